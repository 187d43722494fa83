"""Packet Rocket's estimated clocks (docs/clockwork-control.md, "Estimated
clocks"): a calibration pass that runs the scenario's probe mesh alone on
the same fabric, clocks and seed, estimates every probed host's offset and
drift with fabriclab's own estimator (``estimate.py``: Huygens with the
network effect), and hands the result to the core as a correction table
(``transport.packet_rocket_correction``), which the core only applies.

- **The pass.** The scenario with its own traffic, flows, jobs, LLM and
  trace jobs, collectives, faults and link events taken out and Packet Rocket off; the
  topology, queues, transport, ``[clocks]``, ``[cloud]`` (its other tenants
  are part of the fabric the mesh measures) and seed kept. The mesh is the
  scenario's ``[probes]``, or without one the pass's own default (5 peers, a
  pair per peer every 10 ms for 100 ms: ``[probes]``' default of a pair
  every 2 ms for 10 ms left a drift error of up to 3.5-8.0 ppm, this one
  up to 0.29-0.65, for twice the pairs; ``benches/bench_rocket.py
  calibration``, docs/clockwork-control.md), which then runs in the pass only.
  It stops 1 ms after the mesh's last pair is sent. With
  ``packet_rocket_calibration = "loaded"`` the pass keeps the scenario's own
  load too (Packet Rocket still off), so the estimate carries the
  estimator's error under that load.
- **The estimate.** ``estimate(methods=("huygens",))`` against the first host
  in sorted order, with ``drop_short_edges`` and the robust network effect
  (as ``fabriclab reproduce clock-sync``), windows of the estimator's default
  2 s, and the coded-pair purity bound of that benchmark: 300 ns with NIC
  stamps, 2 us when any host stamps in software.
- **The table.** Window k gives each host the line o(R) = offset + drift (R -
  mid) on the reference's reading R. On the host's own clock L = R + o(R)
  that line is o = (offset + d (L - mid)) / (1 + d), d = drift / 1e6: slope
  d / (1 + d), and o = offset at L = mid + offset. Piece k holds from the
  reading at which the reference shows the midpoint between windows k - 1
  and k (piece 0 from its own middle; the core extends a host's first piece
  backwards and its last forwards). Hosts outside the mesh get no pieces and
  read their clocks raw.
- **What the table is for.** Beside the table the pass writes
  ``packet_rocket_correction_for``: a digest of the pass's own scenario
  (name aside), of the topology it builds and of the files it reads. A
  resolved scenario rerun with another seed, ``[clocks]``, topology, mesh or
  (loaded) load no longer matches it, and its table is made again rather
  than applied to clocks it was not made for. A table given without it
  (by hand) is applied as it is.
"""

from __future__ import annotations

import hashlib
import json

from ...scenario.base import ScenarioError
from ...scenario.clocks import ProbesConfig
from ...scenario.fabric import needs_calibration, rocket_clock

# numpy and the estimator (pyarrow) are imported where a pass runs: `fabriclab validate` and a run without
# Packet Rocket's estimated clocks only ask whether one is needed (tests/test_startup_imports.py).

# The coded-pair purity bound per stamping (``fabriclab reproduce clock-sync``'s choice, docs/reproductions.md).
PURE_BOUND_NS = {"nic": 300.0, "software": 2000.0}
# The pass runs this long after the mesh's last pair is sent, so that pair arrives.
DRAIN_PS = 1_000_000_000
# The pass's mesh without [probes]: a pair per peer every 10 ms for 100 ms (the module's docstring).
DEFAULT_PAIR_EVERY_PS = 10_000_000_000
DEFAULT_DURATION_PS = 100_000_000_000
# The scenario's own load and events, taken out for the pass (each a list; a section this version lacks is skipped).
WORKLOADS = ("traffic", "flows", "jobs", "llm_jobs", "trace_jobs", "collectives", "faults", "link_events")


def calibration_scenario(s, hosts: int):
    """The probe mesh alone on ``s``'s fabric (of ``hosts`` hosts), clocks and
    seed (the module's docstring), or with ``packet_rocket_calibration =
    "loaded"`` beside the scenario's own load; ``s`` is left as it is. The
    default mesh probes 5 peers, or every other host of a smaller mesh."""
    from ...sim.apps.probes import mesh_hosts

    mesh = s.probes
    if mesh is None:
        members = mesh_hosts(s.model_copy(update={"probes": ProbesConfig()}), hosts)
        mesh = ProbesConfig(peers=max(1, min(5, len(members) - 1)), pair_every_ps=DEFAULT_PAIR_EVERY_PS,
                            duration_ps=DEFAULT_DURATION_PS)
    transport = s.transport.model_dump(by_alias=True)
    transport.update(packet_rocket_threshold_ps=None, packet_rocket_hosts=None, packet_rocket_clock=None,
                     packet_rocket_correction=None, packet_rocket_correction_for=None)
    stop = mesh.start_ps + mesh.duration_ps + DRAIN_PS
    if s.transport.packet_rocket_calibration == "loaded":
        return s.replace(recovery=None, transport=transport, probes=mesh.model_dump(by_alias=True),
                         stop_ps=min(stop, s.stop_ps or stop), outputs={})
    cleared = {k: [] for k in WORKLOADS if k in type(s).model_fields}
    return s.replace(**cleared, flows_csv=None, recovery=None, transport=transport,
                     probes=mesh.model_dump(by_alias=True), stop_ps=stop, outputs={})


def _stamping(s) -> str:
    c = s.clocks
    own = [h.stamping for h in c.hosts.values() if h.stamping is not None]
    return "software" if "software" in own + [c.stamping] else "nic"


def pieces(clocks, host_index: dict[str, int]) -> list[dict]:
    """The correction table of an estimate's ``clocks`` table (one method),
    as the core reads it: per host, one linear piece per window on the host's
    own clock (the module's docstring). Hosts not in ``host_index`` get no pieces."""
    import numpy as np

    window = np.asarray(clocks.column("window").to_numpy())
    mid_ns = np.asarray(clocks.column("window_mid_ns").to_numpy(), dtype=np.float64)
    host = clocks.column("host").to_pylist()
    off_ns = np.asarray(clocks.column("offset_ns").to_numpy(), dtype=np.float64)
    drift = np.asarray(clocks.column("drift_ppm").to_numpy(), dtype=np.float64) / 1e6
    out = []
    for name in sorted(set(host) & set(host_index), key=lambda n: host_index[n]):
        rows = sorted((i for i, h in enumerate(host) if h == name), key=lambda i: window[i])
        prev_mid = None
        for i in rows:
            # The reference's reading where the piece starts, and the line's value there.
            r = mid_ns[i] if prev_mid is None else (prev_mid + mid_ns[i]) / 2
            o = off_ns[i] + drift[i] * (r - mid_ns[i])
            out.append({"host": host_index[name], "from_local_ps": round((r + o) * 1000),
                        "offset_ps": round(o * 1000), "drift_ppm": float(drift[i] / (1 + drift[i]) * 1e6)})
            prev_mid = mid_ns[i]
    return out


def calibrate(s) -> tuple[list[dict], dict]:
    """The correction table for ``s`` and what the pass did (for summary.json)."""
    import numpy as np

    from ...sim.pipeline import simulate
    from . import estimate as est
    from . import probes as pr

    t = s.build_topology()
    res = simulate(calibration_scenario(s, len(t.hosts)))
    p = pr.from_simulation(res.probes)
    stamping = _stamping(s)
    try:
        e = est.estimate(p, methods=("huygens",), pure_bound_ns=PURE_BOUND_NS[stamping], drop_short_edges=True,
                         robust=True)
    except est.EstimateInputError as x:
        raise ScenarioError(f'transport.packet_rocket_clock: "estimated" (the default with [clocks]) calibrates the '
                            f"clocks from the probe mesh, and the estimator refused its probes: {x}. Give [probes] "
                            f'more pairs or a longer mesh, or set packet_rocket_clock to "host" or "ideal"') from None
    index = {t.nodes[n]["name"]: i for i, n in enumerate(t.hosts)}
    table = pieces(e.clocks, index)
    info = {"pass": s.transport.packet_rocket_calibration, "mesh": "scenario" if s.probes is not None else "default",
            "probes": len(p.src) * 2, "hosts": len(p.hosts), "reference": p.hosts[0],
            "windows": int(e.clocks.column("window").to_numpy().max()) + 1,
            "pure_bound_ns": PURE_BOUND_NS[stamping], "pieces": len(table),
            "hosts_unconfirmed": est.unconfirmed_hosts(e.clocks)}
    if "error_ns" in e.clocks.column_names:  # against the truth the simulated probes carry; the reference left out
        others = np.array(e.clocks.column("host").to_pylist(), dtype=object) != p.hosts[0]
        err = np.abs(e.clocks.column("error_ns").to_numpy()[others])
        info["offset_error_ns_p50"] = float(np.median(err))
        info["offset_error_ns_max"] = float(err.max())
    info.update(_drift_error(table, res.clocks_arrow, index, p.hosts[0]))
    return table, info


def _drift_error(table: list[dict], truth, index: dict[str, int], reference: str) -> dict:
    """Each piece's slope against the simulated clocks' (clocks.parquet: each
    host's drift at time 0; the wander moves it by about 0.03 ppm over the
    default mesh's 10 ms): the exact slope on host h's clock is (d_h - d_ref) /
    (1 + d_h). The reference is left out; p50 and max of |error|, ppm."""
    import numpy as np

    if truth is None:
        return {}
    d = dict(zip(truth.column("host").to_pylist(), (x / 1e6 for x in truth.column("drift_ppm").to_pylist())))
    name = {i: n for n, i in index.items()}
    err = np.array([abs(q["drift_ppm"] - (d[name[q["host"]]] - d[reference]) / (1 + d[name[q["host"]]]) * 1e6)
                    for q in table if name[q["host"]] != reference])
    if err.size == 0:
        return {}
    return {"drift_error_ppm_p50": float(np.median(err)), "drift_error_ppm_max": float(err.max())}


def made_for(s) -> str:
    """The digest of what ``s``'s calibration pass reads (the module's
    docstring, "What the table is for")."""
    t = s.build_topology()
    c = calibration_scenario(s, len(t.hosts))
    d = c.resolved_dict()
    for k in ("fabriclab_version", "name"):
        d.pop(k, None)
    h = hashlib.sha256(json.dumps([d, t.to_core()], sort_keys=True, separators=(",", ":")).encode())
    for f in c.input_files():
        h.update(f.read_bytes())
    return "sha256:" + h.hexdigest()[:32]


def stale(s) -> bool:
    """``s`` carries a table the calibration pass made for another scenario."""
    tr = s.transport
    return (tr.packet_rocket_correction is not None and tr.packet_rocket_correction_for is not None
            and tr.packet_rocket_threshold_ps is not None and s.backend == "packet"
            and rocket_clock(s) == "estimated" and tr.packet_rocket_correction_for != made_for(s))


def calibrated(s):
    """``s`` with its Packet Rocket correction table filled by the calibration
    pass when it needs one (estimated clocks, no table given, or a pass's
    table made for another scenario), and the pass's account (None when none
    ran)."""
    replaced = stale(s)
    if not (needs_calibration(s) or replaced):
        return s, None
    table, info = calibrate(s)
    info["replaced_stale_table"] = replaced
    transport = s.transport.model_dump(by_alias=True)
    transport.update(packet_rocket_correction=table, packet_rocket_correction_for=made_for(s))
    return s.replace(transport=transport), info

"""Cluster selection on a public cloud (issue 27; docs/clockwork-control.md,
"Cluster selection"): over-provision, measure with the probe mesh, keep the
M best VMs for the job's ring, report what was rejected and why.

- :func:`measure`: the tenant asks ``[cloud]`` for M + margin VMs; the probe
  mesh runs among them for a short time (simulated); the estimator gives
  their clocks; per probe the one-way delay on the estimated clocks, less
  its pair's base (``observe.clock.colocation.probe_delays``); the colocation
  detector groups them.
- :func:`choose`: the stated optimisation. Per VM a score, the p99 of the
  excess delay of every probe it sent or received; noisy when the score is
  above ``noisy_factor`` times the pool's median score and above
  ``noisy_floor_ns``; slow when its bulk probes (below) reached less than
  ``slow_share`` of the documented per-VM cap. The kept set S (|S| = M)
  minimises, in this order: (1) the VMs that share a detected group with
  another kept VM, (2) the slow VMs kept, (3) the noisy VMs kept, (4) the sum
  of the kept VMs' scores. The kept VMs are then ordered for the ring: the
  cyclic order minimising the sum over ring neighbours (i -> i + 1) of the
  pair's median one-way delay (``ring_quantile``), a quadratic assignment of
  the ring's traffic matrix onto the delay matrix, solved by
  ``scipy.optimize.quadratic_assignment``.
- :func:`select` does both; :func:`write` writes the report.

Bandwidth: after the mesh, bulk probes one at a time (:func:`bulk_plan`):
each VM sends ``BULK_BYTES`` to two partners and receives from two; a VM's
rate is the lesser of its best send and its best receive (bits/s over the
transfer's completion time, which the tenant can time)."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import InputError

MS = 10**9
MEASURE_MS = 400
WINDOW_MS = 100
PURE_BOUND_NS = 300.0
NOISY_FACTOR = 3.0
NOISY_FLOOR_NS = 20_000.0
QAP_RESTARTS = 8
BULK_BYTES = 2_000_000
BULK_SLOT_MS = 20
SLOW_SHARE = 0.8
RING_QUANTILE = 50.0


class SelectInputError(InputError):
    pass


@dataclass
class Measurement:
    """What the tenant measured among its pool of VMs (no ground truth)."""

    vms: list[str]                # the pool's VM names, host order
    hosts: list[int]              # their host indices
    groups: list[list[str]]       # the colocation detector's groups (every VM once)
    src: np.ndarray               # per probe: index into vms
    dst: np.ndarray
    owd_ns: np.ndarray            # one-way delay on the estimated clocks
    excess_ns: np.ndarray         # less its (src, dst)'s least
    cap_bps: int                  # the provider's documented per-VM egress cap
    out_bps: Optional[np.ndarray] = None  # per VM: the best rate of its bulk probes sent
    in_bps: Optional[np.ndarray] = None   # ... and received
    # per VM a score measured otherwise (the box: its sender side of the pairs' p90 excess); None: from the probes
    score_ns: Optional[np.ndarray] = None


@dataclass
class Selection:
    hosts: list[int]              # the chosen VMs' host indices, in ring order
    vms: list[str]
    table: list[dict]             # per pool VM: evidence and verdict
    ring_delay_ns: float          # the ring's objective: sum of its neighbours' median OWDs
    objective: dict


def _check_pool(vms: int, margin: int) -> None:
    if vms < 2:
        raise SelectInputError(f"--vms: a collective needs at least 2 VMs, got {vms}")
    if margin < 0:
        raise SelectInputError(f"--margin: must be 0 or more, got {margin}")


def measurement_scenario(scenario, vms: int, margin: int, measure_ms: int = MEASURE_MS):
    """The scenario the tenant measures on: ``[cloud]`` asked for vms +
    margin VMs, ``[clocks]`` (the scenario's, else NIC stamps), ``[probes]``
    among the pool (the scenario's, else 5 peers for ``measure_ms``), the
    scenario's own background ``[[traffic]]`` kept, its collectives and jobs
    left out (the job has not started)."""
    from ...scenario.cloud import machines

    if scenario.cloud is None:
        raise SelectInputError("[cloud]: the scenario has no [cloud] section; selection picks VMs of a cloud "
                               "(docs/scenario.md, '[cloud]')")
    _check_pool(vms, margin)
    if measure_ms <= 0:
        raise SelectInputError(f"--measure-ms: must be positive, got {measure_ms}")
    c = scenario.cloud
    pool = vms + margin
    slots = machines(c) * c.vms_per_host
    if pool > slots:
        raise SelectInputError(f"--vms, --margin: {vms} + {margin} = {pool} VMs asked, but the cloud holds {slots} "
                               f"VM slots ({machines(c)} machines x vms_per_host {c.vms_per_host}); ask for at most "
                               f"{slots}")
    if c.tenant_machines is not None and len(c.tenant_machines) != pool:
        raise SelectInputError(f"cloud.tenant_machines: {len(c.tenant_machines)} machines given, but the pool is "
                               f"--vms + --margin = {pool} VMs; give one machine per VM of the pool")
    cloud = c.model_dump(by_alias=True)
    cloud["tenant_vms"] = pool
    dur = measure_ms * MS
    clocks = scenario.clocks.model_dump(by_alias=True) if scenario.clocks is not None else {"stamping": "nic"}
    if scenario.probes is not None:
        probes = scenario.probes.model_dump(by_alias=True)
        probes["hosts"] = None
        probes["peers"] = min(probes["peers"], pool - 1)
    else:
        probes = {"peers": min(5, pool - 1), "pair_every_ps": 2 * MS, "spacing_ps": 5_000_000, "duration_ps": dur}
    end = probes.get("start_ps", 0) + probes["duration_ps"]
    flows = [{"src": a, "dst": b, "size_bytes": BULK_BYTES, "start_ps": t} for a, b, t in bulk_plan(pool, end)]
    stop = (flows[-1]["start_ps"] if flows else end) + BULK_SLOT_MS * MS
    if cloud["neighbour_duration_ps"] is None:  # the neighbours stay for the bulk probes
        cloud["neighbour_duration_ps"] = stop
    return _with(scenario, cloud=cloud, clocks=clocks, probes=probes, collectives=[], jobs=[], flows=flows,
                 flows_csv=None, stop_ps=stop, outputs={"flows": True, "links": False, "messages": False})


def bulk_plan(pool: int, after_ps: int) -> list[tuple[int, int, int]]:
    """The bulk probes, one at a time (``BULK_SLOT_MS`` apart) after the
    mesh: VM i sends ``BULK_BYTES`` to VM i + 1, then every VM to i + 2
    (modulo the pool), so each VM sends twice and receives twice, from and
    to different partners."""
    out = []
    t = after_ps + BULK_SLOT_MS * MS
    for step in (1, 2) if pool > 2 else (1,):
        for i in range(pool):
            out.append((i, (i + step) % pool, t))
            t += BULK_SLOT_MS * MS
    return out


def _with(scenario, **changes):
    """A copy of a [cloud] scenario with top-level fields changed (its
    [topology] left out: [cloud] builds it)."""
    from ...scenario.model import Scenario

    data = scenario.model_dump(by_alias=True)
    data.pop("topology", None)
    data.update(changes)
    s = Scenario.from_dict(data)
    s._base_dir = scenario._base_dir
    return s


def measure(scenario, vms: int, margin: int, measure_ms: int = MEASURE_MS, window_ms: int = WINDOW_MS) -> Measurement:
    """Simulates the pool's probe mesh and measures it (module docstring)."""
    from ...observe.clock import colocation as co
    from ...observe.clock import estimate as est
    from ...observe.clock import probes as pr
    from ...sim.pipeline import simulate

    s = measurement_scenario(scenario, vms, margin, measure_ms)
    res = simulate(s)
    p = pr.from_simulation(res.probes)
    with np.errstate(invalid="ignore"):  # the fit's bracket on a flat margin (observe/clock/estimate.py)
        e = est.estimate(p, window_s=window_ms / 1000, pure_bound_ns=PURE_BOUND_NS, drop_short_edges=True,
                         robust=True)
    pool = vms + margin
    names = [f"vm{i}" for i in range(pool)]
    r = co.detect(e.clocks, p, hosts=names)
    src, dst, _, owd, excess = co.probe_delays(p, co._columns(e.clocks, "huygens"), names)
    out_bps, in_bps = bulk_rates(res.flows, bulk_plan(pool, s.probes.start_ps + s.probes.duration_ps), pool)
    return Measurement(vms=names, hosts=list(range(pool)), groups=[sorted(g) for g in r.group_sets()],
                       src=src, dst=dst, owd_ns=owd, excess_ns=excess, cap_bps=int(s.cloud.vm_egress_bps),
                       out_bps=out_bps, in_bps=in_bps)


def bulk_rates(flows, plan, pool: int) -> tuple[np.ndarray, np.ndarray]:
    """Per VM the best rate (bits/s: 8 x bytes / completion time, as the
    tenant times its own transfer) of the bulk probes it sent, and of those
    it received: a transfer runs at the lesser of its sender's way out and
    its receiver's way in, so the better of two partners bounds a VM's own
    side from below. 0 for a transfer unfinished at the stop."""
    got = {}
    for a, b, t, fct in zip(flows["src"], flows["dst"], flows["start_ps"], flows["fct_ps"].astype("float64")):
        got[(int(a), int(b), int(t))] = fct
    out_bps, in_bps = np.zeros(pool), np.zeros(pool)
    for a, b, t in plan:
        fct = got.get((a, b, t))
        rate = 8 * BULK_BYTES / (fct / 1e12) if fct is not None and fct > 0 else 0.0  # NaN: unfinished
        out_bps[a] = max(out_bps[a], rate)
        in_bps[b] = max(in_bps[b], rate)
    return out_bps, in_bps


def pair_owd(m: Measurement, q: float = RING_QUANTILE) -> np.ndarray:
    """(n x n) the q-th percentile of the one-way delay a -> b; a pair never
    probed takes the mean of the two VMs' measured entries."""
    n = len(m.vms)
    d = np.full((n, n), np.nan)
    key = m.src * n + m.dst
    for k in np.unique(key):
        d[k // n, k % n] = np.percentile(m.owd_ns[key == k], q)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a VM with no measured pair: filled below
        fill = np.nanmean(d, axis=1)
    fill = np.nan_to_num(fill, nan=float(np.nanmean(fill)) if np.isfinite(fill).any() else 0.0)
    miss = np.isnan(d)
    d[miss] = ((fill[:, None] + fill[None, :]) / 2)[miss]
    np.fill_diagonal(d, 0.0)
    return d


def ring_order(d: np.ndarray, seed: int = 0) -> list[int]:
    """The cyclic order of 0..n-1 minimising sum_i d[o_i, o_(i+1 mod n)]: a
    quadratic assignment of the ring's traffic matrix A (A[i, i+1] = 1) onto
    ``d``; scipy's FAQ from ``QAP_RESTARTS`` seeded starts, the best refined
    by 2-opt. Returns o (o[r] = the item at ring position r), starting at its
    least item."""
    from scipy.optimize import quadratic_assignment

    n = len(d)
    if n <= 3:  # every cyclic order of 3 is one of two directions: try both
        orders = [list(range(n)), [0, *range(n - 1, 0, -1)]] if n == 3 else [list(range(n))]
        return min(orders, key=lambda o: sum(d[o[i], o[(i + 1) % n]] for i in range(n)))
    a = np.zeros((n, n))
    a[np.arange(n), (np.arange(n) + 1) % n] = 1.0
    rng = np.random.default_rng(seed)
    best = None
    for k in range(QAP_RESTARTS):
        r = quadratic_assignment(a, d, method="faq", options={"P0": "randomized", "rng": rng})
        if best is None or r.fun < best.fun:
            best = r
    best = quadratic_assignment(a, d, method="2opt",
                                options={"rng": rng, "partial_guess": np.column_stack([np.arange(n), best.col_ind])})
    o = list(best.col_ind)
    k = o.index(min(o))
    return o[k:] + o[:k]


def choose(m: Measurement, vms: int, noisy_factor: float = NOISY_FACTOR,
           noisy_floor_ns: float = NOISY_FLOOR_NS, ring_quantile: float = RING_QUANTILE,
           slow_share: float = SLOW_SHARE, prefer: str = "spread", score_quantile: float = 99.0) -> Selection:
    """Keeps ``vms`` of the pool by the stated objective (module docstring).
    ``prefer="quiet"`` puts (1) shared machines after (2) slow and (3) noisy:
    the objective minimises slow VMs kept, then noisy ones, then VMs sharing a
    detected group, then the score (the box's choice: docs/clockwork-control.md).
    ``score_quantile``: the percentile of excess delay that scores a VM;
    ``m.score_ns``, when given, is the score instead (the box's)."""
    if prefer not in ("spread", "quiet"):
        raise SelectInputError(f"--prefer: spread or quiet, got {prefer!r}")
    n = len(m.vms)
    if vms > n:
        raise SelectInputError(f"--vms: {vms} VMs asked, but the pool holds {n}; ask for at most {n} or "
                               "over-provision more (--margin)")
    if vms < 2:
        raise SelectInputError(f"--vms: a collective needs at least 2 VMs, got {vms}")
    score = np.zeros(n)
    p50 = np.zeros(n)
    p99 = np.zeros(n)
    for i in range(n):
        x = m.excess_ns[(m.src == i) | (m.dst == i)]
        score[i] = np.percentile(x, score_quantile) if x.size else np.inf
        p50[i] = np.percentile(x, 50) if x.size else np.inf
        p99[i] = np.percentile(x, 99) if x.size else np.inf
    if m.score_ns is not None:
        score = np.asarray(m.score_ns, dtype=float).copy()
    finite = score[np.isfinite(score)]
    median = float(np.median(finite)) if finite.size else 0.0
    limit = max(noisy_floor_ns, noisy_factor * median)
    noisy = score > limit
    avail = (np.minimum(m.out_bps, m.in_bps) if m.out_bps is not None else np.full(n, float(m.cap_bps)))
    slow = avail < slow_share * m.cap_bps
    group_of = {v: k for k, g in enumerate(m.groups) for v in g}
    gsize = {k: len(g) for k, g in enumerate(m.groups)}
    # One per group first (its least score), then the rest; each part by (noisy, score).
    firsts, extras = [], []
    for k, g in enumerate(m.groups):
        idx = sorted((m.vms.index(v) for v in g), key=lambda i: (score[i], i))
        firsts.append(idx[0])
        extras.extend(idx[1:])
    def key(i):
        return bool(slow[i]), bool(noisy[i]), float(score[i]), i

    if prefer == "quiet":
        extra = set(extras)
        order = sorted(firsts + extras, key=lambda i: (bool(slow[i]), bool(noisy[i]), i in extra, float(score[i]), i))
    else:
        order = sorted(firsts, key=key) + sorted(extras, key=key)
    kept = sorted(order[:vms])
    d = pair_owd(m, ring_quantile)
    sub = d[np.ix_(kept, kept)]
    ring = [kept[i] for i in ring_order(sub)]
    ring_delay = float(sum(d[ring[i], ring[(i + 1) % vms]] for i in range(vms)))
    keptset = set(kept)
    table = []
    for i in range(n):
        g = group_of[m.vms[i]]
        mates = [v for v in m.vms if group_of[v] == g and v != m.vms[i]]
        if i in keptset:
            verdict, why = "kept", f"ring position {ring.index(i)}"
        elif i in extras and slow[i] and prefer == "quiet":
            verdict, why = "rejected", (f"slow: bulk probe {avail[i] / 1e9:.3f} Gbit/s, below {slow_share:g} x the cap; "
                                        f"shares a machine with {', '.join(mates)}")
        elif i in extras and noisy[i]:
            verdict, why = "rejected", f"shares a machine with {', '.join(mates)}; noisy"
        elif i in extras:
            verdict, why = "rejected", f"shares a machine with {', '.join(mates)} (one per machine kept)"
        elif slow[i]:
            verdict, why = "rejected", f"slow: bulk probe {avail[i] / 1e9:.2f} Gbit/s, below {slow_share:g} x the cap"
        elif noisy[i]:
            verdict, why = "rejected", (f"noisy: {'score' if m.score_ns is not None else f'excess p{score_quantile:g}'} "
                                        f"above {limit / 1000:.1f} us")
        else:
            verdict, why = "rejected", "spare: higher excess delay than the kept"
        table.append({"vm": m.vms[i], "host": m.hosts[i], "machine": None, "group": g, "group_size": gsize[g],
                      "excess_p50_ns": float(p50[i]), "excess_p99_ns": float(p99[i]), "score_ns": float(score[i]),
                      "noisy": bool(noisy[i]),
                      "bulk_bps": float(avail[i]), "slow": bool(slow[i]), "cap_bps": m.cap_bps, "verdict": verdict, "reason": why})
    kept_groups = [group_of[m.vms[i]] for i in kept]
    objective = {"shared_machine_kept": len(kept_groups) - len(set(kept_groups)),
                 "slow_kept": int(slow[kept].sum()), "noisy_kept": int(noisy[kept].sum()), "score_sum_ns": float(score[kept].sum()),
                 "noisy_limit_ns": limit, "ring_owd_sum_ns": ring_delay, "ring_quantile": ring_quantile, "prefer": prefer}
    return Selection(hosts=[m.hosts[i] for i in ring], vms=[m.vms[i] for i in ring], table=table,
                     ring_delay_ns=ring_delay, objective=objective)


def select(scenario, vms: int, margin: Optional[int] = None, measure_ms: int = MEASURE_MS,
           window_ms: int = WINDOW_MS, **kw) -> tuple[Measurement, Selection]:
    """Over-provisions ``margin`` VMs (default: a quarter of ``vms``,
    rounded up), measures, and keeps ``vms``."""
    margin = default_margin(vms) if margin is None else margin
    _check_pool(vms, margin)
    m = measure(scenario, vms, margin, measure_ms, window_ms)
    return m, choose(m, vms, **kw)


def default_margin(vms: int) -> int:
    return max(1, -(-vms // 4))


def write(out_dir: Path, m: Measurement, s: Selection) -> None:
    """``selection.json`` (the hosts in ring order, the objective, the
    table) and ``selection.csv`` (the table)."""
    import csv

    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "selection.json", "w") as f:
        json.dump({"hosts": s.hosts, "vms": s.vms, "pool": m.vms, "groups": m.groups, "objective": s.objective,
                   "bandwidth": {"cap_bps": m.cap_bps, "cap_source": "cloud.vm_egress_bps (documented cap)",
                                 "measured": f"bulk probes of {BULK_BYTES} bytes: table's bulk_bps",
                                 "slow_below_bps": SLOW_SHARE * m.cap_bps},
                   "table": s.table}, f, indent=1)
    with open(out_dir / "selection.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(s.table[0]))
        w.writeheader()
        w.writerows(s.table)

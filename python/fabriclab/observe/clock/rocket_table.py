"""The runtime's Packet Rocket on estimated clocks (docs/clockwork-control.md, "Packet Rocket in the
runtime", "Clocks"): a probe phase makes the correction table every rank reads.

- **The phase**, from one of four sources. ``loopback_table``: one real clock agent per rank
  (``fabriclab clock agent``, kernel stamps, coded UDP pairs) on 127.0.0.1, each probing every other
  rank, each with that rank's emulated clock (offset, drift, one shared epoch: the runtime reads the
  same emulated clock, one implementation in fabriclab-runtime's clock.rs), for ``duration_s``.
  ``box_table``: the agents' mesh of a cluster-in-a-box (agent.mesh), host i = rank i.
  ``probes_table``: a probe file; ``halves_table``: the agents' half files, joined (``watch`` refits
  from them while flushing agents still probe: the live refit).
- **The estimate** (``fit_table``, one code for all). fabriclab's estimator as the simulator's
  calibration pass uses it (calibrate.py: Huygens, robust network effect, ``drop_short_edges``, the
  2 us purity bound of software stamps), against rank 0, named explicitly.
- **The table.** calibrate.pieces: per rank and window one linear piece on the rank's own clock, in
  ps since the probes' stamp origin (the join's ``stamp_origin_ns``), which the file carries as
  ``epoch_ns``: ``{"epoch_ns": ..., "ranks": n, "clock_epoch_ns": ..., "pieces": [{host, from_local_ps,
  offset_ps, drift_ppm}, ...]}``, host = rank; ``ranks`` and ``clock_epoch_ns`` (the emulated clocks'
  epoch) let the runtime refuse a table made for another world size and take the clocks' epoch from
  it. The runtime applies it with the simulator's code (fabriclab-rocket's correction.rs). Written
  whole (a temp file renamed), so a rank re-reading it never sees half a file.
"""

from __future__ import annotations

import errno
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from .agent import MAX_DRIFT_PPM, AgentInputError, check_emulated, check_options, join, run_agents
from .calibrate import PURE_BOUND_NS, pieces


def rank_name(r: int) -> str:
    return f"r{r:03d}"


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


HEAD_START_NS = 3_000_000_000


def _await_listening(p: subprocess.Popen, deadline_ns: int) -> str:
    """Reads an agent's stderr (its file descriptor, unbuffered, so nothing is left in a buffer that select
    cannot see) up to its "listening" line, its end or the deadline on CLOCK_REALTIME; returns what it read."""
    fd, seen = p.stderr.fileno(), b""
    while b" listening on " not in seen and (left_s := (deadline_ns - time.time_ns()) / 1e9) > 0:
        if not select.select([fd], [], [], left_s)[0]:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        seen += chunk
    return seen.decode(errors="replace")


def check_clocks(n: int, offsets_ns: Sequence[int], drifts_ppm: Sequence[float], epoch_ns: int = 0) -> None:
    """The ranks' emulated clocks, each list checked against its own option (rocket-table's names)."""
    for option, vals in (("--clock-offsets-ns", offsets_ns), ("--clock-drifts-ppm", drifts_ppm)):
        if len(vals) != n:
            raise AgentInputError(f"{option}: give one value per rank ({n}), got {len(vals)}")
    for d in drifts_ppm:
        if not abs(d) <= MAX_DRIFT_PPM:
            raise AgentInputError(f"--clock-drifts-ppm: each drift must be within ±{MAX_DRIFT_PPM:g} ppm, got {d}")
    for o in offsets_ns:
        check_emulated(o, epoch_ns, "--clock-offsets-ns", "--clock-epoch-ns")


def loopback_table(n: int, offsets_ns: Sequence[int], drifts_ppm: Sequence[float], epoch_ns: int, out: Path,
                   duration_s: float = 2.0, rate_hz: float = 100.0, log=sys.stderr) -> dict:
    """Runs the probe phase (the module's docstring) and writes the table to ``out`` (JSON). Returns what
    the phase did: probes, pairs dropped, windows, and the estimate's error against the emulated truth
    (offset at the phase's end, drift; rank 0, the reference, left out)."""
    if n < 2:
        raise AgentInputError(f"-n: the probe phase needs two or more ranks, got {n}")
    if n > MAX_LOOPBACK_RANKS:
        raise AgentInputError(f"-n: at most {MAX_LOOPBACK_RANKS} ranks (one agent process each on this machine), "
                              f"got {n}")
    check_clocks(n, offsets_ns, drifts_ppm, epoch_ns)
    check_options("phase", duration_s, rate_hz, 20_000, 0.0)
    # The ports are free when chosen but not held: another process may bind one before its agent does
    # (review M3). Such an agent exits naming the port as in use, and the phase is run again on new ports.
    in_use = os.strerror(errno.EADDRINUSE)
    for attempt in range(PORT_ATTEMPTS):
        try:
            j, start = _loopback_phase(n, offsets_ns, drifts_ppm, epoch_ns, duration_s, rate_hz)
            break
        except RuntimeError as x:
            if not ("cannot bind" in str(x) and in_use in str(x)) or attempt == PORT_ATTEMPTS - 1:
                raise
            print(f"probe phase: a port was taken before its agent bound it ({x}); again on new ports", file=log)
    from . import probes as pr

    with tempfile.TemporaryDirectory(prefix="fabriclab-rocket-table-") as tmp:
        pr.write(j.table, Path(tmp) / "probes.parquet")
        p = pr.read(Path(tmp) / "probes.parquet")
    names = [rank_name(i) for i in range(n)]
    table, e = fit_table(p, names, int(j.stamp_origin_ns), int(epoch_ns), out, "-n")
    info = {"probes": int(j.probes), "dropped_pairs": int(j.dropped_pairs), "ranks": n,
            "windows": int(e.clocks.column("window").to_numpy().max()) + 1, "pieces": len(table),
            "phase_s": duration_s, "end_ns": start + int(duration_s * 1e9)}
    return {**info, **against_truth(table, out, offsets_ns, drifts_ppm, epoch_ns, info["end_ns"])}


MAX_LOOPBACK_RANKS = 64
PORT_ATTEMPTS = 3


def _loopback_phase(n: int, offsets_ns, drifts_ppm, epoch_ns: int, duration_s: float, rate_hz: float):
    """One agent per rank on 127.0.0.1, each probing every other; returns their joined probes and the start."""
    ports = _free_ports(n)
    # Each agent imports the whole CLI before it listens; on a loaded box that takes a while, and an agent
    # that starts late (agent.run takes max(start, now)) overlaps the others' probing less. A 3 s head start,
    # and each agent's "listening" line is awaited below: one ready only after the start is refused loudly.
    start = time.time_ns() + HEAD_START_NS
    with tempfile.TemporaryDirectory(prefix="fabriclab-rocket-table-") as tmp:
        halves, argvs = [], []
        for i in range(n):
            half = Path(tmp) / f"{rank_name(i)}.half.parquet"
            halves.append(half)
            peer_spec = ",".join(f"{rank_name(j)}=127.0.0.1:{ports[j]}" for j in range(n) if j != i)
            argvs.append([sys.executable, "-m", "fabriclab.cli", "clock", "agent", "--name", rank_name(i),
                          "--listen", f"127.0.0.1:{ports[i]}", "--peers", peer_spec, "--duration-s", str(duration_s),
                          "--rate-hz", str(rate_hz), "--offset-ns", str(int(offsets_ns[i])),
                          "--drift-ppm", repr(float(drifts_ppm[i])), "--epoch-ns", str(int(epoch_ns)),
                          "--start-ns", str(start), "--out", str(half)])

        def ready(procs):
            said = [_await_listening(p, start + 60_000_000_000) for p in procs]
            late_ns = time.time_ns() - start
            if late_ns > 0 and all(" listening on " in t for t in said):  # else an agent failed: its error below
                raise RuntimeError(f"probe phase: the agents were ready only {late_ns / 1e6:.0f} ms after the agreed "
                                   f"start ({HEAD_START_NS / 1e9:g} s head start); the machine is too loaded")
            return said

        run_agents(argvs, [f"rank {i}'s agent" for i in range(n)], duration_s + 60, "probe phase", ready=ready)
        return join(halves), start


def fit_table(p, names: Sequence[str], stamp_origin_ns: int, clock_epoch_ns: int | None, out: Path,
              option: str = "--ranks", trailing_slope: bool = False):
    """The correction table of probe records (``probes.read``'s, stamps in ns since ``stamp_origin_ns``) for the ranks ``names`` (rank r = host ``names[r]``): fabriclab's estimator as the
    simulator's calibration pass runs it (calibrate.py), against rank 0 explicitly, and calibrate.pieces;
    hosts of the probes that are not ranks get no pieces. Written whole to ``out`` (temp file, rename).
    Returns the pieces and the estimate."""
    from . import estimate as est

    if len(names) < 2 or len(set(names)) != len(names):
        raise AgentInputError(f"{option}: give two or more distinct host names, rank 0's first, got {list(names)}")
    absent = [h for h in names if h not in p.hosts]
    if absent:
        shown = ", ".join(p.hosts[:8]) + (", ..." if len(p.hosts) > 8 else "")
        raise AgentInputError(f"{option}: {', '.join(absent)} probed nothing in the probe records (hosts: {shown})")
    e = est.estimate(p, methods=("huygens",), pure_bound_ns=PURE_BOUND_NS["software"], drop_short_edges=True,
                     robust=True, reference=names[0])
    table = pieces(e.clocks, {h: r for r, h in enumerate(names)})
    if trailing_slope:
        table = _extend_by_trailing_slope(table, e.clocks, names)
    doc = {"epoch_ns": int(stamp_origin_ns), "ranks": len(names)}
    if clock_epoch_ns is not None:
        doc["clock_epoch_ns"] = int(clock_epoch_ns)
    text = json.dumps({**doc, "pieces": table}, indent=1)
    tmp_out = Path(out).with_name(Path(out).name + ".tmp")
    tmp_out.write_text(text + "\n")
    os.replace(tmp_out, out)  # whole or not at all
    return table, e


def _extend_by_trailing_slope(table: list[dict], clocks, names: Sequence[str]) -> list[dict]:
    """Each rank's last piece (the one a running job extends until the next table) re-laid on the least-squares
    line through all its windows' offsets (review_rtable B2): its slope from the whole fitted span (tens of
    windows in a live refit) rather than from the last 1-3 s window alone, whose slope error is tens of times
    larger. The earlier pieces stay per window. A rank with one window keeps its piece."""
    import numpy as np

    host = np.array(clocks.column("host").to_pylist(), dtype=object)
    mid = clocks.column("window_mid_ns").to_numpy().astype(np.float64)
    off = clocks.column("offset_ns").to_numpy().astype(np.float64)
    last = {pc["host"]: i for i, pc in enumerate(table)}
    out = [dict(pc) for pc in table]
    for r, name in enumerate(names):
        rows = (host == name) & np.isfinite(off)   # a window the estimator left empty has no offset
        if r not in last or rows.sum() < 2:
            continue
        m0 = mid[rows].mean()
        d, o0 = np.polyfit(mid[rows] - m0, off[rows], 1)
        pc = out[last[r]]
        ref_ns = (pc["from_local_ps"] - pc["offset_ps"]) / 1000   # the reference's reading where the piece starts
        o = o0 + d * (ref_ns - m0)
        pc.update(from_local_ps=round((ref_ns + o) * 1000), offset_ps=round(o * 1000),
                  drift_ppm=float(d / (1 + d) * 1e6))
    return out


def against_truth(table: list[dict], out: Path, offsets_ns, drifts_ppm, epoch_ns: int, end_ns: int) -> dict:
    """The table's error against emulated clocks known to the caller: each piece's slope against the exact
    (d_r - d_0) / (1 + d_r) on rank r's clock (the largest |difference|), and each rank's corrected reading
    minus rank 0's at true time ``end_ns`` (by the runtime's reading code)."""
    import numpy as np

    n = len(offsets_ns)
    d = np.asarray(drifts_ppm, dtype=float)
    exact = (d - d[0]) / (1 + d * 1e-6)
    drift_err = [abs(pc["drift_ppm"] - exact[pc["host"]]) for pc in table if pc["host"] != 0]
    res = residual_ns(out, n, offsets_ns, drifts_ppm, epoch_ns, end_ns)
    return {"drift_error_ppm_max": float(max(drift_err, default=float("nan"))),
            "offset_error_ns_at_end": [int(v) for v in res]}


def probes_table(probes: Path, names: Sequence[str], out: Path, stamp_origin_ns: int | None = None) -> dict:
    """A rank table from a probe file (``fabriclab clock mesh``'s, or any in probes.parquet's schema): rank r is
    host ``names[r]``. The stamps' origin and the emulated clocks' epoch come from a joined file's metadata
    (``fabriclab clock join``); a file without it needs ``stamp_origin_ns`` (the CLOCK_REALTIME ns its stamp 0
    stands for) and gives no clock epoch. Refused: stamps on CLOCK_MONOTONIC (the runtime's stamps read
    CLOCK_REALTIME) and agents on emulated clocks of different epochs (the ranks share one)."""
    import pyarrow.parquet as pq

    from . import probes as pr

    p = pr.read(probes)  # checks the file, naming the column
    meta = json.loads((pq.read_schema(str(probes)).metadata or {}).get(b"fabriclab.clock.join", b"null") or "null")
    if meta is not None and stamp_origin_ns is not None:
        raise AgentInputError(f"--stamp-origin-ns: {probes} is a joined file that says its own "
                              f"({meta.get('stamp_origin_ns')}); leave the option out")
    if meta is None and stamp_origin_ns is None:
        raise AgentInputError(f"--stamp-origin-ns: {probes} has no join metadata; give the CLOCK_REALTIME ns its "
                              "stamps' 0 stands for (the table's epoch_ns)")
    origin = int(meta.get("stamp_origin_ns", 0)) if meta is not None else int(stamp_origin_ns)
    return _records_table(p, (meta or {}).get("hosts", {}), origin, names, out, "--from-probes")


LIVE_SPAN_S = 60.0   # a live refit's trailing span (review_rtable B1, B2); tens of 1-3 s windows for the slope


class NotYet(AgentInputError):
    """A refit the records cannot make yet (no half written, no whole pair, too few pairs); a later flush can."""


def halves_table(folder: Path, names: Sequence[str], out: Path, span_s: float | None = None) -> dict:
    """A rank table from the agents' half files in ``folder`` (``*.half.parquet``; agents with ``--flush-s``
    rewrite theirs while they probe), joined as ``fabriclab clock join`` does; otherwise as ``probes_table``.
    ``span_s``: only the records of the last ``span_s`` seconds (true time, up to the newest record) are
    joined and fitted, and each rank's last piece takes its slope from all of them (``_extend_by_trailing_slope``):
    a live refit's cost then stays flat as the job runs, and its table holds only that span's pieces (a running
    rank reads only its clock's present). Errors a later flush can mend are ``NotYet``."""
    import pyarrow.compute as pc

    from . import probes as pr
    from .agent import read_half
    from .estimate import EstimateInputError

    if not Path(folder).is_dir():
        raise AgentInputError(f"--from-halves: {folder} is not a folder")
    files = sorted(Path(folder).glob("*.half.parquet"))
    if not files:
        raise NotYet(f"--from-halves: no *.half.parquet in {folder}")
    halves = [read_half(f) for f in files]
    hosts = {m.get("host") for _, m in halves}
    unknown = [h for h in names if h not in hosts]
    if unknown:
        raise AgentInputError(f"--ranks: {', '.join(unknown)} wrote no half in {folder} (hosts: "
                              f"{', '.join(sorted(str(h) for h in hosts))})")
    if span_s is not None:
        newest = max((pc.max(t.column("true_ns")).as_py() or 0) for t, _ in halves)
        since = newest - int(span_s * 1e9)
        halves = [(t.filter(pc.greater_equal(t.column("true_ns"), since)), m) for t, m in halves]
    j = join(halves)
    if j.probes == 0:
        raise NotYet(f"--from-halves: the halves in {folder} hold no whole pair yet")
    with tempfile.TemporaryDirectory(prefix="fabriclab-rocket-halves-") as tmp:
        pr.write(j.table, Path(tmp) / "probes.parquet")
        p = pr.read(Path(tmp) / "probes.parquet")
    silent = [h for h in names if h not in p.hosts]
    if silent:
        raise NotYet(f"--from-halves: {', '.join(silent)} has no whole pair yet")
    try:
        return _records_table(p, j.hosts, int(j.stamp_origin_ns), names, out, "--from-halves",
                              trailing_slope=span_s is not None)
    except EstimateInputError as x:
        raise NotYet(f"--from-halves: {x}") from None


def _records_table(p, hosts: dict, origin: int, names: Sequence[str], out: Path, option: str,
                   trailing_slope: bool = False) -> dict:
    mono = sorted(h for h, m in hosts.items() if m.get("clock") == "monotonic")
    if mono:
        raise AgentInputError(f"{option}: the agents stamped on their hosts' CLOCK_MONOTONIC ({', '.join(mono)}); "
                              "the runtime's Packet Rocket reads CLOCK_REALTIME: run them with --clock realtime")
    # the epoch matters only to a clock that drifts: agents run with no emulated drift (real hosts) and no
    # shared --epoch-ns are not refused (review_rtable B8); a half that does not say its drift counts as drifting
    epochs = {m["epoch_ns"] for h, m in hosts.items() if h in names and "epoch_ns" in m and m.get("drift_ppm") != 0}
    if len(epochs) > 1:
        raise AgentInputError(f"{option}: the ranks' agents ran emulated clocks of different epochs "
                              f"({sorted(epochs)}); the runtime's ranks share one")
    clock_epoch = epochs.pop() if epochs else None
    table, e = fit_table(p, names, origin, clock_epoch, out, trailing_slope=trailing_slope)
    info = {"probes": 2 * len(p.src), "ranks": len(names), "pieces": len(table),
            "windows": int(e.clocks.column("window").to_numpy().max()) + 1, "epoch_ns": origin,
            "clock_epoch_ns": clock_epoch,
            "clocks": {h: {k: hosts[h][k] for k in ("offset_ns", "drift_ppm") if k in hosts[h]}
                       for h in names if h in hosts}}
    if "error_ns" in e.clocks.column_names:  # the estimator's own score against the probes' true times
        import numpy as np

        ranks = np.isin(np.array(e.clocks.column("host").to_pylist(), dtype=object), list(names[1:]))
        err = np.abs(e.clocks.column("error_ns").to_numpy()[ranks])
        info["offset_error_ns_max"] = float(err.max()) if err.size else float("nan")
    return info


def watch(folder: Path, names: Sequence[str], out: Path, every_s: float, for_s: float, log=None,
          stop=None, span_s: float = LIVE_SPAN_S) -> int:
    """The live refit: every ``every_s`` for ``for_s`` seconds (or until interrupted), ``halves_table`` of
    the last ``span_s`` seconds the agents have flushed, replacing ``out`` whole; a running job re-reads it
    (``packet_rocket_correction_reload_ms``). A refit the records cannot make yet (``NotYet``: no half yet, too
    few pairs) is skipped and said; the table in place stays. Any other refusal (a missing folder, a rank no
    agent is, clocks of different epochs) ends it with the error. ``stop`` (a threading.Event) ends it early.
    Returns the number of tables written."""
    if not 0.1 <= every_s <= 3600:
        raise AgentInputError(f"--watch-s: must be within 0.1..3600 seconds, got {every_s}")
    if not 0 < for_s <= 30 * 86_400:
        raise AgentInputError(f"--watch-for-s: must be within 0 and 30 days, got {for_s}")
    if not 10 <= span_s <= 86_400:
        raise AgentInputError(f"--span-s: must be within 10 s and a day, got {span_s}")
    if len(names) < 2 or len(set(names)) != len(names) or not all(names):
        raise AgentInputError(f"--ranks: give two or more distinct, non-empty host names, got {list(names)}")
    if not Path(folder).is_dir():
        raise AgentInputError(f"--from-halves: {folder} is not a folder")
    log = sys.stderr if log is None else log
    end, written = time.monotonic() + for_s, 0
    try:
        while True:
            t0 = time.monotonic()
            try:
                info = halves_table(folder, names, out, span_s)
                written += 1
                print(f"refit {written}: {info['pieces']} pieces from {info['probes']} probes, "
                      f"{info['windows']} window(s), in {time.monotonic() - t0:.2f} s", file=log, flush=True)
            except NotYet as x:
                print(f"refit skipped: {x}", file=log, flush=True)
            left = min(end - time.monotonic(), every_s - (time.monotonic() - t0))
            if time.monotonic() >= end or (stop is not None and stop.wait(max(0.0, left))):
                return written
            if stop is None:
                time.sleep(max(0.0, left))
    except KeyboardInterrupt:
        return written


def box_table(cluster: str, offsets_ns: Sequence[int], drifts_ppm: Sequence[float], epoch_ns: int, out: Path,
              duration_s: float = 3.0, rate_hz: float = 100.0, log=sys.stderr) -> dict:
    """A rank table from the agents of cluster-in-a-box ``cluster``: ``fabriclab clock mesh`` (agent.mesh) with
    every host probing every other, on CLOCK_REALTIME with the ranks' emulated clocks (host i = rank i, as the
    box's launcher places ranks), its probes kept beside ``out`` (NAME.probes.parquet), then ``probes_table``.
    Returns what ``probes_table`` does plus the error against the emulated truth at the mesh's end."""
    from ...runtime.cluster.apply import load_state
    from .agent import mesh

    hosts = load_state(cluster, "--box").get("hosts", [])
    n = len(hosts)
    if n < 2:
        raise AgentInputError(f"--box: cluster {cluster!r} has {n} host; a rank table needs two or more")
    check_clocks(n, offsets_ns, drifts_ppm, epoch_ns)
    probes = Path(out).with_name(Path(out).name.removesuffix(".json") + ".probes.parquet")
    j = mesh(cluster, probes, duration_s=duration_s, peers=n - 1, rate_hz=rate_hz, offsets_ns=list(offsets_ns),
             drifts_ppm=list(drifts_ppm), log=log, host_clock="realtime", epoch_ns=epoch_ns)
    info = probes_table(probes, [h["label"] for h in hosts], out)
    end_ns = j.origin_ns + int(j.table.column("true_rx_ps").to_numpy().max()) // 1000
    info.update(probes_file=str(probes), end_ns=end_ns, dropped_pairs=int(j.dropped_pairs))
    return {**info, **against_truth(json.loads(Path(out).read_text())["pieces"], out, offsets_ns, drifts_ppm,
                                    epoch_ns, end_ns)}


def residual_ns(table: Path, n: int, offsets_ns, drifts_ppm, epoch_ns: int, true_ns: int,
                mode: str = "estimated") -> list[int]:
    """Each rank's Packet Rocket reading at true time ``true_ns`` minus rank 0's (the reference the table
    corrects to; 0 for rank 0): the clocks' residual error under ``mode``, computed by the runtime's own
    code (``_core.rocket_clock_reading``)."""
    from ..._core import rocket_clock_reading

    def read(r: int) -> int:
        return rocket_clock_reading(r, n, int(true_ns), mode, int(offsets_ns[r]), float(drifts_ppm[r]), int(epoch_ns),
                                    None if mode != "estimated" else os.fspath(table))

    ref = read(0)
    return [read(r) - ref for r in range(n)]

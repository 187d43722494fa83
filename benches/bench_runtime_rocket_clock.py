"""The runtime's Packet Rocket on emulated host clocks, over loopback (real processes, real TCP, no
namespaces) or in a cluster-in-a-box (--box, root): what sync error costs, and what the estimated clocks
give back. Not a test; run it by hand:

    PYTHONPATH=python python benches/bench_runtime_rocket_clock.py [-n 4] [--op alltoall] [--size 4M]
        [--chunk 256K] [--iters 40] [--threshold-us 300] [--offsets-ns 0,2000000,-1500000,800000]
        [--drifts-ppm 0,80,-60,40] [--phase-s 2] [--reps 2] [--modes ideal,host,estimated] [--json out.json]
        [--box NAME [--rate 1Gbps] [--queue-packets 100]]

Every rank's Packet Rocket reads an emulated clock (offset, drift, one shared epoch: the start of the
sitting). First a probe phase makes the correction table: over loopback `fabriclab clock rocket-table -n`
(one clock agent per rank on 127.0.0.1 with that rank's emulated clock); with --box, `fabriclab clock
rocket-table --box` (the box's own agents, one per host, host i = rank i, over the box's veths and
switch); fabriclab's estimator either way. With --box the box (n hosts on one switch, every link --rate,
a drop-tail fifo of --queue-packets per switch port, Reno: this kernel lets a namespace choose only reno and bbr) is made for the sitting and removed after it, and
the job's ranks run in its hosts. Then the same job runs under each clock mode, in rotating order per
repetition:

- ideal: CLOCK_REALTIME as it is (no emulated error; the box's and loopback's shared clock);
- host: the emulated clocks raw (a receiver running fast reads every later OWD high);
- estimated: the emulated clocks less the table (the default with a table).

With `--op allreduce` (ring) rank r sends to rank r + 1 only, so its counters are that one direction's:
with the default drifts 0→1 and 2→3 have a receiver running fast (+80, +100 ppm relative), 1→2 and 3→0
one running slow (-140, -40).

Reported per run: pauses, total pause time and time messages were held (summed over ranks), the
completion time (wall seconds of the bench run, and the slowest rank's mean per collective), and the
clocks' residual error at the run's end (each rank's reading minus rank 0's, true time alike: the
error left in OWDs, by the runtime's own code). Loopback figures: no switch queue, the OWD's rise is
the receiving socket's backlog and the scheduler's delay on a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

from fabriclab.observe.clock.rocket_table import box_table, loopback_table, residual_ns  # noqa: E402
from fabriclab.runtime.bench import run_bench  # noqa: E402
from fabriclab.collectives.metrics import parse_size  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("--op", default="alltoall")
    ap.add_argument("--size", default="4M")
    ap.add_argument("--chunk", default="256K")
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--threshold-us", type=float, default=300.0)
    ap.add_argument("--offsets-ns", default="0,2000000,-1500000,800000")
    ap.add_argument("--drifts-ppm", default="0,80,-60,40")
    ap.add_argument("--phase-s", type=float, default=2.0)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--modes", default="ideal,host,estimated", help="comma-separated subset, in rotation order")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--box", default=None, help="run in a cluster-in-a-box of this (unique) name, made and removed here")
    ap.add_argument("--rate", default="1Gbps")
    ap.add_argument("--queue-packets", type=int, default=100)
    ap.add_argument("--refit-s", type=float, default=None,
                    help="with --box: a live refit instead of one phase: the box's agents probe for --refit-for-s, "
                         "flushing every this many s, the table is refitted as often and the ranks re-read it")
    ap.add_argument("--refit-for-s", type=float, default=3600.0,
                    help="with --refit-s: the agents' probing at most this long; they are stopped when the runs end")
    a = ap.parse_args()
    if a.refit_s is not None and a.box is None:
        raise SystemExit("--refit-s: only with --box")
    if a.refit_s is not None and not 0.1 <= a.refit_s <= 3600:
        raise SystemExit(f"--refit-s: must be within 0.1..3600 seconds (the agents' --flush-s), got {a.refit_s}")
    if not 0 < a.refit_for_s <= 86_400:
        raise SystemExit(f"--refit-for-s: must be within 0 and 86400 seconds, got {a.refit_for_s}")
    if a.box is None:
        sitting(a, None)
        return
    from fabriclab.runtime.cluster import apply

    scen = Path(tempfile.mkdtemp(prefix="bench-rclock-box-")) / "box.toml"
    scen.write_text(f'name = "bench-rclock-box"\n[topology]\nkind = "star"\nhosts = {a.n}\n'
                    f'link_rate_bps = "{a.rate}"\nlink_delay_ps = "0us"\n[queue]\ndiscipline = "fifo"\n'
                    f'limit_packets = {a.queue_packets}\necn_threshold_packets = "off"\n[transport]\ncc = "newreno"\n')
    apply.up(str(scen), a.box)
    try:
        sitting(a, a.box)
    finally:
        apply.remove(a.box)


FIRST_TABLE_TIMEOUT_S = 120.0   # beyond the agents' 3 s start and --phase-s


def live_refit(a, box: str, offsets, drifts, epoch: int, table: Path, d: Path):
    """The box's agents probing for --refit-for-s and flushing every --refit-s (a thread), the table refitted
    as often (a thread); returns once the first table is written after --phase-s of probing. Raises (the
    threads stopped) if it is not written within FIRST_TABLE_TIMEOUT_S or a thread ended first."""
    import io
    import threading

    from fabriclab.observe.clock.agent import mesh
    from fabriclab.observe.clock.rocket_table import watch
    from fabriclab.runtime.cluster.apply import load_state

    halves = d / "halves"
    halves.mkdir()
    labels = [h["label"] for h in load_state(box)["hosts"]]
    live = {"log": io.StringIO(), "stop": threading.Event(), "errors": []}

    def guarded(f, **kw):
        def run():
            try:
                f(**kw)
            except Exception as x:  # reported by the main thread (stop_live)
                live["errors"].append(f"{f.__name__}: {x}")
        return threading.Thread(target=run, daemon=True)

    live["mesh"] = guarded(mesh, cluster=box, out=d / "mesh.parquet", duration_s=a.refit_for_s, peers=a.n - 1,
                           offsets_ns=offsets, drifts_ppm=drifts, host_clock="realtime", epoch_ns=epoch,
                           flush_s=a.refit_s, halves_dir=halves, log=io.StringIO(), stop=live["stop"])
    live["watch"] = guarded(watch, folder=halves, names=labels, out=table, every_s=a.refit_s,
                            for_s=a.refit_for_s + 10, log=live["log"], stop=live["stop"])
    live["mesh"].start()
    try:
        time.sleep(3.0 + a.phase_s)  # the mesh's agents start probing 3 s after launch
        live["watch"].start()
        deadline = time.monotonic() + FIRST_TABLE_TIMEOUT_S
        while not table.exists():
            if not (live["mesh"].is_alive() and live["watch"].is_alive()) or time.monotonic() > deadline:
                raise RuntimeError(f"live refit: no first table within {FIRST_TABLE_TIMEOUT_S:g} s or a thread "
                                   f"ended: {live['errors']} {live['log'].getvalue()[-500:]}")
            time.sleep(0.2)
    except BaseException:
        stop_live(live)
        raise
    return {"live_refit_s": a.refit_s, "end_ns": time.time_ns(), "first_refit": live["log"].getvalue()}, live


def stop_live(live) -> list[str]:
    """Stops the agents and the refits, waits for both threads; returns their errors."""
    live["stop"].set()
    for k in ("mesh", "watch"):
        if live[k].ident is not None:
            live[k].join(timeout=60)
    return live["errors"]


def tables_written(log: str) -> int:
    """The refits that wrote a table (watch's "refit N: ..." lines; "refit skipped: ..." wrote none)."""
    return len(re.findall(r"^refit \d+:", log, re.M))


def sitting(a, box: str | None) -> None:
    offsets = [int(v) for v in a.offsets_ns.split(",")]
    drifts = [float(v) for v in a.drifts_ppm.split(",")]
    algo = "direct" if a.op == "alltoall" else "ring"
    size, chunk = parse_size(a.size, "--size"), parse_size(a.chunk, "--chunk")
    epoch = time.time_ns()
    with tempfile.TemporaryDirectory(prefix="fabriclab-bench-rclock-") as d:
        table = Path(d, "table.json")
        t0 = time.perf_counter()
        live = None
        if a.refit_s is not None:
            info, live = live_refit(a, box, offsets, drifts, epoch, table, Path(d))
        else:
            info = (loopback_table(a.n, offsets, drifts, epoch, table, duration_s=a.phase_s) if box is None
                    else box_table(box, offsets, drifts, epoch, table, duration_s=a.phase_s))
        try:
            info["wall_s"] = round(time.perf_counter() - t0, 2)
            print(f"# probe phase: {info}", flush=True)
            modes = a.modes.split(",")
            runs = []
            for rep in range(a.reps):
                order = modes[rep % len(modes):] + modes[:rep % len(modes)]
                for mode in order:
                    clock = {"mode": mode, "offsets_ns": offsets, "drifts_ppm": drifts, "epoch_ns": epoch,
                             "correction": str(table) if mode == "estimated" else None,
                             "reload_ms": a.refit_s * 500 if a.refit_s is not None and mode == "estimated" else None}
                    refits0 = tables_written(live["log"].getvalue()) if live is not None else 0
                    stats: list = []
                    t0 = time.perf_counter()
                    rows = run_bench(a.op, algo, f"{size}:{size}", 2, a.n, iters=a.iters, warmup=2, chunk_bytes=chunk,
                                     packet_rocket_threshold_us=a.threshold_us, rocket_stats=stats, clock=clock,
                                     cluster=box)
                    wall = time.perf_counter() - t0
                    end = time.time_ns()
                    err = residual_ns(table, a.n, offsets, drifts, epoch, end, mode)
                    wrong = sum(f.wrong for x in rows for f in (x.out_of_place, x.in_place))
                    tot = {k: sum(s[k] for s in stats) for k in ("echoes", "pauses", "paused_ns", "held_ns")}
                    r = {"rep": rep, "mode": mode, "wall_s": round(wall, 3), "wrong": wrong,
                         "time_us_oop": rows[0].out_of_place.time_us, "time_us_ip": rows[0].in_place.time_us, **tot,
                         "pauses_per_rank": [s["pauses"] for s in stats],
                         "paused_ms_per_rank": [round(s["paused_ns"] / 1e6, 1) for s in stats],
                         "clock_error_ns_at_end": err, "since_phase_s": round((end - info["end_ns"]) / 1e9, 1),
                         "load1": round(os.getloadavg()[0], 2)}
                    if live is not None:
                        r["tables_written_during"] = tables_written(live["log"].getvalue()) - refits0
                        r["since_last_table_s"] = round((end - table.stat().st_mtime_ns) / 1e9, 1)
                        r["agents_probing_at_end"] = live["mesh"].is_alive()
                    runs.append(r)
                    print(json.dumps(r), flush=True)
        finally:   # the agents and the refits stopped whatever happened (review_rtable B3)
            if live is not None:
                for x in stop_live(live):
                    print(f"# live refit: {x}", flush=True)
    where = f"box {box} ({a.rate}, {a.queue_packets}-packet ports)" if box else "loopback"
    print(f"\n# {platform.node()} {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {where}; load "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; n={a.n} {a.op} {a.size} "
          f"chunk {a.chunk} iters {a.iters} T={a.threshold_us:g} us; offsets {offsets} ns, drifts {drifts} ppm")
    print(f"{'mode':10s} {'pauses':>8s} {'paused ms':>10s} {'held ms':>9s} {'wall s':>7s} {'us/op (oop)':>12s} "
          f"{'max |clock err| us':>19s}")
    for mode in modes:
        rs = [r for r in runs if r["mode"] == mode]
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        print(f"{mode:10s} {med('pauses'):8.0f} {med('paused_ns') / 1e6:10.1f} {med('held_ns') / 1e6:9.1f} "
              f"{med('wall_s'):7.2f} {med('time_us_oop'):12.0f} "
              f"{max(max(abs(v) for v in r['clock_error_ns_at_end']) for r in rs) / 1e3:19.1f}")
    print("per rank (a ring's rank r sends to r + 1 only): median pauses / paused ms")
    for mode in modes:
        rs = [r for r in runs if r["mode"] == mode]
        cells = [f"{statistics.median(r['pauses_per_rank'][k] for r in rs):.0f} / "
                 f"{statistics.median(r['paused_ms_per_rank'][k] for r in rs):.1f}" for k in range(a.n)]
        print(f"{mode:10s} " + "  ".join(f"r{k}: {c:>16s}" for k, c in enumerate(cells)))
    if a.json:
        a.json.write_text(json.dumps({"phase": info, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()

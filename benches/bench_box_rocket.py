"""Packet Rocket in the runtime, measured in the cluster-in-a-box: an incast through drop-tail switch ports,
with and without Packet Rocket, runs alternated. Not a test (root, ~5 minutes); run it by hand:

    sudo python benches/bench_box_rocket.py [--hosts 4] [--rate 100Mbps] [--queue-packets 20] [--cc cubic]
        [--size 4M] [--chunk 256K] [--iters 8] [--reps 5] [--threshold-us 300] [--notsent-lowat BYTES]
        [--control-threshold-us T_BIG] [--name rr] [--json out.json]

The box: `--hosts` hosts on one switch, every link `--rate`, no added delay (this lab's kernel has no
netem), a drop-tail fifo of `--queue-packets` on every switch port, `--cc` in every host. The workload:
the runtime's direct allreduce (every rank sends its share of every shard to the shard's owner, then the
owner sends the sum back), so every host's switch port takes n - 1 flows at once: an incast at each port.

Each repetition runs the job twice, off and on, in alternating order (off first on even repetitions).
A run is one `fabriclab launch --cluster`: each rank joins, checks one allreduce of seeded int32 inputs
against numpy's sum (exact: int32 wraps the same way), then times `--iters` allreduces, each after a
barrier. An iteration's completion time is the slowest rank's. Retransmissions are the hosts' TCP
RetransSegs (/proc/net/snmp read in each host namespace before and after the run, summed over hosts),
and timeouts their TCPTimeouts (/proc/net/netstat: retransmission timer expiries, each at least 200 ms).
`--control-threshold-us` runs the "off" arm with Packet Rocket on at that threshold instead (e.g. 1e6: stamps
and echoes flow, no pause is ever taken), which isolates the pauses from the rest of the machinery.
`--notsent-lowat` sets the hosts' net.ipv4.tcp_notsent_lowat (per namespace), which bounds the bytes
that wait unsent in a socket: with it the chunk gate acts closer to the wire (docs/clockwork-control.md).
Results: docs/performance-runtime.md ("Packet Rocket in the box") and docs/clockwork-control.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

PY = sys.executable


def worker(spec: dict, out_dir: str) -> None:
    """One rank: the exactness check, then the timed allreduces."""
    import numpy as np

    from fabriclab.runtime import Communicator

    c = Communicator.from_env(chunk_bytes=spec["chunk"], packet_rocket_threshold_us=spec["threshold_us"])
    count = spec["size"] // 4
    xs = [np.random.default_rng([7, r]).integers(-1 << 20, 1 << 20, count, dtype=np.int32)
          for r in range(c.world_size)]
    got = xs[c.rank].copy()
    c.allreduce(got, algo="direct")
    wrong = int(np.count_nonzero(got != np.sum(np.stack(xs), axis=0, dtype=np.int32)))
    times = []
    for _ in range(spec["iters"]):
        buf = xs[c.rank].copy()
        c.barrier()
        t0 = time.perf_counter_ns()
        c.allreduce(buf, algo="direct")
        times.append(time.perf_counter_ns() - t0)
    Path(out_dir, f"rank{c.rank}.json").write_text(json.dumps(
        {"times_ns": times, "wrong": wrong, "rocket": c.rocket_stats()}))
    c.close()


def scenario_text(a) -> str:
    return (f'name = "bench-box-rocket"\n[topology]\nkind = "star"\nhosts = {a.hosts}\n'
            f'link_rate_bps = "{a.rate}"\nlink_delay_ps = "0us"\n'
            f'[queue]\ndiscipline = "fifo"\nlimit_packets = {a.queue_packets}\necn_threshold_packets = "off"\n'
            f'[transport]\ncc = "{a.cc}"\n')


def counter(state: dict, path: str, prefix: str, field: str) -> int:
    """A kernel counter (/proc/net/snmp or /proc/net/netstat) summed over the box's hosts."""
    total = 0
    for h in state["hosts"]:
        text = subprocess.run(["ip", "netns", "exec", h["ns"], "cat", path], capture_output=True,
                              text=True, check=True).stdout
        rows = [ln.split() for ln in text.splitlines() if ln.startswith(prefix)]
        total += int(rows[1][rows[0].index(field)])
    return total


def counters(state: dict) -> tuple[int, int]:
    """TCP RetransSegs and TCPTimeouts (retransmission timer expiries) summed over the hosts."""
    return (counter(state, "/proc/net/snmp", "Tcp:", "RetransSegs"),
            counter(state, "/proc/net/netstat", "TcpExt:", "TCPTimeouts"))


def one_run(a, name: str, state: dict, threshold_us: float | None, arm: str) -> dict:
    from fabriclab.runtime.launch import launch

    spec = {"size": a.size, "chunk": a.chunk, "iters": a.iters, "threshold_us": threshold_us}
    with tempfile.TemporaryDirectory(prefix="bench-rocket-") as d:
        before = counters(state)
        t0 = time.monotonic()
        rc = launch(a.hosts, [PY, __file__, "--worker", json.dumps(spec), d], cluster=name)
        wall = time.monotonic() - t0
        after = counters(state)
        if rc != 0:
            raise SystemExit(f"a rank failed (exit code {rc})")
        ranks = [json.loads(Path(d, f"rank{r}.json").read_text()) for r in range(a.hosts)]
    per_iter = [max(r["times_ns"][i] for r in ranks) / 1e6 for i in range(a.iters)]
    stats = [r["rocket"] for r in ranks]
    return {"rocket": arm == "on", "threshold_us": threshold_us, "times_ms": per_iter, "retrans": after[0] - before[0], "timeouts": after[1] - before[1],
            "wrong": sum(r["wrong"] for r in ranks), "wall_s": wall,
            "pauses": sum(s["pauses"] for s in stats) if stats[0] else 0,
            "paused_ms": sum(s["paused_ns"] for s in stats) / 1e6 if stats[0] else 0.0,
            "held_ms": sum(s["held_ns"] for s in stats) / 1e6 if stats[0] else 0.0,
            "echoes": sum(s["echoes"] for s in stats) if stats[0] else 0}


def summary(runs: list[dict]) -> dict:
    xs = sorted(t for r in runs for t in r["times_ms"])
    q = statistics.quantiles(xs, n=10)
    iq = statistics.quantiles(xs, n=4)
    return {"iterations": len(xs), "median_ms": statistics.median(xs), "p10_ms": q[0], "p90_ms": q[-1],
            "iqr_ms": iq[2] - iq[0], "stdev_ms": statistics.stdev(xs), "min_ms": xs[0], "max_ms": xs[-1],
            "retrans_per_run": [r["retrans"] for r in runs],
            "retrans_mean": statistics.mean(r["retrans"] for r in runs),
            "timeouts_per_run": [r["timeouts"] for r in runs],
            "pauses_per_run": [r["pauses"] for r in runs], "held_ms_per_run": [round(r["held_ms"], 1) for r in runs],
            "wrong": sum(r["wrong"] for r in runs)}


def main() -> None:
    from fabriclab.collectives.metrics import parse_size
    from fabriclab.runtime.cluster import apply

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--rate", default="100Mbps")
    p.add_argument("--queue-packets", type=int, default=20)
    p.add_argument("--cc", default="cubic")
    p.add_argument("--size", default="4M")
    p.add_argument("--chunk", default="256K")
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threshold-us", type=float, default=300.0)
    p.add_argument("--notsent-lowat", type=int, default=None)
    p.add_argument("--control-threshold-us", type=float, default=None)
    p.add_argument("--gso", action="store_true")
    p.add_argument("--name", default="rr")
    p.add_argument("--keep", action="store_true", help="leave the box up afterwards")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    a.size, a.chunk = parse_size(a.size, "--size"), parse_size(a.chunk, "--chunk")
    scen = Path(tempfile.mkdtemp(prefix="bench-rocket-")) / "box.toml"
    scen.write_text(scenario_text(a))
    state = apply.up(str(scen), a.name, gso=a.gso)
    try:
        if a.notsent_lowat is not None:
            for h in state["hosts"]:
                subprocess.run(["ip", "netns", "exec", h["ns"], "sysctl", "-qw",
                                f"net.ipv4.tcp_notsent_lowat={a.notsent_lowat}"], check=True)
        runs = []
        for rep in range(a.reps):
            arms = [("off", a.control_threshold_us), ("on", a.threshold_us)]
            for arm, t in (arms if rep % 2 == 0 else arms[::-1]):
                r = one_run(a, a.name, state, t, arm)
                runs.append(r)
                print(f"rep {rep} rocket={'on ' if r['rocket'] else 'off'} median "
                      f"{statistics.median(r['times_ms']):8.1f} ms  retrans {r['retrans']:6d}  timeouts {r['timeouts']:4d}  pauses "
                      f"{r['pauses']:5d}  held {r['held_ms']:8.1f} ms  wrong {r['wrong']}", flush=True)
    finally:
        if not a.keep:
            apply.remove(a.name)
    off = summary([r for r in runs if not r["rocket"]])
    on = summary([r for r in runs if r["rocket"]])
    out = {"machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, Linux {platform.release()}",
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "args": {k: v for k, v in vars(a).items() if k not in ("json", "keep")}, "off": off, "on": on,
           "runs": runs}
    for k, s in (("off", off), ("on", on)):
        print(f"{k:3s}: median {s['median_ms']:.1f} ms (p10 {s['p10_ms']:.1f}, p90 {s['p90_ms']:.1f}, IQR "
              f"{s['iqr_ms']:.1f}, stdev {s['stdev_ms']:.1f}), retransmissions per run {s['retrans_per_run']} "
              f"(mean {s['retrans_mean']:.0f}), timeouts {s['timeouts_per_run']}, pauses {s['pauses_per_run']}, wrong {s['wrong']}")
    print(f"on/off: median {on['median_ms'] / off['median_ms']:.3f}, retransmissions "
          f"{on['retrans_mean'] / max(off['retrans_mean'], 1e-9):.3f}, IQR {on['iqr_ms'] / off['iqr_ms']:.3f}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        worker(json.loads(sys.argv[2]), sys.argv[3])
    else:
        main()

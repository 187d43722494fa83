"""Speed of the clock estimator (`fabriclab clock estimate`, Huygens with the network effect) on a
synthetic probe mesh: does it keep up in real time on one core? Not a test; run it by hand:

    python benches/bench_clock_estimate.py [--hosts 1000] [--peers 10] [--rate-hz 50] [--duration-s 10]
                                           [--rounds 3]

It writes the probes once (without true times, as the real agent will: the score against truth is not
timed), then runs the command in fresh single-threaded processes (OMP/OpenBLAS/MKL threads 1) and reports
each run's CPU time (user + system) and wall time. Real time means the CPU time is below the probes'
duration. docs/performance.md, "Clock estimator", holds the latest figure.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--peers", type=int, default=10)
    ap.add_argument("--rate-hz", type=float, default=50.0, help="coded pairs per second to each peer, each echoed")
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--method", default="huygens")
    a = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "python"), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="bench-clock-") as d:
        probes = Path(d) / "probes.parquet"
        t = time.time()
        subprocess.run([sys.executable, "-m", "fabriclab.cli", "clock", "synth", "--out", str(probes),
                        "--hosts", str(a.hosts), "--peers", str(a.peers), "--rate-hz", str(a.rate_hz),
                        "--duration-s", str(a.duration_s), "--no-truth", "--seed", "1"], env=env, check=True)
        print(f"probes written in {time.time() - t:.1f} s ({probes.stat().st_size / 1e6:.0f} MB)")
        cpu, wall = [], []
        for _ in range(a.rounds):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.time()
            subprocess.run([sys.executable, "-m", "fabriclab.cli", "clock", "estimate", str(probes), "--out",
                            str(Path(d) / "clocks.parquet"), "--method", a.method], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            wall.append(time.time() - t)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}; python {platform.python_version()}")
    print(f"{a.hosts} hosts x {a.peers} peers, {a.rate_hz:g} coded pairs/s per peer (echoed), "
          f"{a.duration_s:g} s of probes, method {a.method}")
    print(f"CPU s per run: {', '.join(f'{c:.2f}' for c in cpu)} (best {min(cpu):.2f}, median "
          f"{statistics.median(cpu):.2f}); wall s: {', '.join(f'{w:.2f}' for w in wall)}")
    ratio = min(cpu) / a.duration_s
    print(f"real-time ratio (best CPU / probes' duration): {ratio:.2f} -> "
          f"{'keeps up' if ratio < 1 else 'does NOT keep up'} on one core")


if __name__ == "__main__":
    main()

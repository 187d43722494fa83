"""Soak: many small collectives on local ranks, resident memory sampled.

    python benches/runtime_soak.py [-n 4] [--ops 10000] [--count 256]

Starts the ranks with `fabriclab launch`; every rank runs --ops allreduces
(ring, float32, --count elements), alternating with broadcasts every tenth
op, and records its VmRSS (from /proc/self/status) after 1 %, 10 %, 50 % and
100 % of the ops. Rank 0 prints one line per rank. Numbers: docs/performance-runtime.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def rss_kib() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def rank_main(ops: int, count: int) -> None:
    import numpy as np

    from fabriclab.runtime import Communicator

    c = Communicator.from_env()
    x = np.ones(count, np.float32)
    marks = {max(1, ops // 100), ops // 10, ops // 2, ops}
    samples = []
    t0 = time.perf_counter()
    for i in range(1, ops + 1):
        if i % 10 == 0:
            c.broadcast(x, root=i % c.world_size)
        else:
            c.allreduce(x)
            x[:] = 1.0
        if i in marks:
            samples.append((i, rss_kib()))
    dt = time.perf_counter() - t0
    print(f"rank {c.rank}: {ops} ops in {dt:.1f} s ({dt / ops * 1e6:.0f} us/op); VmRSS KiB after "
          + ", ".join(f"{i} ops: {k}" for i, k in samples), flush=True)
    c.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("--ops", type=int, default=10000)
    ap.add_argument("--count", type=int, default=256)
    ap.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank_main:
        rank_main(a.ops, a.count)
    else:
        cmd = [sys.executable, "-m", "fabriclab.cli", "launch", "-n", str(a.n), "--", sys.executable,
               os.path.abspath(__file__), "--rank-main", "--ops", str(a.ops), "--count", str(a.count)]
        sys.exit(subprocess.call(cmd))

"""Planning and simulated-collective benchmarks (not tests):

    python benches/bench_plan.py

Prints the time to plan (TreeGen included) on DGX-1P/DGX-1V 8-GPU and DGX-2
16-GPU allocations, and the time of an 8-GPU allreduce sweep from 8 B to 1 GB
on the flow backend."""

from __future__ import annotations

import time

from fabriclab.collectives.algos import Allocation, make_plan
from fabriclab.sim.bench import run_bench
from fabriclab.collectives.treegen import best_root_packing, pack_trees
from fabriclab.scenario.gpus import gpu_server


def timed(label, fn, repeat=3):
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    print(f"{label:70s} {best * 1e3:9.1f} ms")
    return out


def main():
    for kind in ("dgx1p", "dgx1v"):
        a = Allocation(gpu_server(kind), list(range(8)))
        timed(f"{kind} 8 GPUs: TreeGen broadcast packing (root 0)", lambda: pack_trees(a.nvlink(), 0))
        timed(f"{kind} 8 GPUs: TreeGen allreduce packing (best root, both ways)",
              lambda: best_root_packing(a.nvlink(), both_directions=True))
        timed(f"{kind} 8 GPUs: plan trees allreduce 1 GiB, 1 MiB chunks", lambda: make_plan("trees", "allreduce", a, 1 << 30, 1 << 20))
        timed(f"{kind} 8 GPUs: plan ring allreduce 1 GiB, 1 MiB chunks", lambda: make_plan("ring", "allreduce", a, 1 << 30, 1 << 20))
    a = Allocation(gpu_server("dgx2"), list(range(16)))
    timed("dgx2 16 GPUs: plan one-hop trees allreduce 1 GiB, 4 MiB chunks", lambda: make_plan("trees", "allreduce", a, 1 << 30, 4 << 20))
    timed("dgx2 16 GPUs: plan ring allreduce 1 GiB, 4 MiB chunks", lambda: make_plan("ring", "allreduce", a, 1 << 30, 4 << 20))
    for chunk in ("1M", "auto"):
        timed(f"dgx1v 8-GPU ring allreduce sweep 8 B..1 GiB (x2), chunk {chunk}, flow backend",
              lambda: run_bench("dgx1v", "all", "allreduce", "ring", "8:1G", 2, chunk), repeat=1)


if __name__ == "__main__":
    main()

"""CPU cost of an allreduce: the runtime against Gloo, on local ranks (issue 31).
Every rank runs this:

    fabriclab launch -n 4 -- python benches/runtime_cpu.py --lib runtime --sizes 8M,16M,32M,64M --iters 10
    fabriclab launch -n 4 -- python benches/runtime_cpu.py --lib gloo    --sizes 8M,16M,32M,64M --iters 10

Per size: ``--iters`` back-to-back in-place float32 ring allreduces (Gloo:
``torch.distributed.all_reduce``) after one warm-up and a barrier. Rank 0
prints the wall time per op (the slowest rank's), the busbw from it, and the
CPU time per op summed over all ranks (user + system of every thread of each
process, ``time.process_time``). On a shared machine wall time mostly
measures the other tenants; the CPU time is what the library itself costs.
One line per size: ``lib n size wall_ms busbw_GBps cpu_ms``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def parse_size(s: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", choices=("runtime", "gloo"), required=True)
    ap.add_argument("--sizes", default="8M,16M,32M,64M")
    ap.add_argument("--iters", type=int, default=10)
    a = ap.parse_args()
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    if a.lib == "runtime":
        from fabriclab.runtime import Communicator
        from fabriclab.runtime.plans import plan_json

        c = Communicator.from_env()
        rank, n = c.rank, c.world_size

        def op_for(x):
            text = plan_json("allreduce", "ring", n, x.size, 4)
            return lambda: c.run_plan(text, x)

        def gather(v):  # sum of a float64 vector over ranks
            c.allreduce(v)
            return v

        def maxed(v):
            out = np.zeros(n, np.float64)
            out[rank] = v
            return gather(out).max()

        barrier, close = c.barrier, c.close
    else:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group("gloo")
        rank, n = dist.get_rank(), dist.get_world_size()

        def op_for(x):
            t = torch.from_numpy(x)
            return lambda: dist.all_reduce(t)

        def gather(v):
            t = torch.from_numpy(v)
            dist.all_reduce(t)
            return v

        def maxed(v):
            t = torch.tensor([v], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            return float(t[0])

        barrier, close = dist.barrier, dist.destroy_process_group
    for size in sizes:
        x = np.ones(size // 4, np.float32)
        op = op_for(x)
        op()
        barrier()
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(a.iters):
            op()
        wall, cpu = (time.perf_counter() - w0) / a.iters, (time.process_time() - c0) / a.iters
        wall = maxed(wall)
        cpu_sum = gather(np.array([cpu], np.float64))[0]
        if rank == 0:
            busbw = 2 * (n - 1) / n * size / wall / 1e9
            print(f"{a.lib} {n} {size} {wall * 1e3:.2f} {busbw:.3f} {cpu_sum * 1e3:.2f}", flush=True)
        barrier()
    close()


if __name__ == "__main__":
    main()

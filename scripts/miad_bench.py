"""MIAD chunk tuning against a sweep of fixed chunk sizes, for real
(docs/performance.md). Run under the launcher:

    fabriclab launch -n 4 -- python scripts/miad_bench.py --size 16M --algo ring
    fabriclab launch --cluster blink -n 4 -- python scripts/miad_bench.py ...

Every rank runs the same allreduces; rank 0 times them, decides the next
chunk (MIAD) and tells the others with a one-element allreduce. Throughput =
size / time of one allreduce (algbw). Rank 0 prints a JSON summary."""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from fabriclab.collectives.bench import parse_size
from fabriclab.runtime.comm import Communicator
from fabriclab.runtime.miad import ChunkMIAD
from fabriclab.runtime.plans import plan_json


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="16M")
    ap.add_argument("--algo", default="ring")
    ap.add_argument("--chunks", default="16K,32K,64K,128K,256K,512K,1M,2M,4M,8M,16M")
    ap.add_argument("--iters", type=int, default=7, help="timed allreduces per fixed chunk (median)")
    ap.add_argument("--miad-iters", type=int, default=60)
    ap.add_argument("--initial", default="16K")
    ap.add_argument("--samples", type=int, default=3)
    a = ap.parse_args()
    c = Communicator.from_env()
    size = parse_size(a.size, "--size")
    x = np.ones(size // 4, np.float32)
    ctrl = np.zeros(1, np.int64)

    def one(chunk: int) -> float:
        text = plan_json("allreduce", a.algo, c.world_size, x.size, 4, 0, chunk)
        c.barrier()
        t0 = time.perf_counter()
        c.run_plan(text, x)
        return time.perf_counter() - t0

    sweep = {}
    for ch in [parse_size(s, "--chunks") for s in a.chunks.split(",")]:
        one(ch)  # warm-up (plan cached, connections warm)
        sweep[ch] = size / statistics.median(one(ch) for _ in range(a.iters))
    miad = ChunkMIAD(parse_size(a.initial, "--initial"), samples=a.samples, align=4, min_chunk=4 << 10,
                     max_chunk=size)
    chunk, trace = miad.chunk, []
    for it in range(a.miad_iters):
        t = one(chunk)
        ctrl[0] = miad.update(size / t) if c.rank == 0 else 0
        c.allreduce(ctrl)  # rank 0's decision to everyone
        trace.append((chunk, size / t))
        chunk = int(ctrl[0])
    final = chunk
    final_thr = size / statistics.median(one(final) for _ in range(a.iters))
    # back-to-back re-measure of the sweep's best, so drift between the sweep and now does not decide
    ctrl[0] = max(sweep, key=sweep.get) if c.rank == 0 else 0  # rank 0's timings decide, as for MIAD
    c.allreduce(ctrl)
    best_ch = int(ctrl[0])
    best_again = size / statistics.median(one(best_ch) for _ in range(a.iters))
    conv = next((i for i in range(len(trace)) if all(ch == final for ch, _ in trace[i:])), None)
    if c.rank == 0:
        print(json.dumps({"size": size, "algo": a.algo, "n": c.world_size,
                          "sweep_MBps": {str(k): round(v / 1e6, 1) for k, v in sweep.items()},
                          "best_fixed_chunk": best_ch, "best_fixed_MBps": round(sweep[best_ch] / 1e6, 1),
                          "best_fixed_again_MBps": round(best_again / 1e6, 1),
                          "miad_chunk": final, "miad_MBps": round(final_thr / 1e6, 1),
                          "miad_iterations_to_settle": conv, "miad_trace": [(ch, round(t / 1e6, 1)) for ch, t in trace]}))
    c.barrier()  # nobody closes while a peer still reads its last messages (a close can reset the connection)
    c.close()


if __name__ == "__main__":
    main()

"""``chunk_bytes="auto"`` (MIAD inside the communicator) against a sweep of
fixed chunk sizes, for real (docs/performance-runtime.md). Run under the launcher:

    fabriclab launch -n 4 -- python scripts/miad_bench.py --size 16M --algo ring
    fabriclab launch --cluster miad -n 4 -- python scripts/miad_bench.py --rounds 2 ...

Phases alternate in one sitting: sweep, auto, sweep, auto, ..., sweep
(``--rounds`` autos, each between two sweeps). A sweep times ``--iters``
allreduces per fixed chunk (plans built with that chunk, median). An auto
phase forgets the tuning (``reset_tuning``), runs ``--auto-iters`` plain
``comm.allreduce`` calls with ``chunk_bytes="auto"`` and takes its steady
throughput from the median of the last ``--steady`` calls (the tuner's own
syncs included). Every timed call follows a barrier. Throughput = size /
time of one allreduce on rank 0 (algbw). Rank 0 prints a JSON summary."""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from fabriclab.collectives.metrics import parse_size
from fabriclab.runtime.autochunk import AutoChunk
from fabriclab.runtime.comm import Communicator
from fabriclab.runtime.plans import plan_json


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="16M")
    ap.add_argument("--algo", default="ring")
    ap.add_argument("--chunks", default="16K,32K,64K,128K,256K,512K,1M,2M,4M,8M,16M")
    ap.add_argument("--iters", type=int, default=5, help="timed allreduces per fixed chunk (median)")
    ap.add_argument("--rounds", type=int, default=2, help="auto phases, each between two sweeps")
    ap.add_argument("--auto-iters", type=int, default=60, help="allreduces per auto phase")
    ap.add_argument("--steady", type=int, default=10, help="last calls of an auto phase that give its throughput")
    ap.add_argument("--initial", default="64K")
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--sync-every", type=int, default=16)
    ap.add_argument("--lookahead", type=int, default=1, help="MIAD steps tried past the first non-improving chunk")
    a = ap.parse_args()
    settings = AutoChunk(initial=parse_size(a.initial, "--initial"), samples=a.samples, sync_every=a.sync_every,
                         lookahead=a.lookahead)
    c = Communicator.from_env(chunk_bytes=settings)
    size = parse_size(a.size, "--size")
    if size < settings.min_bytes:
        raise SystemExit(f"--size: auto tunes messages of at least {settings.min_bytes} bytes, got {size}")
    x = np.zeros(size // 4, np.float32)
    chunks = [parse_size(s, "--chunks") for s in a.chunks.split(",")]

    def timed(run) -> float:
        c.barrier()
        t0 = time.perf_counter()
        run()
        return time.perf_counter() - t0

    def fixed(chunk: int) -> float:
        return timed(lambda: c.run_plan(plan_json("allreduce", a.algo, c.world_size, x.size, 4, 0, chunk), x))

    def sweep() -> dict:
        out = {}
        for ch in chunks:
            fixed(ch)  # warm-up (plan cached, connections warm)
            out[ch] = size / statistics.median(fixed(ch) for _ in range(a.iters))
        return out

    def auto() -> dict:
        c.reset_tuning()
        times = [timed(lambda: c.allreduce(x, a.algo)) for _ in range(a.auto_iters)]
        (st,) = c.tuning.values()
        return {"chunk": st["chunk"], "converged": st["converged"],
                "settled_at_call": st["changes"][-1][0], "changes": st["changes"],
                "steady_MBps": round(size / statistics.median(times[-a.steady:]) / 1e6, 2),
                "decisions": [(ch, round(t / 1e6, 2)) for ch, t in st["decisions"]]}

    phases = [("sweep", sweep())]
    for _ in range(a.rounds):
        phases += [("auto", auto()), ("sweep", sweep())]
    if c.rank == 0:
        rounds = []
        for i in range(1, len(phases), 2):
            before, au, after = phases[i - 1][1], phases[i][1], phases[i + 1][1]
            best = {k: max(s.values()) / 1e6 for k, s in (("before", before), ("after", after))}
            rounds.append({"auto": au, **{f"sweep_best_{k}": {"chunk": max(s, key=s.get), "MBps": round(best[k], 2)}
                                          for k, s in (("before", before), ("after", after))},
                           "ratio_to_best_before": round(au["steady_MBps"] / best["before"], 3),
                           "ratio_to_best_after": round(au["steady_MBps"] / best["after"], 3)})
        print(json.dumps({"size": size, "algo": a.algo, "n": c.world_size, "settings": {
            "initial": settings.initial, "samples": a.samples, "sync_every": a.sync_every,
            "lookahead": settings.lookahead},
            "sweeps_MBps": [{str(k): round(v / 1e6, 2) for k, v in s.items()} for p, s in phases if p == "sweep"],
            "rounds": rounds}))
    c.barrier()  # nobody closes while a peer still reads its last messages (a close can reset the connection)
    c.close()


if __name__ == "__main__":
    main()

"""Helper for tests/test_runtime_autochunk.py (not a test): one rank of a
job with ``chunk_bytes`` tuned automatically.

    python tests/runtime_auto_worker.py spec.json OUT_DIR    (env from the test)

spec: {"settings": AutoChunk fields, "settings_rank": {rank: overrides},
"curves": per rank [S, alpha, B, hops, scale] (a pipelined chain) or {"knots":
[[chunk, bytes/s], ...]} (throughput piecewise linear in the chunk), or null
(real timing),
"switch_at": call index from which "curves_after" applies, "cases": [{"op",
"algo", "count", "dtype", "root", "calls"}]}. Rank r saves, per case and call,
its output and the chunk the call used (rank{r}.npz) and ``comm.tuning``
(rank{r}.json); call k of case i starts from ``call_input(i, k, r, ...)``."""

from __future__ import annotations

import json
import os
import sys

import numpy as np


def call_input(case_id: int, call: int, rank: int, count: int, dtype: str) -> np.ndarray:
    rng = np.random.default_rng([case_id, call, rank])
    if dtype == "int32":
        return rng.integers(-1_000_000, 1_000_000, count, dtype=np.int32)
    return rng.standard_normal(count).astype(dtype)


def pipeline_seconds(chunk: int, S: float, alpha: float, B: float, hops: int, scale: float) -> float:
    """A chain of ``hops`` links pipelining S bytes in chunks: (S/c + hops - 1)(alpha + c/B), times ``scale``."""
    return scale * (S / chunk + hops - 1) * (alpha + chunk / B)


def knots_seconds(chunk: int, nbytes: int, knots: list) -> float:
    """nbytes / throughput, the throughput piecewise linear in the chunk between knots (flat outside)."""
    (c0, t0) = knots[0]
    thr = t0
    for c1, t1 in knots[1:]:
        if chunk <= c0:
            break
        thr = t1 if chunk >= c1 else t0 + (t1 - t0) * (chunk - c0) / (c1 - c0)
        c0, t0 = c1, t1
    return nbytes / thr


def make_cost(spec: dict, rank: int):
    if not spec.get("curves"):
        return None
    calls = [0]

    def cost(chunk: int, nbytes: int) -> float:
        calls[0] += 1
        after = spec.get("switch_at") is not None and calls[0] > spec["switch_at"]
        curve = spec["curves_after" if after else "curves"][rank]
        if isinstance(curve, dict):
            return knots_seconds(chunk, nbytes, curve["knots"])
        return pipeline_seconds(chunk, *curve)
    return cost


def main(spec_path: str, out_dir: str) -> None:
    from fabriclab.runtime import Communicator
    from fabriclab.runtime.autochunk import AutoChunk
    from fabriclab.runtime.errors import RuntimeFailure

    spec = json.loads(open(spec_path).read())
    rank = int(os.environ["RANK"])
    settings = {**spec.get("settings", {}), **spec.get("settings_rank", {}).get(str(rank), {})}
    c = Communicator.from_env(checksum=True, chunk_bytes=AutoChunk(**settings, cost=make_cost(spec, rank)))
    outs = {}
    try:
        for i, case in enumerate(spec["cases"]):
            chunks = []
            for k in range(case["calls"]):
                x = call_input(i, k, rank, case["count"], case["dtype"])
                key = f"{case['op']}:{case['algo']}:<={1 << (x.nbytes - 1).bit_length()}"
                before = c.tuning.get(key)
                chunks.append(before["chunk"] if before else 0)  # 0: the key's first call (its initial chunk)
                c.collective(case["op"], x, case["algo"], case.get("root", 0))
                outs[f"case{i}_call{k}"] = x
            outs[f"case{i}_chunks"] = np.array(chunks, np.int64)
    except RuntimeFailure as e:
        print(f"FAILURE {type(e).__name__}: {e}", flush=True)
        sys.exit(3)
    np.savez(os.path.join(out_dir, f"rank{rank}.npz"), **outs)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(c.tuning, f)
    c.barrier()
    c.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""Every collective and planner run for real on 2, 3, 4 and 8 local
processes over loopback TCP, checksums on. Expectations come from numpy on
the same seeded inputs: exact for int32 (wrapping sums), allclose for
float32. Large cases (64 MB) only with FABRICLAB_RT_LARGE=1, which .ci/run sets."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest


sys.path.insert(0, str(Path(__file__).parent))
from conftest import run_ranks  # noqa: E402
from runtime_worker import make_input  # noqa: E402

WORKER = str(Path(__file__).parent / "runtime_worker.py")
ALGOS_ALLREDUCE = ("ring", "tree", "halving-doubling", "direct")


def shard(count, n, i):
    return i * count // n, (i + 1) * count // n


def expected(case, n, rank):
    xs = [make_input(case, r) for r in range(n)]
    total = np.sum(np.stack(xs), axis=0, dtype=xs[0].dtype)  # int32 wraps like the runtime's sum
    op, root = case["op"], case.get("root", 0)
    if op == "allreduce":
        return total, slice(None)
    if op == "broadcast":
        return xs[root], slice(None)
    if op == "reduce":
        return total, (slice(None) if rank == root else slice(0, 0))
    lo, hi = shard(case["count"], n, rank)
    if op == "reduce_scatter":
        return total, slice(lo, hi)
    out = np.concatenate([xs[i][slice(*shard(case["count"], n, i))] for i in range(n)])  # allgather
    return out, slice(None)


def cases_for(n, counts):
    cases = []
    for count in counts:
        for algo in ALGOS_ALLREDUCE:
            cases.append({"op": "allreduce", "algo": algo, "count": count})
        for op in ("broadcast", "reduce", "allgather", "reduce_scatter"):
            cases.append({"op": op, "algo": "ring", "count": count, "root": (count + 1) % n})
    for i, c in enumerate(cases):
        c["id"] = i
        c["dtype"] = "int32" if i % 2 == 0 else "float32"
    return cases


def run_world(n, cases, tmp_path, timeout=60, extra_env=None):
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    return run_ranks(n, [sys.executable, WORKER, str(tmp_path / "cases.json"), str(tmp_path)], timeout, extra_env)


def check_world(n, counts, tmp_path):
    cases = cases_for(n, counts)
    codes, outs = run_world(n, cases, tmp_path)
    assert codes == [0] * n, "\n".join(outs)
    for r in range(n):
        got = np.load(tmp_path / f"rank{r}.npz")
        for case in cases:
            exp, sl = expected(case, n, r)
            g = got[f"case{case['id']}"]
            what = f"rank {r} {case}"
            if case["dtype"] == "int32":
                np.testing.assert_array_equal(g[sl], exp[sl], err_msg=what)
            else:
                np.testing.assert_allclose(g[sl], exp[sl], rtol=1e-5, atol=1e-5, err_msg=what)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_every_collective_and_planner(n, tmp_path):
    # 1 element, sizes not divisible by n, and ~1 MB (262147 float32) with chunking
    check_world(n, [1, 7, 1003, 262147], tmp_path)


def test_every_collective_and_planner_on_8_ranks(tmp_path):
    check_world(8, [1, 13, 100003], tmp_path)


def test_a_few_megabytes(tmp_path):
    cases = [{"id": 0, "op": "allreduce", "algo": a, "count": 786433, "dtype": "int32"} for a in ("ring",)]
    cases += [{"id": 1, "op": "allreduce", "algo": "halving-doubling", "count": 786431, "dtype": "float32"}]
    codes, outs = run_world(4, cases, tmp_path)
    assert codes == [0] * 4, "\n".join(outs)
    for r in range(4):
        got = np.load(tmp_path / f"rank{r}.npz")
        np.testing.assert_array_equal(got["case0"], expected(cases[0], 4, r)[0])
        np.testing.assert_allclose(got["case1"], expected(cases[1], 4, r)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(os.environ.get("FABRICLAB_RT_LARGE") != "1", reason="64 MB cases: set FABRICLAB_RT_LARGE=1")
@pytest.mark.parametrize("op", ["allreduce", "allgather", "reduce_scatter", "broadcast", "reduce"])
def test_64_megabytes(op, tmp_path):
    count = (64 << 20) // 4 + 3
    cases = [{"id": 0, "op": op, "algo": "ring", "count": count, "dtype": "int32", "root": 1}]
    if op == "allreduce":
        cases += [{"id": i + 1, "op": op, "algo": a, "count": count, "dtype": "float32"}
                  for i, a in enumerate(("tree", "halving-doubling", "direct"))]
    codes, outs = run_world(4, cases, tmp_path, timeout=600)
    assert codes == [0] * 4, "\n".join(outs)
    for r in range(4):
        got = np.load(tmp_path / f"rank{r}.npz")
        for case in cases:
            exp, sl = expected(case, 4, r)
            np.testing.assert_allclose(got[f"case{case['id']}"][sl], exp[sl], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_alltoall_is_numpys_block_transpose(n, tmp_path):
    # Blocks of 1 element, of a few, of ~4 KB, and (2 ranks) of 1.2 MB: cut by the 1 MB chunk.
    counts = [n, 7 * n, 1001 * n] + ([300_000 * n] if n == 2 else [])
    cases = [{"id": i, "op": "alltoall", "algo": "direct", "count": c, "dtype": ("int32", "float32")[i % 2]}
             for i, c in enumerate(counts)]
    codes, outs = run_world(n, cases, tmp_path)
    assert codes == [0] * n, "\n".join(outs)
    got = [np.load(tmp_path / f"rank{r}.npz") for r in range(n)]
    for case in cases:
        every = np.stack([make_input(case, r) for r in range(n)])
        # Block j of rank i goes to rank j as its block i: numpy's transpose of the (rank, block) axes.
        want = every.reshape(n, n, -1).transpose(1, 0, 2).reshape(n, -1)
        for r in range(n):
            np.testing.assert_array_equal(got[r][f"case{case['id']}"], want[r], err_msg=f"rank {r} {case}")

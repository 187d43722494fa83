"""Reductions into a buffer whose pieces arrive out of order on several
streams (issue 31), against numpy's sum taken in rank order.

The plan, written here by hand, is a chain reduce 0 -> 1 -> 2 -> 3 over
pieces of very different sizes (1 to 200,000 elements, in an order that is
neither ascending nor descending). Every rank sends its pieces in reverse
buffer order, round-robin over 4 connections, and receives them in that
order of the plan with no dependency between the receives, so a small
piece on one stream overtakes a large one on another and is reduced first.
Rank k > 0 forwards a piece as soon as it has reduced it. Each element's
result on the root is therefore ((x0 + x1) + x2) + x3, however the pieces
arrived (IEEE addition is commutative), which is what numpy computes adding
the ranks' arrays one after the other: the root's buffer must equal it bit
for bit. Ranks 1 and 2 hold the partial sums (x0 + x1, and + x2)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from conftest import run_ranks  # noqa: E402

PIECES = [1, 7, 200_000, 3, 65_536, 1_000, 31, 120_000, 2, 4_099]
N = 4

WORKER = r"""
import json, sys
import numpy as np
from fabriclab.runtime import Communicator
plan, dtype, out = sys.argv[1], sys.argv[2], sys.argv[3]
c = Communicator.from_env(streams=4, checksum=True)
d = json.loads(open(plan).read())
x = np.random.default_rng([7, c.rank]).standard_normal(d["meta"]["count"]).astype(dtype)
for _ in range(3):   # three ops on the same connections: every one starts from the inputs
    y = x.copy()
    c.run_plan(open(plan).read(), y)
np.save(f"{out}/rank{c.rank}.npy", y)
c.close()
"""


def chain_plan(pieces, n, itemsize):
    """Chain reduce 0 -> 1 -> ... -> n-1 in pieces, sent in reverse buffer order."""
    bounds, o = [], 0
    for p in pieces:
        bounds.append((o * itemsize, p * itemsize))
        o += p
    order = list(reversed(range(len(pieces))))
    ranks = []
    for r in range(n):
        steps, recv_at = [], {}
        if r > 0:
            for i in order:
                recv_at[i] = len(steps)
                steps.append({"op": "recv", "peer": r - 1, "offset": bounds[i][0], "bytes": bounds[i][1], "reduce": True})
        if r < n - 1:
            for i in order:
                s = {"op": "send", "peer": r + 1, "offset": bounds[i][0], "bytes": bounds[i][1]}
                if r > 0:
                    s["deps"] = [recv_at[i]]
                steps.append(s)
        ranks.append(steps)
    return {"version": 1, "collective": "reduce", "nranks": n, "size_bytes": o * itemsize, "root": n - 1,
            "algorithm": "hand-chain", "meta": {"count": o, "element_bytes": itemsize, "streams": 4}, "ranks": ranks}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_out_of_order_pieces_reduce_to_numpys_in_order_sum(tmp_path, dtype):
    itemsize = np.dtype(dtype).itemsize
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(chain_plan(PIECES, N, itemsize)))
    codes, outs = run_ranks(N, [sys.executable, "-c", WORKER, str(plan), dtype, str(tmp_path)], timeout=60)
    assert codes == [0] * N, "\n".join(outs)
    count = sum(PIECES)
    xs = [np.random.default_rng([7, r]).standard_normal(count).astype(dtype) for r in range(N)]
    acc = xs[0].copy()
    for r in range(1, N):
        acc = acc + xs[r]  # numpy, in rank order
        got = np.load(tmp_path / f"rank{r}.npy")
        assert got.tobytes() == acc.tobytes(), f"rank {r}: {np.count_nonzero(got != acc)} elements differ"
    # the sum in another order differs somewhere: the check can tell orders apart
    other = ((xs[3] + xs[2]) + xs[1]) + xs[0]
    assert other.tobytes() != acc.tobytes()
    np.testing.assert_array_equal(np.load(tmp_path / "rank0.npy"), xs[0])

"""The communicator's Python API beyond in-place collectives: out-of-place
calls (the input untouched, the output equal to numpy's result) and
algo="trees" on the communicator's own probe. Ranks are threads of this
process (the runtime releases the GIL)."""

import threading

import numpy as np
import pytest

from fabriclab.runtime import Communicator, RuntimeInputError
from fabriclab.runtime.launch import free_port
from fabriclab.runtime.plans import shard_bounds

N = 3


def on_ranks(fn, n=N):
    port, comms, out, errs = free_port(), [None] * n, [None] * n, []

    def run(r):
        try:
            comms[r] = Communicator(r, n, "127.0.0.1", port, "t", timeout_s=20)
            out[r] = fn(r, comms[r])
        except BaseException as e:  # re-raised in the test's thread
            errs.append(e)
        finally:
            if comms[r] is not None:
                comms[r].close()

    ts = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    [t.start() for t in ts]
    [t.join(120) for t in ts]
    if errs:
        raise errs[0]
    return out


def inputs(count):
    return [np.random.default_rng([7, r]).integers(-1000, 1000, count).astype(np.float32) for r in range(N)]


def test_out_of_place_leaves_the_input_and_fills_out():
    count = 1001  # not divisible by 3
    xs = inputs(count)

    def work(r, c):
        x = xs[r].copy()
        got = {}
        for op, kw in (("allreduce", {}), ("broadcast", {"root": 2}), ("reduce", {"root": 1}),
                       ("allgather", {}), ("reduce_scatter", {})):
            out = np.full(count, np.nan, np.float32)
            res = getattr(c, op)(x, out=out, **kw)
            assert res is out
            got[op] = out
            assert np.array_equal(x, xs[r]), f"{op} changed its input"
        return got

    res = on_ranks(work)
    total = xs[0] + xs[1] + xs[2]  # small integers: exact in float32, whatever the order
    for r in range(N):
        assert np.array_equal(res[r]["allreduce"], total)
        assert np.array_equal(res[r]["broadcast"], xs[2])
        lo, hi = shard_bounds(count, N, r)
        assert np.array_equal(res[r]["reduce_scatter"][lo:hi], total[lo:hi])
        for i in range(N):
            a, b = shard_bounds(count, N, i)
            assert np.array_equal(res[r]["allgather"][a:b], xs[i][a:b])
    assert np.array_equal(res[1]["reduce"], total)


def test_bad_out_is_named():
    def work(r, c):
        x = np.ones(8, np.float32)
        with pytest.raises(RuntimeInputError, match="^out: must have the input's dtype and size"):
            c.allreduce(x, out=np.ones(7, np.float32))
        with pytest.raises(RuntimeInputError, match="^out: must have the input's dtype and size"):
            c.allreduce(x, out=np.ones(8, np.float64))
        with pytest.raises(RuntimeInputError, match="^out: overlaps the input"):
            c.allreduce(x, out=x.view())
        with pytest.raises(RuntimeInputError, match="^algo: trees plans on measured links: call probe"):
            c.allreduce(x, algo="trees")
        return True

    assert on_ranks(work) == [True] * N


def test_trees_on_the_probe():
    count = 5000
    xs = inputs(count)

    def work(r, c):
        m = c.probe(nbytes=256 << 10, pings=3)
        assert m.n == N and all(m.bw_bps[i][j] > 0 for i in range(N) for j in range(N) if i != j)
        x = xs[r].copy()
        c.allreduce(x, algo="trees")
        y = xs[r].copy()
        c.broadcast(y, root=1, algo="trees")
        return x, y

    res = on_ranks(work)
    for x, y in res:
        assert np.array_equal(x, xs[0] + xs[1] + xs[2])
        assert np.array_equal(y, xs[1])

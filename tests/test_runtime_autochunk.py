"""``chunk_bytes="auto"``: the communicator tunes its chunk by MIAD during
repeated collectives (runtime/autochunk.py), on 2-4 local processes.

- Real timing, chunks changing between calls: every call's result equals
  numpy's (exact for int32), and every rank used the same chunk for every
  call (recorded per call by each rank, compared here).
- An injected cost (a pipelined chain whose best chunk is calculus,
  c* = sqrt(S alpha B / (hops - 1))): the in-communicator loop converges to
  that chunk; rank 0 is given a faster curve with another optimum, so only
  the slowest rank's time leads to the expected chunk.
- An injected curve with a plateau below its peak (the tree's shape in the
  box): ``AutoChunk.lookahead`` reaches the controller (1: the peak; 0: the
  plateau, the rule without lookahead).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from fabriclab.runtime import Communicator, RuntimeInputError
from fabriclab.runtime.autochunk import AutoChunk
from fabriclab.runtime.comm import _env_chunk
from fabriclab.runtime.launch import free_port

sys.path.insert(0, str(Path(__file__).parent))
from conftest import run_ranks  # noqa: E402
from runtime_auto_worker import call_input, pipeline_seconds  # noqa: E402

WORKER = str(Path(__file__).parent / "runtime_auto_worker.py")
SLOW = (4 << 20, 1e-5, 1e9, 4, 3.0)  # c* = 118,241 bytes
FAST = (1 << 20, 2e-6, 1e9, 4, 1.0)  # c* = 26,440 bytes
COUNT = 80_000  # int32: 320,000 bytes, size bucket (256K, 512K]


def cstar(S, alpha, B, hops, scale):
    return math.sqrt(S * alpha * B / (hops - 1))


def run_world(n, spec, tmp_path, timeout=60):
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    return run_ranks(n, [sys.executable, WORKER, str(tmp_path / "spec.json"), str(tmp_path)], timeout)


def tuning(n, tmp_path):
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(n)]


def tuned_alike(n, spec, tmp_path):
    """Runs ``spec`` (one tuned case) on n ranks; every rank must end with the same
    tuning state, which is returned."""
    codes, outs = run_world(n, spec, tmp_path)
    assert codes == [0] * n, "\n".join(outs)
    states = tuning(n, tmp_path)
    assert all(s == states[0] for s in states)
    (st,) = states[0].values()
    return st


def expected(case, i, k, n, rank):
    xs = [call_input(i, k, r, case["count"], case["dtype"]) for r in range(n)]
    total = np.sum(np.stack(xs), axis=0, dtype=xs[0].dtype)
    lo, hi = rank * case["count"] // n, (rank + 1) * case["count"] // n
    if case["op"] == "allreduce":
        return total, slice(None)
    if case["op"] == "broadcast":
        return xs[case["root"]], slice(None)
    if case["op"] == "reduce_scatter":
        return total, slice(lo, hi)
    return np.concatenate([xs[j][j * case["count"] // n:(j + 1) * case["count"] // n] for j in range(n)]), slice(None)


@pytest.mark.parametrize("n", [2, 4])
def test_results_exact_and_same_chunks_on_every_rank_while_tuning(n, tmp_path):
    cases = [{"op": "allreduce", "algo": "ring", "count": COUNT, "dtype": "int32", "calls": 12},
             {"op": "allreduce", "algo": "tree", "count": COUNT + 1, "dtype": "int32", "calls": 8},
             {"op": "allreduce", "algo": "direct", "count": COUNT - 1, "dtype": "float32", "calls": 8},
             {"op": "reduce_scatter", "algo": "ring", "count": COUNT, "dtype": "int32", "calls": 8},
             {"op": "allgather", "algo": "ring", "count": COUNT, "dtype": "int32", "calls": 8},
             {"op": "broadcast", "algo": "ring", "count": COUNT, "dtype": "int32", "root": n - 1, "calls": 8}]
    spec = {"settings": {"initial": 8 << 10, "samples": 1, "sync_every": 2, "min_bytes": 64 << 10}, "cases": cases}
    codes, outs = run_world(n, spec, tmp_path)
    assert codes == [0] * n, "\n".join(outs)
    got = [np.load(tmp_path / f"rank{r}.npz") for r in range(n)]
    for i, case in enumerate(cases):
        seq = got[0][f"case{i}_chunks"]
        assert len(set(seq[1:].tolist())) >= 2, f"case {i}: the chunk never changed, nothing was tested: {seq}"
        for r in range(n):
            np.testing.assert_array_equal(got[r][f"case{i}_chunks"], seq, err_msg=f"rank {r} case {i} chunks")
            for k in range(case["calls"]):
                exp, sl = expected(case, i, k, n, r)
                g, what = got[r][f"case{i}_call{k}"], f"rank {r} case {i} call {k} (chunk {seq[k]})"
                if case["dtype"] == "int32":
                    np.testing.assert_array_equal(g[sl], exp[sl], err_msg=what)
                else:
                    np.testing.assert_allclose(g[sl], exp[sl], rtol=1e-5, atol=1e-5, err_msg=what)
    states = tuning(n, tmp_path)
    assert all(s == states[0] for s in states), "ranks' tuning states differ"
    assert len(states[0]) == len(cases)


def test_converges_to_the_slowest_ranks_best_chunk(tmp_path):
    n = 3
    assert all(pipeline_seconds(c, *SLOW) > pipeline_seconds(c, *FAST) for c in range(4096, 1 << 19, 4096))
    spec = {"settings": {"initial": 8 << 10, "samples": 1, "sync_every": 4, "min_bytes": 64 << 10},
            "curves": [FAST, SLOW, SLOW],
            "cases": [{"op": "allreduce", "algo": "ring", "count": COUNT, "dtype": "int32", "calls": 30}]}
    st = tuned_alike(n, spec, tmp_path)
    best = cstar(*SLOW)
    assert st["converged"] and st["calls"] == 30
    assert best / 2 <= st["chunk"] <= 2 * best and not st["chunk"] <= 2 * cstar(*FAST)
    assert pipeline_seconds(best, *SLOW) >= 0.95 * pipeline_seconds(st["chunk"], *SLOW)
    assert st["changes"][0] == [0, 8 << 10] and len(st["changes"]) >= 5  # 8K, 16K, 32K, 64K, 128K at least


def test_retunes_when_the_curve_moves(tmp_path):
    after = (4 << 20, 1e-4, 1e9, 4, 3.0)  # c* = 373,912 bytes; at 128K the time grows by 64 %
    spec = {"settings": {"initial": 8 << 10, "samples": 1, "sync_every": 4, "min_bytes": 64 << 10},
            "curves": [SLOW, SLOW], "curves_after": [after, after], "switch_at": 30,
            "cases": [{"op": "allreduce", "algo": "ring", "count": COUNT, "dtype": "int32", "calls": 70}]}
    st = tuned_alike(2, spec, tmp_path)
    assert any(call <= 30 and abs(ch - cstar(*SLOW)) < cstar(*SLOW) / 2 for call, ch in st["changes"])
    assert st["converged"] and pipeline_seconds(cstar(*after), *after) >= 0.95 * pipeline_seconds(st["chunk"], *after)


# throughput knots (chunk, bytes/s): a plateau at 32-64K, the peak at 128K (tests/test_runtime_miad.py, PLATEAU)
PLATEAU = {"knots": [[16 << 10, 40e6], [32 << 10, 45e6], [64 << 10, 45e6], [128 << 10, 55e6], [256 << 10, 54e6],
                     [512 << 10, 52e6]]}


@pytest.mark.parametrize("lookahead, chunk, decisions", [
    # by hand as in tests/test_runtime_miad.py (max_chunk is the bucket's 512K, which the look at 512K reaches)
    (1, 128 << 10, [32, 64, 128, 256, 512, 224, 192, 160, 128, 96]),
    (0, 32 << 10, [32, 64, 56, 48, 40, 32, 24])])
def test_lookahead_setting_reaches_the_controller(lookahead, chunk, decisions, tmp_path):
    spec = {"settings": {"initial": 32 << 10, "samples": 1, "sync_every": 4, "min_bytes": 64 << 10,
                         "lookahead": lookahead},
            "curves": [PLATEAU, PLATEAU],
            "cases": [{"op": "allreduce", "algo": "tree", "count": COUNT, "dtype": "int32", "calls": 14}]}
    st = tuned_alike(2, spec, tmp_path)
    assert [c >> 10 for c, _ in st["decisions"]] == decisions
    assert st["converged"] and st["chunk"] == chunk


@pytest.mark.parametrize("override", [{"sync_every": 5}, {"lookahead": 0}])
def test_different_settings_on_different_ranks_stop_the_job(override, tmp_path):
    spec = {"settings": {"samples": 1, "min_bytes": 64 << 10}, "settings_rank": {"1": override},
            "cases": [{"op": "allreduce", "algo": "ring", "count": COUNT, "dtype": "int32", "calls": 3}]}
    codes, outs = run_world(2, spec, tmp_path)
    assert codes == [3, 3], "\n".join(outs)
    assert all("FAILURE TuningDiverged: chunk tuning: ranks disagree at call 1" in o for o in outs), "\n".join(outs)


def test_small_messages_keep_the_fixed_default_chunk():
    with Communicator(0, 1, "127.0.0.1", free_port(), "t", chunk_bytes="auto") as c:
        c.allreduce(np.ones(1000, np.float32))
        c.barrier()
        assert c.tuning == {}
        c.allreduce(np.ones(1 << 18, np.float32))  # 1 MiB: tuned
        assert list(c.tuning) == ["allreduce:ring:<=1048576"]


def test_a_fixed_chunk_has_no_tuning():
    with Communicator(0, 1, "127.0.0.1", free_port(), "t", chunk_bytes=1 << 16) as c:
        c.allreduce(np.ones(1 << 18, np.float32))
        assert c.tuning is None and c.chunk_bytes == 1 << 16


@pytest.mark.parametrize("value, field", [("fast", "chunk_bytes:"), (1.5, "chunk_bytes:"),
                                          (AutoChunk, "chunk_bytes:")])
def test_bad_chunk_bytes_is_refused(value, field):
    with pytest.raises(RuntimeInputError, match=f"^{field}"):
        Communicator(0, 1, "127.0.0.1", free_port(), "t", chunk_bytes=value)


@pytest.mark.parametrize("kwargs, field", [({"samples": 0}, "AutoChunk.samples"), ({"initial": 1024}, "AutoChunk.initial"),
                                           ({"tolerance": 2.0}, "AutoChunk.tolerance"), ({"cost": 3}, "AutoChunk.cost"),
                                           ({"min_bytes": 100}, "AutoChunk.min_bytes"),
                                           ({"lookahead": -1}, "AutoChunk.lookahead: must be an integer >= 0"),
                                           ({"lookahead": 0.5}, "AutoChunk.lookahead")])
def test_bad_auto_settings_name_the_field(kwargs, field):
    with pytest.raises(RuntimeInputError, match=f"^chunk_bytes: {field}"):
        AutoChunk(**kwargs)


def test_chunk_from_the_environment():
    assert _env_chunk("auto") == "auto" and _env_chunk(" AUTO ") == "auto" and _env_chunk("none") is None
    assert _env_chunk("256K") == 256 << 10 and _env_chunk("4096") == 4096
    for bad in ("fast", "0", "-1K"):
        with pytest.raises(RuntimeInputError, match="^FABRICLAB_CHUNK_BYTES: must be a size"):
            _env_chunk(bad)


def test_reset_tuning_starts_over_and_needs_auto():
    with Communicator(0, 1, "127.0.0.1", free_port(), "t", chunk_bytes=AutoChunk(initial=8 << 10, samples=1)) as c:
        for _ in range(3):
            c.allreduce(np.ones(1 << 18, np.float32))
        assert c.tuning["allreduce:ring:<=1048576"]["calls"] == 3
        c.reset_tuning()
        assert c.tuning == {}
    with Communicator(0, 1, "127.0.0.1", free_port(), "t") as c:
        with pytest.raises(RuntimeInputError, match="^chunk_bytes: reset_tuning"):
            c.reset_tuning()

"""Packet Rocket in the runtime (docs/clockwork-control.md, "Packet Rocket in the
runtime"), end to end over loopback: with the option on, every collective
still gives numpy's result (int32 exactly), the ranks' connections carry
stamps and echoes, and bad thresholds are refused naming the field. The rule
itself is tested by hand in Rust (crates/fabriclab-runtime/src/edge.rs,
tests/rocket_edge.rs; crates/fabriclab-core/tests/rocket.rs)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_runtime_collectives import cases_for, expected, run_world  # noqa: E402

from fabriclab.runtime import Communicator  # noqa: E402
from fabriclab.runtime.bench import run_bench  # noqa: E402
from fabriclab.runtime.errors import RuntimeInputError  # noqa: E402


def test_every_collective_is_exact_with_packet_rocket_at_threshold_zero(tmp_path):
    # T = 0 holds a connection for every rise of its delay above the base:
    # the hold path runs as often as it can, and the results stay exact.
    n = 3
    cases = cases_for(n, [1000, 300_000])
    codes, outs = run_world(n, cases, tmp_path, extra_env={"FABRICLAB_PACKET_ROCKET_US": "0"})
    assert codes == [0] * n, "\n".join(outs)
    for r in range(n):
        got = np.load(tmp_path / f"rank{r}.npz")
        for case in cases:
            exp, sl = expected(case, n, r)
            g = got[f"case{case['id']}"]
            if case["dtype"] == "int32":
                np.testing.assert_array_equal(g[sl], exp[sl], err_msg=f"rank {r} {case}")
            else:
                np.testing.assert_allclose(g[sl], exp[sl], rtol=1e-5, atol=1e-5, err_msg=f"rank {r} {case}")


def test_bench_with_packet_rocket_echoes_every_rank_and_counts_right():
    # 2 ranks, ring allreduce of 4 MB in 1 MB chunks: both ranks send on
    # their one connection, so stamps flow both ways and come back as echoes.
    stats: list = []
    rows = run_bench("allreduce", "ring", "4M:4M", 2, 2, iters=1, warmup=1, chunk_bytes=1 << 20,
                     packet_rocket_threshold_us=50.0, rocket_stats=stats)
    assert all(f.wrong == 0 for x in rows for f in (x.out_of_place, x.in_place))
    assert len(stats) == 2
    for s in stats:
        assert set(s) == {"echoes", "pauses", "paused_ns", "held_ns"}
        assert s["echoes"] > 0 and s["paused_ns"] >= 0 and s["held_ns"] >= 0
        assert (s["pauses"] == 0) == (s["paused_ns"] == 0)
    off: list = []
    run_bench("allreduce", "ring", "64K:64K", 2, 2, iters=1, warmup=0, rocket_stats=off)
    assert off == [None, None]


def test_bench_cli_prints_the_packet_rocket_line_and_refuses_bad_thresholds(cli):
    r = cli("runtime", "bench", "-n", "2", "--sizes", "256K:256K", "--iters", "1", "--warmup", "0",
            "--packet-rocket-threshold-us", "20")
    assert r.returncode == 0, r.stderr
    assert "# Out of bounds values : 0 OK" in r.stdout
    m = re.search(r"# Packet Rocket\s+: threshold 20 us; (\d+) pauses .* (\d+) echoes", r.stdout)
    assert m and int(m.group(2)) > 0, r.stdout
    r = cli("runtime", "bench", "-n", "2", "--packet-rocket-threshold-us", "-1")
    assert r.returncode == 2 and "error: --packet-rocket-threshold-us: must be" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("bad", [-1, float("nan"), "10", True])
def test_communicator_refuses_a_bad_threshold_naming_it(bad):
    with pytest.raises(RuntimeInputError, match="packet_rocket_threshold_us: must be"):
        Communicator(0, 1, "127.0.0.1", 1, "t", packet_rocket_threshold_us=bad)


def test_a_single_rank_reports_zero_counters_when_on_and_none_when_off():
    with Communicator(0, 1, "127.0.0.1", 1, "t", packet_rocket_threshold_us=5) as c:
        assert c.rocket_stats() == {"echoes": 0, "pauses": 0, "paused_ns": 0, "held_ns": 0}
    with Communicator(0, 1, "127.0.0.1", 1, "t") as c:
        assert c.rocket_stats() is None

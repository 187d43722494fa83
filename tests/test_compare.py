"""`fabriclab compare` (docs/compare.md): argument checks, the table's
arithmetic against nccl-tests' formulas on the printed times, the simulated
side of a ring allreduce on a 4-host star against a closed form, and (root
only) one real comparison through a 1 Gbit/s cluster-in-a-box."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from conftest import why_no_box
from fabriclab.observe.compare import (CompareError, Job, build_job, box_scenario, make_row, resolve_source, run_compare,
                               simulate, table_text)

ROOT = Path(__file__).resolve().parents[1]
STAR = str(ROOT / "examples" / "cluster-star4-1g.toml")
MSS = 1460
DATA_WIRE = MSS + 78  # + IP/TCP 40, Ethernet header and FCS 18, preamble and gap 20
ACK_WIRE = 64 + 20  # a bare ACK is a minimum Ethernet frame, + preamble and gap
R = 1e9


# ---------------------------------------------------------------- arguments

def test_source_resolution():
    assert resolve_source(None, None, None) == ("ring", None)
    assert resolve_source("tree", None, None) == ("tree", None)
    assert resolve_source(None, "direct", None) == ("direct", None)
    assert resolve_source("p.json", None, None) == (None, "p.json")
    with pytest.raises(CompareError, match="PLAN_OR_ALGO"):
        resolve_source("bogus", None, None)
    with pytest.raises(CompareError, match="--plan"):
        resolve_source(None, "ring", "p.json")
    with pytest.raises(CompareError, match="--algo"):
        resolve_source(None, "nope", None)


@pytest.mark.parametrize("args, field", [
    (["ring", "--cluster", STAR, "--sizes", "64M:1M"], "--sizes"),
    (["ring", "--cluster", STAR, "--factor", "1"], "--factor"),
    (["ring", "--cluster", STAR, "-n", "5"], "-n"),
    (["tree", "--cluster", STAR, "--op", "allgather"], "--algo"),
    (["ring", "--cluster", STAR, "--op", "alltoall"], "--op"),
    (["ring", "--cluster", STAR, "--iters", "0"], "--iters"),
    (["ring", "--cluster", STAR, "--name", "Bad_Name"], "--name"),
    (["ring", "--cluster", "/nonexistent/box.toml"], "--cluster"),
    (["ring", "--cluster", STAR, "--csv", "/nonexistent/dir/x.csv"], "--csv"),
    (["nothing-like-an-algo", "--cluster", STAR], "PLAN_OR_ALGO"),
])
def test_bad_input_names_the_option(cli, args, field):
    r = cli("compare", *args, "--sim-only")
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"error: {field}"), r.stderr


def _two_rank_plan(size: int) -> dict:
    """docs/plans.md's worked example: each rank sends its buffer and sums in the other's."""
    return {"version": 1, "collective": "allreduce", "nranks": 2, "size_bytes": size, "root": None,
            "algorithm": "hand-made", "meta": {}, "ranks": [
                [{"op": "send", "peer": 1, "offset": 0, "bytes": size},
                 {"op": "recv", "peer": 1, "offset": 0, "bytes": size, "reduce": True, "deps": [0]}],
                [{"op": "send", "peer": 0, "offset": 0, "bytes": size},
                 {"op": "recv", "peer": 0, "offset": 0, "bytes": size, "reduce": True, "deps": [0]}]]}


def test_plan_file(tmp_path):
    p = tmp_path / "p.json"
    p.write_text(json.dumps(_two_rank_plan(4096)))
    job = build_job("allreduce", None, str(p), None, 2, None, 1 << 20, 4)
    assert (job.op, job.n, job.sizes, job.plans) == ("allreduce", 2, [4096], [p.read_text()])
    with pytest.raises(CompareError, match="^-n"):
        build_job("allreduce", None, str(p), None, 2, 3, 1 << 20, 4)
    with pytest.raises(CompareError, match="^--sizes"):
        build_job("allreduce", None, str(p), "1M", 2, None, 1 << 20, 4)
    p.write_text(json.dumps(_two_rank_plan(4098)))  # half a float32 at the end
    with pytest.raises(CompareError, match="^--plan: .*4-byte"):
        build_job("allreduce", None, str(p), None, 2, None, 1 << 20, 4)


def test_sizes_and_plans_match():
    job = build_job("allreduce", "ring", None, "1M:4M", 2, None, 1 << 20, 4)
    assert job.sizes == [1 << 20, 2 << 20, 4 << 20] and job.n == 4
    assert [json.loads(t)["size_bytes"] for t in job.plans] == job.sizes


# ---------------------------------------------------------------- the table's arithmetic

def test_row_arithmetic_from_printed_times(tmp_path):
    n, size = 4, 8 << 20
    real_ns, sim_ps = 110_123_456.7, 111_837_301_234  # 110123.46 us, 111837.30 us
    row = make_row("allreduce", n, size, real_ns, sim_ps, 0)
    job = Job("allreduce", "ring", n, [size], ["{}"], "ring")
    line = [x for x in table_text([row], job, ["h"]).splitlines() if not x.startswith("#")][0].split()
    real_us, sim_us, ratio, real_bb, sim_bb = (float(v) for v in line[1:6])
    assert (real_us, sim_us) == (110123.46, 111837.30)
    assert ratio == pytest.approx(110123.46 / 111837.30, abs=5e-4)
    # nccl-tests: algbw = S / t, busbw = algbw * 2(n-1)/n for allreduce, GB/s = 1e9 bytes/s
    assert real_bb == pytest.approx(size / (110123.46e-6) * 2 * 3 / 4 / 1e9, abs=5e-5)
    assert sim_bb == pytest.approx(size / (111837.30e-6) * 1.5 / 1e9, abs=5e-5)


# ---------------------------------------------------------------- the simulated side

@pytest.fixture(scope="module")
def star():
    return box_scenario(STAR)[0]


def _sim(star, size: int, overhead_us: float = 0.0, reduce_bps: int = 10**15) -> float:
    job = build_job("allreduce", "ring", None, str(size), 2, 4, 1 << 20, 4)
    return simulate(job, star, reduce_bps, int(overhead_us * 1e6))[0] / 1e12


@pytest.mark.parametrize("size", [1 << 20, 4 << 20])
def test_ring_allreduce_closed_form(star, size):
    """A ring allreduce over n hosts takes 2(n-1) steps; in each, every host
    sends S/n bytes over its own uplink (shards of 1 MiB chunks pipeline,
    so the steps add up). The uplink also carries the ACKs of the flow
    coming into the host: the simulator acknowledges every segment. So
    T = 2(n-1) * ceil(S/n / mss) * (mss + 78 + 84) * 8 / R, plus a packet's
    store-and-forward time per step (under 0.1 %)."""
    n = 4
    segs = -(-(size // n) // MSS)
    expected = 2 * (n - 1) * segs * (DATA_WIRE + ACK_WIRE) * 8 / R
    assert _sim(star, size) == pytest.approx(expected, rel=0.02)


def test_overhead_and_reduction_add_on_the_critical_path(star):
    """1 MiB, n = 4: one unchunked 256 KiB message per step, each step waits
    for the previous one, so each of the 6 sends adds its overhead; the 3
    reduce-scatter receives each sum 256 KiB before the next send."""
    size, shard = 1 << 20, (1 << 20) // 4
    base = _sim(star, size)
    assert _sim(star, size, overhead_us=1000) - base == pytest.approx(6 * 1e-3, rel=0.05)
    slow = 1_000_000_000  # 1 Gbit/s of reduction: 2.097 ms per shard
    assert _sim(star, size, reduce_bps=slow) - base == pytest.approx(3 * shard * 8 / slow, rel=0.05)


def test_sim_only_cli_csv(cli, tmp_path):
    out = tmp_path / "c.csv"
    r = cli("compare", "ring", "--cluster", STAR, "--sizes", "1M", "--sim-only", "--overhead-us", "0",
            "--reduce-gbps", "1000", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(out.open()))
    assert [x["size_bytes"] for x in rows] == [str(1 << 20)]
    segs = -(-(1 << 20) // 4 // MSS)
    assert float(rows[0]["sim_us"]) == pytest.approx(6 * segs * (DATA_WIRE + ACK_WIRE) * 8 / R * 1e6, rel=0.02)


# ---------------------------------------------------------------- real (root)



@pytest.mark.skipif(why_no_box() is not None, reason=why_no_box() or "")
def test_real_against_simulated_star(tmp_path):
    """A 4-host 1 Gbit/s star (with --gso: the only way this 2-core machine
    carries 1 Gbit/s, docs/cluster.md), ring allreduce at 1 and 2 MiB."""
    from fabriclab.runtime.cluster.apply import list_namespaces, remove, state_path

    name = f"cmpt{os.getpid() % 10**6}"
    out = tmp_path / "c.csv"
    try:
        run_compare("ring", STAR, sizes="1M:2M", iters=3, warmup=1, name=name, gso=True, csv=out)
    finally:
        left, exists = list_namespaces(f"flbox-{name}-"), state_path(name).exists()
        if left or exists:
            remove(name)
        assert not left and not exists  # compare brought its box down
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 2
    for x in rows:
        real, sim = float(x["real_us"]), float(x["sim_us"])
        assert real > 0 and sim > 0 and int(x["wrong"]) == 0
        assert 0.5 < real / sim < 2.0, x

"""Data-parallel groups on the C4P testbed (figure 13's allreduce): a rail
group's ring and connections counted by hand, and its allreduce time against
the bonded NIC's closed-form bound."""

from fabriclab.systems.c4p.bench import Job, RunConfig, cross_pairs, run_jobs
from fabriclab.systems.c4p.testbed import PORT_BPS
from fabriclab.systems.c4p import testbed as tb
from conftest import assert_quick_bands


def test_a_rail_group_is_one_ring_over_gpu_r_of_each_server():
    t = tb.testbed(4)
    job = Job("dp3", [0, 2, 1, 3], rail=3)
    assert job.nranks == 4
    assert job.hosts(t) == [t.gpu_host(s, 3) for s in (0, 2, 1, 3)]
    # One ring of 4 ranks: 4 hops, each between two servers.
    assert cross_pairs(job) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    # The whole-server job keeps its 8 rail channels: with 2 servers, each
    # channel crosses between them twice (out and back).
    assert len(cross_pairs(Job("all", [0, 1]))) == 8 * 2


def test_c4p_rail_groups_run_near_the_bonded_ports_bound_and_ecmp_not_faster():
    """8 rail groups over 4 servers (two per leaf group, so every hop crosses
    the spines): each GPU sends 2 (n-1)/n of the bytes through its NIC's two
    200 Gbit/s ports, so no allreduce beats 2 (n-1)/n S / 400 Gbit/s. With
    C4P's paths nothing collides and the ring gets within 25 % of it (chunk
    pipeline and per-message overhead); ECMP cannot beat C4P by more than a
    rounding."""
    t = tb.testbed(4)
    size, n = 16 << 20, 4
    bound_ps = 2 * (n - 1) / n * size * 8 / (2 * PORT_BPS) * 1e12
    jobs = [Job(f"dp{r}", [0, 2, 1, 3], rail=r) for r in range(8)]
    c4p = max(j.iteration_ps[0] for j in run_jobs(t, jobs, RunConfig(mode="c4p", size_bytes=size)).jobs)
    ecmp = max(j.iteration_ps[0] for j in run_jobs(t, jobs, RunConfig(mode="ecmp", size_bytes=size)).jobs)
    assert bound_ps <= c4p <= 1.25 * bound_ps, (c4p, bound_ps)
    assert ecmp >= c4p * 0.999


def test_reproduce_c4p_fig10_quick(cli, tmp_path):
    """Figure 10's quick run from the CLI: per-port CNPs never exceed the
    fabric's ECN marks (a CNP answers a marked packet), nor what the
    receivers' pacers allow: a sender NIC has one connection to the other
    server, of 2 QPs, and each QP's receiver sends at most one CNP per
    50 us, so at most 2 (run / 50 us + 1) per port, however many messages
    the QPs carry. C4P's paths never lose to ECMP's."""
    import json

    import pandas as pd

    out = tmp_path / "f10"
    r = cli("reproduce", "c4p-fig10", "--quick", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert_quick_bands("c4p-fig10", json.loads((out / "summary.json").read_text()))
    s = json.loads((out / "summary.json").read_text())["ours"]
    cnps = pd.read_csv(out / "fig10_cnps.csv")
    for mode in ("ecmp", "c4p"):
        assert cnps[cnps["mode"] == mode].cnps.sum() <= s[mode]["ecn_marks"]
        assert cnps[cnps["mode"] == mode].cnps.max() <= 2 * (s[mode]["run_ps"] // 50_000_000 + 1)
    assert s["c4p"]["busbw_min_GBps"] >= s["ecmp"]["busbw_min_GBps"]
    assert (out / "fig10.png").exists() and "c4p-job0" in (out / "fig10_nccl_tests.txt").read_text()

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


def test_fig13_llm_connections_between_servers_counted_by_hand():
    # Job1 (TP 8 x DP 16): each rail's DP ring of 16 visits 16 servers, every hop crosses: 8 x 16 = 128.
    # Job2 (DP 128 on 8 rail rings): each ring leaves each of the 16 servers once: 8 x 16 = 128.
    # Job3 (TP 8 x PP 8 x DP 2): pipeline hops between the 8 stages' servers, 7 boundaries x 2 replicas x 8 TP
    # ranks x 2 directions = 224, and each stage's DP pairs (64 groups of 2) both ways = 128: 352.
    # TP stays on the servers' NVSwitches: no TP pair crosses.
    import json

    from fabriclab.scenario.model import Scenario
    from fabriclab.sim.pipeline import core_spec
    from fabriclab.systems.c4p import fig13_llm as F

    t = tb.testbed(16)
    server_of = {t.gpu_host(s, k): s for s in range(16) for k in range(8)}
    for name, want in (("job1", 128), ("job2", 128), ("job3", 352)):
        cfg = F.job_config(name, quick=True)
        cfg["dp_channels"] = F.LLM_JOBS[name].get("dp_channels", 1)  # the full run's rings; quick uses one
        s = Scenario.from_dict({"backend": "flow", "llm_jobs": [cfg]})
        job = json.loads(json.dumps(core_spec(s, topology_data=t)["graph_jobs"][0]))
        assert len(F.cross_server_pairs(job, server_of)) == want, name


def test_fig13_llm_job1_quick_compute_is_megatrons_flops_and_c4p_not_slower():
    # GPT 22B with 6 layers, 16 sequences of 2048 tokens per micro-batch, TP 8: forward FLOPs per layer
    # 24 b s h^2 (1 + s / 6h), the logit layer 2 b s h V; backward twice the forward; at 40 % of 989 TFLOP/s.
    from fabriclab.systems.c4p import fig13_llm as F

    b, s, h, v, layers = 16, 2048, 6144, 50257, 6
    fwd = layers * 24 * b * s * h * h * (1 + s / (6 * h)) + 2 * b * s * h * v
    want_s = 3 * fwd / 8 / (989e12 * 0.40)
    e, c = (F.run_job("job1", m, quick=True) for m in ("ecmp", "c4p"))
    assert e["compute_s_max"] == c["compute_s_max"]
    assert abs(e["compute_s_max"] / want_s - 1) < 1e-6
    assert c["iteration_s"] <= e["iteration_s"] * 1.001

"""Training jobs: iteration times against hand-computed critical paths,
priority versus FIFO, the fast-network limit, and per-layer dependencies."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriclab import Scenario, simulate
from fabriclab.scenario.profiles import PARAM_COUNTS, build_profile, resnet50_layer_params
from conftest import assert_quick_bands

R = 10 * 10**9  # 10 Gbit/s
MS = 10**9
RED = 10**18  # reductions effectively free (one byte costs 8e-6 ps)


def wire_bytes(size):
    full, rest = divmod(size, 1460)
    return full * 1538 + (max(rest + 58, 64) + 20 if rest else 0)


def run_job(tmp_path, layers, workers=2, rate=R, **job):
    csv = tmp_path / "p.csv"
    csv.write_text("param_bytes,fwd_ps,bwd_ps\n" + "".join(f"{a},{b},{c}\n" for a, b, c in layers))
    s = Scenario.from_dict({
        "backend": "flow", "flow_model": "fluid",  # hand models of the max-min rates alone
        "topology": {"kind": "star", "hosts": workers, "link_rate_bps": rate, "link_delay_ps": 0},
        "jobs": [{"name": "j", "profile": str(csv), "reduce_bps": RED, "send_overhead_ps": 0, **job}],
    })
    return simulate(s)


def allreduce_ps(size, n, rate=R):
    """Ring allreduce alone on a star: 2(n-1) rounds of one partition per link."""
    part = size // n
    return 2 * (n - 1) * wire_bytes(part) * 8 / rate * 1e12


@pytest.mark.parametrize("workers", [2, 4])
@pytest.mark.parametrize("barrier", [True, False])
def test_single_fusion_iteration_is_compute_plus_allreduce(tmp_path, workers, barrier):
    mb = 1_000_000
    layers = [(mb, 1 * MS, 2 * MS)] * 3
    r = run_job(tmp_path, layers, workers, iterations=3, fusion_bytes=10 * mb, barrier=barrier)
    times = r.summary["jobs"]["j"]["iteration_times_ps"]
    expect = 3 * MS + 6 * MS + allreduce_ps(3 * mb, workers)
    for t in times:
        assert t == pytest.approx(expect, rel=1e-6)


@pytest.mark.parametrize("algo,expect_wire", [
    # 2(n-1) rounds of one partition (the built-in ring's closed form).
    ("ring-plan", lambda S: 6 * wire_bytes(S // 4)),
    # Recursive halving then doubling: S/2, S/4 out, S/4, S/2 back.
    ("halving-doubling", lambda S: 2 * (wire_bytes(S // 2) + wire_bytes(S // 4))),
    # Every worker sends its S/4 shard to the three others at once (sharing
    # its link fairly), twice: reduce-scatter, then all-gather.
    ("direct", lambda S: 6 * wire_bytes(S // 4)),
])
def test_job_allreduce_with_a_planner(tmp_path, algo, expect_wire):
    # The planner's plan is built for fusion_bytes (10 MB) and scaled to the
    # 3 MB fusion; iteration = compute + the plan's wire time on 4 workers.
    mb = 1_000_000
    layers = [(mb, 1 * MS, 2 * MS)] * 3
    r = run_job(tmp_path, layers, 4, iterations=3, fusion_bytes=10 * mb, barrier=True, allreduce=algo)
    expect = 9 * MS + expect_wire(3 * mb) * 8 / R * 1e12
    for t in r.summary["jobs"]["j"]["iteration_times_ps"]:
        assert t == pytest.approx(expect, rel=1e-6)


def test_job_allreduce_plan_file_and_bad_ones(tmp_path):
    from fabriclab.collectives.rings import ring_allreduce
    from fabriclab.scenario.model import ScenarioError

    mb = 1_000_000
    layers = [(mb, 1 * MS, 2 * MS)] * 3
    good = tmp_path / "ring4.json"
    good.write_text(ring_allreduce(4, 12 * mb).to_json())
    ring = run_job(tmp_path, layers, 4, iterations=2, fusion_bytes=10 * mb)
    plan = run_job(tmp_path, layers, 4, iterations=2, fusion_bytes=10 * mb, allreduce=str(good))
    assert plan.summary["jobs"]["j"]["iteration_times_ps"] == pytest.approx(ring.summary["jobs"]["j"]["iteration_times_ps"], rel=1e-6)
    three = tmp_path / "ring3.json"
    three.write_text(ring_allreduce(3, mb).to_json())
    with pytest.raises(ScenarioError, match="allreduce plan over 4 ranks"):
        run_job(tmp_path, layers, 4, allreduce=str(three))
    with pytest.raises(ScenarioError, match="neither a planner"):
        run_job(tmp_path, layers, 4, allreduce="no-such-algo")


def test_priority_queue_lets_forward_start_earlier(tmp_path):
    # Six 1 MB layers, fusions of 2 MB: A = {5,4}, B = {3,2}, C = {1,0} in
    # backward order; forward 1 ms and backward 2 ms per layer; the network
    # is slow enough that B and C queue behind A.
    mb, f, b = 1_000_000, 1 * MS, 2 * MS
    layers = [(mb, f, b)] * 6
    t = allreduce_ps(2 * mb, 2, rate=10**9)
    assert t > 4 * b  # C is ready while A is still being sent
    F = 6 * f
    kw = dict(workers=2, rate=10**9, iterations=2, fusion_bytes=2 * mb, barrier=False)
    fifo = run_job(tmp_path, layers, queue="fifo", **kw).summary["jobs"]["j"]["iteration_times_ps"]
    prio = run_job(tmp_path, layers, queue="priority", **kw).summary["jobs"]["j"]["iteration_times_ps"]
    # Iteration 0 ends when the last fusion is reduced: F + 2b + 3T either way.
    assert fifo[0] == pytest.approx(F + 2 * b + 3 * t, rel=1e-6)
    assert prio[0] == pytest.approx(F + 2 * b + 3 * t, rel=1e-6)
    # FIFO: iteration 1 waits for C (sent last) before any forward: F + 2b + 3T again.
    assert fifo[1] == pytest.approx(F + 2 * b + 3 * t, rel=1e-6)
    # Priority: C goes second, so layers 0 and 1 run forward while B is sent;
    # layer 2 waits for B at F + 2b + 3T, then 4 more forward layers: the
    # second iteration ends 4f + 2b + 3T after the first.
    assert prio[1] == pytest.approx(4 * f + 2 * b + 3 * t, rel=1e-6)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(10_000, 3_000_000), st.integers(0, 3), st.integers(1, 6)), min_size=2, max_size=8),
       st.integers(2, 4), st.booleans(), st.sampled_from([10**9, 10 * 10**9]))
def test_priority_never_slower_than_fifo_alone(tmp_path_factory, spec, workers, barrier, rate):
    layers = [(p, f * MS, b * MS) for p, f, b in spec]
    tmp = tmp_path_factory.mktemp("p")
    kw = dict(workers=workers, rate=rate, iterations=3, fusion_bytes=3_000_000, barrier=barrier)
    fifo = run_job(tmp, layers, queue="fifo", **kw).summary["jobs"]["j"]["iteration_times_ps"]
    prio = run_job(tmp, layers, queue="priority", **kw).summary["jobs"]["j"]["iteration_times_ps"]
    assert sum(prio) <= sum(fifo) * (1 + 1e-9)


def test_fast_network_iteration_equals_compute(tmp_path):
    layers = build_profile("thesis-resnet50", 900 * MS, 100_000_000, 50)
    rows = [(x["param_bytes"], x["fwd_ps"], x["bwd_ps"]) for x in layers]
    r = run_job(tmp_path, rows, workers=4, rate=10**15, iterations=3, fusion_bytes=6_280_000, barrier=False)
    for t in r.summary["jobs"]["j"]["iteration_times_ps"]:
        assert t == pytest.approx(900 * MS, rel=0.01)


def test_forward_never_starts_before_its_gradient_arrives(tmp_path):
    layers = build_profile("thesis-resnet50", 300 * MS, 40_000_000, 20)
    rows = [(x["param_bytes"], x["fwd_ps"], x["bwd_ps"]) for x in layers]
    r = run_job(tmp_path, rows, workers=3, rate=2 * 10**9, iterations=3, fusion_bytes=4_000_000, barrier=False,
                queue="priority")
    tl = r.timeline
    # The fusion of every layer, by the rule: layers in backward order, a
    # fusion closed before it would exceed fusion_bytes.
    fusion, cur, size = {}, -1, None
    for i in range(len(rows) - 1, -1, -1):
        if size is None or size + rows[i][0] > 4_000_000:
            cur, size = cur + 1, 0
        size += rows[i][0]
        fusion[i] = cur
    ar = tl[tl.kind == "allreduce"].set_index(["worker", "index", "iteration"])["end_ps"]
    fwd = tl[(tl.kind == "forward") & (tl.iteration > 0)]
    assert len(fwd) == 3 * len(rows) * 2
    for row in fwd.itertuples():
        arrived = ar[(row.worker, fusion[row.index], row.iteration - 1)]
        assert row.start_ps >= arrived
    # Layer order within a forward pass.
    for (w, it), g in tl[tl.kind == "forward"].groupby(["worker", "iteration"]):
        g = g.sort_values("index")
        assert (np.diff(g.start_ps.to_numpy().astype(np.int64)) > 0).all()


def test_straggler_slows_everyone(tmp_path):
    mb = 1_000_000
    layers = [(mb, 1 * MS, 2 * MS)] * 3
    base = run_job(tmp_path, layers, 4, iterations=2, fusion_bytes=10 * mb)
    slow = run_job(tmp_path, layers, 4, iterations=2, fusion_bytes=10 * mb, slowdown={"2": 2.0})
    b = base.summary["jobs"]["j"]["iteration_times_ps"][1]
    s = slow.summary["jobs"]["j"]["iteration_times_ps"][1]
    # The allreduce waits for the straggler's 9 ms of compute doubled.
    assert s == pytest.approx(b + 9 * MS, rel=1e-6)


def test_resnet50_parameter_count_from_the_architecture():
    assert sum(resnet50_layer_params()) == PARAM_COUNTS["resnet50"]
    p = build_profile("resnet50", 300 * MS)
    assert sum(x["param_bytes"] for x in p) == 4 * 25_557_032
    assert sum(x["fwd_ps"] for x in p) == 100 * MS and sum(x["bwd_ps"] for x in p) == 200 * MS


@pytest.mark.parametrize("name,batch,images_per_s", [
    ("alexnet", 512, 2987), ("vgg16", 64, 154), ("resnet50", 64, 219), ("resnet152", 64, 91.8),
    ("inception_v3", 64, 142), ("googlenet", 128, 468)])
def test_panama_models_default_to_published_p100_iteration_times(name, batch, images_per_s):
    # One iteration = batch / published images per second on one P100 (the
    # TensorFlow DGX-1 benchmarks; GoogLeNet from Dell's NV-Caffe runs).
    p = build_profile(name)
    assert sum(x["fwd_ps"] + x["bwd_ps"] for x in p) == pytest.approx(batch / images_per_s * 1e12, abs=2)
    assert sum(x["param_bytes"] for x in p) == 4 * PARAM_COUNTS[name]


def test_thesis_profile_still_needs_compute_time():
    from fabriclab.scenario.profiles import ProfileError

    with pytest.raises(ProfileError, match="compute_ps"):
        build_profile("thesis-resnet50")


def test_thesis_ch4_reproduction_quick(cli, tmp_path):
    import json

    r = cli("reproduce", "thesis-ch4", "--quick", "--out", str(tmp_path / "c"))
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert_quick_bands("thesis-ch4", s)
    off = s["barrier_off"]
    # Network-bound at 1 Gbit/s: the priority queue shortens the iteration.
    assert off["1G"]["priority_change_pct"] < -5
    # From 2 Gbit/s up the job is compute-bound: no difference, about 900 ms.
    for rate in ("2G", "5G", "10G", "20G"):
        assert abs(off[rate]["priority_change_pct"]) < 1
        assert 900 <= off[rate]["fifo_ms"] < 920
    assert (tmp_path / "c" / "fig4.9_1G_priority_nobarrier.png").is_file()


def _shared_run(tmp_path, **job):
    mb = 1_000_000
    csv = tmp_path / "p.csv"
    csv.write_text("param_bytes,fwd_ps,bwd_ps\n" + f"{4 * mb},{2 * MS},{4 * MS}\n" * 4)
    s = Scenario.from_dict({
        "backend": "flow", "flow_model": "fluid",  # hand models of the max-min rates alone
        "topology": {"kind": "star", "hosts": 3, "link_rate_bps": "10Gbps", "link_delay_ps": 0},
        "queue": {"discipline": "prio"},
        "flows": [{"src": 2, "dst": 1, "size_bytes": "200MB", "class": 0}],  # an elephant into worker 1
        "jobs": [{"name": "j", "workers": [0, 1], "profile": str(csv), "iterations": 4, "fusion_bytes": 4 * mb,
                  "barrier": False, "queue": "priority", "send_overhead_ps": 0, "reduce_bps": RED, **job}],
    })
    return simulate(s).summary["jobs"]["j"]["iteration_times_ps"]


def test_slack_aware_priority_between_static_classes(tmp_path):
    same = _shared_run(tmp_path, **{"class": 0})
    lower = _shared_run(tmp_path, **{"class": 1})
    assert sum(lower) > sum(same)  # the elephant starves the low-priority job
    # Always urgent: every round goes at class 0, exactly like the same-priority job.
    always = _shared_run(tmp_path, **{"class": 1, "slack_aware": True, "urgent_class": 0, "slack_factor": 1e9})
    assert always == same
    # Slack-aware: faster than static low priority. (It may even beat the
    # same class: while its messages wait at the low class the elephant runs
    # at the full rate and leaves the link sooner, so no bound from below.)
    slack = _shared_run(tmp_path, **{"class": 1, "slack_aware": True, "urgent_class": 0})
    assert sum(slack) < sum(lower)


def _ring_sim(tmp_path, layers, **job):
    """Three workers (hosts 0-2) on a 10 Gbit/s star, flow backend, and an
    elephant from host 3 into worker 1 at class 0 for the whole run: at a
    lower class the ring hop 0 -> 1 gets nothing."""
    csv = tmp_path / "ring.csv"
    csv.write_text("param_bytes,fwd_ps,bwd_ps\n" + "".join(f"{b},{f},{w}\n" for b, f, w in layers))
    s = Scenario.from_dict({
        "backend": "flow", "flow_model": "fluid",  # hand models of the max-min rates alone
        "topology": {"kind": "star", "hosts": 4, "link_rate_bps": "10Gbps", "link_delay_ps": 0},
        "queue": {"discipline": "prio"},
        "flows": [{"src": 3, "dst": 1, "size_bytes": "2GB", "class": 0}],
        "jobs": [{"name": "j", "workers": [0, 1, 2], "profile": str(csv), "iterations": 2, "fusion_bytes": 3_000_000,
                  "barrier": False, "queue": "priority", "send_overhead_ps": 0, "reduce_bps": RED, **job}],
    })
    return simulate(s)


def _ring_run(tmp_path, layers, **job):
    return _ring_sim(tmp_path, layers, **job).summary["jobs"]["j"]


def test_slack_aware_sends_the_critical_path_fusion_urgent(tmp_path):
    # One layer, one fusion: the next forward pass needs it the moment the
    # backward pass ends, so it has no slack from its first round on and
    # every message goes at the urgent class -- exactly the same-priority job.
    layers = [(3_000_000, 1 * MS, 2 * MS)]
    same = _ring_run(tmp_path, layers, **{"class": 0})
    slack = _ring_run(tmp_path, layers, **{"class": 1, "slack_aware": True, "urgent_class": 0, "slack_factor": 1e-6})
    assert slack["iteration_times_ps"] == same["iteration_times_ps"]
    assert slack["urgent_messages"] == slack["ring_messages"] == 2 * 2 * 3 * 2  # 2(n-1) rounds x n workers x 2 iterations


def test_slack_aware_raises_ring_stragglers_by_hand(tmp_path):
    # Layer 0: one byte of gradient, 300 ms of backward compute; layer 1:
    # 3 MB. Fusion 0 (layer 1) is ready at 4 ms at every worker and needed
    # only after 300 ms: it starts at the low class, and its hop 0 -> 1 gets
    # nothing beside the elephant. Partitions of 1 MB are 1,053,430 wire
    # bytes: d = 842.744 us at 10 Gbit/s, 2d when raised beside the elephant.
    # Played by hand with straggler raising: round 0 - the messages 1 -> 2
    # and 2 -> 0 arrive at 4 ms + d, making 0 -> 1 its round's last: raised,
    # it arrives at +3d. Each later round of hop 0 -> 1 is sent low, starves,
    # and is raised when the other two of its round have arrived (+4d, +7d,
    # +10d), arriving 2d later. Worker 0 holds the sum at +8d, worker 2 at
    # +10d, worker 1 at +12d.
    layers = [(1, 1 * MS, 300 * MS), (3_000_000, 1 * MS, 2 * MS)]
    sa = {"class": 1, "slack_aware": True, "urgent_class": 0, "slack_factor": 1e-6}
    r = _ring_sim(tmp_path, layers, **sa, slack_lag_rounds=1)
    tl = r.timeline_arrow.to_pandas()
    ar = tl[(tl.kind == "allreduce") & (tl["index"] == 0) & (tl.iteration == 0)].set_index("worker")
    d = 1_053_430 * 8 * 100  # ps at 10 Gbit/s
    t0 = 4 * MS
    for worker, k in ((0, 8), (2, 10), (1, 12)):
        assert ar.loc[worker, "start_ps"] == t0
        assert abs(ar.loc[worker, "end_ps"] - (t0 + k * d)) < 100, worker  # reductions cost 8 ps each
    j = r.summary["jobs"]["j"]
    assert j["raised_messages"] >= 4  # the four rounds of hop 0 -> 1 of fusion 0 in iteration 0
    # Without straggler raising the same hop waits for the deadline check,
    # which raises it only when fusion 1 (layer 0, ready at 304 ms) would
    # otherwise wait behind it.
    late = _ring_sim(tmp_path, layers, **sa, slack_lag_rounds=0).timeline_arrow.to_pandas()
    late = late[(late.kind == "allreduce") & (late["index"] == 0) & (late.iteration == 0)]
    assert late.end_ps.max() > 300 * MS


def test_thesis_ch5_reproduction_quick(cli, tmp_path):
    import json

    r = cli("reproduce", "thesis-ch5", "--quick", "--out", str(tmp_path / "c5"))
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "c5" / "summary.json").read_text())
    assert_quick_bands("thesis-ch5", s)
    light, heavy = s["ratio4_46fps"], s["ratio4_184fps"]
    # Light background: lowering Horovod's priority helps small flows and costs Horovod little.
    assert light["small_mean_change_pct"] < -15
    assert light["iteration_change_pct"] < 10
    # Heavy background (25 % of the links): the lower priority slows Horovod down.
    assert heavy["iteration_change_pct"] > 10
    assert (tmp_path / "c5" / "fig5.19_heatmaps.png").is_file()


def test_gradient_slack_single_fusion_by_hand(tmp_path):
    # One fusion: the next forward waits for it, so layer 0's slack is zero and
    # layer i's is the forward time of the layers before it (i ms here).
    mb = 1_000_000
    layers = [(mb, 1 * MS, 2 * MS)] * 4
    r = run_job(tmp_path, layers, 2, iterations=3, fusion_bytes=10 * mb)
    slack = r.summary["jobs"]["j"]["gradient_slack_ps"]
    assert slack["min"] >= 0
    for i, s in enumerate(slack["per_layer_mean"]):
        assert s == pytest.approx(i * MS, abs=1)


def test_thesis_slack_reproduction_quick(cli, tmp_path):
    import json

    r = cli("reproduce", "thesis-slack", "--quick", "--out", str(tmp_path / "s"))
    assert r.returncode == 0, r.stderr
    cell = json.loads((tmp_path / "s" / "summary.json").read_text())["ratio4_92fps"]
    assert_quick_bands("thesis-slack", json.loads((tmp_path / "s" / "summary.json").read_text()))
    # The cell where static low priority hurts Horovod and helps small flows.
    assert cell["lower"]["iteration_pct"] > 10 and cell["lower"]["small_mean_pct"] < -20
    # The deadline check alone (lag 0, factor 1) raises most bytes: the
    # penalty goes, and so does most of the gain.
    assert cell["slack f=1 lag=0"]["penalty_removed"] > 0.8
    assert cell["slack f=1 lag=0"]["urgent_bytes_pct"] > 50
    # Raising ring stragglers lets the deadline check be optimistic: most of
    # the penalty removed, and part of the gain kept where the deadline check
    # alone gives it all back (docs/reproductions.md: 0.71 of the gain before
    # the loss-recovery correction, 0.40 after).
    best = cell["slack f=0.1 lag=1"]
    assert best["penalty_removed"] > 0.5 and best["gain_kept"] > 0.25
    assert best["gain_kept"] > cell["slack f=1 lag=0"]["gain_kept"] + 0.25
    assert (tmp_path / "s" / "slack_tradeoff.png").is_file()

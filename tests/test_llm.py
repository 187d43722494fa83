"""LLM jobs (docs/llm.md): the pipeline schedules' closed forms, tensor
parallelism's and ZeRO's hand counts, and bad input refused naming the field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fabriclab import simulate
from fabriclab.scenario.llm import GPU_PEAK_FLOPS
from fabriclab.scenario.model import Scenario
from fabriclab.sim.apps.llm import layer_costs

PY = str(Path(__file__).resolve().parents[1] / "python")


def _custom(hidden=64, layers=4, seq_len=16, heads=4):
    return {"hidden": hidden, "layers": layers, "heads": heads, "ffn_hidden": 4 * hidden, "vocab": 128,
            "seq_len": seq_len}


def _scenario(tmp_path, job: dict, hosts: int, backend="flow", **extra) -> Scenario:
    d = {"backend": backend, "flow_model": "fluid", "seed": 3,
         "topology": {"kind": "star", "hosts": hosts, "link_rate_bps": "10Tbps", "link_delay_ps": 0},
         "llm_jobs": [{"model": "custom", **job}], **extra}
    s = Scenario.from_dict(d)
    s._base_dir = tmp_path
    return s


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_pipeline_with_equal_stages_and_free_communication_takes_m_plus_p_minus_1_slots(tmp_path, schedule):
    # One layer per stage, forward 1 ms and backward 2 ms from a profile; 128-byte messages over 10 Tb/s links
    # cost about 0.1 ns each, so the iteration is (m + p - 1) slots of 3 ms and the bubble (p - 1) / (m + p - 1).
    p, m = 4, 8
    (tmp_path / "prof.csv").write_text("layer,forward_ps,backward_ps\n" +
                                       "".join(f"{k},1000000000,2000000000\n" for k in range(p)))
    s = _scenario(tmp_path, {"shape": _custom(hidden=8, layers=p, seq_len=8), "pp": p, "micro_batches": m,
                             "schedule": schedule, "profile": "prof.csv"}, hosts=p)
    res = simulate(s)
    j = res.summary["llm_jobs"]["llm"]
    slot_ps = 3_000_000_000
    assert j["iteration_times_ps"][0] == pytest.approx((m + p - 1) * slot_ps, rel=1e-6)
    bubble = (p - 1) / (m + p - 1)
    assert j["idle_fraction_mean"] == pytest.approx(bubble, rel=1e-5)
    # Every stage computes m forward and m backward passes: its busy share is equal.
    assert j["compute_fraction"]["min"] == pytest.approx(j["compute_fraction"]["max"], rel=1e-6)
    tl = res.timeline
    tl = tl[tl.end_ps > tl.start_ps]
    for stage in range(p):
        t = tl[tl.worker == stage]
        fwd_end = t[t.kind == "forward"].groupby("index").end_ps.max()
        bwd_start = t[t.kind == "backward"].groupby("index").start_ps.min()
        assert len(fwd_end) == len(bwd_start) == m
        # Micro-batches in flight (forward done, backward not begun) when each backward begins: 1F1B keeps at
        # most p - s on stage s, GPipe all m.
        peak = max(int(((fwd_end <= b) & (bwd_start >= b)).sum()) for b in bwd_start)
        assert peak == (min(p - stage, m) if schedule == "1f1b" else m)


def _ops(res, collective, kind="send"):
    c = res.ccl
    c = c[c.collective == collective]
    return c[c.kind == kind]


@pytest.mark.parametrize("sp,lpn,rc", [(False, 1, False), (True, 1, False), (False, 2, False), (True, 2, False),
                                       (False, 1, True), (True, 2, True)])
def test_tensor_parallel_bytes_per_layer_match_the_hand_count(tmp_path, sp, lpn, rc):
    # Megatron TP: per layer and micro-batch, 2 allreduces forward and 2 backward of b*s*h*2 bytes; a ring
    # allreduce of S over n ranks sends 2 (n - 1) / n S per rank. Sequence parallelism: each allreduce becomes an
    # allgather and a reduce-scatter of the same buffer, (n - 1) / n S per rank each: the same bytes. Coarsened
    # (layers_per_node = 2), one collective per direction carries both layers' bytes: a quarter of the ops.
    # Activation recomputation reruns each layer's forward, collectives included, before its backward: 6 per
    # layer (2 forward, 2 recomputed, 2 backward), 3 per coarse chunk.
    n, layers, m, h, sq = 4, 2, 2, 64, 16
    S = 1 * sq * h * 2
    per_layer = 6 if rc else 4
    ops = per_layer * layers * m if lpn == 1 else per_layer // 2 * (layers // lpn) * m
    s = _scenario(tmp_path, {"shape": _custom(hidden=h, layers=layers, seq_len=sq), "tp": n, "micro_batches": m,
                             "sequence_parallel": sp, "layers_per_node": lpn, "activation_recompute": rc}, hosts=n)
    res = simulate(s)
    assert res.summary["llm_jobs"]["llm"]["finished"]
    if sp:
        ag, rs = _ops(res, "allgather"), _ops(res, "reduce_scatter")
        assert ag.op_id.nunique() == rs.op_id.nunique() == ops
        sent = int(ag.bytes.sum() + rs.bytes.sum())
        assert _ops(res, "allreduce").empty
    else:
        ar = _ops(res, "allreduce")
        assert ar.op_id.nunique() == ops
        sent = int(ar.bytes.sum())
    assert sent == layers * m * per_layer * n * 2 * (n - 1) * S // n


def test_zero3_gathers_and_scatters_per_step_match_the_hand_count(tmp_path):
    # ZeRO-3 over DP: per micro-batch and layer, the layer's parameters gathered for its forward and again for its
    # backward, its gradients reduce-scattered once: 2 m L allgathers and m L reduce-scatters per step per rank.
    dp, layers, m = 4, 3, 2
    s = _scenario(tmp_path, {"shape": _custom(layers=layers), "dp": dp, "micro_batches": m, "zero": 3}, hosts=dp)
    res = simulate(s)
    tl = res.timeline
    per_rank = tl.groupby(["worker", "kind"]).size().unstack()
    assert per_rank["zero3_allgather"].tolist() == [2 * m * layers] * dp
    assert per_rank["zero3_reduce_scatter"].tolist() == [m * layers] * dp
    assert _ops(res, "allgather").op_id.nunique() == 2 * m * layers  # one DP group
    assert _ops(res, "reduce_scatter").op_id.nunique() == m * layers
    assert _ops(res, "allreduce").empty
    # A layer's gathered parameters: (12 h^2) x 2 bytes, + the embedding, V h, on the first layer only: with one
    # stage the tied logit layer is the same V h (eq. (2) of Narayanan et al. counts it once). A ring allgather
    # of S bytes sends (dp - 1) S over the group; per step 2 m of them for each layer.
    ag = _ops(res, "allgather")
    per_op = ag.groupby("op_id").bytes.sum()
    h, v = 64, 128
    layer = 12 * h * h * 2
    assert sorted(set(per_op)) == sorted({(x * (dp - 1)) for x in (layer, layer + v * h * 2)})
    assert int(per_op.sum()) == 2 * m * (dp - 1) * (layers * layer + v * h * 2)


@pytest.mark.parametrize("pp", [1, 2])
def test_data_parallel_gradient_bytes_follow_the_papers_parameter_count(tmp_path, pp):
    # Hand count: a stage's fp16 gradients are 2 (12 h^2 l / pp + V h) bytes: its layers, and the tied embedding
    # once: on the one stage for pp = 1 (eq. (2) of Narayanan et al., SC'21, counts V h once), on the first
    # (embedding) and on the last (its tied copy, the logit layer) for pp = 2. h = 64, l = 4, V = 128:
    # pp = 1: 2 (196608 + 8192) = 409600 bytes; pp = 2: 2 (98304 + 8192) = 212992 bytes per stage.
    # One bucket holds them; a ring allreduce of S over dp = 2 ranks sends 2 (dp - 1) / dp S per rank, S per
    # rank, so each stage's DP group sends 2 S.
    dp, h, layers, v = 2, 64, 4, 128
    stage_bytes = {1: 409600, 2: 212992}[pp]
    assert stage_bytes == 2 * (12 * h * h * layers // pp + v * h)
    s = _scenario(tmp_path, {"shape": _custom(hidden=h, layers=layers), "dp": dp, "pp": pp, "micro_batches": 2,
                             "bucket_bytes": "1GB"}, hosts=dp * pp)
    res = simulate(s)
    assert res.summary["llm_jobs"]["llm"]["finished"]
    ar = _ops(res, "allreduce")
    per_op = ar.groupby("op_id").bytes.sum()
    assert len(per_op) == pp  # one allreduce per stage's DP group
    assert per_op.tolist() == [dp * stage_bytes] * pp


@pytest.mark.parametrize("zero,ops", [(0, {"allreduce": 1}), (1, {"reduce_scatter": 1, "allgather": 1})])
def test_data_parallel_buckets_once_per_step(tmp_path, zero, ops):
    # One bucket holding every gradient: one allreduce (ZeRO-0) or one reduce-scatter and one allgather (ZeRO-1).
    s = _scenario(tmp_path, {"shape": _custom(layers=2), "dp": 2, "micro_batches": 3, "zero": zero,
                             "bucket_bytes": "1GB"}, hosts=2)
    res = simulate(s)
    c = res.ccl
    assert c.groupby("collective").op_id.nunique().to_dict() == ops


def test_flops_follow_megatrons_formula():
    # GPT (FFN 4h, no GQA): forward FLOPs per layer 24 b s h^2 (1 + s / (6 h)) (Narayanan et al., SC'21).
    j = Scenario.from_dict({"llm_jobs": [{"model": "gpt3-175b", "micro_batch_size": 2}]}).llm_jobs[0]
    c = layer_costs(None, 0, j)
    b, sq, h = 2, 2048, 12288
    flops = 24 * b * sq * h * h * (1 + sq / (6 * h))
    rate = GPU_PEAK_FLOPS["a100"] * 0.5 / 1e12
    assert c["attn_ps"][0] + c["mlp_ps"][0] == pytest.approx(flops / rate, rel=1e-9)
    assert c["layer_params"] == 12 * h * h


def test_a_straggler_stalls_its_pipeline(tmp_path):
    (tmp_path / "prof.csv").write_text("layer,forward_ps,backward_ps\n0,1000000000,2000000000\n"
                                       "1,1000000000,2000000000\n")
    job = {"shape": _custom(hidden=8, layers=2, seq_len=8), "pp": 2, "micro_batches": 4, "profile": "prof.csv"}
    fast = simulate(_scenario(tmp_path, job, hosts=2)).summary["llm_jobs"]["llm"]["iteration_times_ps"][0]
    slow = simulate(_scenario(tmp_path, {**job, "slowdown": {"1": 2.0}}, hosts=2))
    t = slow.summary["llm_jobs"]["llm"]["iteration_times_ps"][0]
    # Stage 1 at 6 ms per micro-batch is the bottleneck: 4 x 6 + 3 (stage 0's first forward and last backward).
    assert fast == pytest.approx(5 * 3e9, rel=1e-6)
    assert t == pytest.approx(4 * 6e9 + 3e9, rel=1e-6)


def test_same_scenario_same_results(tmp_path):
    job = {"shape": _custom(layers=4), "tp": 2, "pp": 2, "dp": 2, "micro_batches": 3, "zero": 1,
           "sequence_parallel": True}
    a, b = (simulate(_scenario(tmp_path, job, hosts=8, backend="packet")) for _ in range(2))
    for name in ("jobs", "timeline", "ccl"):
        assert a.tables[name].equals(b.tables[name]), name


def _moe(tmp_path, skew: float, ep=4, layers=2, m=2):
    pytest.importorskip("fabriclab.collectives.alltoall")
    shape = {**_custom(layers=layers), "experts": 4, "top_k": 2}
    return simulate(_scenario(tmp_path, {"shape": shape, "dp": ep, "ep": ep, "micro_batches": m,
                                         "ep_skew": skew}, hosts=ep))


def test_expert_parallel_all_to_alls_match_the_hand_count(tmp_path):
    # Per MoE layer and micro-batch: dispatch and combine forward, and both again backward: 4 L m all-to-alls
    # per EP group; a direct all-to-all sends (n - 1) / n of the buffer (b s top_k h 2 bytes) from every rank.
    ep, layers, m = 4, 2, 2
    res = _moe(tmp_path, 0.0, ep, layers, m)
    a2a = _ops(res, "alltoall")
    assert a2a.op_id.nunique() == 4 * layers * m
    buf = 1 * 16 * 2 * 64 * 2
    per = a2a.groupby(["op_id", "rank"]).bytes.sum()
    assert set(per) == {buf * (ep - 1) // ep}
    tl = res.timeline
    assert (tl.groupby(["worker", "kind"]).size().unstack()[["ep_alltoall_forward", "ep_alltoall_backward"]]
            == 2 * layers * m).all().all()


def test_routing_skew_loads_the_hot_experts(tmp_path):
    # ep_skew = 1: EP rank e gets a share of the tokens proportional to 1 / (e + 1); every rank sends rank e
    # that share of its buffer, and rank e's experts compute n times their share of the routed tokens.
    ep = 4
    uni, hot = _moe(tmp_path, 0.0, ep), _moe(tmp_path, 1.0, ep)
    w = [1 / (e + 1) for e in range(ep)]
    a2a = _ops(hot, "alltoall")
    got = a2a.groupby("peer").bytes.sum()
    # Blocks of about 1 KB in whole bytes: within 0.5 %.
    assert [got[e] / got[1] for e in range(ep)] == pytest.approx([x / w[1] for x in w], rel=5e-3)
    t_uni = uni.summary["llm_jobs"]["llm"]["iteration_times_ps"][0]
    t_hot = hot.summary["llm_jobs"]["llm"]["iteration_times_ps"][0]
    assert t_hot > t_uni


def _cli(tmp_path, toml: str):
    (tmp_path / "s.toml").write_text(toml)
    return subprocess.run([sys.executable, "-m", "fabriclab.cli", "run", str(tmp_path / "s.toml"), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, env={"PYTHONPATH": PY}, check=False,
                          cwd=tmp_path)


@pytest.mark.parametrize("job,field", [
    ('model = "gpt3-125m"\ntp = 2\npp = 2\ndp = 1', "llm_jobs[0].hosts"),  # 4 ranks on the topology's 8 hosts
    ('model = "gpt3-125m"\npp = 13\ndp = 1', "llm_jobs[0].pp"),  # 13 stages for 12 layers
    ('model = "gpt3-125m"\nep = 2', "llm_jobs[0].ep"),  # experts needed
    ('model = "gpt3-125m"\ndp = 8\ndp_channels = 3', "llm_jobs[0].dp_channels"),  # 3 does not divide 8
    ('model = "gpt3-125m"\ndp = 8\nqps = [{rank = 0, peer = 8, src_ports = [1]}]', "llm_jobs[0].qps"),  # no rank 8
])
def test_bad_llm_job_exits_2_naming_the_field(tmp_path, job, field):
    r = _cli(tmp_path, f'[topology]\nkind = "star"\nhosts = 8\n\n[[llm_jobs]]\n{job}\n')
    assert r.returncode == 2, r.stderr
    assert field in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_example_runs_beside_background_traffic_on_both_backends(tmp_path):
    example = Path(__file__).resolve().parents[1] / "examples" / "llm_gpt_tp_pp_dp.toml"
    s = Scenario.load(example)
    # The packet backend on a shorter sequence and two micro-batches (the example as given: about 20 s).
    small = s.model_dump(by_alias=True)
    small["llm_jobs"][0].update(shape={"seq_len": 128}, micro_batches=2)
    small["backend"] = "packet"
    for sc in (s, Scenario.from_dict(small)):
        res = simulate(sc)
        j = res.summary["llm_jobs"]["gpt"]
        assert j["finished"], sc.backend
        flows = res.flows
        assert (flows.tag == "bg").sum() > 0 and (flows.tag == "gpt").sum() > 0
        assert set(res.groups.label) == {"tp", "dp"}
        jobs = res.jobs
        assert len(jobs[jobs.job == "gpt"]) == 16


def test_ccl_rows_name_their_communicator_group(tmp_path):
    # TP 2 x DP 2 on 4 ranks (Megatron order: TP fastest): the TP groups are ranks {0, 1} and {2, 3}, the DP
    # groups {0, 2} and {1, 3}. Every TP allreduce row belongs to one of two TP groups, every DP bucket's rows to
    # one of two DP groups, and each group's rows come from its own members only.
    s = _scenario(tmp_path, {"shape": _custom(layers=2), "tp": 2, "dp": 2, "micro_batches": 2,
                             "bucket_bytes": "1GB"}, hosts=4)
    res = simulate(s)
    c = res.ccl
    assert c.group.notna().all()
    members = {grp: frozenset(int(x) for x in rows["rank"].unique()) for grp, rows in c.groupby("group")}
    assert set(members) == {"tp0", "tp1", "dp0", "dp1"}
    assert {members["tp0"], members["tp1"]} == {frozenset({0, 1}), frozenset({2, 3})}
    assert {members["dp0"], members["dp1"]} == {frozenset({0, 2}), frozenset({1, 3})}


def test_queue_pairs_split_each_message_onto_their_source_ports_paths(tmp_path):
    # DP 2 on two hosts under different leaves of a 2-spine fabric. The connection rank 0 -> rank 1 gets two QPs
    # whose source ports ECMP sends over different spines: each message of the pair is cut in two halves (within
    # a byte), one over each spine, and the halves add up to what the collectives sent (bytes are conserved).
    # With both ports on one spine, nothing of the pair crosses the other.
    import json

    from fabriclab._core import Simulator
    from fabriclab.sim.pipeline import core_spec

    d = {"backend": "flow", "flow_model": "fluid", "seed": 3,
         "topology": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 1, "spines": 2},
         "llm_jobs": [{"model": "custom", "shape": _custom(layers=2), "dp": 2, "micro_batches": 1,
                       "bucket_bytes": "1GB"}]}
    s = Scenario.from_dict(d)
    s._base_dir = tmp_path
    core = core_spec(s)
    probe = Simulator(json.dumps(core))
    spine = {}
    for port in range(1024, 1200):
        spine.setdefault(probe.ecmp_path(0, 1, port)[2], port)
    assert len(spine) == 2
    (a, pa), (b, pb) = sorted(spine.items())

    def run(ports):
        core["graph_jobs"][0]["qps"] = [{"rank": 0, "peer": 1, "src_ports": ports}]
        sim = Simulator(json.dumps(core))
        sim.run_until(2**63)
        m = sim.messages()
        it = sim.app_tables()["graph_iterations"]
        assert all(e is not None for e in it["end_ps"])
        ccl = sim.app_tables()["graph_ccl"]
        sent = sum(x for x, k, r in zip(ccl["bytes"], ccl["kind"], ccl["rank"]) if k == "send" and r == 0)
        out = [(size, path) for src, size, path in zip(m["src"], m["size_bytes"], m["path"]) if src == 0]
        return out, sent

    out, sent = run([pa, pb])
    assert sum(x for x, _ in out) == sent
    names = {n: probe_name for n, probe_name in zip(sorted(spine), ("spine0", "spine1"))}  # spines in node order
    via = [next(v for k, v in names.items() if f"> {v} >" in p) for _, p in out]
    assert len(out) % 2 == 0 and via.count(names[a]) == via.count(names[b]) == len(out) // 2
    sizes = sorted(x for x, _ in out)
    assert all(abs(sizes[2 * i] - sizes[2 * i + 1]) <= 1 for i in range(len(sizes) // 2))
    out, sent = run([pa, pa])
    assert sum(x for x, _ in out) == sent and all(f"> {names[b]} >" not in p for _, p in out)


def test_a_queue_pair_carries_one_message_at_a_time(tmp_path):
    # GPipe over 2 stages on a 1 Gbit/s fabric: stage 0 posts its 4 activations (2 KiB each, 16 us on the wire)
    # nanoseconds apart, so on their own they overlap on the wire. On one QP a NIC serves them in order: each
    # starts when the one before it has arrived.
    import json

    from fabriclab._core import Simulator
    from fabriclab.sim.pipeline import core_spec

    d = {"backend": "flow", "flow_model": "fluid", "seed": 3,
         "topology": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 1, "spines": 2, "link_rate_bps": "1Gbps"},
         "llm_jobs": [{"model": "custom", "shape": _custom(layers=2), "pp": 2, "micro_batches": 4,
                       "schedule": "gpipe"}]}
    s = Scenario.from_dict(d)
    s._base_dir = tmp_path

    def sends(qps):
        core = core_spec(s)
        core["graph_jobs"][0]["qps"] = qps
        sim = Simulator(json.dumps(core))
        sim.run_until(2**63)
        m = sim.messages()
        rows = sorted((a, b) for src, a, b in zip(m["src"], m["start_ps"], m["end_ps"]) if src == 0)
        assert len(rows) == 4
        return rows

    alone = sends([])
    assert any(b[0] < a[1] for a, b in zip(alone, alone[1:]))
    on_qp = sends([{"rank": 0, "peer": 1, "src_ports": [2000]}])
    assert all(b[0] >= a[1] for a, b in zip(on_qp, on_qp[1:]))

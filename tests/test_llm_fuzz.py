"""LLM jobs over drawn small shapes and parallelisms (tp, pp, dp, ep, ZeRO
stage, sequence parallelism, schedule, micro-batches, layers, coarsening,
DP channels): every run ends with every rank's step done, and the bytes each
communicator group sent equal the ring collectives' closed forms, computed
here from the shape alone (docs/llm.md):

- a ring allreduce of S bytes over n ranks sends every slice n - 1 times in
  its reduce-scatter and n - 1 times in its allgather: 2 (n - 1) S over the
  group; a reduce-scatter or an allgather alone (n - 1) S, whatever the
  number of rings (channels);
- a stage's gradient on one TP rank: its L / pp layers of 4 h^2 + 2 h f
  parameters (the MLP's times experts / ep) plus the V h embedding on the
  first and on the last stage (once with pp = 1: tied), over tp, at 2 bytes each;
- Megatron TP: per layer and micro-batch 2 allreduces of b s h 2 bytes
  forward and 2 backward (sequence parallelism: an allgather and a
  reduce-scatter each, the same bytes).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fabriclab import simulate
from fabriclab.scenario.model import Scenario

H, F, V, SEQ, HEADS = 32, 64, 64, 8, 4


@st.composite
def llm_jobs(draw):
    tp = draw(st.sampled_from([1, 2]))
    pp = draw(st.integers(1, 3))
    dp = draw(st.integers(1, 4))
    per_stage = draw(st.integers(1, 2))
    experts = draw(st.sampled_from([None, 2]))
    ep = 2 if experts and dp % 2 == 0 and draw(st.booleans()) else 1
    job = {"model": "custom", "tp": tp, "pp": pp, "dp": dp, "ep": ep,
           "shape": {"hidden": H, "layers": pp * per_stage, "heads": HEADS, "ffn_hidden": F, "vocab": V,
                     "seq_len": SEQ, **({"experts": experts} if experts else {})},
           "micro_batches": draw(st.integers(1, 3)), "schedule": draw(st.sampled_from(["1f1b", "gpipe"])),
           "zero": draw(st.integers(0, 3)), "sequence_parallel": draw(st.booleans()),
           "layers_per_node": draw(st.integers(1, 2)), "dp_channels": draw(st.sampled_from([1, dp])),
           "bucket_bytes": draw(st.sampled_from([2_000, 10**9]))}
    return job


def _stage_grad_bytes(job: dict, stage: int) -> int:
    layers = job["shape"]["layers"] // job["pp"]
    mlp = 2 * H * F * (job["shape"].get("experts", 1) // job["ep"])
    # the tied embedding: on the first and on the last stage, once where they are one stage (pp = 1; eq. 2 of
    # Narayanan et al. 2021)
    params = layers * (4 * H * H + mlp) + V * H * ((stage == 0) + (stage == job["pp"] - 1 and job["pp"] > 1))
    assert params % job["tp"] == 0  # H and F are multiples of tp: no rounding
    return params // job["tp"] * 2


@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(llm_jobs(), st.sampled_from(["fluid", "tcp"]))
def test_drawn_llm_jobs_end_and_send_the_closed_form_bytes(tmp_path_factory, job, flow_model):
    tp, pp, dp, m = job["tp"], job["pp"], job["dp"], job["micro_batches"]
    n = tp * pp * dp
    s = Scenario.from_dict({"backend": "flow", "flow_model": flow_model, "seed": 1,
                            "topology": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": -(-n // 2),
                                         "spines": 2},
                            "llm_jobs": [{**job, "hosts": list(range(n))}]})
    s._base_dir = tmp_path_factory.mktemp("llm")
    res = simulate(s)
    # Every rank's step ends.
    jobs = res.jobs[res.jobs.job == "llm"]
    assert sorted(jobs.worker) == list(range(n)) and jobs.end_ps.notna().all()
    assert res.summary["llm_jobs"]["llm"]["finished"]
    tl = res.timeline
    # Pipeline: every rank but the last stage's sends m activations, every rank but the first's m gradients.
    sends = tl[tl.kind.isin(["pp_send_activation", "pp_send_gradient"])].groupby(["worker", "kind"]).size()
    for r in range(n):
        stage = r // (tp * dp)
        assert sends.get((r, "pp_send_activation"), 0) == (m if stage < pp - 1 else 0)
        assert sends.get((r, "pp_send_gradient"), 0) == (m if stage > 0 else 0)
    if tp * dp == 1:
        return
    c = res.ccl[res.ccl.kind == "send"]
    groups = res.groups.set_index("name")
    sent = c.groupby(["group", "collective"]).bytes.sum()
    act = 1 * SEQ * H * 2  # micro_batch_size 1
    for name, g in groups.iterrows():
        first = int(g.ranks.split()[0])
        stage = first // (tp * dp)
        got = {k: int(v) for k, v in sent[name].items()} if name in sent.index.get_level_values(0) else {}
        if g.label == "tp":
            tp_bytes = 2 * (tp - 1) * 4 * (job["shape"]["layers"] // pp) * act * m
            assert sum(v for k, v in got.items() if k != "alltoall") == tp_bytes
        elif g.label == "dp":
            G = _stage_grad_bytes(job, stage)
            want = {0: {"allreduce": 2 * (dp - 1) * G}, 1: {"reduce_scatter": (dp - 1) * G, "allgather": (dp - 1) * G},
                    3: {"reduce_scatter": m * (dp - 1) * G, "allgather": 2 * m * (dp - 1) * G}}
            assert got == ({} if dp == 1 else want[{2: 1}.get(job["zero"], job["zero"])])  # ZeRO-2 moves ZeRO-1's bytes

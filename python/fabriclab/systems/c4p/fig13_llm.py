"""C4P's figure 13 with the three training jobs as LLM jobs (``[[llm_jobs]]``,
docs/llm.md) on the C4P testbed: tensor parallelism on each server's
NVSwitch, pipeline stages and data-parallel groups across the fabric, every
connection between servers on 2 queue pairs whose source ports come from
the C4P master or, without it, at random (docs/c4p.md). ``fig13`` in
``repro.py`` is the analytic approximation (compute model plus the
data-parallel allreduce simulated alone); this runs the whole step.

Assumptions beyond the paper's (it gives model, framework, parallelism and,
for Job3, GA 16 only; the rest is ours, as in ``repro.fig13``): 2048-token
sequences, bf16 gradients, H800 at 40 % of its dense 989 TFLOP/s, micro-batch
sizes of ``repro.TRAINING_JOBS`` (16 sequences per replica for Jobs 1 and 3,
4 per GPU for Job2), Megatron's rank order, each replica's servers alternating
between the two leaf groups as in figures 8 and 13 (so the data-parallel
rings cross the spines). GPT 22B's shape is not published: 48 layers of
hidden 6144 (48 heads, FFN 4h) give 21.7e9 parameters in the layers plus
0.3e9 in the embedding (12 L h^2 + V h = 22.0e9). Llama 7B is Llama 2 7B's
shape at Llama 1's 2048-token context (Touvron et al. 2023a, table 2: the
same dim, heads, layers). The DP gradient reduction overlaps the backward
in buckets (PyTorch DDP, Megatron); ZeRO for Job2 is stage 1 (unstated in
the paper): a reduce-scatter per bucket, the parameters' allgather after the
step. Layers are coarsened (``layers_per_node``: 12, 8 and 4 layers per
compute node and per TP collective) so that a run takes minutes; the bytes
are the same (docs/llm.md). Buckets (1, 3 and 1 GB) close at those chunks'
ends, so each job's gradient goes out in 4, 4 and 3 buckets overlapping the
backward of the last micro-batch.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from .bench import REDUCE_BPS, SEND_OVERHEAD_PS
from .master import Master, ecmp_src_ports
from .repro import MFU, PAPER_FIG13, TRAINING_JOBS
from .testbed import GPUS_PER_SERVER, Router, testbed

QPS = 2  # per connection between servers, as figure 13's analytic mode
GPT22B = {"hidden": 6144, "layers": 48, "heads": 48, "ffn_hidden": 4 * 6144, "vocab": 50257, "seq_len": 2048}
LLM_JOBS = {
    "job1": {"model": "custom", "shape": GPT22B, "tp": 8, "dp": 16, "micro_batches": 1, "micro_batch_size": 16,
             "layers_per_node": 12, "bucket_bytes": 10**9},
    "job2": {"model": "llama2-7b", "shape": {"seq_len": 2048}, "dp": 128, "zero": 1, "dp_channels": GPUS_PER_SERVER,
             "micro_batches": 1, "micro_batch_size": 4, "layers_per_node": 8, "bucket_bytes": 3 * 10**9},
    "job3": {"model": "gpt3-175b", "tp": 8, "pp": 8, "dp": 2, "micro_batches": 16, "micro_batch_size": 16,
             "layers_per_node": 4, "bucket_bytes": 10**9},
}
# Quick: GPT 22B with 6 layers, Llama 7B with 4 on one ring (not 8 channels), GPT 175B with 4 micro-batches.
QUICK = {"job1": {"shape": dict(GPT22B, layers=6), "layers_per_node": 6},
         "job2": {"shape": {"seq_len": 2048, "layers": 4}, "layers_per_node": 4, "dp_channels": 1},
         "job3": {"micro_batches": 4}}


def server_order() -> list[int]:
    """Replica servers alternating between the leaf groups (figure 8's order)."""
    return [(i // 2) + (8 if i % 2 else 0) for i in range(16)]


def job_config(name: str, quick: bool = False, overlap: bool = True) -> dict:
    """The ``[[llm_jobs]]`` entry of a job, its 128 ranks on the testbed's GPUs;
    without ``overlap``, the whole gradient in one bucket, reduced after the
    backward (as repro.fig13 assumes)."""
    t = testbed(16)
    cfg = {"name": name, "gpu": "h800", "efficiency": MFU, "reduce_bps": REDUCE_BPS,
           "send_overhead_ps": SEND_OVERHEAD_PS, "telemetry": False, **LLM_JOBS[name]}
    if quick:
        cfg.update(QUICK[name])
    if not overlap:
        cfg["bucket_bytes"] = 10**13
    order = server_order()
    cfg["hosts"] = [t.gpu_host(order[r // GPUS_PER_SERVER], r % GPUS_PER_SERVER) for r in range(128)]
    return cfg


def cross_server_pairs(job: dict, server_of: dict[int, int]) -> list[tuple[int, int]]:
    """(rank, rank) of every message between servers the lowered job can
    send: its collectives' send steps over each group, its pipeline peers."""
    pairs = set()
    seen = set()
    for rk in job["ranks"]:
        prog = job["programs"][rk["program"]]
        for nd in prog:
            if nd["kind"] == "collective":
                g = rk["groups"][nd["slot"]]
                if (g, nd["plan"]) in seen:
                    continue
                seen.add((g, nd["plan"]))
                members = job["groups"][g]["ranks"]
                for m, steps in enumerate(job["plans"][nd["plan"]]["steps"]):
                    for st in steps:
                        if st["op"] == "send":
                            pairs.add((members[m], members[st["peer"]]))
            elif nd["kind"] == "send":
                pairs.add((job["ranks"].index(rk), rk["peers"][nd["slot"]]))
    hosts = [rk["host"] for rk in job["ranks"]]
    return sorted((a, b) for a, b in pairs if server_of[hosts[a]] != server_of[hosts[b]])


def run_job(name: str, mode: str, quick: bool = False, seed: int = 0, overlap: bool = True) -> dict:
    """One job alone on the 1:1 testbed, ``mode`` "ecmp" or "c4p": its
    iteration and how much of it each rank computed."""
    import pandas as pd

    from ..._core import Simulator
    from ...scenario.model import Scenario
    from ...sim.pipeline import core_spec

    t = testbed(16)
    scenario = Scenario.from_dict({"backend": "flow", "flow_model": "fluid", "seed": seed,
                                   "routing": {"resilient_hash": True},
                                   "llm_jobs": [job_config(name, quick, overlap)]})
    core = core_spec(scenario, topology_data=t)
    job = core["graph_jobs"][0]
    server_of = {t.gpu_host(s, k): s for s in range(16) for k in range(GPUS_PER_SERVER)}
    rng = random.Random(seed)
    master = Master(t, seed=seed) if mode == "c4p" else None
    router = Router(t) if mode == "ecmp" else None
    job["qps"] = []
    for a, b in cross_server_pairs(job, server_of):
        ha, hb = job["ranks"][a]["host"], job["ranks"][b]["host"]
        ports = master.allocate(ha, hb, QPS) if master else ecmp_src_ports(t, router, ha, hb, QPS, rng)
        job["qps"].append({"rank": a, "peer": b, "src_ports": ports})
    sim = Simulator(json.dumps(core))
    sim.run_until(2**63)
    tables = sim.app_tables()
    it = pd.DataFrame(tables["graph_iterations"])
    if it["end_ps"].isna().any():
        raise RuntimeError(f"{name} ({mode}): a rank did not finish")
    tl = pd.DataFrame(tables["graph_timeline"])
    comp = tl[tl.kind.isin(("forward", "backward"))]
    busy = (comp.end_ps - comp.start_ps).groupby(comp.worker).sum()
    iteration_ps = int(it.end_ps.max() - it.start_ps.min())
    return {"iteration_s": iteration_ps * 1e-12, "compute_s_max": float(busy.max()) * 1e-12,
            "connections": len(job["qps"]), "events": sim.events}


def fig13_llm(out_dir: Path, quick: bool = False) -> dict:
    """Each job with ECMP and with C4P: the iteration and C4P's gain, beside
    the paper's; the share of the iteration not spent computing (bubble and
    exposed communication) under ECMP. Rows 0-2: the DP reduction overlapping
    the backward in buckets; rows 3-5: one bucket after the backward."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for overlap in (True, False):
        for name in LLM_JOBS:
            r = {m: run_job(name, m, quick, overlap=overlap) for m in ("ecmp", "c4p")}
            e, c = r["ecmp"]["iteration_s"], r["c4p"]["iteration_s"]
            rows.append({"job": name, "model": TRAINING_JOBS[name]["model"], "dp_overlap": overlap,
                         "iteration_ecmp_s": round(e, 4), "iteration_c4p_s": round(c, 4),
                         "compute_s": round(r["ecmp"]["compute_s_max"], 4),
                         "not_computing_ecmp": round(1 - r["ecmp"]["compute_s_max"] / e, 3),
                         "gain_percent": round(100 * (e / c - 1), 2), "connections": r["ecmp"]["connections"],
                         "paper_gain_percent": PAPER_FIG13[name]["gain_percent"]})
    df = pd.DataFrame(rows)
    df.to_csv(out_dir / "fig13_llm.csv", index=False)
    return {"ours": rows, "paper": PAPER_FIG13, "jobs": {k: job_config(k, quick) | {"hosts": "see fig13_llm.py"}
                                                         for k in LLM_JOBS},
            "quick": quick}

"""Megatron-LM's weak-scaling table (Narayanan et al., SC'21, Table 1) as
LLM jobs on a DGX A100 fabric: our predicted iteration time, the share of it
spent communicating, and the throughput per GPU it implies, beside the
paper's achieved throughput (``fabriclab reproduce megatron-weak-scaling``;
docs/reproductions.md).

The paper's rows (Table 1; the shapes, parallelism, GPUs, batch sizes and
throughputs agree with the launch script the paper's repository publishes
for it, NVIDIA/Megatron-LM ``examples/sc21/run_table_1.sh``, which also
gives what the table does not: the micro-batch size, the DDP implementation
(PyTorch's for the four smallest models, Megatron's own "local" one after
that), activation recomputation (``--recompute-method uniform``) and the
interleaved schedule for 76.1B and 145.6B (``--num-layers-per-virtual-
pipeline-stage 5``); ``CONFIG.sh`` beside it: sequence 2048, fp16). The
vocabulary is 51,200 (the paper, section 5.1). FLOPs per iteration are the
paper's equation (3), appendix: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), with
recomputation (four passes over each transformer layer: forward, the
recomputed forward, backward twice; the logit layer 2 B s h V forward and
4 B s h V backward). The paper's throughput is those FLOPs over the
measured iteration time and the GPUs, so its implied iteration is F / (X n).

The hardware (section 5): DGX A100 servers (Selene), 8 A100 80 GB GPUs on
NVSwitch (NVLink 3: 600 GB/s per GPU both directions together, so
2,400 Gbit/s each way), 8 HDR InfiniBand NICs of 200 Gbit/s per server, one
per GPU, on a three-level fat tree. Ours: the ``gpu_cluster`` topology with
those rates, 8 servers per leaf, non-blocking two-level leaf-spine (a
three-level fat tree's extra level only lengthens paths; it is
non-blocking too). A100 dense fp16/bf16 peak 312 TFLOP/s (datasheet).

One compute efficiency for every row, calibrated on the smallest row
(1.7B on 32 GPUs: no tensor or pipeline parallelism, the least
communication): starting from its achieved share of peak (137 / 312), one
fixed-point step sets the efficiency so that its computing time plus the
time it does not compute equals the paper's implied iteration. The other
rows are then predictions.
"""

from __future__ import annotations

import csv
from dataclasses import asdict, dataclass
from pathlib import Path

from ...scenario.llm import GPU_PEAK_FLOPS

PEAK_FLOPS = GPU_PEAK_FLOPS["a100"]
SEQ_LEN = 2048
VOCAB = 51200
GPUS_PER_SERVER = 8
SERVERS_PER_LEAF = 8
NIC_BPS = 200 * 10**9
NVLINK_BPS = 2400 * 10**9
# PyTorch DDP's default bucket (bucket_cap_mb = 25, in MiB); Megatron's local DDP reduces the whole
# gradient once after the backward: one bucket.
TORCH_BUCKET_BYTES = 25 * 2**20
ONE_BUCKET = 10**15
# A reduction of S bytes reads 2 S and writes S of the A100's HBM2e (2,039 GB/s, A100 80GB SXM datasheet):
# S at 680 GB/s.
REDUCE_BPS = 680 * 8 * 10**9
# A network that costs (almost) nothing: 10^15 bit/s links and reductions, no delays.
FREE_BPS = 10**15


@dataclass(frozen=True)
class PaperRow:
    """One row of Table 1, with the launch script's micro-batch size, DDP and virtual stages."""

    params_b: float
    heads: int
    hidden: int
    layers: int
    tp: int
    pp: int
    gpus: int
    batch: int
    tflops_per_gpu: float  # achieved, Table 1
    micro_batch: int  # run_table_1.sh MBS
    ddp: str  # "torch" (PyTorch DDP, bucketed, overlapped with the backward) or "local" (after the backward)
    virtual_stage_layers: int | None  # interleaved schedule: layers per virtual stage (None: plain 1F1B)
    layers_per_node: int  # our coarsening (docs/llm.md): layers per compute node and TP collective

    @property
    def name(self) -> str:
        return f"{self.params_b:g}B"

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)

    @property
    def micro_batches(self) -> int:
        return self.batch // (self.micro_batch * self.dp)

    @property
    def virtual_stages(self) -> int:
        """Model chunks per pipeline stage under the interleaved schedule (1: plain 1F1B)."""
        return self.layers // self.pp // self.virtual_stage_layers if self.virtual_stage_layers else 1


TABLE1 = (
    PaperRow(1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 16, "torch", None, 4),
    PaperRow(3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 16, "torch", None, 3),
    PaperRow(7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 16, "torch", None, 4),
    PaperRow(18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 8, "torch", None, 4),
    PaperRow(39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 4, "local", None, 8),
    PaperRow(76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 2, "local", 5, 15),
    PaperRow(145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 2, "local", 5, 10),
)
CALIBRATION_ROW = 0  # 1.7B
QUICK_ROWS = (0, 1)  # 1.7B and 3.6B: 32 and 64 GPUs


def paper_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """FLOPs of one iteration with activation recomputation, the paper's equation (3)."""
    return 96 * batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def row_flops(r: PaperRow) -> float:
    return paper_flops(r.batch, SEQ_LEN, r.layers, r.hidden, VOCAB)


def implied_iteration_s(r: PaperRow) -> float:
    """The iteration time the paper's throughput implies: F / (X n)."""
    return row_flops(r) / (r.tflops_per_gpu * 1e12 * r.gpus)


def connections(d: dict) -> list[dict]:
    """One queue pair per connection between servers (NCCL's default, ``NCCL_IB_QPS_PER_CONNECTION`` = 1),
    each on a source port drawn from the ephemeral range by a seeded stream (the ECMP hash reads it): a
    connection's messages then leave one at a time, in order, as on one QP (docs/llm.md, "Channels and queue
    pairs"); without it every message a fast upstream ring hop lets through would be a flow of its own."""
    import random

    from ...scenario.model import Scenario
    from ...sim.pipeline import core_spec
    from ..c4p.fig13_llm import cross_server_pairs
    from ..c4p.master import SRC_PORT_BASE, SRC_PORT_SPAN

    job = core_spec(Scenario.from_dict(d))["graph_jobs"][0]
    server_of = {rk["host"]: rk["host"] // GPUS_PER_SERVER for rk in job["ranks"]}
    rng = random.Random(0)
    return [{"rank": a, "peer": b, "src_ports": [SRC_PORT_BASE + rng.randrange(SRC_PORT_SPAN)]}
            for a, b in cross_server_pairs(job, server_of)]


def scenario(r: PaperRow, efficiency: float, free: bool = False) -> dict:
    """Row ``r`` as a scenario: its job alone on the DGX A100 fabric, one QP per connection between servers
    (``free``: links and reductions at 10^15 bit/s without delays, to measure the step without
    communication)."""
    servers = r.gpus // GPUS_PER_SERVER
    per_leaf = min(servers, SERVERS_PER_LEAF)
    topo = {"kind": "gpu_cluster", "leaves": servers // per_leaf, "servers_per_leaf": per_leaf,
            "gpus_per_server": GPUS_PER_SERVER, "spines": 8,
            "nic_rate_bps": FREE_BPS if free else NIC_BPS, "nvlink_bps": FREE_BPS if free else NVLINK_BPS}
    if free:
        topo.update(link_delay_ps=0, nvlink_delay_ps=0)
    job = {"name": r.name, "model": "custom",
           "shape": {"hidden": r.hidden, "layers": r.layers, "heads": r.heads, "ffn_hidden": 4 * r.hidden,
                     "vocab": VOCAB, "seq_len": SEQ_LEN},
           "tp": r.tp, "pp": r.pp, "dp": r.dp, "micro_batches": r.micro_batches, "micro_batch_size": r.micro_batch,
           "activation_recompute": True, "gpu": "a100", "efficiency": efficiency,
           "bucket_bytes": TORCH_BUCKET_BYTES if r.ddp == "torch" else ONE_BUCKET,
           # NCCL's rings over the DP ranks of a server, each leaving through its own GPU's NIC.
           "dp_channels": GPUS_PER_SERVER // r.tp, "layers_per_node": r.layers_per_node, "telemetry": False,
           "reduce_bps": FREE_BPS if free else REDUCE_BPS}
    d = {"name": f"megatron-{r.name}", "backend": "flow", "flow_model": "fluid", "topology": topo, "llm_jobs": [job]}
    job["qps"] = connections(d)
    return d


def run_row(r: PaperRow, efficiency: float, free: bool = False) -> dict:
    """One iteration of row ``r``: its time and the busiest rank's computing time (s)."""
    from ...scenario.model import Scenario
    from ...sim.pipeline import simulate

    res = simulate(Scenario.from_dict(scenario(r, efficiency, free)))
    j = res.summary["llm_jobs"][r.name]
    t = j["iteration_times_ps"][0] * 1e-12
    return {"iteration_s": t, "compute_s": j["compute_fraction"]["max"] * t}


def calibrate(r: PaperRow) -> dict:
    """The efficiency that makes row ``r``'s predicted iteration the paper's: from its achieved share of
    peak, one fixed-point step (computing time scales as 1 / efficiency; the time not computing is kept)."""
    e0 = r.tflops_per_gpu * 1e12 / PEAK_FLOPS
    run = run_row(r, e0)
    not_computing = run["iteration_s"] - run["compute_s"]
    e1 = e0 * run["compute_s"] / (implied_iteration_s(r) - not_computing)
    return {"row": r.name, "start": e0, "efficiency": e1, "not_computing_s_at_start": not_computing}


def predict(r: PaperRow, efficiency: float) -> dict:
    """Row ``r``: our iteration, its shares (computing, pipeline bubble, communication), the implied
    throughput, beside the paper's."""
    real = run_row(r, efficiency)
    free = run_row(r, efficiency, free=True)
    t, c, t0 = real["iteration_s"], real["compute_s"], free["iteration_s"]
    paper_t = implied_iteration_s(r)
    # The interleaved schedule (not modelled) divides the bubble by the virtual stages (the paper, section 2.2.2):
    # an estimate of our iteration under it, the rest unchanged: interleaving's v-fold pipeline p2p traffic (a
    # micro-batch crosses v times as many stage boundaries) is not included.
    interleaved_t = t - (t0 - c) * (1 - 1 / r.virtual_stages)
    # Diagnostic, not a prediction: the efficiency at which this row alone would meet the paper, the time not
    # computing kept (none: that time alone exceeds the paper's iteration).
    spare = paper_t - (t - c)
    to_match = round(efficiency * c / spare, 4) if spare > 0 else None
    return {"model": r.name, "gpus": r.gpus, "tp": r.tp, "pp": r.pp, "dp": r.dp, "micro_batch": r.micro_batch,
            "micro_batches": r.micro_batches, "ddp": r.ddp, "interleaved_in_paper": r.virtual_stage_layers is not None,
            "layers_per_node": r.layers_per_node,
            "paper_tflops_per_gpu": r.tflops_per_gpu, "paper_iteration_s": round(paper_t, 4),
            "iteration_s": round(t, 4), "iteration_no_comm_s": round(t0, 4), "compute_s": round(c, 4),
            "compute_share": round(c / t, 4), "bubble_share": round((t0 - c) / t, 4),
            "comm_share": round((t - t0) / t, 4),
            "tflops_per_gpu": round(row_flops(r) / (t * r.gpus) / 1e12, 1),
            "ratio_to_paper": round(t / paper_t, 4), "virtual_stages_in_paper": r.virtual_stages,
            "iteration_interleaved_estimate_s": round(interleaved_t, 4),
            "ratio_to_paper_interleaved_estimate": round(interleaved_t / paper_t, 4),
            "efficiency_to_match_paper": to_match}


def weak_scaling(out_dir: Path, quick: bool = False) -> dict:
    """The rows (quick: 1.7B and 3.6B) with one efficiency calibrated on 1.7B; writes
    ``megatron_table1.csv``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cal = calibrate(TABLE1[CALIBRATION_ROW])
    rows = [predict(TABLE1[i], cal["efficiency"]) for i in (QUICK_ROWS if quick else range(len(TABLE1)))]
    with open(out_dir / "megatron_table1.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return {"calibration": cal, "efficiency": round(cal["efficiency"], 4), "ours": rows,
            "paper": [asdict(r) for r in TABLE1], "quick": quick,
            "assumptions": {"peak_flops": PEAK_FLOPS, "nic_bps": NIC_BPS, "nvlink_bps_per_direction": NVLINK_BPS,
                            "seq_len": SEQ_LEN, "vocab": VOCAB, "torch_bucket_bytes": TORCH_BUCKET_BYTES,
                            "reduce_bps": REDUCE_BPS,
                            "backend": "flow, fluid", "free_network_bps": FREE_BPS}}

"""``[[llm_jobs]]``: a large language model's training job by its shape and
parallelism (tensor, pipeline, data with ZeRO), lowered by
``fabriclab.sim.apps.llm`` onto the core's dependency-graph job
(docs/llm.md).

Model shapes by name, each field with its source:

- GPT-3 sizes: Brown et al., "Language Models are Few-Shot Learners"
  (2020), Table 2.1 (n_layers, d_model, n_heads; n_ctx 2048); vocabulary
  50257 (the GPT-2 BPE, Radford et al. 2019); FFN 4 x d_model.
- Llama 2 7B/13B/70B: Touvron et al., "Llama 2" (2023), Table 1 and the
  released config.json files (hidden_size, num_hidden_layers,
  num_attention_heads, num_key_value_heads, intermediate_size, vocab 32000,
  context 4096).
- Llama 3 8B/70B: Meta's released config.json (hidden 4096/8192, layers
  32/80, heads 32/64, kv heads 8, intermediate 14336/28672, vocab 128256,
  context 8192); "The Llama 3 Herd of Models" (2024), Table 3.
- Mixtral 8x7B: Jiang et al., "Mixtral of Experts" (2024), Table 1
  (dim 4096, n_layers 32, heads 32, kv heads 8, hidden_dim 14336, vocab
  32000, 8 experts, top 2; context 32768, trained here at 4096 unless
  given).

GPU peaks (dense, tensor cores; vendor datasheets): V100 SXM2 125 TFLOPS
FP16; A100 SXM 312 TFLOPS BF16; H100 SXM 989 TFLOPS BF16 (1,979 is with
sparsity); H800 SXM the H100's 989 (its datasheet's 1,979 BF16 is with
sparsity; the H800 differs in NVLink and FP64, not in tensor throughput). The default efficiency 0.5 is of the order Megatron-LM reached
(Narayanan et al., SC'21: 163 TFLOPS per A100, 52 % of peak, at 1T
parameters).
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

from pydantic import Field, StrictBool, StrictFloat, StrictInt, model_validator

from .base import U32_MAX, _Strict
from .graph_job import GraphJobRun
from .units import SizeBytes

# name: hidden, layers, heads, kv_heads, ffn_hidden, gated_mlp, vocab, seq_len, experts, top_k
MODELS: dict[str, dict] = {
    "gpt3-125m": dict(hidden=768, layers=12, heads=12, ffn_hidden=3072, vocab=50257, seq_len=2048),
    "gpt3-350m": dict(hidden=1024, layers=24, heads=16, ffn_hidden=4096, vocab=50257, seq_len=2048),
    "gpt3-1.3b": dict(hidden=2048, layers=24, heads=16, ffn_hidden=8192, vocab=50257, seq_len=2048),
    "gpt3-2.7b": dict(hidden=2560, layers=32, heads=32, ffn_hidden=10240, vocab=50257, seq_len=2048),
    "gpt3-6.7b": dict(hidden=4096, layers=32, heads=32, ffn_hidden=16384, vocab=50257, seq_len=2048),
    "gpt3-13b": dict(hidden=5140, layers=40, heads=40, ffn_hidden=20560, vocab=50257, seq_len=2048),
    "gpt3-175b": dict(hidden=12288, layers=96, heads=96, ffn_hidden=49152, vocab=50257, seq_len=2048),
    "llama2-7b": dict(hidden=4096, layers=32, heads=32, ffn_hidden=11008, gated_mlp=True, vocab=32000,
                      seq_len=4096),
    "llama2-13b": dict(hidden=5120, layers=40, heads=40, ffn_hidden=13824, gated_mlp=True, vocab=32000,
                       seq_len=4096),
    "llama2-70b": dict(hidden=8192, layers=80, heads=64, kv_heads=8, ffn_hidden=28672, gated_mlp=True,
                       vocab=32000, seq_len=4096),
    "llama3-8b": dict(hidden=4096, layers=32, heads=32, kv_heads=8, ffn_hidden=14336, gated_mlp=True,
                      vocab=128256, seq_len=8192),
    "llama3-70b": dict(hidden=8192, layers=80, heads=64, kv_heads=8, ffn_hidden=28672, gated_mlp=True,
                       vocab=128256, seq_len=8192),
    "mixtral-8x7b": dict(hidden=4096, layers=32, heads=32, kv_heads=8, ffn_hidden=14336, gated_mlp=True,
                         vocab=32000, seq_len=4096, experts=8, top_k=2),
}

# Dense peak FLOP/s of one GPU (datasheets, module docstring).
GPU_PEAK_FLOPS = {"v100": 125e12, "a100": 312e12, "h100": 989e12, "h800": 989e12}


class ModelShape(_Strict):
    """A transformer's shape. Unset fields take the named model's values."""

    hidden: Optional[StrictInt] = Field(None, ge=1, le=U32_MAX)
    layers: Optional[StrictInt] = Field(None, ge=1, le=U32_MAX)
    heads: Optional[StrictInt] = Field(None, ge=1, le=U32_MAX)
    # Grouped-query attention's key/value heads (unset: as many as heads).
    kv_heads: Optional[StrictInt] = Field(None, ge=1, le=U32_MAX)
    ffn_hidden: Optional[StrictInt] = Field(None, ge=1, le=U32_MAX)
    # SwiGLU-style MLP: three weight matrices in place of two.
    gated_mlp: Optional[StrictBool] = None
    vocab: Optional[StrictInt] = Field(None, ge=1, le=U32_MAX)
    seq_len: Optional[StrictInt] = Field(None, ge=1, le=U32_MAX)
    experts: Optional[StrictInt] = Field(None, ge=1, le=U32_MAX)
    top_k: Optional[StrictInt] = Field(None, ge=1, le=U32_MAX)


class LlmQps(_Strict):
    """The queue pairs of the connection from rank ``rank`` to rank ``peer``:
    one per source port; each message between them is cut into one equal
    part per QP (docs/llm.md, "Queue pairs")."""

    rank: StrictInt = Field(ge=0, le=U32_MAX)
    peer: StrictInt = Field(ge=0, le=U32_MAX)
    src_ports: list[Annotated[StrictInt, Field(ge=0, le=65535)]] = Field(min_length=1, max_length=64)


class _LlmJobShape(_Strict):
    """The fields of ``[[llm_jobs]]`` before :class:`GraphJobRun`'s: the model,
    its parallelism, placement, compute and buckets."""

    name: str = "llm"
    # A named shape (MODELS) or "custom" (every field of `shape` given).
    model: str = "gpt3-1.3b"
    shape: ModelShape = Field(default_factory=ModelShape)
    tp: StrictInt = Field(1, ge=1, le=U32_MAX)
    pp: StrictInt = Field(1, ge=1, le=U32_MAX)
    dp: StrictInt = Field(1, ge=1, le=U32_MAX)
    # Expert parallelism: EP groups of ep data-parallel ranks, the experts split among them; an
    # all-to-all dispatches each MoE layer's tokens and another combines them (docs/llm.md).
    ep: StrictInt = Field(1, ge=1, le=U32_MAX)
    # Token-routing skew: EP rank e receives a share of the tokens proportional to 1 / (e + 1)^ep_skew.
    ep_skew: StrictFloat = Field(0.0, ge=0, le=10)
    micro_batches: StrictInt = Field(8, ge=1, le=U32_MAX)
    micro_batch_size: StrictInt = Field(1, ge=1, le=U32_MAX)
    schedule: Literal["1f1b", "gpipe"] = "1f1b"
    zero: StrictInt = Field(0, ge=0, le=3)
    sequence_parallel: StrictBool = False
    activation_recompute: StrictBool = False
    # Hosts of the ranks: "all" or a list, taken in the order of `order`
    # (Megatron-LM's: tensor-parallel ranks fastest, so on consecutive GPUs
    # of a server, then data-parallel, then pipeline stages).
    hosts: Union[Literal["all"], list[StrictInt]] = "all"
    order: Literal["tp-dp-pp", "tp-pp-dp"] = "tp-dp-pp"
    gpu: Literal["v100", "a100", "h100", "h800"] = "a100"
    efficiency: StrictFloat = Field(0.5, gt=0, le=1)
    # A measured profile (CSV: layer,forward_ps,backward_ps per transformer
    # layer, one micro-batch, one tensor-parallel rank) in place of FLOPs.
    profile: Optional[str] = None
    # Gradients' bytes per parameter (2: bf16) and DP buckets.
    grad_bytes_per_param: StrictInt = Field(2, ge=1, le=8)
    bucket_bytes: Annotated[SizeBytes, Field(gt=0)] = 40 * 10**6
    # NCCL channels of the data-parallel collectives: that many rings, each
    # with its part of the buffer; ring c leaves each block of dp_channels
    # consecutive DP ranks (a server's GPUs) through a different rank (NCCL's
    # rail rings, collectives.rings.block_rings). 1: one ring in rank order.
    dp_channels: StrictInt = Field(1, ge=1, le=U32_MAX)
    # Coarsening: consecutive layers of a stage lowered as one compute node
    # and one collective per kind (docs/llm.md); 1 is per layer.
    layers_per_node: StrictInt = Field(1, ge=1, le=U32_MAX)


class LlmJobConfig(GraphJobRun, _LlmJobShape):
    """An LLM training job (docs/llm.md)."""

    # Rank pairs on queue pairs with given source ports (a path manager's choice, e.g. C4P's).
    qps: list[LlmQps] = Field(default_factory=list)
    # Rank -> compute slowdown factor (a straggler: > 1).
    slowdown: dict[str, float] = Field(default_factory=dict)
    # Every collective message in ccl.parquet (large jobs: millions of rows).
    telemetry: StrictBool = True
    end_run: StrictBool = False

    @model_validator(mode="after")
    def _shape(self):
        if self.model != "custom" and self.model not in MODELS:
            raise ValueError(f"model: {self.model!r} is not a known model ({', '.join(MODELS)}) or 'custom'")
        if self.model == "custom":
            for f in ("hidden", "layers", "heads", "ffn_hidden", "vocab", "seq_len"):
                if getattr(self.shape, f) is None:
                    raise ValueError(f"shape.{f}: a custom model gives hidden, layers, heads, ffn_hidden, "
                                     f"vocab and seq_len")
        m = self.resolved_shape()
        if self.pp > m["layers"]:
            raise ValueError(f"pp: {self.pp} pipeline stages for {m['layers']} layers; at most one stage per layer")
        if m["layers"] % self.pp:
            raise ValueError(f"pp: {m['layers']} layers do not split evenly into {self.pp} stages")
        if m["heads"] % self.tp or m["ffn_hidden"] % self.tp:
            raise ValueError(f"tp: {self.tp} does not divide the heads ({m['heads']}) and ffn_hidden "
                             f"({m['ffn_hidden']})")
        if self.ep > 1 and m["experts"] is None:
            raise ValueError("ep: expert parallelism needs a model with experts (shape.experts)")
        if self.ep > 1 and (m["experts"] % self.ep or self.dp % self.ep):
            raise ValueError(f"ep: {self.ep} must divide the experts ({m['experts']}) and dp ({self.dp})")
        if self.dp % self.dp_channels:
            raise ValueError(f"dp_channels: {self.dp_channels} must divide dp ({self.dp})")
        n = self.tp * self.pp * self.dp
        pairs = [(q.rank, q.peer) for q in self.qps]
        for q in self.qps:
            if q.rank >= n or q.peer >= n or q.rank == q.peer:
                raise ValueError(f"qps: rank {q.rank} -> peer {q.peer}: two distinct ranks of the job's {n} needed")
        if len(set(pairs)) != len(pairs):
            raise ValueError("qps: a rank pair is listed twice")
        if self.hosts != "all" and len(self.hosts) != self.tp * self.pp * self.dp:
            raise ValueError(f"hosts: {len(self.hosts)} hosts given, but tp x pp x dp = "
                             f"{self.tp} x {self.pp} x {self.dp} = {self.tp * self.pp * self.dp} ranks")
        return self

    def resolved_shape(self) -> dict:
        """The model's shape: the named one's fields, overridden by `shape`."""
        base = dict(MODELS.get(self.model, {}))
        base.update({k: v for k, v in self.shape.model_dump().items() if v is not None})
        base.setdefault("kv_heads", base.get("heads"))
        base.setdefault("gated_mlp", False)
        base.setdefault("experts", None)
        base.setdefault("top_k", 1 if base["experts"] else None)
        return base

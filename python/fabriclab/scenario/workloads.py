"""The workloads a scenario runs: ``[[traffic]]`` (Poisson arrivals), ``[[flows]]``,
``[[jobs]]`` (data-parallel training), ``[[collectives]]`` (a plan run once), and
``[outputs]`` (which tables a run writes). docs/scenario.md documents every field."""

# No `from __future__ import annotations` in a schema module: see base.py.

from typing import Annotated, Literal, Optional, Union

from pydantic import (
    Field,
    PrivateAttr,
    StrictBool,
    StrictFloat,
    StrictInt,
    field_validator,
    model_validator,
)

from .aggregation import AGGREGATION_ALLREDUCE, JobAggregationConfig
from .base import U32_MAX, Delay, TrafficClass, _off_is_none, _Strict
from .units import RateBps, SizeBytes, TimePs


class PoissonTrafficConfig(_Strict):
    kind: Literal["poisson"] = "poisson"
    load: Optional[StrictFloat] = Field(None, gt=0, le=1, description="fraction of the hosts' link rate")
    flows_per_s: Optional[StrictFloat] = Field(None, gt=0, description="arrival rate over the whole host set")
    cdf: str = "websearch"
    start_ps: Delay = 0
    duration_ps: Annotated[TimePs, Field(gt=0)] = 1_000_000_000_000
    hosts: Union[Literal["all"], list[StrictInt]] = "all"
    class_: StrictInt = Field(0, ge=0, le=7, alias="class")
    tag: str = "background"

    @model_validator(mode="after")
    def _one_rate(self):
        if (self.load is None) == (self.flows_per_s is None):
            raise ValueError("give exactly one of load (fraction of link rate) and flows_per_s")
        return self


class FlowConfig(_Strict):
    src: StrictInt = Field(..., ge=0, le=U32_MAX)
    dst: StrictInt = Field(..., ge=0, le=U32_MAX)
    size_bytes: Annotated[SizeBytes, Field(gt=0)]
    start_ps: Delay = 0
    class_: StrictInt = Field(0, ge=0, le=7, alias="class")
    path: Optional[list[Union[Annotated[StrictInt, Field(ge=0, le=U32_MAX)], str]]] = None


class JobConfig(_Strict):
    """A data-parallel training job (see fabriclab/scenario/profiles.py and docs/scenario.md)."""

    name: str = "job"
    workers: Union[Literal["all"], list[StrictInt]] = "all"
    profile: str = "thesis-resnet50"
    layers: Optional[StrictInt] = Field(None, ge=1, le=U32_MAX)
    model_bytes: Optional[Annotated[SizeBytes, Field(gt=0)]] = None
    compute_ps: Optional[Annotated[TimePs, Field(gt=0)]] = None
    iterations: StrictInt = Field(5, ge=1, le=U32_MAX)
    fusion_bytes: Annotated[SizeBytes, Field(gt=0)] = 64 * 2**20
    barrier: StrictBool = True
    queue: Literal["fifo", "priority"] = "fifo"
    max_inflight: StrictInt = Field(1, ge=1, le=U32_MAX)
    class_: StrictInt = Field(0, ge=0, le=7, alias="class")
    layer_class: Optional[list[TrafficClass]] = None
    start_ps: Delay = 0
    slowdown: dict[str, Annotated[StrictFloat, Field(gt=0)]] = Field(default_factory=dict)
    jitter: StrictFloat = Field(0.0, ge=0, le=1)
    reduce_bps: Annotated[RateBps, Field(gt=0)] = 300 * 8 * 10**9
    send_overhead_ps: Delay = 0
    slack_aware: StrictBool = False
    urgent_class: StrictInt = Field(0, ge=0, le=7)
    slack_factor: StrictFloat = Field(1.0, gt=0)
    slack_lag_rounds: StrictInt = Field(1, ge=0, le=1000)
    persistent_connections: StrictBool = True
    allreduce: str = "ring"
    allreduce_chunk_bytes: Optional[Annotated[SizeBytes, Field(gt=0)]] = None
    # Trees and window of an in-network aggregation allreduce (panama, switchml, ...).
    aggregation: Optional[JobAggregationConfig] = None
    # The run ends once this job (and every other job with end_run) has finished,
    # whatever background traffic is still going.
    end_run: StrictBool = False
    # Checkpoints (docs/c4-recovery.md): before every iteration that is a
    # multiple of checkpoint_iterations, each worker pauses checkpoint_ps.
    checkpoint_iterations: Optional[StrictInt] = Field(None, ge=1, le=U32_MAX)
    checkpoint_ps: Optional[Delay] = None

    @model_validator(mode="after")
    def _checkpoint_pair(self):
        if self.checkpoint_ps is not None and self.checkpoint_iterations is None:
            raise ValueError("checkpoint_ps: a checkpoint's pause needs checkpoint_iterations (how often one is taken)")
        return self

    @model_validator(mode="after")
    def _aggregation_needs_it(self):
        if self.aggregation is not None and self.allreduce not in AGGREGATION_ALLREDUCE:
            raise ValueError(f"aggregation: settings for in-network aggregation, but allreduce = {self.allreduce!r}; "
                             f"use one of {', '.join(AGGREGATION_ALLREDUCE)}")
        if self.allreduce in AGGREGATION_ALLREDUCE:
            # Aggregation packets keep the job's class: nothing re-marks them.
            for name in ("slack_aware", "layer_class"):
                if getattr(self, name) not in (None, False):
                    raise ValueError(f"{name}: changes the class of a job's messages, but in-network aggregation "
                                     f"(allreduce = {self.allreduce!r}) keeps the job's class; drop {name}")
        return self


# Chunks of one fusion in a job's plan: every chunk is a plan step in memory.
MAX_PLAN_CHUNKS = 1 << 16

# Planners a job's allreduce can use by name (topology-free: ranks = workers).
JOB_ALLREDUCE = ("ring", "ring-plan", "tree", "halving-doubling", "direct")


# A collective's reduction throughput: a GPU sums at memory speed; a V100's
# HBM2 gives about 900 GB/s, and a reduction streams three operands (two
# reads, one write), so about 300 GB/s of reduced data (NVIDIA V100 datasheet).
COLLECTIVE_REDUCE_BPS = 300 * 8 * 10**9
# Software overhead per message (kernel launch and synchronisation), an
# assumption of the order of NCCL's per-step latency on NVLink.
COLLECTIVE_SEND_OVERHEAD_PS = 1_000_000

# Planners a [[collectives]] entry can use by name, and the operations each builds.
COLLECTIVE_PLANNERS = {
    "ring": ("allreduce", "reduce_scatter", "allgather"),
    "tree": ("allreduce",),
    "halving-doubling": ("allreduce",),
    "direct": ("allreduce", "alltoall"),
}


class QpRepathConfig(_Strict):
    """QP ``qp`` of the group takes source port ``src_port`` from ``at_ps`` on
    (a path manager re-allocating it; docs/c4p.md)."""

    at_ps: Delay
    qp: StrictInt = Field(ge=0, le=U32_MAX)
    src_port: StrictInt = Field(ge=0, le=65535)


class QpGroupConfig(_Strict):
    """The queue pairs of one rank pair of a collective (docs/c4p.md)."""

    rank: StrictInt = Field(ge=0, le=U32_MAX)
    peer: StrictInt = Field(ge=0, le=U32_MAX)
    # One QP per source port (the port the ECMP hash reads).
    src_ports: list[Annotated[StrictInt, Field(ge=0, le=65535)]] = Field(min_length=1)
    repaths: list[QpRepathConfig] = Field(default_factory=list)


class CollectiveConfig(_Strict):
    """A collective run once as an app: a plan (format v1) from a file, or
    built by a planner over ``ranks`` ranks, placed on ``hosts``."""

    name: str = "collective"
    # The communicator group it belongs to (e.g. "tp0", "dp3"): ccl.parquet's group column.
    group: Optional[Annotated[str, Field(min_length=1, max_length=64)]] = None
    # A plan JSON file (docs/plans.md), relative to the scenario file; verified.
    plan: Optional[str] = None
    planner: Optional[Literal["ring", "tree", "halving-doubling", "direct"]] = None
    op: Optional[Literal["allreduce", "reduce_scatter", "allgather", "alltoall"]] = None
    size_bytes: Optional[Annotated[SizeBytes, Field(gt=0)]] = None
    chunk_bytes: Optional[Annotated[SizeBytes, Field(gt=0)]] = None
    # Ranks of a planner's plan; default: len(hosts), else every host.
    ranks: Optional[StrictInt] = Field(None, ge=2, le=U32_MAX)
    # Host index of every rank; default: hosts 0..n-1.
    hosts: Optional[list[Annotated[StrictInt, Field(ge=0, le=U32_MAX)]]] = None
    start_ps: Delay = 0
    class_: StrictInt = Field(0, ge=0, le=7, alias="class")
    reduce_bps: Annotated[RateBps, Field(gt=0)] = COLLECTIVE_REDUCE_BPS
    send_overhead_ps: Delay = COLLECTIVE_SEND_OVERHEAD_PS
    persistent_connections: StrictBool = False
    # Rank pairs whose sends go over several queue pairs; each send is cut in
    # one part per QP, on its own QP (split) or on the fastest free one (dlb).
    qps: list[QpGroupConfig] = Field(default_factory=list)
    balance: Literal["split", "dlb"] = "split"
    qp_depth: StrictInt = Field(1, ge=1, le=U32_MAX)

    # A plan built in code (sim.plans.run_plan); not part of the file format.
    _plan_object = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _source(self):
        if (self.plan is None) == (self.planner is None):
            raise ValueError("plan: give exactly one of plan (a plan JSON file) and planner (ring, tree, "
                             "halving-doubling, direct)")
        if self.planner is None:
            for k in ("op", "size_bytes", "chunk_bytes", "ranks"):
                if getattr(self, k) is not None:
                    raise ValueError(f"{k}: only with planner (a plan file gives its own)")
        else:
            if self.size_bytes is None:
                raise ValueError(f"size_bytes: planner = {self.planner!r} needs the collective's size")
            ops = COLLECTIVE_PLANNERS[self.planner]
            if self.op is not None and self.op not in ops:
                raise ValueError(f"op: planner {self.planner!r} builds {', '.join(ops)}, not {self.op!r}")
            if self.ranks is not None and self.hosts is not None and self.ranks != len(self.hosts):
                raise ValueError(f"ranks: {self.ranks} ranks but hosts lists {len(self.hosts)}")
            if self.chunk_bytes is not None and -(-self.size_bytes // self.chunk_bytes) > MAX_PLAN_CHUNKS:
                raise ValueError(f"chunk_bytes: {self.chunk_bytes} bytes cuts size_bytes ({self.size_bytes}) into "
                                 f"more than {MAX_PLAN_CHUNKS:,} chunks; give at least "
                                 f"{-(-self.size_bytes // MAX_PLAN_CHUNKS)} bytes")
        if self.hosts is not None and len(set(self.hosts)) != len(self.hosts):
            raise ValueError(f"hosts: each rank needs its own host, got {self.hosts}")
        return self

    @classmethod
    def of_plan(cls, plan, hosts: list[int], name: str = "collective", start_ps: int = 0, class_: int = 0,
                reduce_bps: int = COLLECTIVE_REDUCE_BPS, send_overhead_ps: int = COLLECTIVE_SEND_OVERHEAD_PS,
                persistent_connections: bool = False, group: str | None = None) -> "CollectiveConfig":
        """A collective running ``plan`` (a :class:`fabriclab.collectives.plan.Plan` built in code);
        ``group``: its communicator group in ccl.parquet."""
        c = cls.model_construct(name=name, hosts=list(hosts), start_ps=start_ps, class_=class_, reduce_bps=reduce_bps,
                                send_overhead_ps=send_overhead_ps, persistent_connections=persistent_connections,
                                group=group)
        c._plan_object = plan
        return c


class OutputsConfig(_Strict):
    flows: StrictBool = True
    links: StrictBool = True
    # Every message with its app, tag, first and last byte times and path.
    messages: StrictBool = True
    # Sample every port's queue bands this often (queues.parquet); off by default.
    queues_every_ps: Optional[Annotated[TimePs, Field(gt=0)]] = None

    _off = field_validator("queues_every_ps", mode="before")(_off_is_none)

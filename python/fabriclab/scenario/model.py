"""The scenario schema: the one contract between fabriclab's parts.

A scenario is a TOML file (or a :class:`Scenario` built in code) validated
here field by field; ``docs/scenario.md`` documents every field. Quantities
carry their unit in their name (``*_ps``, ``*_bytes``, ``*_bps``) and accept
a plain integer in that unit or a string with an explicit unit (``"10Gbps"``).
"""

# No `from __future__ import annotations` in a schema module: see base.py.

import csv
import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal, Optional, Union

from pydantic import (BaseModel, Field, PrivateAttr, StrictBool, StrictFloat, StrictInt, ValidationError, field_validator,
                      model_validator)

from ..util.inputs import read_text
from ..util.toml import tomllib
from . import topology as topo
from .aggregation import AGGREGATION_ALLREDUCE, AggregationConfig, JobAggregationConfig
from .base import (
    U32_MAX,
    WIRE_OVERHEAD_BYTES,
    Delay,
    ScenarioError,
    TrafficClass,
    _off_is_none,
    _Strict,
)
from .fabric import (
    QUEUE_FIELDS,
    RAMP_FIELDS,
    FatTreeTopology,
    GpuClusterTopology,
    LeafSpineTopology,
    LinkEventConfig,
    PfcConfig,
    QueueConfig,
    QueueOverrideConfig,
    RoutingConfig,
    StarTopology,
    SwitchBufferConfig,
    TapLogicConfig,
    TopologyConfig,
    TransportConfig,
)
from .clocks import ClocksConfig, ProbesConfig
from .cloud import CloudConfig
from .faults import FaultConfig
from .llm import LlmJobConfig
from .trace import TraceJobConfig
from .recovery import RecoveryConfig
from .recovery import check_scenario as _check_recovery
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


class Scenario(_Strict):
    name: str = "scenario"
    seed: StrictInt = Field(1, ge=0, lt=2**64)
    backend: Literal["packet", "flow"] = "packet"
    # The flow backend's model of a flow: "tcp" (slow-start rounds, standing-queue estimates,
    # store-and-forward; docs/architecture.md) or "fluid" (max-min rates only, the model before).
    flow_model: Literal["tcp", "fluid"] = "tcp"
    stop_ps: Optional[Annotated[TimePs, Field(gt=0)]] = None
    topology: TopologyConfig = Field(default_factory=StarTopology)
    queue: QueueConfig = Field(default_factory=QueueConfig)
    # Host NIC ports' queues; None: unlimited and never marking (bounded by TCP Small Queues).
    host_queue: Optional[QueueConfig] = None
    queue_overrides: list[QueueOverrideConfig] = Field(default_factory=list)
    pfc: Optional[PfcConfig] = None
    link_events: list[LinkEventConfig] = Field(default_factory=list)
    switch_logic: list[TapLogicConfig] = Field(default_factory=list)
    switch_buffer: Optional[SwitchBufferConfig] = None
    # The accelerators of jobs whose allreduce aggregates in the network.
    aggregation: Optional[AggregationConfig] = None
    transport: TransportConfig = Field(default_factory=TransportConfig)
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    traffic: list[PoissonTrafficConfig] = Field(default_factory=list)
    flows: list[FlowConfig] = Field(default_factory=list)
    flows_csv: Optional[str] = None
    jobs: list[JobConfig] = Field(default_factory=list)
    # LLM training jobs (docs/llm.md): tensor, pipeline and data parallelism.
    llm_jobs: list[LlmJobConfig] = Field(default_factory=list)
    # Jobs replayed from Chakra execution traces (docs/llm.md, "Chakra traces").
    trace_jobs: list[TraceJobConfig] = Field(default_factory=list)
    collectives: list[CollectiveConfig] = Field(default_factory=list)
    # Labelled faults (docs/c4.md), compiled onto job faults and link events.
    faults: list[FaultConfig] = Field(default_factory=list)
    # Detection, isolation and restart of the job (docs/c4-recovery.md).
    recovery: Optional[RecoveryConfig] = None
    # Host clocks (docs/clockwork.md); absent: every clock reads true time.
    clocks: Optional[ClocksConfig] = None
    # The probe mesh (docs/clockwork.md): probes.parquet.
    probes: Optional[ProbesConfig] = None
    # A public cloud (docs/clockwork.md): builds the topology from its provider
    # fabric and its VMs' placement; cloud.parquet.
    cloud: Optional[CloudConfig] = None
    outputs: OutputsConfig = Field(default_factory=OutputsConfig)
    # Written into scenario.resolved.toml by the version that ran it; informative only.
    fabriclab_version: Optional[str] = None

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)

    @model_validator(mode="after")
    def _overrides_inherit(self):
        # An override's unset fields are [queue]'s; the result is checked as a whole.
        for i, o in enumerate(self.queue_overrides):
            merged = {k: getattr(self.queue, k) for k in QUEUE_FIELDS}
            own = {k: getattr(o, k) for k in o.model_fields_set if k in QUEUE_FIELDS}
            # Its own marking (a step or a ramp, "off" included) replaces the one it would inherit.
            if any(k in own for k in ("ecn_threshold_packets", "ecn_threshold_bytes")):
                merged.update(dict.fromkeys(RAMP_FIELDS))
            if any(k in own for k in RAMP_FIELDS):
                merged.update(dict.fromkeys(("ecn_threshold_packets", "ecn_threshold_bytes")))
            merged.update(own)
            try:
                self.queue_overrides[i] = QueueOverrideConfig(**merged, node=o.node, to=o.to)
            except ValidationError as e:
                raise ValueError(f"queue_overrides[{i}]: {e.errors()[0]['msg']}") from None
        return self

    @model_validator(mode="after")
    def _cloud_builds_the_topology(self):
        if self.cloud is None:
            return self
        if "topology" in self.model_fields_set:
            raise ValueError("topology: [cloud] builds the topology (its provider fabric is cloud.fabric, a table "
                             "of kind leaf_spine or fat_tree); drop [topology] or [cloud]")
        if self.clocks is not None and self.clocks.groups:
            raise ValueError("clocks.groups: [cloud] fills the groups from its placement (the VMs of one machine "
                             "share its oscillator); give no groups with [cloud]")
        return self

    @model_validator(mode="after")
    def _collective_names(self):
        seen: dict[str, int] = {}
        for i, c in enumerate(self.collectives):
            if c.name in seen:
                raise ValueError(f"collectives[{i}].name: {c.name!r} is already the name of collectives[{seen[c.name]}]; "
                                 f"give each collective its own name")
            seen[c.name] = i
        graph = [(f"llm_jobs[{i}]", j.name) for i, j in enumerate(self.llm_jobs)]
        graph += [(f"trace_jobs[{i}]", j.name) for i, j in enumerate(self.trace_jobs)]
        named: dict[str, str] = {}
        for where, name in graph:
            if name in named:
                raise ValueError(f"{where}.name: {name!r} is already the name of {named[name]}; give each job its own")
            named[name] = where
        return self

    @model_validator(mode="after")
    def _ramp_needs_packets(self):
        # The flow backend's tcp model reads step thresholds only (docs/architecture.md): a RED
        # ramp there would silently mean "never marks". Refused rather than misread.
        if self.backend != "flow" or self.flow_model != "tcp":
            return self
        queues = [("queue", self.queue), ("host_queue", self.host_queue)]
        queues += [(f"queue_overrides[{i}]", o) for i, o in enumerate(self.queue_overrides)]
        for name, q in queues:
            if q is not None and q.ecn_kmin_bytes is not None:
                raise ValueError(f"{name}.ecn_kmin_bytes: a RED marking ramp is modelled by the packet backend only "
                                 f"(the flow backend's tcp model reads ecn_threshold_packets/_bytes); use "
                                 f'backend = "packet", a step threshold, or flow_model = "fluid"')
        return self

    @model_validator(mode="after")
    def _packet_rocket_host_clocks_exist(self):
        clock = self.transport.packet_rocket_clock
        if clock in ("host", "estimated") and self.clocks is None:
            raise ValueError(f'transport.packet_rocket_clock: "{clock}" reads each host\'s [clocks] reading, and '
                             f'this scenario has no [clocks]; add a [clocks] section, or use "ideal" (true time, '
                             f'what hosts read without [clocks])')
        if self.transport.packet_rocket_correction is not None and self.clocks is None:
            raise ValueError('transport.packet_rocket_correction: corrects each host\'s [clocks] reading, and this '
                             'scenario has no [clocks]; add a [clocks] section or drop the table')
        return self

    @model_validator(mode="after")
    def _transport_the_flow_backend_models(self):
        # Refused rather than run as something else: the flow backend has no packets (docs/scenario.md,
        # "[transport]"). Settings it merely does not read are listed by ignored_settings().
        if self.backend != "flow":
            return self
        if self.transport.cc == "dcqcn":
            raise ValueError('transport.cc: "dcqcn" (RoCE\'s rate control, paced packets and CNPs) is modelled by the '
                             'packet backend only; use backend = "packet", or cc = "dctcp" or "newreno" with the flow '
                             'backend')
        if self.transport.cc == "cubic":
            raise ValueError('transport.cc: "cubic" (RFC 9438\'s window function of time since the last loss) is '
                             'modelled by the packet backend only; use backend = "packet", or cc = "newreno" or '
                             '"dctcp" with the flow backend')
        if self.transport.packet_rocket_threshold_ps is not None:
            raise ValueError('transport.packet_rocket_threshold_ps: Packet Rocket holds a flow\'s packets at its '
                             'sender, which the flow backend has none of; use backend = "packet", or leave the '
                             'threshold unset (off)')
        if self.transport.handshake:
            raise ValueError('transport.handshake: the SYN / SYN-ACK exchange is modelled by the packet backend only '
                             '(the flow backend has no packets); use backend = "packet", or handshake = false')
        return self

    def ignored_settings(self) -> list[str]:
        """Settings this scenario gives (other than their defaults) that its
        backend does not read, one line each: they are accepted, since
        refusing them would break scenarios shared between the backends
        (sweeps over ``backend``), and the run says so (summary.json's
        ``ignored``, ``validate``, the start of ``run``)."""
        notes = []
        tr, default_tr = self.transport, TransportConfig()

        def differs(names, obj, default):
            return [n for n in names if getattr(obj, n) != getattr(default, n)]

        if tr.cc != "dcqcn" and tr.dcqcn != default_tr.dcqcn:
            notes.append(f"transport.dcqcn: DCQCN's parameters are read with cc = \"dcqcn\" only (cc is {tr.cc!r})")
        if tr.cc != "cubic" and tr.cubic_fast_convergence != default_tr.cubic_fast_convergence:
            notes.append(f"transport.cubic_fast_convergence: read with cc = \"cubic\" only (cc is {tr.cc!r})")
        if self.backend == "packet":
            if self.flow_model != "tcp":
                notes.append(f"flow_model: {self.flow_model!r} is the flow backend's model; the packet backend "
                             f"simulates every packet")
            return notes
        for n in differs(("initial_rto_ps", "dupack_threshold", "dctcp_g", "dctcp_initial_alpha"), tr, default_tr):
            notes.append(f"transport.{n}: the flow backend has no retransmissions, duplicate ACKs or DCTCP window "
                         f"(its tcp model: slow-start rounds and standing queues)")
        queues = [("queue", self.queue), ("host_queue", self.host_queue)]
        queues += [(f"queue_overrides[{i}]", o) for i, o in enumerate(self.queue_overrides)]
        if self.flow_model == "fluid":
            for n in differs(("init_cwnd_packets", "tsq_limit_bytes"), tr, default_tr):
                notes.append(f"transport.{n}: the fluid flow model has no windows or NIC queues (max-min rates only)")
            given = [name for name, q in queues if q is not None and (name != "queue" or q != QueueConfig())]
            if given:
                notes.append(f"{', '.join(given)}: the fluid flow model reads no queue limits or thresholds "
                             f"(max-min rates only)")
        else:
            for name, q in queues:
                if q is not None and q.discipline == "fq":
                    notes.append(f"{name}.discipline: \"fq\" is read as \"fifo\" by the flow backend (its flows "
                                 f"share a port by max-min rates)")
        return notes

    @model_validator(mode="after")
    def _a_packet_fits(self):
        # A queue that cannot hold one full segment drops every packet and the run never ends.
        full = self.transport.mss_bytes + WIRE_OVERHEAD_BYTES
        queues = [("queue", self.queue), ("host_queue", self.host_queue)]
        queues += [(f"queue_overrides[{i}]", o) for i, o in enumerate(self.queue_overrides)]
        if self.cloud is not None:
            queues.append(("cloud.hypervisor_queue", self.cloud.hypervisor_queue))
        for name, q in queues:
            if q is not None and q.limit_bytes is not None and q.limit_bytes < full:
                raise ValueError(f"{name}.limit_bytes: {q.limit_bytes} bytes cannot hold one full segment "
                                 f"({full} wire bytes: transport.mss_bytes + {WIRE_OVERHEAD_BYTES} of headers, "
                                 f"preamble and gap); give at least {full}")
        b = self.switch_buffer
        # An empty buffer admits a frame of w bytes when it fits (w <= bytes) and the dynamic
        # threshold allows it (w <= alpha * bytes).
        if b is not None and min(b.bytes, b.alpha * b.bytes) < full:
            raise ValueError(f"switch_buffer.bytes: {b.bytes} bytes at alpha {b.alpha} cannot admit one full segment "
                             f"({full} wire bytes) even when empty; give bytes and alpha x bytes of at least {full}")
        p = self.pfc
        # A lossless packet is admitted while its ingress holds at most xoff + headroom bytes.
        if p is not None and p.headroom_bytes is not None and p.xoff_bytes + p.headroom_bytes < full:
            raise ValueError(f"pfc.headroom_bytes: xoff_bytes + headroom_bytes = {p.xoff_bytes + p.headroom_bytes} "
                             f"bytes cannot hold one full segment ({full} wire bytes): every lossless packet would "
                             f"be dropped; give at least {full} together")
        if self.pfc is not None and self.backend != "packet":
            raise ValueError('pfc: the flow backend has no queues to pause; PFC needs backend = "packet"')
        if self.switch_buffer is not None and self.backend != "packet":
            raise ValueError('switch_buffer: the flow backend has no queues; needs backend = "packet"')
        if self.pfc is not None and self.pfc.xoff_fraction is not None and self.switch_buffer is None:
            raise ValueError("pfc.xoff_fraction: a fraction of the free shared buffer needs [switch_buffer]")
        a = self.aggregation
        if a is not None and a.memory_bytes < a.vector_bytes + 16:
            raise ValueError(f"aggregation.memory_bytes: {a.memory_bytes} bytes cannot hold one aggregation packet "
                             f"({a.vector_bytes} + 16 header bytes); give at least {a.vector_bytes + 16}")
        aggregating = [i for i, j in enumerate(self.jobs) if j.allreduce in AGGREGATION_ALLREDUCE]
        if a is not None and a.functional and self.backend != "packet":
            raise ValueError('aggregation.functional: the flow backend moves no values; needs backend = "packet"')
        if len(aggregating) > 65536:
            raise ValueError("jobs: at most 65536 jobs aggregate in the network (the header's JID is 16 bits)")
        if self.switch_logic and self.backend != "packet":
            raise ValueError('switch_logic: the flow backend has no packets for logic to see; needs backend = "packet"')
        for i, f in enumerate(self.faults):
            if f.loss is not None and self.backend != "packet":
                raise ValueError(f'faults[{i}].loss: the flow backend has no packets to lose; needs backend = "packet"')
        if self.recovery is not None:
            _check_recovery(self)
        for i, e in enumerate(self.link_events):
            if e.action == "loss" and self.backend != "packet":
                raise ValueError(f'link_events[{i}].action: the flow backend has no packets to lose; "loss" '
                                 f'needs backend = "packet"')
        return self

    @field_validator("topology", mode="before")
    @classmethod
    def _star_by_default(cls, v):
        if isinstance(v, dict) and "kind" not in v:
            return {"kind": "star", **v}
        return v

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path: str | Path) -> "Scenario":
        path = Path(path)
        if not path.exists():
            raise ScenarioError(f"{path}: no such scenario file")
        text = read_text(path, "", "scenario file")
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ScenarioError(f"{path}: malformed TOML: {e}") from None
        s = cls.from_dict(raw, source=str(path))
        s._base_dir = path.parent.resolve()
        return s

    @classmethod
    def from_dict(cls, raw: dict, source: str = "scenario") -> "Scenario":
        try:
            return cls.model_validate(raw)
        except ValidationError as e:
            raise ScenarioError(format_validation_error(e, source)) from None

    @classmethod
    def default(cls) -> "Scenario":
        """The built-in default scenario (``fabriclab/data/default.toml``)."""
        text = resources.files("fabriclab.data").joinpath("default.toml").read_text()
        return cls.from_dict(tomllib.loads(text), source="default scenario")

    def replace(self, **changes) -> "Scenario":
        """A copy with top-level fields changed, validated again."""
        data = self.model_dump(by_alias=True)
        if self.cloud is not None:
            data.pop("topology")  # [cloud] builds it (its default here would be refused)
        data.update(changes)
        s = Scenario.from_dict(data)
        s._base_dir = self._base_dir
        return s

    # ------------------------------------------------------------------ resolving
    def build_cloud(self):
        """The cloud of ``[cloud]`` (its topology and placement); None without it."""
        if self.cloud is None:
            return None
        from .cloud import build

        return build(self.cloud, self.seed)

    def all_traffic(self) -> list[PoissonTrafficConfig]:
        """``[[traffic]]`` and, with ``[cloud]``, the noisy neighbours' Poisson
        traffic (after the scenario's own entries)."""
        c = self.cloud
        if c is None:
            return list(self.traffic)
        noisy = self.build_cloud().noisy_vms()
        if len(noisy) < 2:
            return list(self.traffic)
        duration = c.neighbour_duration_ps
        if duration is None:
            duration = self.probes.start_ps + self.probes.duration_ps if self.probes else 10**12
        return [*self.traffic, PoissonTrafficConfig.model_validate(
            {"load": c.neighbour_load, "cdf": c.neighbour_cdf, "start_ps": c.neighbour_start_ps,
             "duration_ps": duration, "hosts": noisy, "class": c.neighbour_class, "tag": "neighbours"})]

    def all_queue_overrides(self) -> list[QueueOverrideConfig]:
        """``[[queue_overrides]]`` and, with ``[cloud]``, each machine's
        hypervisor queue (its node's port toward its ToR), before them so that
        the scenario's own overrides win."""
        if self.cloud is None:
            return list(self.queue_overrides)
        cl = self.build_cloud()
        q = {k: getattr(self.cloud.hypervisor_queue, k) for k in QUEUE_FIELDS}
        own = [QueueOverrideConfig(**q, node=m, to=tor) for m, tor in zip(cl.machine_names, cl.tor_names)]
        return own + list(self.queue_overrides)

    def build_topology(self) -> topo.TopologyData:
        if self.cloud is not None:
            return self.build_cloud().topology
        t = self.topology
        try:
            if isinstance(t, StarTopology):
                return topo.star(t.hosts, t.link_rate_bps, t.link_delay_ps)
            if isinstance(t, LeafSpineTopology):
                return topo.leaf_spine(
                    t.leaves, t.hosts_per_leaf, t.spines, t.link_rate_bps, t.link_delay_ps,
                    t.oversubscription, t.spine_link_rate_bps, t.host_ports,
                )
            if isinstance(t, FatTreeTopology):
                return topo.fat_tree(t.k, t.link_rate_bps, t.link_delay_ps, t.host_ports)
            if isinstance(t, GpuClusterTopology):
                return topo.gpu_cluster(t.leaves, t.servers_per_leaf, t.gpus_per_server, t.spines, t.nic_rate_bps,
                                        t.nvlink_bps, t.link_delay_ps, t.nvlink_delay_ps, t.spine_link_rate_bps)
            return topo.from_file(self._resolve_path(t.path))
        except topo.TopologyError as e:
            raise ScenarioError(str(e)) from None

    def flow_label(self, i: int) -> str:
        """How the user wrote explicit flow ``i`` (the core numbers ``[[flows]]``, then the CSV's rows)."""
        n = len(self.flows)
        return f"flows[{i}]" if i < n else f"flows_csv row {i - n + 1}"

    def explicit_flows(self, t: topo.TopologyData) -> list[FlowConfig]:
        """The scenario's own flows: ``flows`` and those of ``flows_csv``."""
        flows = list(self.flows)
        if self.flows_csv:
            text = read_text(self._resolve_path(self.flows_csv), "flows_csv", "flows CSV file")
            lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
            reader = csv.DictReader(lines)
            rows = list(reader)
            # The header names the columns: each one a field of [[flows]] (a blank name holds no values).
            columns = [f.alias or n for n, f in FlowConfig.model_fields.items()]
            unknown = [c for c in (reader.fieldnames or []) if c.strip() and c.strip() not in columns]
            if unknown:
                raise ScenarioError(f"flows_csv: unknown column {unknown[0].strip()!r} in the header "
                                    f"(allowed columns: {', '.join(columns)})")
            for i, r in enumerate(rows):
                if None in r:
                    raise ScenarioError(f"flows_csv row {i + 1}: more values than the header has columns "
                                        f"(columns: {', '.join(k for k in r if k is not None)})")
                r = {k.strip(): v.strip() for k, v in r.items() if v not in (None, "")}
                if "path" in r:
                    r["path"] = r["path"].split()
                for k in ("src", "dst", "class"):
                    if k in r and r[k].lstrip("-").isdigit():
                        r[k] = int(r[k])
                for k in ("size_bytes", "start_ps"):
                    if k in r and r[k].isdigit():
                        r[k] = int(r[k])
                try:
                    flows.append(FlowConfig.model_validate(r))
                except ValidationError as e:
                    raise ScenarioError(format_validation_error(e, f"flows_csv row {i + 1}")) from None
        return flows

    def _file_refs(self, d: dict):
        """(table, key) of every entry of ``d`` (this scenario dumped by
        alias) that names a file: topology path, CDFs, flows CSV, profiles, plans."""
        from .cdfs import BUILTIN as CDFS
        from .profiles import BUILTIN as PROFILES

        if d.get("topology", {}).get("kind") == "file":
            yield d["topology"], "path"
        yield from ((tr, "cdf") for tr in d["traffic"] if tr["cdf"] not in CDFS)
        if d.get("cloud") and d["cloud"]["neighbour_cdf"] not in CDFS:
            yield d["cloud"], "neighbour_cdf"
        if d.get("flows_csv"):
            yield d, "flows_csv"
        for j in d["jobs"]:
            if j["profile"] not in PROFILES:
                yield j, "profile"
            if j["allreduce"] not in JOB_ALLREDUCE:
                yield j, "allreduce"
        for c in d.get("collectives", []):
            if c.get("plan") is not None:
                yield c, "plan"
        yield from ((t, "path") for t in d.get("trace_jobs", []))

    def _resolve_path(self, name: str) -> Path:
        p = Path(name)
        return p if p.is_absolute() else self._base_dir / p

    def input_files(self) -> list[Path]:
        """The files this scenario reads besides itself, resolved against its folder."""
        d = self.model_dump(by_alias=True)
        return [self._resolve_path(t[k]) for t, k in self._file_refs(d)]

    def resolved_dict(self) -> dict:
        """Every field with its default filled in (None fields omitted), for
        ``scenario.resolved.toml``."""
        from .._version import __version__

        dump = self.model_dump(by_alias=True, exclude_none=True)
        dump.pop("fabriclab_version", None)  # the version that wrote it; this one writes its own
        if self.cloud is not None:
            dump.pop("topology")  # [cloud] builds it
        d = {"fabriclab_version": __version__, **dump}
        # Queue limits and thresholds default to a value, so "none" must be
        # written explicitly (as "off") for the resolved file to mean the same.
        for table in [d["queue"], d.get("host_queue"), *d.get("queue_overrides", []),
                      d.get("cloud", {}).get("hypervisor_queue")]:
            for k in ("limit_bytes", "limit_packets", "ecn_threshold_bytes", "ecn_threshold_packets"):
                if table is not None:
                    table.setdefault(k, "off")
        # Files are named by absolute paths, so the resolved file runs the
        # same from wherever it is written.
        for table, key in self._file_refs(d):
            table[key] = str(self._resolve_path(table[key]))
        return d

    def arrivals_end_ps(self) -> int:
        """When the last scheduled arrival can happen (progress target)."""
        ends = [tr.start_ps + tr.duration_ps for tr in self.all_traffic()]
        ends += [f.start_ps for f in self.flows]
        from .profiles import p100_iteration_ps

        ends += [c.start_ps for c in self.collectives]
        if self.probes is not None:
            ends.append(self.probes.start_ps + self.probes.duration_ps)
        ends += [j.start_ps + j.iterations * (j.compute_ps or p100_iteration_ps(j.profile) or 0)
                 + (j.iterations - 1) // (j.checkpoint_iterations or j.iterations) * (j.checkpoint_ps or 0)
                 for j in self.jobs]
        end = max(ends, default=0)
        return min(end, self.stop_ps) if self.stop_ps else end


def _allowed_fields(model: type[BaseModel], loc: tuple) -> list[str]:
    """Names a model at `loc` accepts, for 'unknown field' messages."""
    cur: type[BaseModel] | None = model
    for part in loc[:-1]:
        if cur is None or isinstance(part, int):
            continue
        f = cur.model_fields.get(part)
        if f is None:
            f = next((x for x in cur.model_fields.values() if x.alias == part), None)
        if f is None:
            return []
        ann = f.annotation
        cur = None
        for cand in _model_candidates(ann):
            cur = cand
            break
    if cur is None:
        return []
    return [f.alias or n for n, f in cur.model_fields.items()]


def _model_candidates(ann):
    import typing

    if isinstance(ann, type) and issubclass(ann, BaseModel):
        yield ann
        return
    for a in typing.get_args(ann):
        yield from _model_candidates(a)


# What a strict field takes, by pydantic's error type (quantities with units are not among them: see units.py).
_TOML_TYPES = {"bool_type": "a boolean (true or false, unquoted)", "int_type": "an integer (e.g. 8, unquoted)",
               "float_type": "a number (e.g. 0.5 or 1, unquoted)"}


def _toml_type_of(v) -> str:
    """A value as TOML calls its type, for 'must be ..., got ...'."""
    if isinstance(v, bool):
        return f"the boolean {str(v).lower()}"
    if isinstance(v, str):
        return f"the string {v!r}"
    if isinstance(v, float):
        return f"the float {v!r}"
    if isinstance(v, int):
        return f"the integer {v}"
    if isinstance(v, (list, tuple)):
        return "an array"
    if isinstance(v, dict):
        return "a table"
    return f"a {type(v).__name__}"


def format_validation_error(e: ValidationError, source: str) -> str:
    lines = []
    for err in e.errors():
        loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x in ("star", "leaf_spine", "fat_tree", "file")))
        where = ".".join(f"[{x}]" if isinstance(x, int) else str(x) for x in loc).replace(".[", "[")
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            allowed = _allowed_fields(Scenario, err["loc"])
            msg = "unknown field" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
        elif err["type"] == "missing":
            msg = "required field is missing"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
            # A model's rule about one of its fields ("min_rto_ps (...) must ...") joins the field to the path.
            m = re.match(r"([a-z_][a-z_0-9.]*): (.*)", msg, re.S)
            if m:
                where = f"{where}.{m.group(1)}" if where else m.group(1)
                msg = m.group(2)
        elif err["type"] in _TOML_TYPES:
            # Strict types: a value of another TOML type is refused, never read as this one ("yes" as true).
            msg = f"must be {_TOML_TYPES[err['type']]}, got {_toml_type_of(err.get('input'))}"
        if err["type"] == "finite_number":
            msg = "must be a finite number (inf and nan are not allowed)"
        lines.append(f"{where or '(top level)'}: {msg}")
    return f"{source}: " + ("; ".join(lines) if len(lines) == 1 else "\n  " + "\n  ".join(lines))

"""The scenario schema: the one contract between fabriclab's parts.

A scenario is a TOML file (or a :class:`Scenario` built in code) validated
here field by field; ``docs/scenario.md`` documents every field. Quantities
carry their unit in their name (``*_ps``, ``*_bytes``, ``*_bps``) and accept
a plain integer in that unit or a string with an explicit unit (``"10Gbps"``).

Here: :class:`Scenario`, its top-level fields, the rules across its sections,
the settings its backend ignores, and loading. Its sections are their own
modules (``workloads.py``, ``fabric.py``, the apps'); what it resolves to (the
topology, traffic, flows, the resolved file) is ``resolving.py``'s mixin; the
errors' text is ``messages.py``'s. Every schema name is still imported from
here (and from ``fabriclab.scenario``).
"""

# No `from __future__ import annotations` in a schema module: see base.py.

from importlib import resources
from pathlib import Path
from typing import Annotated, Literal, Optional

from pydantic import (
    Field,
    PrivateAttr,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from ..util.inputs import read_text
from ..util.toml import tomllib
from .aggregation import AGGREGATION_ALLREDUCE, AggregationConfig, JobAggregationConfig
from .base import (
    U32_MAX,
    WIRE_OVERHEAD_BYTES,
    Delay,
    ScenarioError,
    TrafficClass,
    _Strict,
)
from .clocks import ClocksConfig, ProbesConfig
from .cloud import CloudConfig
from .fabric import (
    QUEUE_FIELDS,
    RAMP_FIELDS,
    FatTreeTopology,
    GpuClusterTopology,
    LeafSpineTopology,
    LinkEventConfig,
    NodeOverrideConfig,
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
from .faults import FaultConfig
from .llm import LlmJobConfig
from .messages import format_validation_error
from .recovery import RecoveryConfig
from .recovery import check_scenario as _check_recovery
from .resolving import ScenarioResolving
from .trace import TraceJobConfig
from .units import RateBps, SizeBytes, TimePs
from .workloads import (
    COLLECTIVE_PLANNERS,
    COLLECTIVE_REDUCE_BPS,
    COLLECTIVE_SEND_OVERHEAD_PS,
    JOB_ALLREDUCE,
    MAX_PLAN_CHUNKS,
    CollectiveConfig,
    FlowConfig,
    JobConfig,
    OutputsConfig,
    PoissonTrafficConfig,
    QpGroupConfig,
    QpRepathConfig,
)

# The schema's names, read through ``fabriclab.scenario`` (its ``__getattr__``) as well as from here.
__all__ = [
    "AGGREGATION_ALLREDUCE", "COLLECTIVE_PLANNERS", "COLLECTIVE_REDUCE_BPS", "COLLECTIVE_SEND_OVERHEAD_PS",
    "JOB_ALLREDUCE", "MAX_PLAN_CHUNKS", "QUEUE_FIELDS", "RAMP_FIELDS", "U32_MAX", "WIRE_OVERHEAD_BYTES",
    "AggregationConfig", "ClocksConfig", "CloudConfig", "CollectiveConfig", "Delay", "FatTreeTopology", "FaultConfig",
    "FlowConfig", "GpuClusterTopology", "JobAggregationConfig", "JobConfig", "LeafSpineTopology", "LinkEventConfig",
    "LlmJobConfig", "NodeOverrideConfig", "OutputsConfig", "PfcConfig", "PoissonTrafficConfig", "ProbesConfig", "QpGroupConfig",
    "QpRepathConfig", "QueueConfig", "QueueOverrideConfig", "RateBps", "RecoveryConfig", "RoutingConfig", "Scenario",
    "ScenarioError", "SizeBytes", "StarTopology", "SwitchBufferConfig", "TapLogicConfig", "TimePs", "TopologyConfig",
    "TraceJobConfig", "TrafficClass", "TransportConfig", "format_validation_error",
]


class Scenario(_Strict, ScenarioResolving):
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
    # Per switch: a forwarding capacity (packets per second), packet backend.
    node_overrides: list[NodeOverrideConfig] = Field(default_factory=list)
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
        for n in differs(("initial_rto_ps", "dupack_threshold", "dctcp_g", "dctcp_initial_alpha", "sack"), tr,
                         default_tr):
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
        if self.node_overrides and self.backend != "packet":
            raise ValueError('node_overrides[0].forwarding_pps: a per-packet forwarding capacity needs backend = '
                             '"packet" (the flow backend has no packets to serve one at a time)')
        if self.cloud is not None and self.cloud.hypervisor_pps is not None and self.backend != "packet":
            raise ValueError('cloud.hypervisor_pps: the virtual switch\'s per-packet capacity needs backend = '
                             '"packet" (the flow backend has no packets to serve one at a time)')
        if self.pfc is not None and self.node_overrides:
            raise ValueError("node_overrides: a node's forwarding capacity cannot be combined with [pfc]: its CPU "
                             "backlog drops at its tail (not lossless) and PFC does not see that queue, so lossless "
                             "classes would lose packets there; give one of node_overrides or [pfc]")
        if self.pfc is not None and self.cloud is not None and self.cloud.hypervisor_pps is not None:
            raise ValueError("cloud.hypervisor_pps: the virtual switch's CPU cannot be combined with [pfc]: its "
                             "backlog drops at its tail (not lossless) and PFC does not see that queue, so lossless "
                             "classes would lose packets there; give one of cloud.hypervisor_pps or [pfc]")
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
            raise ScenarioError(format_validation_error(e, source, Scenario)) from None

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

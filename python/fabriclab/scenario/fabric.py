"""The fabric sections of the scenario schema (topology builders, queues,
PFC, the shared switch buffer, switch logic, transport, routing, timed link
events) and their part of the core's JSON (:func:`fabric_core`)."""

# No `from __future__ import annotations` in a schema module: see base.py.

from typing import Annotated, Literal, Optional, Union

from pydantic import Field, StrictBool, StrictFloat, StrictInt, field_validator, model_validator

from . import topology as topo
from .base import (
    U32_MAX,
    WIRE_OVERHEAD_BYTES,
    Delay,
    PositiveRate,
    ScenarioError,
    _off_is_none,
    _Strict,
)
from .clocks import SignedTimePs
from .units import RateBps, SizeBytes, TimePs


class StarTopology(_Strict):
    kind: Literal["star"] = "star"
    hosts: StrictInt = Field(8, ge=2, le=U32_MAX)
    link_rate_bps: PositiveRate = 10_000_000_000
    link_delay_ps: Delay = 10_000_000


class LeafSpineTopology(_Strict):
    kind: Literal["leaf_spine"]
    leaves: StrictInt = Field(4, ge=1, le=U32_MAX)
    hosts_per_leaf: StrictInt = Field(8, ge=1, le=U32_MAX)
    spines: StrictInt = Field(4, ge=1, le=U32_MAX)
    link_rate_bps: PositiveRate = 10_000_000_000
    link_delay_ps: Delay = 1_000_000
    oversubscription: StrictFloat = Field(1.0, gt=0)
    spine_link_rate_bps: Optional[PositiveRate] = None
    # 2: dual-port hosts, one port on each leaf of a pair.
    host_ports: StrictInt = Field(1, ge=1, le=2)

    @model_validator(mode="after")
    def _spine_rate(self):
        if self.spine_link_rate_bps is None:
            rate = topo.leaf_spine_uplink_bps(self.hosts_per_leaf, self.spines, self.link_rate_bps, self.oversubscription)
            if not 1 <= rate < 2**64:
                raise ValueError(f"oversubscription: {self.oversubscription} gives a leaf-spine link rate of {rate} bps "
                                 f"(hosts_per_leaf x link_rate_bps / (spines x oversubscription)); it must come to "
                                 f"1..{2**64 - 1} bps")
        return self


class FatTreeTopology(_Strict):
    kind: Literal["fat_tree"]
    k: StrictInt = Field(4, ge=2, le=U32_MAX)
    link_rate_bps: PositiveRate = 10_000_000_000
    link_delay_ps: Delay = 1_000_000
    # 2: dual-port hosts, one port on each edge switch of a pair.
    host_ports: StrictInt = Field(1, ge=1, le=2)

    @field_validator("k")
    @classmethod
    def _even(cls, v: int) -> int:
        if v % 2:
            raise ValueError("must be even")
        return v


class GpuClusterTopology(_Strict):
    """GPU servers on a leaf-spine fabric (docs/llm.md): a NIC per GPU,
    an NVSwitch per server. Defaults: DGX H100-like, 8 GPUs with
    ConnectX-7 400 Gb/s NICs and NVLink 4 at 900 GB/s per GPU, both
    directions together (NVIDIA DGX H100 datasheet), so 450 GB/s each way."""

    kind: Literal["gpu_cluster"]
    leaves: StrictInt = Field(2, ge=1, le=U32_MAX)
    servers_per_leaf: StrictInt = Field(2, ge=1, le=U32_MAX)
    gpus_per_server: StrictInt = Field(8, ge=1, le=U32_MAX)
    spines: StrictInt = Field(2, ge=1, le=U32_MAX)
    nic_rate_bps: PositiveRate = 400_000_000_000
    nvlink_bps: PositiveRate = 3_600_000_000_000
    link_delay_ps: Delay = 1_000_000
    nvlink_delay_ps: Delay = 500_000
    spine_link_rate_bps: Optional[PositiveRate] = None


class FileTopology(_Strict):
    kind: Literal["file"]
    path: str


TopologyConfig = Annotated[
    Union[StarTopology, LeafSpineTopology, FatTreeTopology, GpuClusterTopology, FileTopology], Field(discriminator="kind")
]


RAMP_FIELDS = ("ecn_kmin_bytes", "ecn_kmax_bytes", "ecn_pmax")


class QueueConfig(_Strict):
    discipline: Literal["fifo", "prio", "fq"] = "fifo"
    bands: StrictInt = Field(3, ge=1, le=8)
    priomap: list[StrictInt] = Field(default_factory=lambda: [0, 1, 2, 2, 2, 2, 2, 2], min_length=8, max_length=8)
    limit_bytes: Optional[Annotated[SizeBytes, Field(gt=0)]] = None
    limit_packets: Optional[StrictInt] = Field(1000, gt=0, lt=2**64)
    ecn_threshold_bytes: Optional[Annotated[SizeBytes, Field(ge=0)]] = None
    ecn_threshold_packets: Optional[StrictInt] = Field(65, ge=0, lt=2**64)
    # RED's ramp on the band's bytes (DCQCN's switches); beside a step given explicitly.
    ecn_kmin_bytes: Optional[Annotated[SizeBytes, Field(ge=0)]] = None
    ecn_kmax_bytes: Optional[Annotated[SizeBytes, Field(gt=0)]] = None
    ecn_pmax: Optional[StrictFloat] = Field(None, gt=0, le=1)

    @model_validator(mode="before")
    @classmethod
    def _ramp_without_default_step(cls, data):
        # With a ramp, the step's default (65 packets) does not apply; a step given as well marks too.
        if isinstance(data, dict) and any(_off_is_none(data.get(k)) is not None for k in RAMP_FIELDS):
            data = {"ecn_threshold_packets": None, **data}
        return data

    _off = field_validator(
        "limit_bytes", "limit_packets", "ecn_threshold_bytes", "ecn_threshold_packets", *RAMP_FIELDS, mode="before"
    )(_off_is_none)

    @model_validator(mode="after")
    def _bands(self):
        bad = [b for b in self.priomap if not 0 <= b < self.bands]
        if bad:
            raise ValueError(f"priomap: every band must be within 0..{self.bands - 1} (bands = {self.bands}), got {bad}")
        given = [k for k in RAMP_FIELDS if getattr(self, k) is not None]
        if given and len(given) < len(RAMP_FIELDS):
            missing = [k for k in RAMP_FIELDS if k not in given]
            raise ValueError(f"{missing[0]}: a RED ramp needs all of {', '.join(RAMP_FIELDS)}; got only {', '.join(given)}")
        if given and self.ecn_kmin_bytes >= self.ecn_kmax_bytes:
            raise ValueError(f"ecn_kmax_bytes: must exceed ecn_kmin_bytes ({self.ecn_kmin_bytes}), got {self.ecn_kmax_bytes}")
        return self


QUEUE_FIELDS = ("discipline", "bands", "priomap", "limit_bytes", "limit_packets", "ecn_threshold_bytes",
                "ecn_threshold_packets", "ecn_kmin_bytes", "ecn_kmax_bytes", "ecn_pmax")


class QueueOverrideConfig(QueueConfig):
    """A queue discipline for the egress ports of one node (``node``) or of
    one link direction (``node`` -> ``to``); fields not given are the
    ``[queue]`` section's."""
    node: str
    to: Optional[str] = None


class NodeOverrideConfig(_Strict):
    """Settings of one switch (``node``), packet backend: a forwarding
    capacity. Every packet entering the node, over any port, waits for its
    one processor (FIFO, ``1 / forwarding_pps`` each) before its egress
    queue; at most ``forwarding_queue_packets`` are in the node, the one in
    service included (drop-tail). Later entries for one node win."""
    node: str
    forwarding_pps: StrictInt = Field(gt=0, le=10**12)
    # Linux's net.core.netdev_max_backlog default (1000 packets).
    forwarding_queue_packets: StrictInt = Field(1000, ge=1, lt=2**64)


class PfcConfig(_Strict):
    """Priority flow control (IEEE 802.1Qbb) at every switch, packet backend."""
    classes: list[StrictInt] = Field(min_length=1, max_length=8, description="lossless traffic classes")
    xoff_bytes: Annotated[SizeBytes, Field(gt=0)] = 100_000
    xon_bytes: Annotated[SizeBytes, Field(ge=0)] = 50_000
    # None: twice the largest link's bandwidth-delay product plus two full frames.
    headroom_bytes: Optional[Annotated[SizeBytes, Field(ge=0)]] = None
    pause_quanta: StrictInt = Field(65535, ge=1, le=65535)
    # Dynamic XOFF: the smaller of xoff_bytes and this fraction of the switch's
    # free shared buffer (needs [switch_buffer]).
    xoff_fraction: Optional[StrictFloat] = Field(None, gt=0, le=1)

    @model_validator(mode="after")
    def _check(self):
        bad = [c for c in self.classes if not 0 <= c <= 7]
        if bad:
            raise ValueError(f"classes: traffic classes are 0..7, got {bad}")
        if len(set(self.classes)) != len(self.classes):
            raise ValueError(f"classes: each class once, got {self.classes}")
        if self.xon_bytes > self.xoff_bytes:
            raise ValueError(f"xon_bytes: {self.xon_bytes} must not exceed xoff_bytes ({self.xoff_bytes})")
        return self


def _core_queue(q: QueueConfig) -> dict:
    return {k: getattr(q, k) for k in QUEUE_FIELDS}


class SwitchBufferConfig(_Strict):
    """A buffer shared by each switch's egress queues with Choudhury and
    Hahne's dynamic threshold: a queue may grow while it holds at most
    ``alpha`` times the switch's free buffer (packet backend)."""
    bytes: Annotated[SizeBytes, Field(gt=0)]
    alpha: StrictFloat = Field(1.0, gt=0)


class TapLogicConfig(_Strict):
    """Switch logic that counts the packets of one class a switch receives,
    mirrors each to its port toward ``mirror_to`` (a neighbour), and absorbs
    them instead of forwarding when ``absorb`` (packet backend)."""
    kind: Literal["tap"]
    node: str
    class_: StrictInt = Field(0, ge=0, le=7, alias="class")
    mirror_to: Optional[str] = None
    absorb: StrictBool = False


class DcqcnConfig(_Strict):
    """DCQCN's parameters (docs/scenario.md); defaults: the ns-3 HPCC repository's."""
    g: StrictFloat = Field(1 / 16, gt=0, le=1)
    alpha_interval_ps: Annotated[TimePs, Field(gt=0)] = 55_000_000
    decrease_interval_ps: Annotated[TimePs, Field(gt=0)] = 4_000_000
    increase_interval_ps: Annotated[TimePs, Field(gt=0)] = 1_500_000_000
    fast_recovery_steps: StrictInt = Field(5, ge=0, le=U32_MAX)
    rate_ai_bps: Annotated[RateBps, Field(gt=0)] = 5_000_000
    rate_hai_bps: Annotated[RateBps, Field(gt=0)] = 50_000_000
    min_rate_bps: Annotated[RateBps, Field(gt=0)] = 100_000_000
    clamp_target: StrictBool = False
    cnp_interval_ps: Annotated[TimePs, Field(ge=0)] = 50_000_000


class CorrectionPieceConfig(_Strict):
    """One linear piece of a host's clock correction (Packet Rocket's "estimated" clocks): from the host's clock
    reading ``from_local_ps`` on (until its next piece's), correction = offset_ps + drift_ppm x (L - from) / 1e6,
    and the corrected reading is L - correction."""

    host: StrictInt = Field(ge=0, le=U32_MAX)
    from_local_ps: SignedTimePs
    offset_ps: SignedTimePs
    drift_ppm: StrictFloat = Field(ge=-2000.0, le=2000.0, allow_inf_nan=False)


class TransportConfig(_Strict):
    cc: Literal["newreno", "dctcp", "cubic", "dcqcn"] = "dctcp"
    mss_bytes: Annotated[SizeBytes, Field(ge=64, le=9000)] = 1460
    init_cwnd_packets: StrictInt = Field(10, ge=1, le=U32_MAX)
    min_rto_ps: Annotated[TimePs, Field(gt=0)] = 1_000_000_000
    initial_rto_ps: Annotated[TimePs, Field(gt=0)] = 1_000_000_000
    max_rto_ps: Annotated[TimePs, Field(gt=0)] = 1_000_000_000_000
    dupack_threshold: StrictInt = Field(3, ge=1, le=U32_MAX)
    dctcp_g: StrictFloat = Field(1 / 16, gt=0, le=1)
    dctcp_initial_alpha: StrictFloat = Field(1.0, ge=0, le=1)
    # RFC 9438 §4.7, on by default as in Linux; it serves competing CUBIC flows (off for a flow alone).
    cubic_fast_convergence: StrictBool = True
    tsq_limit_bytes: Annotated[SizeBytes, Field(ge=1)] = 131_072
    persistent_connections: StrictBool = False
    # Open each new connection with a SYN / SYN-ACK exchange (packet backend).
    handshake: StrictBool = False
    # Selective acknowledgments (RFC 2018) and SACK-based loss recovery (RFC 6675) in place of NewReno's (packet
    # backend; refused with cc = "dcqcn", whose queue pairs recover by go-back-N). docs/scenario.md.
    sack: StrictBool = False
    dcqcn: DcqcnConfig = Field(default_factory=DcqcnConfig)
    # Packet Rocket (docs/clockwork-control.md): hold a flow at its sender while an echoed one-way delay exceeds its
    # path's base (the least seen) by more than this; None: off (packet backend).
    packet_rocket_threshold_ps: Optional[Annotated[TimePs, Field(ge=0)]] = None
    # The clocks its one-way delays are read on: "ideal" (true time), "host" (each host's [clocks], raw) or
    # "estimated" (each host's [clocks] less what fabriclab's estimator recovers of it from the probe mesh:
    # packet_rocket_correction, which fabriclab.simulate fills by a calibration pass when absent);
    # None: "estimated" with [clocks], else "ideal" (what hosts without [clocks] read anyway).
    packet_rocket_clock: Optional[Literal["ideal", "host", "estimated"]] = None
    # Which echoes a pause ignores: "ended" (packets sent before the last pause ended: issue 27's reading
    # of On-Ramp), or our variants, not the paper's: "extend" (as "ended", but an echo arriving during a
    # pause may move its end later) and "during" (only packets sent during a pause). docs/clockwork-control.md.
    packet_rocket_ignore: Literal["ended", "extend", "during"] = "ended"
    # The hosts (host indices; with [cloud] the tenant's VMs are 0..tenant_vms-1) whose senders run Packet
    # Rocket; a connection from any other host runs as with it off. None: every host.
    packet_rocket_hosts: Optional[list[Annotated[StrictInt, Field(ge=0, le=U32_MAX)]]] = None
    # With "estimated": each host's clock correction as linear pieces on its own clock (docs/clockwork-control.md,
    # "Estimated clocks"); None: computed by the calibration pass. A host without pieces reads its clock raw.
    packet_rocket_correction: Optional[list[CorrectionPieceConfig]] = None
    # What the calibration pass made the table for (a digest of the pass's scenario: seed, [clocks], topology or
    # [cloud], mesh, and with "loaded" the load), written beside the table it makes; a table whose digest no
    # longer matches the scenario is made again. None: a table given by hand, applied as it is.
    packet_rocket_correction_for: Optional[str] = None
    # The calibration pass that makes the table: "idle" (the probe mesh alone) or "loaded" (the mesh beside the
    # scenario's own load, with Packet Rocket off: the estimator's error under load). Read only when it runs.
    packet_rocket_calibration: Literal["idle", "loaded"] = "idle"

    @model_validator(mode="after")
    def _rocket_correction(self):
        if self.packet_rocket_correction is None:
            if self.packet_rocket_correction_for is not None:
                raise ValueError("packet_rocket_correction_for: names what the calibration pass made "
                                 "packet_rocket_correction for, and no table is given; drop it or give the table")
            return self
        if self.packet_rocket_threshold_ps is None:
            raise ValueError("packet_rocket_correction: corrects the clocks Packet Rocket reads, and Packet Rocket is "
                             "off without packet_rocket_threshold_ps; set the threshold or drop the table")
        if self.packet_rocket_clock not in (None, "estimated"):
            raise ValueError(f'packet_rocket_correction: corrects the clocks of packet_rocket_clock = "estimated", '
                             f'not "{self.packet_rocket_clock}"; drop the table or set the clock to "estimated"')
        last: dict[int, int] = {}
        for i, p in enumerate(self.packet_rocket_correction):
            if p.host in last and p.from_local_ps <= last[p.host]:
                raise ValueError(f"packet_rocket_correction[{i}].from_local_ps: host {p.host}'s pieces must be in "
                                 f"strictly increasing from_local_ps ({p.from_local_ps} follows {last[p.host]})")
            last[p.host] = p.from_local_ps
        return self

    @model_validator(mode="after")
    def _rocket_hosts(self):
        if self.packet_rocket_hosts is None:
            return self
        if self.packet_rocket_threshold_ps is None:
            raise ValueError("packet_rocket_hosts: names the hosts that run Packet Rocket, which is off without "
                             "packet_rocket_threshold_ps; set the threshold or drop packet_rocket_hosts")
        if len(set(self.packet_rocket_hosts)) != len(self.packet_rocket_hosts):
            raise ValueError(f"packet_rocket_hosts: each host once, got {self.packet_rocket_hosts}")
        return self

    @model_validator(mode="after")
    def _sack_not_with_dcqcn(self):
        if self.sack and self.cc == "dcqcn":
            raise ValueError('sack: RoCE queue pairs (cc = "dcqcn") recover by go-back-N and send no SACK; use '
                             'sack = false with dcqcn, or a TCP congestion control ("newreno", "dctcp", "cubic")')
        return self

    @model_validator(mode="after")
    def _rto_order(self):
        if self.min_rto_ps > self.max_rto_ps:
            raise ValueError(f"min_rto_ps: {self.min_rto_ps} ps must not exceed max_rto_ps ({self.max_rto_ps} ps)")
        if self.initial_rto_ps > self.max_rto_ps:
            raise ValueError(f"initial_rto_ps: {self.initial_rto_ps} ps must not exceed max_rto_ps ({self.max_rto_ps} ps)")
        return self


class RoutingConfig(_Strict):
    ecmp_hash_seed: StrictInt = Field(0, ge=0, lt=2**64)
    # After a link goes down or up, routing follows this much later.
    convergence_ps: Annotated[TimePs, Field(ge=0)] = 0
    # Resilient hashing: after a link goes down only the flows it carried move.
    resilient_hash: StrictBool = False


class LinkEventConfig(_Strict):
    """At ``at_ps``, the link between two nodes (both directions; every
    parallel link between them) goes down or up, changes its rate, or starts
    losing packets with probability ``loss``."""
    at_ps: Annotated[TimePs, Field(ge=0)]
    link: list[str] = Field(min_length=2, max_length=2, description="the two nodes the link joins")
    action: Literal["down", "up", "rate", "loss"]
    rate_bps: Optional[Annotated[RateBps, Field(gt=0)]] = None
    loss: Optional[StrictFloat] = Field(None, ge=0, le=1)

    @model_validator(mode="after")
    def _fields_of_action(self):
        if self.action == "rate" and self.rate_bps is None:
            raise ValueError('rate_bps: action = "rate" needs the new rate')
        if self.action == "loss" and self.loss is None:
            raise ValueError('loss: action = "loss" needs a probability within [0, 1]')
        if self.action != "rate" and self.rate_bps is not None:
            raise ValueError(f'rate_bps: only for action = "rate", not "{self.action}"')
        if self.action != "loss" and self.loss is not None:
            raise ValueError(f'loss: only for action = "loss", not "{self.action}"')
        return self


def node_index(names: dict[str, int], name: str, field_name: str) -> int:
    """The index of the node called ``name``; an unknown one is bad input naming the field."""
    if name not in names:
        raise ScenarioError(f"{field_name}: unknown node {name!r}")
    return names[name]


def links_joining(t: topo.TopologyData, a: int, b: int) -> list[int]:
    """Indices of the topology's links between nodes ``a`` and ``b``."""
    return [k for k, lk in enumerate(t.links) if {lk["a"], lk["b"]} == {a, b}]


def fabric_core(s, t: topo.TopologyData, names: dict[str, int]) -> dict:
    """The fabric sections of scenario ``s`` as the core reads them, on its
    built topology ``t`` (``names``: node name -> index)."""
    tr = s.transport
    core_pfc = None
    if s.pfc is not None:
        p = s.pfc
        headroom = p.headroom_bytes
        if headroom is None:
            # What can still arrive after an XOFF: the link's round trip of data
            # and a full frame in serialization at each end, on the worst link.
            headroom = max((2 * lk["rate_bps"] * lk["delay_ps"] // (8 * 10**12) for lk in t.links), default=0)
            headroom += 2 * (tr.mss_bytes + WIRE_OVERHEAD_BYTES)
        core_pfc = {"classes": p.classes, "xoff_bytes": p.xoff_bytes, "xon_bytes": p.xon_bytes,
                    "headroom_bytes": headroom, "pause_quanta": p.pause_quanta, "xoff_fraction": p.xoff_fraction}
    overrides = []
    queue_all = s.all_queue_overrides()
    # The cloud's own entries come first; the user's are named by their own index.
    own = len(queue_all) - len(s.queue_overrides)
    for i, o in enumerate(queue_all):
        field = "cloud.hypervisor_queue" if i < own else f"queue_overrides[{i - own}]"
        ends = [None if getattr(o, key) is None else node_index(names, getattr(o, key), f"{field}.{key}")
                for key in ("node", "to")]
        overrides.append({"from": ends[0], "to": ends[1], "queue": _core_queue(o)})
    nodes = []
    node_all = s.all_node_overrides()
    own = len(node_all) - len(s.node_overrides)
    for i, o in enumerate(node_all):
        field = "cloud.hypervisor_pps" if i < own else f"node_overrides[{i - own}]"
        k = node_index(names, o.node, f"{field}.node")
        if t.nodes[k]["kind"] != "switch":
            raise ScenarioError(f"{field}.node: {o.node!r} is a host; a forwarding capacity is a "
                                f"switch's (name one of the topology's switches)")
        nodes.append({"node": k, "forwarding_pps": o.forwarding_pps,
                      "forwarding_queue_packets": o.forwarding_queue_packets})
    check_link_rates(s, t)
    link_events = []
    for i, e in enumerate(s.link_events):
        a, b = (node_index(names, name, f"link_events[{i}].{key}") for key, name in zip(("link[0]", "link[1]"), e.link))
        found = links_joining(t, a, b)
        if not found:
            raise ScenarioError(f"link_events[{i}].link: no link joins {e.link[0]!r} and {e.link[1]!r}")
        for k in found:
            link_events.append({"at_ps": e.at_ps, "link": k, "action": e.action,
                                "rate_bps": e.rate_bps, "loss": e.loss})
    logic = []
    for i, lg in enumerate(s.switch_logic):
        if lg.node not in names or t.nodes[names[lg.node]]["kind"] != "switch":
            raise ScenarioError(f"switch_logic[{i}].node: {lg.node!r} is not a switch of the topology")
        mirror = None
        if lg.mirror_to is not None:
            mirror = node_index(names, lg.mirror_to, f"switch_logic[{i}].mirror_to")
            if not links_joining(t, names[lg.node], mirror):
                raise ScenarioError(f"switch_logic[{i}].mirror_to: {lg.mirror_to!r} is not a neighbour of {lg.node!r}")
        logic.append({"kind": lg.kind, "node": names[lg.node], "class": lg.class_, "mirror_to": mirror,
                      "absorb": lg.absorb})
    return {
        "queue": _core_queue(s.queue),
        "host_queue": None if s.host_queue is None else _core_queue(s.host_queue),
        "queue_overrides": overrides,
        "node_overrides": nodes,
        "pfc": core_pfc,
        "transport": {
            "cc": tr.cc, "mss_bytes": tr.mss_bytes, "init_cwnd_packets": tr.init_cwnd_packets,
            "min_rto_ps": tr.min_rto_ps, "initial_rto_ps": tr.initial_rto_ps, "max_rto_ps": tr.max_rto_ps,
            "dupack_threshold": tr.dupack_threshold, "dctcp_g": tr.dctcp_g,
            "dctcp_initial_alpha": tr.dctcp_initial_alpha, "cubic_fast_convergence": tr.cubic_fast_convergence,
            "tsq_limit_bytes": tr.tsq_limit_bytes,
            "persistent_connections": tr.persistent_connections, "handshake": tr.handshake,
            "sack": tr.sack,
            "dcqcn": tr.dcqcn.model_dump(),
            "packet_rocket_threshold_ps": tr.packet_rocket_threshold_ps,
            "packet_rocket_clock": rocket_clock(s),
            "packet_rocket_ignore": tr.packet_rocket_ignore,
            "packet_rocket_hosts": rocket_hosts(s, t),
            "packet_rocket_correction": rocket_correction(s, t),
        },
        "routing": {"ecmp_hash_seed": s.routing.ecmp_hash_seed, "convergence_ps": s.routing.convergence_ps,
                    "resilient_hash": s.routing.resilient_hash},
        "link_events": link_events,
        "switch_logic": logic,
        "switch_buffer": None if s.switch_buffer is None else
        {"bytes": s.switch_buffer.bytes, "alpha": s.switch_buffer.alpha},
    }


def rocket_hosts(s, t: topo.TopologyData) -> Optional[list[int]]:
    """``transport.packet_rocket_hosts``, each checked to be a host index of
    the built topology."""
    given = s.transport.packet_rocket_hosts
    n = len(t.hosts)
    for h in given or []:
        if h >= n:
            raise ScenarioError(f"transport.packet_rocket_hosts: host {h} does not exist; the topology has {n} "
                                f"hosts, indices 0..{n - 1}")
    return given


def rocket_clock(s) -> str:
    """The clocks Packet Rocket reads: as given, else each host's own as the
    estimator recovers it when the scenario has ``[clocks]`` (sync error
    enters as in reality), else true time."""
    given = s.transport.packet_rocket_clock
    if given is not None:
        return given
    return "estimated" if s.clocks is not None else "ideal"


def needs_calibration(s) -> bool:
    """Packet Rocket reads estimated clocks and no correction table is given:
    the calibration pass (``fabriclab.observe.clock.calibrate``) must make one."""
    return (s.transport.packet_rocket_threshold_ps is not None and s.backend == "packet"
            and rocket_clock(s) == "estimated" and s.transport.packet_rocket_correction is None)


def rocket_correction(s, t: topo.TopologyData) -> list[dict]:
    """``transport.packet_rocket_correction`` as the core reads it (empty
    unless the clocks are "estimated"), each host checked to exist."""
    if s.transport.packet_rocket_threshold_ps is None or rocket_clock(s) != "estimated":
        return []
    if s.transport.packet_rocket_correction is None:
        raise ScenarioError('transport.packet_rocket_correction: packet_rocket_clock = "estimated" (the default with '
                            '[clocks]) needs each host\'s correction, which fabriclab.simulate (and `fabriclab run`) '
                            'computes by a calibration pass; give the table, run through fabriclab.simulate, or set '
                            'packet_rocket_clock to "host" or "ideal"')
    n = len(t.hosts)
    out = []
    for i, p in enumerate(s.transport.packet_rocket_correction):
        if p.host >= n:
            raise ScenarioError(f"transport.packet_rocket_correction[{i}].host: host {p.host} does not exist; the "
                                f"topology has {n} hosts, indices 0..{n - 1}")
        out.append({"host": p.host, "from_local_ps": p.from_local_ps, "offset_ps": p.offset_ps,
                    "drift_ppm": p.drift_ppm})
    return out


def check_link_rates(s, t: topo.TopologyData) -> None:
    """A link so slow that one full segment takes longer to send than the
    largest retransmission timeout cannot carry TCP: every segment would
    time out before it arrived, and the run would retransmit for
    simulated days."""
    tr = s.transport
    frame_bits = (tr.mss_bytes + WIRE_OVERHEAD_BYTES) * 8
    least = -(-frame_bits * 10**12 // tr.max_rto_ps)
    rates = [(lk["rate_bps"], _rate_field(s, t, k)) for k, lk in enumerate(t.links)]
    rates += [(e.rate_bps, f"link_events[{i}].rate_bps") for i, e in enumerate(s.link_events) if e.rate_bps]
    for rate, name in rates:
        if rate < least:
            raise ScenarioError(
                f"{name}: at {rate} bps one full segment ({tr.mss_bytes + WIRE_OVERHEAD_BYTES} wire bytes) takes "
                f"{frame_bits / rate:,.0f} s to send, longer than transport.max_rto_ps ({tr.max_rto_ps / 1e12:g} s): "
                f"every segment would time out before it arrives; give at least {least} bps or raise max_rto_ps")

def _rate_field(s, data: topo.TopologyData, k: int) -> str:
    """The field that set the rate of the topology's link ``k``."""
    t, lk = s.topology, data.links[k]
    if isinstance(t, FileTopology):
        return f"topology.path: links[{k}].rate_bps"
    host_link = any(data.nodes[lk[end]]["kind"] == "host" for end in ("a", "b"))
    if isinstance(t, LeafSpineTopology) and not host_link:
        return "topology.spine_link_rate_bps" if t.spine_link_rate_bps is not None else "topology.oversubscription"
    return "topology.link_rate_bps"

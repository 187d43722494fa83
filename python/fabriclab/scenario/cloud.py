"""A public cloud (``[cloud]``): a provider fabric whose hosts are physical
machines, each carrying ``vms_per_host`` VM slots, and a tenant's VMs placed
on them at random (docs/clockwork.md, "The cloud model"; docs/scenario.md
gives every default's source).

Lowering (:func:`build`), Python only: each machine becomes a switch node
``pm<j>`` (its hypervisor's virtual switch) joined to its ToR by the fabric's
host link (the machine's NIC, ``fabric.link_rate_bps``); each VM is a host
``vm<i>`` joined to its machine's node by a link at the per-VM egress cap
``vm_egress_bps``. So the VMs of one machine share its NIC and the queue of
its hypervisor node toward the NIC (``hypervisor_queue``). With
``hypervisor_pps``, each machine node also gets that forwarding capacity (a
``[[node_overrides]]`` entry): every packet its VMs send or receive, ACKs
included, waits for the virtual switch's CPU. The tenant's VMs are hosts
0..tenant_vms-1, other tenants' VMs follow."""

# No `from __future__ import annotations` in a schema module: see base.py.

import random
from dataclasses import dataclass, field
from typing import Annotated, Optional, Union

from pydantic import Field, StrictFloat, StrictInt, model_validator

from . import topology as topo
from .base import U32_MAX, Delay, PositiveRate, TrafficClass, _Strict
from .fabric import FatTreeTopology, LeafSpineTopology, QueueConfig
from .units import TimePs

# Mixed into the scenario's seed for the placement's stream (ASCII "CLOUD").
_SEED_SALT = 0x434C4F5544


def _default_fabric() -> LeafSpineTopology:
    # 16 machines on 4 ToRs and 2 spines; NICs of 100 Gbit/s, the largest
    # per-VM cap of an N1 VM with V100s (docs/scenario.md).
    return LeafSpineTopology(kind="leaf_spine", leaves=4, hosts_per_leaf=4, spines=2, link_rate_bps=100 * 10**9)


# The virtual switch's CPU backlog when [cloud] gives none: Linux's netdev_max_backlog default.
HYPERVISOR_BACKLOG_PACKETS = 1000


def _default_hypervisor_queue() -> QueueConfig:
    # Linux's default txqueuelen (1000 packets); a software queue marks no ECN.
    return QueueConfig(limit_packets=1000, ecn_threshold_packets=None)


class CloudConfig(_Strict):
    """A provider's fabric of physical machines with VM slots, a tenant's
    VMs placed on them (seeded), other tenants' VMs and their traffic."""

    # The provider fabric: a [topology] table of kind leaf_spine or fat_tree,
    # one port per machine; its hosts are the physical machines and its
    # link_rate_bps their NICs' rate.
    fabric: Annotated[Union[LeafSpineTopology, FatTreeTopology], Field(discriminator="kind")] = Field(
        default_factory=_default_fabric)
    # VM slots per machine: 8 V100s per machine, 2 per VM as the talk's VMs (chosen).
    vms_per_host: StrictInt = Field(4, ge=1, le=U32_MAX)
    # The provider's per-VM egress cap: GCP N1 with 2 V100s, 32 Gbit/s (unverified; docs/scenario.md).
    vm_egress_bps: PositiveRate = 32 * 10**9
    # Between a VM and its hypervisor's switch (a memory copy; chosen).
    vm_link_delay_ps: Delay = 1_000_000
    # The hypervisor's egress queue toward the NIC, shared by the machine's VMs.
    hypervisor_queue: QueueConfig = Field(default_factory=_default_hypervisor_queue)
    # The virtual switch's CPU: packets per second it forwards, every packet of the machine's VMs
    # (data and ACKs, both directions) one at a time; None: no CPU (docs/scenario.md gives the sources).
    hypervisor_pps: Optional[StrictInt] = Field(None, gt=0, le=10**12)
    # Packets waiting for that CPU, the one in service included; None: HYPERVISOR_BACKLOG_PACKETS
    # (only with hypervisor_pps: a backlog with no CPU would do nothing, so it is refused).
    hypervisor_backlog_packets: Optional[StrictInt] = Field(None, ge=1, lt=2**64)
    # The tenant's VMs: hosts 0..tenant_vms-1.
    tenant_vms: StrictInt = Field(8, ge=2, le=U32_MAX)
    # Share of the slots left by the tenant that hold other tenants' VMs.
    occupancy: StrictFloat = Field(1.0, ge=0, le=1)
    # Share of the machines holding other tenants' VMs on which those VMs carry traffic (noisy neighbours).
    busy_share: StrictFloat = Field(0.5, ge=0, le=1)
    # Their traffic: Poisson flows of this CDF among them, at this fraction of their egress caps.
    neighbour_load: StrictFloat = Field(0.3, gt=0, le=1)
    neighbour_cdf: str = "websearch"
    neighbour_class: TrafficClass = 0
    neighbour_start_ps: Delay = 0
    # None: as long as the probe mesh runs ([probes]), else 1 s.
    neighbour_duration_ps: Optional[Annotated[TimePs, Field(gt=0)]] = None
    # A placement given by hand instead of drawn (tests, what-ifs): the machine of
    # each tenant VM (slots taken in order on each machine) ...
    tenant_machines: Optional[list[Annotated[StrictInt, Field(ge=0)]]] = None
    # ... and the busy machines (those holding other tenants' VMs carry traffic).
    busy_machines: Optional[list[Annotated[StrictInt, Field(ge=0)]]] = None

    @model_validator(mode="after")
    def _fits(self):
        if self.fabric.host_ports != 1:
            raise ValueError("fabric.host_ports: a cloud's machines have one NIC port each; give 1")
        slots = machines(self) * self.vms_per_host
        if self.tenant_vms > slots:
            raise ValueError(f"tenant_vms: {self.tenant_vms} VMs asked, but the cloud has {slots} VM slots "
                             f"({machines(self)} machines x vms_per_host {self.vms_per_host}); ask for at most "
                             f"{slots}, or give more machines or slots")
        n = machines(self)
        if self.tenant_machines is not None:
            tm = self.tenant_machines
            if len(tm) != self.tenant_vms:
                raise ValueError(f"tenant_machines: {len(tm)} machines given for tenant_vms = {self.tenant_vms}; "
                                 "give one machine per tenant VM")
            for m in tm:
                if m >= n:
                    raise ValueError(f"tenant_machines: machine {m} is beyond the cloud's {n} machines (0..{n - 1})")
                if tm.count(m) > self.vms_per_host:
                    raise ValueError(f"tenant_machines: machine {m} is given {tm.count(m)} times, more than its "
                                     f"vms_per_host = {self.vms_per_host} slots")
        if self.hypervisor_backlog_packets is not None and self.hypervisor_pps is None:
            raise ValueError("hypervisor_backlog_packets: the CPU's backlog is only with cloud.hypervisor_pps "
                             "(without it the machine has no CPU to queue for); give hypervisor_pps or remove it")
        if self.busy_machines is not None:
            bm = self.busy_machines
            if len(set(bm)) != len(bm) or any(m >= n for m in bm):
                raise ValueError(f"busy_machines: give distinct machines within 0..{n - 1}, got {bm}")
        return self


def machines(c: CloudConfig) -> int:
    """The physical machines of the provider fabric."""
    f = c.fabric
    if isinstance(f, FatTreeTopology):
        return f.k ** 3 // 4
    return f.leaves * f.hosts_per_leaf


@dataclass
class Cloud:
    """A cloud built from its section and the scenario's seed: the topology
    and the placement (per VM, in host order: its machine, its slot, whether
    it is the tenant's)."""

    topology: topo.TopologyData
    machine: list[int] = field(default_factory=list)
    slot: list[int] = field(default_factory=list)
    tenant: list[bool] = field(default_factory=list)
    # Machines whose other tenants' VMs carry traffic.
    busy: list[int] = field(default_factory=list)
    # Per machine: its node name and the name of its ToR (edge) switch.
    machine_names: list[str] = field(default_factory=list)
    tor_names: list[str] = field(default_factory=list)

    @property
    def vms(self) -> list[str]:
        return [f"vm{i}" for i in range(len(self.machine))]

    def groups(self) -> list[list[str]]:
        """VMs sharing a machine (and so one oscillator), machines with one VM left out."""
        by: dict[int, list[str]] = {}
        for name, m in zip(self.vms, self.machine):
            by.setdefault(m, []).append(name)
        return [g for _, g in sorted(by.items()) if len(g) > 1]

    def noisy_vms(self) -> list[int]:
        """Host indices of the other tenants' VMs on busy machines."""
        busy = set(self.busy)
        return [i for i, (m, t) in enumerate(zip(self.machine, self.tenant)) if m in busy and not t]


def place(c: CloudConfig, seed: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]], list[int]]:
    """The provider's placement, seeded: the tenant's VMs on (machine, slot)
    drawn uniformly without replacement from every slot; other tenants' VMs
    on ``occupancy`` of the slots left, drawn likewise; ``busy_share`` of the
    machines holding other tenants' VMs, drawn likewise, are busy: there
    those VMs carry the neighbours' traffic. ``tenant_machines`` and
    ``busy_machines``, when given, replace their draws. Tenant and
    other VMs are each listed in (machine, slot) order."""
    rng = random.Random(seed ^ _SEED_SALT)
    n = machines(c)
    slots = [(m, s) for m in range(n) for s in range(c.vms_per_host)]
    if c.tenant_machines is None:
        tenant = sorted(rng.sample(slots, c.tenant_vms))
    else:
        tenant = sorted((m, c.tenant_machines[:k].count(m)) for k, m in enumerate(c.tenant_machines))
    taken = set(tenant)
    free = [x for x in slots if x not in taken]
    others = sorted(rng.sample(free, round(c.occupancy * len(free))))
    hosting = sorted({m for m, _ in others})
    if c.busy_machines is None:
        busy = sorted(rng.sample(hosting, round(c.busy_share * len(hosting))))
    else:
        busy = sorted(c.busy_machines)
    return tenant, others, busy


def build(c: CloudConfig, seed: int) -> Cloud:
    """The cloud's topology: VM hosts first (the tenant's, then the
    others'), the provider fabric's switches, then one switch per machine."""
    f = c.fabric
    if isinstance(f, FatTreeTopology):
        fabric = topo.fat_tree(f.k, f.link_rate_bps, f.link_delay_ps)
    else:
        fabric = topo.leaf_spine(f.leaves, f.hosts_per_leaf, f.spines, f.link_rate_bps, f.link_delay_ps,
                                 f.oversubscription, f.spine_link_rate_bps)
    tenant, others, busy = place(c, seed)
    t = topo.TopologyData()
    placed = tenant + others
    vm_nodes = [t.add_node(f"vm{i}", "host", 0) for i in range(len(placed))]
    # The fabric's switches, shifted up a layer; its hosts become the machines' nodes.
    index = {}
    for k, node in enumerate(fabric.nodes):
        if node["kind"] == "switch":
            index[k] = t.add_node(node["name"], "switch", fabric.layers[k] + 1)
    phys = fabric.hosts
    machine_nodes = [t.add_node(f"pm{j}", "switch", 1) for j in range(len(phys))]
    for k, node in enumerate(phys):
        index[node] = machine_nodes[k]
    pos = {node: k for k, node in enumerate(phys)}
    tors = [""] * len(phys)
    for lk in fabric.links:
        t.add_link(index[lk["a"]], index[lk["b"]], lk["rate_bps"], lk["delay_ps"])
        for end, other in (("a", "b"), ("b", "a")):
            if lk[end] in pos:
                tors[pos[lk[end]]] = fabric.nodes[lk[other]]["name"]
    for v, (m, _) in zip(vm_nodes, placed):
        t.add_link(v, machine_nodes[m], c.vm_egress_bps, c.vm_link_delay_ps)
    return Cloud(topology=t, machine=[m for m, _ in placed], slot=[s for _, s in placed],
                 tenant=[True] * len(tenant) + [False] * len(others), busy=busy,
                 machine_names=[f"pm{j}" for j in range(len(phys))], tor_names=tors)

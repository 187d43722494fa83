"""The C4P testbed of the C4 paper, section 4.1, as a topology builder.

Servers of 8 GPUs on an NVSwitch, each GPU with its own NIC (PCIe); each NIC
has two 200 Gbit/s ports bonded into one 400 Gbit/s port, the left port to
one leaf and the right port to another (a dual-plane, rail-pair wiring).
The servers form two groups, each under its own four leaves (the paper's
"distinct groups of leaf switches"): in group g, NIC r's left port goes to
leaf 4g + 2(r mod 2) and its right port to leaf 4g + 2(r mod 2) + 1. Every
leaf joins every spine; with 16 servers a leaf has 32 host ports
(6.4 Tbit/s), so 8 spines of 800 Gbit/s links make it 1:1, and keeping half
of the spines makes it 2:1 (the paper halves the spines).

GPUs are hosts; NVSwitch and NICs are switches, so a NIC's two ports are two
equal-cost next hops that ECMP (or a pinned path) chooses between.
"""

from __future__ import annotations

import json

from ...scenario.gpus import GpuTopology

GBps = 8 * 10**9
PORT_BPS = 200 * 10**9  # BlueField-3: two 200 Gbit/s ports per NIC (paper, table 2)
PCIE5_X16_BPS = 64 * GBps  # PCIe Gen5 x16, about 64 GB/s per direction
# NVSwitch link per GPU, calibrated: a rail ring sends 7/8 of a GPU's bytes
# over NVLink, so its bus bandwidth caps at 8/7 of this rate; the paper
# gives that cap as 362 (section 4.2.2, "constrained by the NVLink fabric").
NVLINK_CAP_GBps = 362
NVSWITCH_BPS = NVLINK_CAP_GBps * GBps * 7 // 8
LINK_DELAY_PS = 1_000_000  # 1 us per hop, as the GPU-server models (gpus.py)
GPUS_PER_SERVER = 8
LEAVES = 8


class Testbed(GpuTopology):
    """Topology data plus where every NIC port goes."""

    def __init__(self):
        super().__init__()
        self.nic: dict[tuple[int, int], int] = {}  # (server, rail) -> NIC node
        self.ports: dict[int, tuple[int, int]] = {}  # NIC node -> (left leaf node, right leaf node)
        self.leaves: list[int] = []
        self.spines: list[int] = []
        self.group: list[int] = []  # group of each server

    def name(self, node: int) -> str:
        return self.nodes[node]["name"]

    def index(self, name: str) -> int:
        return next(i for i, n in enumerate(self.nodes) if n["name"] == name)

    def gpu_host(self, server: int, gpu: int) -> int:
        """Host index of a GPU."""
        return self.host_index(self.servers[server][gpu])


def testbed(servers: int = 16, spines: int = 8, oversubscription: float = 1.0,
            delay_ps: int = LINK_DELAY_PS) -> Testbed:
    """``servers`` (even) servers in two groups under 8 leaves; ``spines``
    spines of which the first ``spines / oversubscription`` are built, the
    leaf-spine rate making the full set 1:1."""
    if servers < 2 or servers % 2:
        raise ValueError(f"servers: an even number of at least 2, got {servers}")
    kept = spines / oversubscription
    if spines < 1 or oversubscription < 1 or kept != int(kept):
        raise ValueError(f"oversubscription: must leave a whole number of the {spines} spines, got {oversubscription}")
    t = Testbed()
    per_group = servers // 2
    leaf_ports = per_group * GPUS_PER_SERVER // 2  # NICs of a group on a leaf pair, one port each per leaf
    uplink_bps = leaf_ports * PORT_BPS // spines
    t.leaves = [t.add_node(f"leaf{i}", "switch", 3) for i in range(LEAVES)]
    t.spines = [t.add_node(f"spine{i}", "switch", 4) for i in range(int(kept))]
    for lf in t.leaves:
        for sp in t.spines:
            t.add_link(lf, sp, uplink_bps, delay_ps)
    for s in range(servers):
        g = s // per_group
        t.group.append(g)
        base = len(t.gpus)
        ids = []
        for k in range(GPUS_PER_SERVER):
            t.gpus.append(t.add_node(f"s{s}.gpu{k}", "host", 0))
            ids.append(base + k)
        nvs = t.add_node(f"s{s}.nvswitch", "switch", 1)
        for k in range(GPUS_PER_SERVER):
            t.add_link(t.gpus[base + k], nvs, NVSWITCH_BPS, delay_ps)
        for r in range(GPUS_PER_SERVER):
            nic = t.add_node(f"s{s}.nic{r}", "switch", 2)
            t.add_link(t.gpus[base + r], nic, PCIE5_X16_BPS, delay_ps)
            left = t.leaves[4 * g + 2 * (r % 2)]
            right = t.leaves[4 * g + 2 * (r % 2) + 1]
            t.add_link(nic, left, PORT_BPS, delay_ps)
            t.add_link(nic, right, PORT_BPS, delay_ps)
            t.nic[(s, r)] = nic
            t.ports[nic] = (left, right)
        t.servers.append(ids)
    return t


def without_links(t: Testbed, down: list[tuple[str, str]]) -> Testbed:
    """A copy of ``t`` without the links joining the named node pairs."""
    import copy

    pairs = {frozenset((t.index(a), t.index(b))) for a, b in down}
    c = copy.copy(t)
    c.links = [lk for lk in t.links if frozenset((lk["a"], lk["b"])) not in pairs]
    return c


class Router:
    """The switches' ECMP as the core computes it, for one topology: which
    node path a connection with a given source port takes. With ``down``
    (node-name pairs), those links are down, as after a failure mid-run:
    with ``resilient_hash`` the switches keep every other flow in place and
    hash only the dead link's flows again (docs/c4p.md)."""

    def __init__(self, topo, ecmp_hash_seed: int = 0, down: list[tuple[str, str]] = (),
                 resilient_hash: bool = False):
        from ..._core import Simulator
        from ...scenario.model import Scenario
        from ...sim.pipeline import core_spec

        scenario = Scenario.from_dict({
            "backend": "flow", "routing": {"ecmp_hash_seed": ecmp_hash_seed, "resilient_hash": resilient_hash},
            "link_events": [{"at_ps": 0, "link": list(lk), "action": "down"} for lk in down],
        })
        core = core_spec(scenario, topology_data=topo)
        self._sim = Simulator(json.dumps(core))
        if down:
            self._sim.run_until(0)

    def path(self, src_host: int, dst_host: int, src_port: int) -> list[int] | None:
        return self._sim.ecmp_path(src_host, dst_host, src_port)

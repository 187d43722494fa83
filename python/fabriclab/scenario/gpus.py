"""GPU-server topologies: DGX-1 (P100 and V100), DGX-2, PCIe trees, and
clusters of servers joined through NICs to a data-center fabric.

GPUs are hosts (they send and receive but never forward); NVLink joins two
GPUs directly; PCIe switches, CPU sockets, NVSwitch and NICs are switches.
Several NVLinks between the same two GPUs are one link of the summed rate.

Link figures (cited where used):
- NVLink gen 1 (P100) about 18 GB/s, gen 2 (V100) about 23 GB/s per link and
  direction; PCIe 3.0 x16 about 10 GB/s; NVSwitch about 130 GB/s per GPU
  (Blink, MLSys'20 talk, "State of the art (hardware)").
- DGX-1 NVLink wiring (hybrid cube-mesh): P100 has 4 links per GPU, V100 6,
  with the links 0-3, 0-4, 1-2, 1-5, 2-3, 4-7, 5-6, 6-7 doubled
  (NVIDIA DGX-1 System Architecture whitepapers, P100 and V100 editions; the
  ``nvidia-smi topo -m`` matrix of a DGX-1V).
- DGX-1 PCIe: four PCIe switches, each with two GPUs and one NIC, two per CPU
  socket, sockets joined by QPI. QPI is taken as 2 links x 9.6 GT/s x 2 bytes
  = 38.4 GB/s (Intel Xeon E5-2698 v4 datasheet); PCIe links 10 GB/s.
- Latency per link: 1 us for NVLink and PCIe hops (an assumption of this
  model, the order of NCCL's per-hop latency; change it per builder).
"""

from __future__ import annotations

from .topology import TopologyData

GBps = 8 * 10**9  # bits per second in one GB/s
NVLINK1_BPS = 18 * GBps
NVLINK2_BPS = 23 * GBps
PCIE3_X16_BPS = 10 * GBps
NVSWITCH_BPS = 130 * GBps
QPI_BPS = round(38.4 * GBps)
LINK_DELAY_PS = 1_000_000

# Undirected NVLink edges of the DGX-1 hybrid cube-mesh with link counts.
DGX1_EDGES = [(0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 5), (2, 3),
              (2, 6), (3, 7), (4, 5), (4, 6), (4, 7), (5, 6), (5, 7), (6, 7)]
DGX1V_DOUBLE = {(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)}

KINDS = ("dgx1p", "dgx1v", "dgx2", "pcie")


class GpuTopology(TopologyData):
    """Topology data plus which nodes are GPUs and which links are NVLink."""

    def __init__(self):
        super().__init__()
        self.gpus: list[int] = []  # node index of GPU g (global GPU id)
        self.nvlink: dict[tuple[int, int], int] = {}  # (gpu a, gpu b) -> rate_bps, both directions
        self.servers: list[list[int]] = []  # global GPU ids of each server

    def gpu_name(self, g: int) -> str:
        return self.nodes[self.gpus[g]]["name"]

    def host_index(self, g: int) -> int:
        """Index among hosts (what messages address) of GPU g."""
        return self.hosts.index(self.gpus[g])


def _server(t: GpuTopology, kind: str, prefix: str, delay_ps: int, nic_bps: int | None) -> list[int]:
    base = len(t.gpus)
    ngpu = 16 if kind == "dgx2" else 8
    ids = []
    for g in range(ngpu):
        t.gpus.append(t.add_node(f"{prefix}gpu{g}", "host", 0))
        ids.append(base + g)
    node = lambda g: t.gpus[base + g]  # noqa: E731
    if kind in ("dgx1p", "dgx1v"):
        per = NVLINK1_BPS if kind == "dgx1p" else NVLINK2_BPS
        for a, b in DGX1_EDGES:
            rate = per * (2 if kind == "dgx1v" and (a, b) in DGX1V_DOUBLE else 1)
            t.add_link(node(a), node(b), rate, delay_ps)
            t.nvlink[(base + a, base + b)] = t.nvlink[(base + b, base + a)] = rate
    if kind == "dgx2":
        sw = t.add_node(f"{prefix}nvswitch", "switch", 1)
        for g in range(ngpu):
            t.add_link(node(g), sw, NVSWITCH_BPS, delay_ps)
    # PCIe tree: one switch per two GPUs (per four on DGX-2), two CPU sockets.
    per_switch = 4 if kind == "dgx2" else 2
    cpus = [t.add_node(f"{prefix}cpu{c}", "switch", 2) for c in range(2)]
    t.add_link(cpus[0], cpus[1], QPI_BPS, delay_ps)
    nsw = ngpu // per_switch
    for s in range(nsw):
        sw = t.add_node(f"{prefix}pcie{s}", "switch", 1)
        t.add_link(sw, cpus[s * 2 // nsw], PCIE3_X16_BPS, delay_ps)
        for g in range(s * per_switch, (s + 1) * per_switch):
            t.add_link(node(g), sw, PCIE3_X16_BPS, delay_ps)
        if nic_bps:
            nic = t.add_node(f"{prefix}nic{s}", "switch", 2)
            t.add_link(nic, sw, PCIE3_X16_BPS, delay_ps)
    t.servers.append(ids)
    return ids


def gpu_server(kind: str, delay_ps: int = LINK_DELAY_PS) -> GpuTopology:
    """One server: ``dgx1p``, ``dgx1v``, ``dgx2``, or ``pcie`` (a DGX-1's PCIe
    tree without NVLink)."""
    if kind not in KINDS:
        raise ValueError(f"topology: unknown GPU server {kind!r} (known: {', '.join(KINDS)})")
    t = GpuTopology()
    _server(t, "dgx1v" if kind == "pcie" else kind, "", delay_ps, None)
    if kind == "pcie":
        keep = [i for i, lk in enumerate(t.links) if not (t.nodes[lk["a"]]["kind"] == "host" and t.nodes[lk["b"]]["kind"] == "host")]
        t.links = [t.links[i] for i in keep]
        t.nvlink = {}
    return t


def gpu_cluster(kind: str, servers: int, nic_bps: int, fabric_delay_ps: int = LINK_DELAY_PS,
                delay_ps: int = LINK_DELAY_PS) -> GpuTopology:
    """``servers`` servers whose NICs (one per PCIe switch) join one
    top-of-rack switch at ``nic_bps``."""
    if kind not in ("dgx1p", "dgx1v", "dgx2"):
        raise ValueError(f"topology: unknown GPU server {kind!r}")
    t = GpuTopology()
    for s in range(servers):
        _server(t, kind, f"s{s}.", delay_ps, nic_bps)
    tor = t.add_node("tor", "switch", 3)
    for i, n in enumerate(t.nodes):
        if n["kind"] == "switch" and ".nic" in n["name"]:
            t.add_link(i, tor, nic_bps, fabric_delay_ps)
    return t


def nvlink_graph(t: GpuTopology, gpus: list[int]):
    """Directed NVLink graph among allocated GPUs, nodes relabelled as ranks
    0..len(gpus)-1, edge attribute ``capacity`` in bits per second."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(range(len(gpus)))
    for i, a in enumerate(gpus):
        for j, b in enumerate(gpus):
            if i != j and (a, b) in t.nvlink:
                g.add_edge(i, j, capacity=t.nvlink[(a, b)])
    return g


def pcie_path(t: GpuTopology, a: int, b: int) -> list[str]:
    """The node path from GPU a to GPU b through PCIe switches and CPUs only."""
    import networkx as nx

    g = nx.Graph()
    for lk in t.links:
        na, nb = t.nodes[lk["a"]], t.nodes[lk["b"]]
        if na["kind"] == "host" and nb["kind"] == "host":
            continue  # NVLink
        if "nvswitch" in na["name"] or "nvswitch" in nb["name"]:
            continue
        g.add_edge(lk["a"], lk["b"])
    hosts = set(t.hosts)
    src, dst = t.gpus[a], t.gpus[b]
    sub = g.subgraph([v for v in g if v not in hosts or v in (src, dst)])
    return [t.nodes[v]["name"] for v in nx.shortest_path(sub, src, dst)]

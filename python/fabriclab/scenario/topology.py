"""Topology builders. Each returns plain data, a :class:`TopologyData`:
nodes (hosts first, then switches) and full-duplex links with their rate and
propagation delay. The core reads this data; builders hold no behaviour."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..util.toml import tomllib


class TopologyError(InputError):
    pass


@dataclass
class TopologyData:
    nodes: list[dict] = field(default_factory=list)  # {"name", "kind": "host"|"switch"}
    links: list[dict] = field(default_factory=list)  # {"a", "b", "rate_bps", "delay_ps"} (node indices)
    # Drawing hint: layer of every node (0 = hosts), for `fabriclab topo show`.
    layers: list[int] = field(default_factory=list)

    def add_node(self, name: str, kind: str, layer: int) -> int:
        self.nodes.append({"name": name, "kind": kind})
        self.layers.append(layer)
        return len(self.nodes) - 1

    def add_link(self, a: int, b: int, rate_bps: int, delay_ps: int) -> None:
        self.links.append({"a": a, "b": b, "rate_bps": int(rate_bps), "delay_ps": int(delay_ps)})

    @property
    def hosts(self) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n["kind"] == "host"]

    def host_rate_bps(self, host_index: int) -> int:
        """Summed rate of a host's links (as the core's Topology::host_rate_bps)."""
        node = self.hosts[host_index]
        return sum(lk["rate_bps"] for lk in self.links if node in (lk["a"], lk["b"]))

    def to_core(self) -> dict:
        return {"nodes": self.nodes, "links": self.links}


def star(hosts: int, link_rate_bps: int, link_delay_ps: int) -> TopologyData:
    """One switch with ``hosts`` hosts."""
    t = TopologyData()
    hs = [t.add_node(f"h{i}", "host", 0) for i in range(hosts)]
    s = t.add_node("s0", "switch", 1)
    for h in hs:
        t.add_link(h, s, link_rate_bps, link_delay_ps)
    return t


def leaf_spine_uplink_bps(hosts_per_leaf: int, spines: int, link_rate_bps: int, oversubscription: float) -> int:
    """The leaf-spine link rate that makes a leaf's downlink capacity
    ``oversubscription`` times its uplink capacity."""
    return round(hosts_per_leaf * link_rate_bps / (spines * oversubscription))


def leaf_spine(
    leaves: int,
    hosts_per_leaf: int,
    spines: int,
    link_rate_bps: int,
    link_delay_ps: int,
    oversubscription: float = 1.0,
    spine_link_rate_bps: int | None = None,
    host_ports: int = 1,
) -> TopologyData:
    """Two tiers: every leaf joins every spine. Unless given, the leaf-spine
    link rate makes the leaf's downlink capacity ``oversubscription`` times
    its uplink capacity: ``hosts_per_leaf * rate / (spines * oversubscription)``.
    ``host_ports = 2``: leaves form pairs (0-1, 2-3, ...) and each of a
    pair's ``hosts_per_leaf`` hosts has one port on each leaf of the pair
    (dual-port NICs, C4's setting), so each leaf still has ``hosts_per_leaf``
    host links."""
    if host_ports not in (1, 2):
        raise TopologyError("topology.host_ports: must be 1 or 2")
    if host_ports == 2 and leaves % 2:
        raise TopologyError("topology.leaves: with host_ports = 2, leaves pair up and must be even")
    if spine_link_rate_bps is None:
        spine_link_rate_bps = leaf_spine_uplink_bps(hosts_per_leaf, spines, link_rate_bps, oversubscription)
    t = TopologyData()
    hs = [t.add_node(f"h{i}", "host", 0) for i in range(leaves // host_ports * hosts_per_leaf)]
    ls = [t.add_node(f"leaf{i}", "switch", 1) for i in range(leaves)]
    ss = [t.add_node(f"spine{i}", "switch", 2) for i in range(spines)]
    for i, h in enumerate(hs):
        first = i // hosts_per_leaf * host_ports
        for port in range(host_ports):
            t.add_link(h, ls[first + port], link_rate_bps, link_delay_ps)
    for leaf in ls:
        for sp in ss:
            t.add_link(leaf, sp, spine_link_rate_bps, link_delay_ps)
    return t


def gpu_cluster(leaves: int, servers_per_leaf: int, gpus_per_server: int, spines: int, nic_rate_bps: int,
                nvlink_bps: int, link_delay_ps: int, nvlink_delay_ps: int,
                spine_link_rate_bps: int | None = None) -> TopologyData:
    """GPU servers on a leaf-spine fabric (DGX-like): every GPU is a host
    with its own NIC (a switch node) on its server's leaf, and one
    NVSwitch node joins a server's GPUs at ``nvlink_bps`` each. A message
    between GPUs of a server takes the NVSwitch (two hops), any other the
    NIC and the fabric. Unless given, the leaf-spine link rate makes the
    fabric non-blocking."""
    per_leaf = servers_per_leaf * gpus_per_server
    if spine_link_rate_bps is None:
        spine_link_rate_bps = leaf_spine_uplink_bps(per_leaf, spines, nic_rate_bps, 1.0)
    t = TopologyData()
    n_servers = leaves * servers_per_leaf
    gpus = [t.add_node(f"s{k}.gpu{g}", "host", 0) for k in range(n_servers) for g in range(gpus_per_server)]
    ls = [t.add_node(f"leaf{i}", "switch", 2) for i in range(leaves)]
    ss = [t.add_node(f"spine{i}", "switch", 3) for i in range(spines)]
    for k in range(n_servers):
        nvs = t.add_node(f"s{k}.nvswitch", "switch", 1)
        for g in range(gpus_per_server):
            gpu = gpus[k * gpus_per_server + g]
            t.add_link(gpu, nvs, nvlink_bps, nvlink_delay_ps)
            nic = t.add_node(f"s{k}.nic{g}", "switch", 1)
            t.add_link(gpu, nic, nic_rate_bps, 0)
            t.add_link(nic, ls[k // servers_per_leaf], nic_rate_bps, link_delay_ps)
    for leaf in ls:
        for sp in ss:
            t.add_link(leaf, sp, spine_link_rate_bps, link_delay_ps)
    return t


def fat_tree(k: int, link_rate_bps: int, link_delay_ps: int, host_ports: int = 1) -> TopologyData:
    """k-ary three-tier fat-tree (Al-Fares et al., SIGCOMM 2008): k pods of
    k/2 edge and k/2 aggregation switches, (k/2)^2 cores, k^3/4 hosts.
    ``host_ports = 2``: a pod's edge switches form pairs and each host has
    one port on each edge of its pair (k^3/8 hosts, k a multiple of 4)."""
    if k < 2 or k % 2:
        raise TopologyError("topology.k: must be an even number >= 2")
    if host_ports not in (1, 2):
        raise TopologyError("topology.host_ports: must be 1 or 2")
    if host_ports == 2 and k % 4:
        raise TopologyError("topology.k: with host_ports = 2, edge switches pair up: k must be a multiple of 4")
    half = k // 2
    t = TopologyData()
    hs = [t.add_node(f"h{i}", "host", 0) for i in range(k * half * half // host_ports)]
    edges, aggs = [], []
    for p in range(k):
        edges.append([t.add_node(f"edge{p}_{e}", "switch", 1) for e in range(half)])
    for p in range(k):
        aggs.append([t.add_node(f"agg{p}_{a}", "switch", 2) for a in range(half)])
    cores = [t.add_node(f"core{c}", "switch", 3) for c in range(half * half)]
    per_pod = half * half // host_ports
    for i, h in enumerate(hs):
        pod, rem = divmod(i, per_pod)
        first = rem // half * host_ports
        for port in range(host_ports):
            t.add_link(h, edges[pod][first + port], link_rate_bps, link_delay_ps)
    for p in range(k):
        for e in edges[p]:
            for a in aggs[p]:
                t.add_link(e, a, link_rate_bps, link_delay_ps)
        for j, a in enumerate(aggs[p]):
            for c in range(half):
                t.add_link(a, cores[j * half + c], link_rate_bps, link_delay_ps)
    return t


def from_file(path: Path, field: str = "topology.path") -> TopologyData:
    """A topology file (TOML or JSON): ``nodes = [{name, kind}]`` and
    ``links = [{a, b, rate_bps, delay_ps}]`` where ``a``/``b`` are node names."""
    from pydantic import TypeAdapter

    from ..util.inputs import read_text
    from .units import RateBps, TimePs

    text = read_text(path, field, "topology file")
    try:
        raw = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        raise TopologyError(f"{field}: {path}: cannot parse: {e}") from None
    if not isinstance(raw, dict):
        raise TopologyError(f"{field}: {path}: must hold a table (object) with lists 'nodes' and 'links', got a {type(raw).__name__}")
    extra = sorted(set(raw) - {"nodes", "links"})
    if extra:
        raise TopologyError(f"{field}: {path}: unknown key(s) {', '.join(map(repr, extra))} (allowed: nodes, links)")
    nodes, links = raw.get("nodes"), raw.get("links")
    if not isinstance(nodes, list) or not isinstance(links, list):
        raise TopologyError(f"{field}: {path}: needs lists 'nodes' and 'links'")
    rate = TypeAdapter(RateBps)
    delay = TypeAdapter(TimePs)
    t = TopologyData()
    index: dict[str, int] = {}
    for i, n in enumerate(nodes):
        if not isinstance(n, dict) or set(n) - {"name", "kind", "layer"} or "name" not in n:
            raise TopologyError(f"{field}: {path}: nodes[{i}]: needs 'name' and 'kind' ('host' or 'switch'), optional 'layer'")
        if not isinstance(n["name"], str) or not n["name"]:
            raise TopologyError(f"{field}: {path}: nodes[{i}].name: must be a non-empty string, got {n['name']!r}")
        if n.get("kind") not in ("host", "switch"):
            raise TopologyError(f"{field}: {path}: nodes[{i}].kind: must be 'host' or 'switch', got {n.get('kind')!r}")
        if n["name"] in index:
            raise TopologyError(f"{field}: {path}: nodes[{i}].name: duplicate name {n['name']!r}")
        layer = n.get("layer", 0 if n["kind"] == "host" else 1)
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer <= 255:
            raise TopologyError(f"{field}: {path}: nodes[{i}].layer: must be an integer within 0..255 (for drawing), got {layer!r}")
        index[n["name"]] = t.add_node(n["name"], n["kind"], layer)
    for i, lk in enumerate(links):
        if not isinstance(lk, dict) or set(lk) != {"a", "b", "rate_bps", "delay_ps"}:
            raise TopologyError(f"{field}: {path}: links[{i}]: needs exactly 'a', 'b', 'rate_bps', 'delay_ps'")
        for end in ("a", "b"):
            if not isinstance(lk[end], str) or lk[end] not in index:
                raise TopologyError(f"{field}: {path}: links[{i}].{end}: unknown node {lk[end]!r}")
        vals = {}
        for key, adapter in (("rate_bps", rate), ("delay_ps", delay)):
            try:
                vals[key] = adapter.validate_python(lk[key])
            except Exception as e:  # pydantic.ValidationError
                msg = e.errors()[0]["msg"].removeprefix("Value error, ")
                raise TopologyError(f"{field}: {path}: links[{i}].{key}: {msg}") from None
        r, d = vals["rate_bps"], vals["delay_ps"]
        if lk["a"] == lk["b"]:
            raise TopologyError(f"{field}: {path}: links[{i}]: a link must join two different nodes, got {lk['a']!r} twice")
        if r <= 0:
            raise TopologyError(f"{field}: {path}: links[{i}].rate_bps: must be positive")
        if d < 0:
            raise TopologyError(f"{field}: {path}: links[{i}].delay_ps: must not be negative")
        t.add_link(index[lk["a"]], index[lk["b"]], r, d)
    return t


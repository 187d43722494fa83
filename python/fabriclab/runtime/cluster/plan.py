"""The cluster-in-a-box plan: a pure function from a scenario to the
namespaces, veth links, addresses, routes, sysctls and tc commands that
build it (docs/cluster.md). Nothing here runs a command; apply.py does.

Addressing (deterministic; l = leaf index, j = the host's index on its leaf,
s = spine index; a star is one leaf):

- host link (host j of leaf l): 10.<l+1>.<j>.0/31, switch end .0, host end .1
- fabric link (leaf l - spine s): 10.0.<s>.<2l>/31, spine end 2l, leaf end 2l+1
- a host routes everything via its switch end; a leaf routes 10.<m+1>.0.0/16
  of every other leaf m over all spines (ECMP, one next hop per spine); a
  spine routes 10.<l+1>.0.0/16 to leaf l.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import InputError
from ...scenario.cloud import FatTreeTopology
from ...scenario.model import LeafSpineTopology, QueueConfig, Scenario, StarTopology

PREFIX = "flbox-"
MAX_HOSTS = 32
MAX_SWITCHES = 16
# Bytes Linux's tc counts per full-size frame (skb->len: IP packet = MTU, + Ethernet header 14) and what
# the wire adds beyond it (FCS 4 + preamble 8 + inter-frame gap 12): at MTU 1500, 1514 + 24 = 1538, the
# simulator's wire bytes of a full segment (docs/architecture.md). The MTU is transport.mss_bytes + 40
# (IP and TCP headers), so the box's segments are the simulator's.
FRAME_BYTES = 1514
ETH_HEADER_BYTES = 14
WIRE_EXTRA_BYTES = 24
HOST_QUEUE_PACKETS = 100_000  # a host's NIC queue: the simulator's is unlimited (TSQ bounds it)
CC_NAMES = {"newreno": "reno", "dctcp": "dctcp", "cubic": "cubic"}


class ClusterError(InputError):
    """A scenario or argument the box cannot build; the message names the field."""


@dataclass
class Link:
    a_ns: str
    a_dev: str
    a_addr: str  # "10.1.0.0/31"
    b_ns: str
    b_dev: str
    b_addr: str
    rate_bps: int
    delay_ps: int
    a_switch: bool  # the a end is a switch port (queue, bands, ECN); else a host NIC
    b_switch: bool


@dataclass
class Route:
    ns: str
    dest: str  # "default" or a prefix
    nexthops: list[tuple[str, str]]  # (via address, device)


@dataclass
class Plan:
    name: str
    kind: str
    hosts: list[str] = field(default_factory=list)  # host namespaces, in host order
    host_addrs: list[str] = field(default_factory=list)  # their addresses (no prefix length)
    switches: list[str] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)
    sysctls: list[tuple[str, str, str]] = field(default_factory=list)  # (ns, key, value)
    tc: list[tuple[str, list[str]]] = field(default_factory=list)  # (ns, argv after "tc")
    # kernel features the plan uses -> the scenario field that asks for them (apply.py checks them first)
    needs: dict[str, str] = field(default_factory=dict)
    # False: one MTU-size packet per skb, so tc counts every frame's wire overhead exactly (costs CPU);
    # True: the kernel's GSO super-packets (up to 64 KB), cheaper, but htb adds the 24 bytes of
    # preamble, gap and FCS once per super-packet (docs/cluster.md)
    gso: bool = False
    mtu: int = 1500
    # [cloud] boxes: namespaces that are neither the tenant's hosts nor switches (noisy neighbours, their sink;
    # build_cloud_plan): {label, ns, addr, role, ...}
    others: list[dict] = field(default_factory=list)

    @property
    def namespaces(self) -> list[str]:
        return self.hosts + self.switches + [o["ns"] for o in self.others]

    def label(self, ns: str) -> str:
        return ns[len(PREFIX) + len(self.name) + 1:]

    def commands(self) -> list[list[str]]:
        """Every command, in order (after the namespaces exist)."""
        cmds: list[list[str]] = []
        for ns in self.namespaces:
            cmds.append(["ip", "-n", ns, "link", "set", "lo", "up"])
        for ns, key, value in self.sysctls:
            cmds.append(["ip", "netns", "exec", ns, "sysctl", "-qw", f"{key}={value}"])
        for lk in self.links:
            cmds.append(["ip", "link", "add", "name", lk.a_dev, "netns", lk.a_ns, "type", "veth",
                         "peer", "name", lk.b_dev, "netns", lk.b_ns])
            for ns, dev, addr in ((lk.a_ns, lk.a_dev, lk.a_addr), (lk.b_ns, lk.b_dev, lk.b_addr)):
                if not self.gso:
                    cmds.append(["ip", "-n", ns, "link", "set", "dev", dev, "gso_max_segs", "1", "gso_max_size",
                                 str(self.mtu + ETH_HEADER_BYTES)])
                if self.mtu != 1500:
                    cmds.append(["ip", "-n", ns, "link", "set", "dev", dev, "mtu", str(self.mtu)])
                cmds.append(["ip", "-n", ns, "addr", "add", addr, "dev", dev])
                cmds.append(["ip", "-n", ns, "link", "set", "dev", dev, "up"])
        for ns, argv in self.tc:
            cmds.append(["tc", "-n", ns, *argv])
        for r in self.routes:
            if len(r.nexthops) == 1:
                via, dev = r.nexthops[0]
                cmds.append(["ip", "-n", r.ns, "route", "add", r.dest, "via", via, "dev", dev])
            else:
                hops = [w for via, dev in r.nexthops for w in ("nexthop", "via", via, "dev", dev)]
                cmds.append(["ip", "-n", r.ns, "route", "add", r.dest, *hops])
        return cmds


def check_name(name: str) -> str:
    if not (isinstance(name, str) and 1 <= len(name) <= 12 and name.isascii() and name.isalnum() and name.islower()):
        raise ClusterError(f"--name: the cluster's name must be 1..12 lowercase letters or digits, got {name!r}")
    return name


def rate_arg(rate_bps: int) -> str:
    return f"{rate_bps}bit"


def time_arg(ps: int) -> str:
    """tc's time syntax, exact to the nanosecond (netem's resolution)."""
    if ps % 1_000_000 == 0:
        return f"{ps // 1_000_000}us"
    return f"{ps // 1000}ns"


def _queue_limits(q: QueueConfig, frame: int = FRAME_BYTES) -> tuple[str, int]:
    """The band's drop-tail limit as a Linux fifo: ('pfifo', packets) or ('bfifo', bytes)."""
    if q.limit_bytes is None and q.limit_packets is None:
        return "pfifo", HOST_QUEUE_PACKETS
    if q.limit_bytes is None:
        return "pfifo", q.limit_packets
    if q.limit_packets is None:
        return "bfifo", q.limit_bytes
    return "bfifo", min(q.limit_bytes, q.limit_packets * frame)


def ecn_threshold_bytes(q: QueueConfig, frame: int = FRAME_BYTES) -> int | None:
    """The marking threshold in bytes (packets counted as full frames); the smaller if both are given."""
    vals = [v for v in (q.ecn_threshold_bytes,
                        None if q.ecn_threshold_packets is None else q.ecn_threshold_packets * frame)
            if v is not None]
    return min(vals) if vals else None


def link_end_tc(dev: str, rate_bps: int, delay_ps: int, q: QueueConfig, switch_port: bool,
                frame: int = FRAME_BYTES) -> list[list[str]]:
    """tc for one link end's egress: netem (delay) at the root when the delay is positive, an htb tree
    under it (rate, counted on the wire: +24 bytes per frame), one htb class per band, strict priority
    between bands by htb's prio, DSCP class selector -> band by u32 filters, and per band a drop-tail
    fifo, or red marking ECN at the threshold. A host's NIC (switch_port False) has one unlimited band
    that never marks, as in the simulator."""
    r = rate_arg(rate_bps)
    cmds: list[list[str]] = []
    parent = ["root"]
    if delay_ps > 0:
        # netem only delays: its queue must never drop (rate x delay in frames, with a wide margin)
        inflight = rate_bps * delay_ps // (8 * frame * 10**12)
        cmds.append(["qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay", time_arg(delay_ps),
                     "limit", str(max(10_000, 4 * inflight))])
        parent = ["parent", "1:1"]
    prio = switch_port and q.discipline == "prio" and q.bands > 1
    bands = q.bands if prio else 1
    default_band = q.priomap[0] if prio else 0
    cmds.append(["qdisc", "add", "dev", dev, *parent, "handle", "2:", "htb", "default", f"{10 + default_band:x}"])
    shape = ["overhead", str(WIRE_EXTRA_BYTES), "quantum", str(frame)]
    cmds.append(["class", "add", "dev", dev, "parent", "2:", "classid", "2:1", "htb", "rate", r, "ceil", r, *shape])
    # a band's guaranteed rate is 1/1000 of the link (htb needs one); the rest goes to the lowest prio first
    band_rate = r if bands == 1 else rate_arg(max(8000, rate_bps // 1000))
    ecn = ecn_threshold_bytes(q, frame) if switch_port else None
    kind, limit = _queue_limits(q, frame) if switch_port else ("pfifo", HOST_QUEUE_PACKETS)
    for b in range(bands):
        cid = f"{10 + b:x}"
        cmds.append(["class", "add", "dev", dev, "parent", "2:1", "classid", f"2:{cid}", "htb", "rate", band_rate,
                     "ceil", r, "prio", str(b), *shape])
        if ecn is None:
            cmds.append(["qdisc", "add", "dev", dev, "parent", f"2:{cid}", kind, "limit", str(limit)])
        else:
            limit_b = limit * frame if kind == "pfifo" else limit
            lo = max(1, ecn)
            hi = lo + frame
            # burst = lo / avpkt makes tc pick red's smallest averaging shift (weight 1/2): near-instantaneous
            burst = max(1, -(-lo // frame))
            cmds.append(["qdisc", "add", "dev", dev, "parent", f"2:{cid}", "red", "limit", str(max(limit_b, 2 * hi)),
                         "min", str(lo), "max", str(hi), "avpkt", str(frame), "burst", str(burst),
                         "probability", "1.0", "bandwidth", r, "ecn"])
    if prio:
        for c in range(8):  # traffic class c = DSCP class selector CSc (TOS bits 7..5)
            cmds.append(["filter", "add", "dev", dev, "parent", "2:", "protocol", "ip", "prio", "1", "u32",
                         "match", "ip", "tos", f"0x{c << 5:02x}", "0xe0", "flowid", f"2:{10 + q.priomap[c]:x}"])
    return cmds


# What the box can leave out when the kernel lacks it (apply.py --allow-missing): feature -> what is omitted.
OMITTABLE = {"netem": "delay", "red": "ecn", "cc": "cc"}


# Why the box refuses node_overrides and cloud.hypervisor_pps.
NO_FORWARDING_CAPACITY = "the box's switches forward at the kernel's own speed; a set forwarding capacity is not built"


def _refuse_unbuildable(s: Scenario) -> None:
    """Scenario features the box does not build, named by their field (getattr: newer schemas have them)."""
    t = s.topology
    if getattr(t, "host_ports", 1) != 1:
        raise ClusterError(f"topology.host_ports: the box builds one port per host, got {t.host_ports}")
    for field, why in (("queue_overrides", "the box gives every switch port [queue]; per-port overrides are not built"),
                       ("pfc", "veths have no priority flow control (PAUSE frames)"),
                       ("link_events", "the box does not replay timed link events"),
                       ("switch_logic", "the box's switches are plain Linux routers"),
                       ("node_overrides", NO_FORWARDING_CAPACITY)):
        if getattr(s, field, None):
            raise ClusterError(f"{field}: {why}; remove it to build the box")
    if s.transport.cc not in CC_NAMES:
        raise ClusterError(f"transport.cc: the box runs Linux's TCP ({', '.join(CC_NAMES)}), not {s.transport.cc!r}")


def build_plan(s: Scenario, name: str = "box", omit: frozenset = frozenset(), gso: bool = False) -> Plan:
    """The box for scenario ``s``: a star or a leaf-spine; anything else is refused naming the field.
    ``omit`` leaves out "delay" (no netem), "ecn" (plain fifo bands) or "cc" (the kernel's default
    congestion control) -- what a kernel without them cannot build."""
    check_name(name)
    if getattr(s, "cloud", None) is not None:
        return build_cloud_plan(s, name, omit, gso)
    t = s.topology
    if isinstance(t, StarTopology):
        leaves, per_leaf, spines = 1, t.hosts, 0
        if t.hosts > MAX_HOSTS:
            raise ClusterError(f"topology.hosts: the box builds at most {MAX_HOSTS} hosts (namespaces on one "
                               f"machine), got {t.hosts}")
    elif isinstance(t, LeafSpineTopology):
        leaves, per_leaf, spines = t.leaves, t.hosts_per_leaf, t.spines
        if leaves * per_leaf > MAX_HOSTS:
            raise ClusterError(f"topology.hosts_per_leaf: the box builds at most {MAX_HOSTS} hosts, got "
                               f"{leaves} leaves x {per_leaf} = {leaves * per_leaf}")
        if leaves + spines > MAX_SWITCHES:
            raise ClusterError(f"topology.spines: the box builds at most {MAX_SWITCHES} switches, got "
                               f"{leaves} leaves + {spines} spines")
    else:
        raise ClusterError(f"topology.kind: the box builds star and leaf_spine topologies, not {t.kind}")
    _refuse_unbuildable(s)
    data = s.build_topology()  # the simulator's own nodes and links: the same rates and delays
    q = s.queue
    host_q = getattr(s, "host_queue", None)  # newer schemas: host NIC queues that drop and mark like any port
    ns = lambda label: f"{PREFIX}{name}-{label}"  # noqa: E731
    p = Plan(name=name, kind=t.kind, gso=gso, mtu=s.transport.mss_bytes + 40)
    frame = p.mtu + ETH_HEADER_BYTES
    node_ns: dict[int, str] = {}
    for i, node in enumerate(data.nodes):
        label = "sw" if spines == 0 and node["kind"] == "switch" else node["name"]
        node_ns[i] = ns(label)
        (p.hosts if node["kind"] == "host" else p.switches).append(node_ns[i])
    leaf_ns = [ns("sw")] if spines == 0 else [ns(f"leaf{i}") for i in range(leaves)]
    spine_ns = [ns(f"spine{i}") for i in range(spines)]

    def data_link(a_ns: str, b_ns: str) -> dict:
        for lk in data.links:
            if {node_ns[lk["a"]], node_ns[lk["b"]]} == {a_ns, b_ns}:
                return lk
        raise AssertionError(f"no link {a_ns} - {b_ns}")  # the builders make every link the box expects

    for h, host in enumerate(p.hosts):
        l, j = divmod(h, per_leaf)
        lk = data_link(leaf_ns[l], host)
        sw, ha = f"10.{l + 1}.{j}.0", f"10.{l + 1}.{j}.1"
        p.links.append(Link(leaf_ns[l], f"p{j}", f"{sw}/31", host, "eth0", f"{ha}/31", lk["rate_bps"],
                            lk["delay_ps"], True, False))
        p.host_addrs.append(ha)
        p.routes.append(Route(host, "default", [(sw, "eth0")]))
    for l in range(spines and leaves):
        for sp in range(spines):
            lk = data_link(leaf_ns[l], spine_ns[sp])
            p.links.append(Link(spine_ns[sp], f"down{l}", f"10.0.{sp}.{2 * l}/31", leaf_ns[l], f"up{sp}",
                                f"10.0.{sp}.{2 * l + 1}/31", lk["rate_bps"], lk["delay_ps"], True, True))
            p.routes.append(Route(spine_ns[sp], f"10.{l + 1}.0.0/16", [(f"10.0.{sp}.{2 * l + 1}", f"down{l}")]))
    _leaf_routes_and_forwarding(p, leaf_ns, spines)
    if "ecn" in omit:
        q = q.model_copy(update={"ecn_threshold_bytes": None, "ecn_threshold_packets": None})
        if host_q is not None:
            host_q = host_q.model_copy(update={"ecn_threshold_bytes": None, "ecn_threshold_packets": None})
    ecn = ecn_threshold_bytes(q) is not None or (host_q is not None and ecn_threshold_bytes(host_q) is not None)
    _host_transport(p, p.hosts, s, ecn, omit)
    for lk in p.links:
        delay = 0 if "delay" in omit else lk.delay_ps
        for end_ns, dev, sw_port in ((lk.a_ns, lk.a_dev, lk.a_switch), (lk.b_ns, lk.b_dev, lk.b_switch)):
            if sw_port or host_q is None:
                cmds = link_end_tc(dev, lk.rate_bps, delay, q, sw_port, frame)
            else:
                cmds = link_end_tc(dev, lk.rate_bps, delay, host_q, True, frame)
            for argv in cmds:
                p.tc.append((end_ns, argv))
                if argv[0] == "qdisc" and "netem" in argv:
                    p.needs["netem"] = "topology.link_delay_ps"
                if argv[0] == "qdisc" and "red" in argv:
                    qq, sec = (q, "queue") if sw_port or host_q is None else (host_q, "host_queue")
                    p.needs.setdefault("red", f"{sec}.ecn_threshold_bytes" if qq.ecn_threshold_bytes is not None
                                       else f"{sec}.ecn_threshold_packets")
    return p


# ---------------------------------------------------------------- a [cloud] scenario
# The box of a ``[cloud]`` scenario (docs/clockwork-control.md, "The cloud in the
# box"): the same placement the simulator lowers (``Scenario.build_cloud``),
# built as namespaces.
#
# - Every machine holding a built VM is a namespace ``pm<j>``: a Linux router
#   standing for its hypervisor's virtual switch. Its port toward the ToR
#   (``up``) is the machine's NIC, shaped at the fabric's host-link rate with
#   the ``[cloud] hypervisor_queue`` as its queue: the one uplink and the one
#   queue its VMs share.
# - Every tenant VM is a host namespace ``vm<i>`` (the box's hosts, in the
#   cloud's host order), joined to its machine by a link at the per-VM egress
#   cap ``vm_egress_bps``.
# - Other tenants' VMs are built only on busy machines (``vm<i>`` too, listed
#   apart from the hosts): the noisy neighbours. Each sends Poisson bursts
#   over TCP, ``neighbour_load`` x its cap on average, out of its machine to
#   ``ext``, a namespace on leaf 0 standing for the other tenants' VMs
#   elsewhere (noise.py; apply.py starts them). Other tenants' VMs on quiet machines carry
#   no traffic and are left out.
# - The provider fabric: its leaves (and spines, when there are two leaves or
#   more) as in the leaf-spine box (plan.py), same rates.
#
# Addressing (leaf l, the machine's index k on its leaf, the VM's slot s):
# machine uplink 10.<l+1>.<16k>.0/31 (leaf end .0, machine end .1); VM link
# 10.<l+1>.<16k+1+s>.0/31 (machine end .0, VM end .1); ext 10.1.255.0/31
# (leaf 0 end .0). A leaf routes 10.<l+1>.<16k>.0/20 to machine k, a machine
# routes everything else up, a VM via its machine. Spines as in plan.py.

EXT_RATE_BPS = 10 * 10**9  # ext's own link: never the bottleneck
MAX_SLOTS = 15
MAX_PER_LEAF = 14


def build_cloud_plan(s: Scenario, name: str = "box", omit: frozenset = frozenset(), gso: bool = False) -> Plan:
    """The plan of a [cloud] scenario's box (module docstring)."""
    check_name(name)
    c = s.cloud
    f = c.fabric
    if isinstance(f, FatTreeTopology):
        raise ClusterError("cloud.fabric.kind: the box builds a leaf_spine provider fabric, not fat_tree")
    if c.vms_per_host > MAX_SLOTS:
        raise ClusterError(f"cloud.vms_per_host: the box addresses at most {MAX_SLOTS} VMs per machine, "
                           f"got {c.vms_per_host}")
    if f.hosts_per_leaf > MAX_PER_LEAF:
        raise ClusterError(f"cloud.fabric.hosts_per_leaf: the box addresses at most {MAX_PER_LEAF} machines per "
                           f"leaf, got {f.hosts_per_leaf}")
    if s.transport.cc not in CC_NAMES:
        raise ClusterError(f"transport.cc: the box runs Linux's TCP ({', '.join(CC_NAMES)}), not {s.transport.cc!r}")
    for field, given in (("node_overrides", bool(s.node_overrides)), ("cloud.hypervisor_pps", c.hypervisor_pps)):
        if given:
            raise ClusterError(f"{field}: {NO_FORWARDING_CAPACITY}; remove it to build the box")
    cl = s.build_cloud()
    noisy = cl.noisy_vms()
    vms = [i for i, t in enumerate(cl.tenant) if t] + noisy
    machines = sorted({cl.machine[i] for i in vms})
    if len(vms) + (1 if noisy else 0) > MAX_HOSTS:
        raise ClusterError(f"cloud.tenant_vms: the box builds at most {MAX_HOSTS} VM namespaces, got "
                           f"{len(vms)} (tenant VMs and noisy neighbours)")
    leaves = f.leaves
    spines = f.spines if leaves > 1 else 0
    if len(machines) + leaves + spines > 2 * MAX_SWITCHES:
        raise ClusterError(f"cloud.fabric: the box builds at most {2 * MAX_SWITCHES} machines and switches, got "
                           f"{len(machines)} machines + {leaves + spines} switches")
    ns = lambda label: f"{PREFIX}{name}-{label}"  # noqa: E731
    p = Plan(name=name, kind="cloud", gso=gso, mtu=s.transport.mss_bytes + 40)
    frame = p.mtu + ETH_HEADER_BYTES
    t = cl.topology
    idx = {node["name"]: k for k, node in enumerate(t.nodes)}

    def rate_delay(a: str, b: str) -> tuple[int, int]:
        for lk in t.links:
            if {lk["a"], lk["b"]} == {idx[a], idx[b]}:
                return lk["rate_bps"], lk["delay_ps"]
        raise AssertionError(f"no link {a} - {b}")  # cloud.build makes every link the box expects

    leaf_ns = [ns(f"leaf{i}") for i in range(leaves)]
    spine_ns = [ns(f"spine{i}") for i in range(spines)]
    hyper = c.hypervisor_queue
    q = s.queue
    ports: dict[tuple[str, str], QueueConfig | None] = {}  # (ns, dev) -> its queue (None: a host NIC)
    for m in machines:
        l, k = divmod(m, f.hosts_per_leaf)
        pm = ns(f"pm{m}")
        p.switches.append(pm)
        rate, delay = rate_delay(f"pm{m}", cl.tor_names[m])
        lo = f"10.{l + 1}.{16 * k}"
        p.links.append(Link(leaf_ns[l], f"m{k}", f"{lo}.0/31", pm, "up", f"{lo}.1/31", rate, delay, True, True))
        ports[(leaf_ns[l], f"m{k}")], ports[(pm, "up")] = q, hyper
        p.routes.append(Route(pm, "default", [(f"{lo}.0", "up")]))
        p.routes.append(Route(leaf_ns[l], f"{lo}.0/20", [(f"{lo}.1", f"m{k}")]))
    others = []
    for i in vms:
        m, slot = cl.machine[i], cl.slot[i]
        l, k = divmod(m, f.hosts_per_leaf)
        vm, pm = ns(f"vm{i}"), ns(f"pm{m}")
        rate, delay = rate_delay(f"vm{i}", f"pm{m}")
        sub = f"10.{l + 1}.{16 * k + 1 + slot}"
        p.links.append(Link(pm, f"v{slot}", f"{sub}.0/31", vm, "eth0", f"{sub}.1/31", rate, delay, True, False))
        ports[(pm, f"v{slot}")], ports[(vm, "eth0")] = q, None
        p.routes.append(Route(vm, "default", [(f"{sub}.0", "eth0")]))
        if cl.tenant[i]:
            p.hosts.append(vm)
            p.host_addrs.append(f"{sub}.1")
        else:
            others.append({"label": f"vm{i}", "ns": vm, "addr": f"{sub}.1", "role": "neighbour",
                           "machine": f"pm{m}", "rate_bps": round(c.neighbour_load * c.vm_egress_bps)})
    if noisy:
        ext = ns("ext")
        p.links.append(Link(leaf_ns[0], "ext", "10.1.255.0/31", ext, "eth0", "10.1.255.1/31", EXT_RATE_BPS, 0,
                            True, False))
        ports[(leaf_ns[0], "ext")], ports[(ext, "eth0")] = q, None
        p.routes.append(Route(ext, "default", [("10.1.255.0", "eth0")]))
        others.append({"label": "ext", "ns": ext, "addr": "10.1.255.1", "role": "sink"})
    p.others = others
    p.switches += leaf_ns + spine_ns
    for sp in range(spines):
        for l in range(leaves):
            rate, delay = rate_delay(f"leaf{l}", f"spine{sp}")
            p.links.append(Link(spine_ns[sp], f"down{l}", f"10.0.{sp}.{2 * l}/31", leaf_ns[l], f"up{sp}",
                                f"10.0.{sp}.{2 * l + 1}/31", rate, delay, True, True))
            ports[(spine_ns[sp], f"down{l}")], ports[(leaf_ns[l], f"up{sp}")] = q, q
            p.routes.append(Route(spine_ns[sp], f"10.{l + 1}.0.0/16", [(f"10.0.{sp}.{2 * l + 1}", f"down{l}")]))
    _leaf_routes_and_forwarding(p, leaf_ns, spines)
    if "ecn" in omit:
        off = {"ecn_threshold_bytes": None, "ecn_threshold_packets": None}
        ports = {k: (v.model_copy(update=off) if v is not None else None) for k, v in ports.items()}
    ecn = any(v is not None and ecn_threshold_bytes(v) is not None for v in ports.values())
    _host_transport(p, p.hosts + [o["ns"] for o in others], s, ecn, omit)
    for lk in p.links:
        delay = 0 if "delay" in omit else lk.delay_ps
        for end_ns, dev in ((lk.a_ns, lk.a_dev), (lk.b_ns, lk.b_dev)):
            pq = ports[(end_ns, dev)]
            for argv in link_end_tc(dev, lk.rate_bps, delay, pq if pq is not None else q, pq is not None, frame):
                p.tc.append((end_ns, argv))
                if argv[0] == "qdisc" and "netem" in argv:
                    p.needs["netem"] = "cloud.vm_link_delay_ps"
                if argv[0] == "qdisc" and "red" in argv:
                    p.needs.setdefault("red", "queue.ecn_threshold_packets")
    return p


def _leaf_routes_and_forwarding(p: "Plan", leaf_ns: list[str], spines: int) -> None:
    """Each leaf's route to every other leaf's hosts over all its uplinks (ECMP), and the switches' forwarding
    sysctls (multipath hashing on L4, no reverse-path filter): the same in a leaf-spine and a [cloud] box."""
    for l in range(len(leaf_ns) if spines else 0):
        for m in range(len(leaf_ns)):
            if m != l:
                p.routes.append(Route(leaf_ns[l], f"10.{m + 1}.0.0/16",
                                      [(f"10.0.{sp}.{2 * l}", f"up{sp}") for sp in range(spines)]))
    for sw in p.switches:
        for key, value in (("net.ipv4.ip_forward", "1"), ("net.ipv4.conf.all.rp_filter", "0"),
                           ("net.ipv4.conf.default.rp_filter", "0"), ("net.ipv4.fib_multipath_hash_policy", "1")):
            p.sysctls.append((sw, key, value))


def _host_transport(p: "Plan", hosts: list[str], s, ecn: bool, omit) -> None:
    """The hosts' TCP congestion control (the scenario's, unless omitted; the box then needs that module) and ECN
    when any queue marks: the same in every box."""
    cc = CC_NAMES[s.transport.cc]
    for host in hosts:
        if "cc" not in omit:
            p.sysctls.append((host, "net.ipv4.tcp_congestion_control", cc))
        if ecn:
            p.sysctls.append((host, "net.ipv4.tcp_ecn", "1"))
    if "cc" not in omit:
        p.needs[f"cc:{cc}"] = "transport.cc"

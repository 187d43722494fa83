"""The box of a ``[cloud]`` scenario (docs/clockwork.md, "The cloud in the
box"): the same placement the simulator lowers (``Scenario.build_cloud``),
built as namespaces.

- Every machine holding a built VM is a namespace ``pm<j>``: a Linux router
  standing for its hypervisor's virtual switch. Its port toward the ToR
  (``up``) is the machine's NIC, shaped at the fabric's host-link rate with
  the ``[cloud] hypervisor_queue`` as its queue: the one uplink and the one
  queue its VMs share.
- Every tenant VM is a host namespace ``vm<i>`` (the box's hosts, in the
  cloud's host order), joined to its machine by a link at the per-VM egress
  cap ``vm_egress_bps``.
- Other tenants' VMs are built only on busy machines (``vm<i>`` too, listed
  apart from the hosts): the noisy neighbours. Each sends Poisson bursts
  over TCP, ``neighbour_load`` x its cap on average, out of its machine to
  ``ext``, a namespace on leaf 0 standing for the other tenants' VMs
  elsewhere (noise.py; apply.py starts them). Other tenants' VMs on quiet machines carry
  no traffic and are left out.
- The provider fabric: its leaves (and spines, when there are two leaves or
  more) as in the leaf-spine box (plan.py), same rates.

Addressing (leaf l, the machine's index k on its leaf, the VM's slot s):
machine uplink 10.<l+1>.<16k>.0/31 (leaf end .0, machine end .1); VM link
10.<l+1>.<16k+1+s>.0/31 (machine end .0, VM end .1); ext 10.1.255.0/31
(leaf 0 end .0). A leaf routes 10.<l+1>.<16k>.0/20 to machine k, a machine
routes everything else up, a VM via its machine. Spines as in plan.py."""

from __future__ import annotations

from ...scenario.cloud import FatTreeTopology
from ...scenario.model import QueueConfig, Scenario
from .plan import (CC_NAMES, ETH_HEADER_BYTES, MAX_HOSTS, MAX_SWITCHES, PREFIX, ClusterError, Link, Plan, Route,
                   check_name, ecn_threshold_bytes, link_end_tc)

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
    for l in range(leaves if spines else 0):
        for m2 in range(leaves):
            if m2 != l:
                p.routes.append(Route(leaf_ns[l], f"10.{m2 + 1}.0.0/16",
                                      [(f"10.0.{sp}.{2 * l}", f"up{sp}") for sp in range(spines)]))
    for sw in p.switches:
        for key, value in (("net.ipv4.ip_forward", "1"), ("net.ipv4.conf.all.rp_filter", "0"),
                           ("net.ipv4.conf.default.rp_filter", "0"), ("net.ipv4.fib_multipath_hash_policy", "1")):
            p.sysctls.append((sw, key, value))
    if "ecn" in omit:
        off = {"ecn_threshold_bytes": None, "ecn_threshold_packets": None}
        ports = {k: (v.model_copy(update=off) if v is not None else None) for k, v in ports.items()}
    ecn = any(v is not None and ecn_threshold_bytes(v) is not None for v in ports.values())
    cc = CC_NAMES[s.transport.cc]
    for host in p.hosts + [o["ns"] for o in others]:
        if "cc" not in omit:
            p.sysctls.append((host, "net.ipv4.tcp_congestion_control", cc))
        if ecn:
            p.sysctls.append((host, "net.ipv4.tcp_ecn", "1"))
    if "cc" not in omit:
        p.needs[f"cc:{cc}"] = "transport.cc"
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

"""The cluster-in-a-box plan (fabriclab.runtime.cluster.plan), without root: addresses,
reachability through the planned routes, ECMP, and the tc arguments against
hand-converted scenario values; the CLI's refusals."""

from __future__ import annotations

import ipaddress

import pytest

from fabriclab import Scenario
from fabriclab.runtime.cluster.plan import ClusterError, build_plan


def scen(topology: dict, **kw) -> Scenario:
    return Scenario.from_dict({"topology": topology, **kw})


STAR4 = {"kind": "star", "hosts": 4, "link_rate_bps": "100Mbps", "link_delay_ps": "250us"}
LS = {"kind": "leaf_spine", "leaves": 3, "hosts_per_leaf": 2, "spines": 4, "link_rate_bps": "1Gbps",
      "link_delay_ps": "1.5us"}


def ends(plan):
    for lk in plan.links:
        yield lk.a_ns, lk.a_dev, lk.a_addr
        yield lk.b_ns, lk.b_dev, lk.b_addr


def test_star_addresses_are_the_documented_plan_and_unique():
    p = build_plan(scen(STAR4), "t")
    assert p.host_addrs == ["10.1.0.1", "10.1.1.1", "10.1.2.1", "10.1.3.1"]
    assert p.hosts == [f"flbox-t-h{i}" for i in range(4)] and p.switches == ["flbox-t-sw"]
    addrs = [a for _, _, a in ends(p)]
    assert len(set(addrs)) == len(addrs) == 8
    for lk in p.links:  # both ends of a link in one /31
        assert ipaddress.ip_interface(lk.a_addr).network == ipaddress.ip_interface(lk.b_addr).network
        assert ipaddress.ip_interface(lk.a_addr).network.prefixlen == 31


def test_leaf_spine_addresses_unique_and_devices_unique_per_namespace():
    p = build_plan(scen(LS), "t")
    addrs = [ipaddress.ip_interface(a).ip for _, _, a in ends(p)]
    assert len(set(addrs)) == len(addrs) == 2 * (6 + 3 * 4)
    devs = [(ns, dev) for ns, dev, _ in ends(p)]
    assert len(set(devs)) == len(devs)
    assert all(len(dev) <= 15 for _, dev in devs)  # Linux's interface name limit
    assert p.host_addrs[3] == "10.2.1.1"  # host 3 = leaf 1, second host


def _walk(plan, src_ns: str, dst: str, hops=0) -> set[str]:
    """Where a packet to ``dst`` from ``src_ns`` ends up, following every ECMP branch: longest-prefix
    match over connected /31s and the planned routes (an independent little router)."""
    assert hops < 8, "routing loop"
    dst = ipaddress.ip_address(dst)
    local = {ipaddress.ip_interface(a).ip for ns, _, a in ends(plan) if ns == src_ns}
    if dst in local:
        return {src_ns}
    cands = []  # (prefix length, [next-hop addresses])
    for ns, _, a in ends(plan):
        if ns == src_ns and dst in ipaddress.ip_interface(a).network:
            cands.append((31, [str(dst)]))
    for r in plan.routes:
        if r.ns == src_ns:
            net = ipaddress.ip_network("0.0.0.0/0" if r.dest == "default" else r.dest)
            if dst in net:
                cands.append((net.prefixlen, [via for via, _ in r.nexthops]))
    if not cands:
        return {"unreachable"}
    _, vias = max(cands, key=lambda c: c[0])
    out = set()
    for via in vias:
        owner = [ns for ns, _, a in ends(plan) if str(ipaddress.ip_interface(a).ip) == via]
        assert len(owner) == 1 and owner[0] != src_ns
        # the next hop must be on a link of this namespace
        assert any(ns == src_ns and ipaddress.ip_address(via) in ipaddress.ip_interface(a).network
                   for ns, _, a in ends(plan))
        out |= _walk(plan, owner[0], str(dst), hops + 1)
    return out


@pytest.mark.parametrize("topology", [STAR4, LS], ids=["star", "leaf_spine"])
def test_every_host_reaches_every_other_on_every_path(topology):
    p = build_plan(scen(topology), "t")
    for i, src in enumerate(p.hosts):
        for j, dst in enumerate(p.host_addrs):
            if i != j:
                assert _walk(p, src, dst) == {p.hosts[j]}


def test_leaf_spine_ecmp_has_one_next_hop_per_spine():
    p = build_plan(scen(LS), "t")
    leaf_routes = [r for r in p.routes if "-leaf" in r.ns]
    assert len(leaf_routes) == 3 * 2  # every leaf: one route per other leaf
    for r in leaf_routes:
        assert len(r.nexthops) == 4
        assert sorted(dev for _, dev in r.nexthops) == ["up0", "up1", "up2", "up3"]
    cmd = next(c for c in p.commands() if c[:3] == ["ip", "-n", "flbox-t-leaf0"] and "route" in c)
    assert cmd.count("nexthop") == 4
    assert ("flbox-t-leaf0", "net.ipv4.fib_multipath_hash_policy", "1") in p.sysctls
    assert ("flbox-t-spine2", "net.ipv4.ip_forward", "1") in p.sysctls


def tc_of(plan, ns, dev):
    return [argv for n, argv in plan.tc if n == ns and argv[3] == dev]


def test_tc_rate_and_delay_are_the_scenario_converted():
    p = build_plan(scen(STAR4), "t")
    for ns, dev in (("flbox-t-h2", "eth0"), ("flbox-t-sw", "p2")):
        cmds = tc_of(p, ns, dev)
        netem = [c for c in cmds if "netem" in c]
        assert len(netem) == 1 and netem[0][netem[0].index("delay") + 1] == "250us"  # 250 us = 250,000,000 ps
        root_class = next(c for c in cmds if "2:1" in c and c[0] == "class")
        assert root_class[root_class.index("rate") + 1] == "100000000bit"  # 100 Mbit/s
        assert root_class[root_class.index("overhead") + 1] == "24"  # FCS 4 + preamble 8 + gap 12
    p = build_plan(scen(LS), "t")
    netem = [c for c in tc_of(p, "flbox-t-leaf0", "up1") if "netem" in c][0]
    assert netem[netem.index("delay") + 1] == "1500ns"  # 1.5 us
    # leaf-spine links at the builder's rate: 2 hosts x 1 Gbit/s / (4 spines x oversubscription 1) = 500 Mbit/s
    up = next(c for c in tc_of(p, "flbox-t-leaf0", "up1") if c[0] == "class" and "2:1" in c)
    assert up[up.index("rate") + 1] == "500000000bit"
    p = build_plan(scen({**LS, "oversubscription": 4}), "t")
    up = next(c for c in tc_of(p, "flbox-t-spine0", "down2") if c[0] == "class" and "2:1" in c)
    assert up[up.index("rate") + 1] == "125000000bit"  # 2 x 1e9 / (4 x 4)


def test_zero_delay_or_omitted_delay_has_no_netem():
    p = build_plan(scen({**STAR4, "link_delay_ps": 0}), "t")
    assert not any("netem" in argv for _, argv in p.tc) and "netem" not in p.needs
    p = build_plan(scen(STAR4), "t", omit=frozenset({"delay"}))
    assert not any("netem" in argv for _, argv in p.tc)
    assert build_plan(scen(STAR4), "t").needs["netem"] == "topology.link_delay_ps"


def test_prio_bands_priomap_and_ecn_threshold_on_switch_ports_only():
    q = {"discipline": "prio", "bands": 3, "priomap": [1, 0, 2, 2, 2, 2, 2, 0], "ecn_threshold_packets": 65,
         "limit_packets": 1000}
    p = build_plan(scen(STAR4, queue=q), "t")
    sw = tc_of(p, "flbox-t-sw", "p0")
    bands = [c for c in sw if c[0] == "class" and c[c.index("parent") + 1] == "2:1"]
    assert [c[c.index("prio") + 1] for c in bands] == ["0", "1", "2"]
    filters = {c[c.index("tos") + 1]: c[c.index("flowid") + 1] for c in sw if c[0] == "filter"}
    # class c is DSCP CSc (TOS c << 5); band b is htb class 2:(10 + b) in hex
    assert filters == {"0x00": "2:b", "0x20": "2:a", "0x40": "2:c", "0x60": "2:c", "0x80": "2:c", "0xa0": "2:c",
                       "0xc0": "2:c", "0xe0": "2:a"}
    htb = next(c for c in sw if c[0] == "qdisc" and "htb" in c)
    assert htb[htb.index("default") + 1] == "b"  # unclassified = class 0 -> priomap[0] = band 1
    red = [c for c in sw if "red" in c]
    assert len(red) == 3
    # 65 packets x 1514 bytes = 98,410; max one frame above; limit 1000 x 1514
    r = red[0]
    assert (r[r.index("min") + 1], r[r.index("max") + 1], r[r.index("limit") + 1]) == ("98410", "99924", "1514000")
    assert "ecn" in r and r[r.index("probability") + 1] == "1.0"
    host = tc_of(p, "flbox-t-h0", "eth0")  # a host NIC: one band, no marking, a deep queue
    assert not any("red" in c or c[0] == "filter" for c in host)
    assert [c[c.index("limit") + 1] for c in host if "pfifo" in c] == ["100000"]
    assert ("flbox-t-h0", "net.ipv4.tcp_ecn", "1") in p.sysctls


def test_fifo_limits_without_ecn():
    p = build_plan(scen(STAR4, queue={"ecn_threshold_packets": "off", "limit_packets": 50}), "t")
    sw = tc_of(p, "flbox-t-sw", "p1")
    assert [c[c.index("limit") + 1] for c in sw if "pfifo" in c] == ["50"]
    p = build_plan(scen(STAR4, queue={"ecn_threshold_packets": "off", "limit_packets": "off",
                                      "limit_bytes": "64KiB"}), "t")
    assert [c[c.index("limit") + 1] for c in tc_of(p, "flbox-t-sw", "p1") if "bfifo" in c] == ["65536"]
    assert not any(k == "net.ipv4.tcp_ecn" for _, k, _ in p.sysctls)


def test_congestion_control_from_the_scenario():
    p = build_plan(scen(STAR4, transport={"cc": "newreno"}), "t")
    assert ("flbox-t-h1", "net.ipv4.tcp_congestion_control", "reno") in p.sysctls
    assert p.needs["cc:reno"] == "transport.cc"


def test_refusals_name_the_field():
    with pytest.raises(ClusterError, match=r"^topology\.kind: .*fat_tree"):
        build_plan(scen({"kind": "fat_tree", "k": 4}))
    with pytest.raises(ClusterError, match=r"^topology\.hosts: .*at most 32"):
        build_plan(scen({"kind": "star", "hosts": 33}))
    with pytest.raises(ClusterError, match=r"^topology\.hosts_per_leaf: "):
        build_plan(scen({**LS, "hosts_per_leaf": 11}))
    with pytest.raises(ClusterError, match=r"^topology\.spines: "):
        build_plan(scen({**LS, "spines": 14}))
    with pytest.raises(ClusterError, match=r"^--name: "):
        build_plan(scen(STAR4), "Bad-Name")


def test_cli_refuses_bad_input_with_exit_2(cli, tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[topology]\nkind = "fat_tree"\nk = 4\n')
    r = cli("cluster", "up", str(f))
    assert r.returncode == 2 and r.stderr.startswith("error: topology.kind: ") and "Traceback" not in r.stderr
    f.write_text('[topology]\nkind = "star"\nlink_rate_bps = "fast"\n')
    r = cli("cluster", "up", str(f))
    assert r.returncode == 2 and "error: " in r.stderr and "link_rate_bps" in r.stderr
    r = cli("cluster", "up", str(tmp_path / "missing.toml"))
    assert r.returncode == 2 and "no such scenario file" in r.stderr
    r = cli("cluster", "exec", "--name", "nosuchbox1", "h0", "--", "true")
    assert r.returncode == 2 and r.stderr.startswith("error: --name: no cluster 'nosuchbox1'")
    r = cli("launch", "--cluster", "nosuchbox1", "-n", "2", "--", "true")
    assert r.returncode == 2 and r.stderr.startswith("error: --cluster: no cluster 'nosuchbox1'")
    r = cli("runtime", "bench", "--baseline", "nccl", "-n", "2", "--sizes", "1K:1K")
    assert r.returncode == 2 and r.stderr.startswith("error: --baseline: unknown baseline 'nccl'")
    f.write_text('[topology]\nkind = "star"\nhosts = 4\n')
    for bad in ("1,2", "0,1,2,x"):   # one offset per host, integers (ns); refused before anything is built
        r = cli("cluster", "up", str(f), "--name", "nosuchbox1", "--mono-offsets-ns", bad)
        assert r.returncode == 2 and r.stderr.startswith("error: --mono-offsets-ns: "), r.stderr


def _with(obj, **fields):
    """Sets fields that newer scenario schemas have (host_queue, pfc, ...) on this branch's models."""
    for k, v in fields.items():
        object.__setattr__(obj, k, v)
    return obj


def test_newer_schema_features_are_refused_or_built():
    with pytest.raises(ClusterError, match=r"^topology\.host_ports: "):
        s = scen(LS)
        _with(s.topology, host_ports=2)
        build_plan(s)
    for field in ("queue_overrides", "pfc", "link_events", "switch_logic"):
        with pytest.raises(ClusterError, match=rf"^{field}: "):
            build_plan(_with(scen(STAR4), **{field: [{"x": 1}]}))
    # a host queue is a queue like a switch port's: here 20 packets, marking at 5 (5 x 1514 = 7570 bytes)
    from fabriclab.scenario.model import QueueConfig

    s = _with(scen(STAR4, queue={"ecn_threshold_packets": "off"}),
              host_queue=QueueConfig(limit_packets=20, ecn_threshold_packets=5))
    p = build_plan(s, "t")
    red = [c for c in tc_of(p, "flbox-t-h1", "eth0") if "red" in c]
    assert len(red) == 1 and red[0][red[0].index("min") + 1] == "7570"
    assert not any("red" in c for c in tc_of(p, "flbox-t-sw", "p1"))
    assert p.needs["red"] == "host_queue.ecn_threshold_packets"
    assert ("flbox-t-h1", "net.ipv4.tcp_ecn", "1") in p.sysctls


def test_mss_sets_the_mtu_and_the_frame_size_of_queue_conversions():
    p = build_plan(scen(STAR4), "t")
    assert not any("mtu" in c for c in p.commands())  # 1460 + 40 = 1500: the veth's default
    p = build_plan(scen(STAR4, transport={"mss_bytes": 8960}, queue={"ecn_threshold_packets": 65}), "t")
    mtus = [c for c in p.commands() if "mtu" in c]
    assert len(mtus) == 8 and all(c[c.index("mtu") + 1] == "9000" for c in mtus)  # 8960 + 20 IP + 20 TCP
    red = next(c for c in tc_of(p, "flbox-t-sw", "p0") if "red" in c)
    assert red[red.index("min") + 1] == str(65 * 9014) and red[red.index("avpkt") + 1] == "9014"  # 9000 + 14

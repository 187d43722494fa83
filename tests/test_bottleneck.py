"""Bottleneck naming from one-way delays (fabriclab bottleneck; docs/clockwork.md, "Bottleneck
identification").

Hand-built delay tables on a small fabric whose routes are written out below; the verdict and its
figures follow by hand from the rules (expected delay per size = the median over connections of their
least delay; elevated = above 2x that and 20 us; tomography score per directed hop = elevated messages
through it - the others through it; accepted at >= 5 elevated and >= 40 % of its messages elevated).
Then the quick labelled cases (labels from how each case is built) and bad input (exit 2)."""

import json

import pandas as pd
import pytest

from conftest import assert_quick_bands, run_cli
from fabriclab.systems.c4.tomography import scores
from fabriclab.systems.clockwork import bottleneck as bn
from fabriclab.systems.clockwork import repro_bottleneck as R

# Leaf0: h0 h1 h2; leaf1: h3 h4 h5; leaf2: h6; one spine s0.
LEAF = {"h0": "leaf0", "h1": "leaf0", "h2": "leaf0", "h3": "leaf1", "h4": "leaf1", "h5": "leaf1", "h6": "leaf2"}
CONNS = [("h0", "h3"), ("h1", "h4"), ("h2", "h5"), ("h3", "h0"), ("h4", "h1"), ("h0", "h1"), ("h3", "h4"),
         ("h5", "h2"), ("h6", "h4")]
BASE_NS, MSGS = 100_000.0, 10


def route(a, b):
    return [a, LEAF[a], b] if LEAF[a] == LEAF[b] else [a, LEAF[a], "s0", LEAF[b], b]


def table(slow: dict):
    """MSGS messages of 1 MB per connection at BASE_NS, except slow[(a, b)] = (first seq, delay)."""
    rows, routes = [], []
    for a, b in CONNS:
        first, d = slow.get((a, b), (MSGS, BASE_NS))
        for q in range(MSGS):
            owd = d if q >= first else BASE_NS
            rows.append({"op_id": q, "src_rank": 0, "dst_rank": 1, "src": a, "dst": b, "seq": 0,
                         "bytes": 1_000_000, "owd_ns": owd, "excess_ns": 0.0, "sender_delay_ns": 1000})
            routes.append(route(a, b))
    return pd.DataFrame(rows), routes


def test_link_crossed_by_three_slow_connections():
    # h0->h3, h1->h4, h2->h5 cross leaf0>s0 and s0>leaf1; h6->h4 (healthy) also crosses s0>leaf1, so
    # leaf0>s0 scores 15 - 15 = 0 and s0>leaf1 15 - 25 = -10. Half its messages are elevated, and it
    # holds every elevated one: confidence 0.5 x 1.
    t, r = table({c: (5, 5 * BASE_NS) for c in [("h0", "h3"), ("h1", "h4"), ("h2", "h5")]})
    v, ev = bn.identify(t, r)
    assert (v.kind, v.component, v.hop) == ("link", "leaf0-s0", "leaf0>s0")
    assert (v.elevated, v.purity, v.coverage, v.confidence) == (15, 0.5, 1.0, 0.5)
    assert v.excess_ns == 4 * BASE_NS
    assert [c[:3] for c in v.connections] == [["h0", "h3", 5], ["h1", "h4", 5], ["h2", "h5", 5]]
    assert ev.set_index("hop").loc["s0>leaf1", "score"] == -10


def test_every_connection_out_of_a_host():
    # Both connections out of h0 slow from message 5: h0>leaf0 scores 10 - 10 = 0; leaf0>h1 5 - 15 (h4->h1).
    t, r = table({("h0", "h3"): (5, 4 * BASE_NS), ("h0", "h1"): (5, 4 * BASE_NS)})
    v, _ = bn.identify(t, r)
    assert (v.kind, v.component, v.hop, v.elevated, v.purity) == ("sending_host", "h0", "h0>leaf0", 10, 0.5)


def test_every_connection_into_a_host():
    # h1->h4, h3->h4, h6->h4 slow: leaf1>h4 scores 15 - 15 = 0; s0>leaf1 10 - 30.
    t, r = table({c: (5, 3 * BASE_NS) for c in [("h1", "h4"), ("h3", "h4"), ("h6", "h4")]})
    v, _ = bn.identify(t, r)
    assert (v.kind, v.component, v.hop, v.elevated) == ("receiving_host", "h4", "leaf1>h4", 15)


def test_nothing_elevated_is_none():
    # 1.9x the expected delay is under 2x: nothing elevated.
    t, r = table({c: (5, 1.9 * BASE_NS) for c in CONNS[:4]})
    v, _ = bn.identify(t, r)
    assert (v.kind, v.component, v.elevated) == ("none", None, 0)


def test_scattered_elevation_is_none():
    # One late message on each of 6 connections: 6 elevated, but no hop holds 5 of them at 40 %.
    t, r = table({c: (MSGS - 1, 5 * BASE_NS) for c in CONNS[:6]})
    v, _ = bn.identify(t, r)
    assert v.kind == "none" and v.elevated == 6


def test_a_connection_slow_from_the_start():
    # h6->h4 at 3x for all its messages: its own least delay is 3x, but the expected delay is the
    # median of the 9 connections' least delays (BASE_NS), so all 10 are elevated; s0>leaf1 also
    # carries h0->h3, h1->h4, h2->h5: 10 of 40; leaf2>s0 only h6->h4: 10 of 10.
    t, r = table({("h6", "h4"): (0, 3 * BASE_NS)})
    v, _ = bn.identify(t, r)
    assert (v.kind, v.component, v.purity, v.elevated) == ("link", "leaf2-s0", 1.0, 10)


def test_shared_tomography_scores_by_hand():
    paths = {1: ["a", "b"], 2: ["b", "c"], 3: ["c"]}
    assert scores({1, 2}, {3}, paths) == {"a": 1, "b": 2, "c": 0}


def test_ecmp_routes_join_their_hops():
    assert bn.route_hops(["h0", "leaf0", "spine0|spine1", "leaf1", "h5"]) == [
        "h0>leaf0", "leaf0>spine0", "leaf0>spine1", "spine0>leaf1", "spine1>leaf1", "leaf1>h5"]


# ------------------------------------------------------------------ labelled cases

def test_case_labels_follow_their_construction():
    # The label is read from the scenario each case builds: the rate event's link, the pinned flows'
    # shared leaf-spine link, the bulk flows' common job host.
    for i in range(3 * len(R.CAUSES)):
        c = R.case(i)
        s = R.scenario(c)
        kind, comp = c["label"]
        assert kind == R.KIND[c["cause"]]
        if c["cause"] == "link_slow":
            (e,) = s["link_events"]
            assert e["action"] == "rate" and e["rate_bps"] < 20e9 / 5 and comp == "-".join(sorted(e["link"]))
        elif c["cause"] == "link_tenants":
            shared = set.intersection(*({"-".join(sorted(h)) for h in zip(f["path"], f["path"][1:])}
                                        for f in s["flows"]))
            assert shared == {comp}
        elif c["cause"] == "sending_host":
            assert {f"h{f['src']}" for f in s["flows"]} == {comp} and int(comp[1:]) in c["job"]
        elif c["cause"] == "receiving_host":
            assert {f"h{f['dst']}" for f in s["flows"]} == {comp} and int(comp[1:]) in c["job"]
        else:
            assert comp is None and "flows" not in s and "link_events" not in s


def test_reproduce_bottleneck_quick(tmp_path):
    out = tmp_path / "r"
    r = run_cli("reproduce", "bottleneck", "--out", str(out), "--quick", "--workers", "2")
    assert r.returncode == 0, r.stderr
    rows = pd.read_csv(out / "bottleneck_cases.csv", keep_default_na=False)
    true = rows[rows["clocks"] == "true"]
    assert sorted(true["cause"]) == sorted(R.CAUSES * R.QUICK_PER_CAUSE)
    for _, x in true.iterrows():
        c = R.case(int(x["case"]))
        assert (x["label_kind"], x["label_component"]) == (c["label"][0], c["label"][1] or "")
    assert set(rows["clocks"]) == {"true", "true (clocked run)", "huygens"}
    s = json.loads((out / "summary.json").read_text())
    assert_quick_bands("bottleneck", s)
    assert s["cases"] == len(true)
    right = true["right"].astype(str) == "True"
    assert s["true_clocks"]["overall"]["accuracy"] == pytest.approx(right.mean())


# ------------------------------------------------------------------ bad input

def test_owd_missing_column_exit_2(tmp_path):
    t, _ = table({})
    t.drop(columns=["bytes"]).to_parquet(tmp_path / "owd.parquet")
    r = run_cli("bottleneck", str(tmp_path), "--owd", str(tmp_path / "owd.parquet"), "--scenario",
                str(tmp_path / "x.toml"))
    assert r.returncode == 2 and "bytes" in r.stderr + r.stdout and "Traceback" not in r.stderr
    assert not (tmp_path / "bottleneck.json").exists()


def test_connection_without_route_exit_2(tmp_path):
    t, _ = table({})
    t.to_parquet(tmp_path / "owd.parquet")
    (tmp_path / "star.toml").write_text('[topology]\nkind = "star"\nhosts = 4\n')
    r = run_cli("bottleneck", str(tmp_path), "--owd", str(tmp_path / "owd.parquet"), "--scenario",
                str(tmp_path / "star.toml"))
    # The star's hosts are h0..h3; the table's h4 has no route.
    assert r.returncode == 2 and "h4" in r.stderr + r.stdout and "Traceback" not in r.stderr
    assert not (tmp_path / "bottleneck.json").exists()


def test_simulated_run_without_messages_exit_2(tmp_path):
    import tomli_w

    s = R.scenario(R.case(4))
    s["outputs"]["messages"] = False
    s["collectives"] = s["collectives"][:1]
    s.pop("traffic", None)
    (tmp_path / "s.toml").write_bytes(tomli_w.dumps(s).encode())
    assert run_cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "run")).returncode == 0
    r = run_cli("bottleneck", str(tmp_path / "run"))
    assert r.returncode == 2 and "messages.parquet" in r.stderr + r.stdout


def test_simulated_run_end_to_end_and_report(tmp_path):
    # Case 2 is a noisy co-located VM: bulk flows leave its host (the label: by construction). The
    # command names it from the run's own files (messages.parquet routes), and the report shows it.
    import tomli_w

    c = R.case(2)
    assert c["label"][0] == "sending_host"
    (tmp_path / "s.toml").write_bytes(tomli_w.dumps(R.scenario(c)).encode())
    run = tmp_path / "run"
    assert run_cli("run", str(tmp_path / "s.toml"), "--out", str(run)).returncode == 0
    assert run_cli("owd", str(run)).returncode == 0
    r = run_cli("bottleneck", str(run))
    assert r.returncode == 0, r.stderr
    v = json.loads((run / "bottleneck.json").read_text())["verdict"]
    assert (v["kind"], v["component"]) == c["label"]
    # Every connection named goes out of that host.
    assert v["connections"] and all(x[0] == c["label"][1] for x in v["connections"])
    assert run_cli("report", str(run)).returncode == 0
    html = next(run.glob("*.html")).read_text()
    assert f"bottleneck: sending host {c['label'][1]}" in html


def _plan_route(plan, a: int, b: int) -> list:
    """Host a to host b through the cluster-in-a-box plan's own routes (runtime/cluster/plan.py): at each
    namespace the directly connected /31 if it holds b's address, else the longest matching route's next
    hops; every namespace reached at each position, as the box's ECMP may take any."""
    import ipaddress

    owner, peer = {}, {}  # address -> namespace; (namespace, its address on a link) -> the other end's namespace
    for lk in plan.links:
        for ns, addr, other in ((lk.a_ns, lk.a_addr, lk.b_ns), (lk.b_ns, lk.b_addr, lk.a_ns)):
            owner[addr.split("/")[0]] = ns
            peer[(ns, ipaddress.ip_interface(addr).network)] = other
    dst = ipaddress.ip_address(plan.host_addrs[b])
    here, out = {plan.hosts[a]}, []
    while True:
        out.append("|".join(sorted(plan.label(ns) for ns in here)))
        if here == {plan.hosts[b]}:
            return out
        nxt = set()
        for ns in here:
            direct = [o for (n, net), o in peer.items() if n == ns and dst in net]
            if direct:
                nxt |= set(direct)
                continue
            routes = [r for r in plan.routes if r.ns == ns
                      and (r.dest == "default" or dst in ipaddress.ip_network(r.dest))]
            best = max(routes, key=lambda r: -1 if r.dest == "default" else ipaddress.ip_network(r.dest).prefixlen)
            nxt |= {owner[via] for via, _ in best.nexthops}
        here = nxt


@pytest.mark.parametrize("leaves,per_leaf,spines", [(2, 2, 2), (3, 2, 1)])
def test_static_routes_are_the_boxs(tmp_path, leaves, per_leaf, spines):
    # The routes the naming reads from a scenario are the ones the cluster-in-a-box installs.
    from fabriclab.runtime.cluster.plan import build_plan
    from fabriclab.scenario import Scenario

    path = tmp_path / "ls.toml"
    path.write_text(f'[topology]\nkind = "leaf_spine"\nleaves = {leaves}\nhosts_per_leaf = {per_leaf}\n'
                    f'spines = {spines}\n')
    plan = build_plan(Scenario.load(path), name="t")
    n = leaves * per_leaf
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    t = pd.DataFrame({"src": [f"h{a}" for a, _ in pairs], "dst": [f"h{b}" for _, b in pairs]})
    got = bn.static_routes(path, t)
    assert got == [_plan_route(plan, a, b) for a, b in pairs]
    if spines == 2:  # by hand: across leaves, both spines
        assert got[pairs.index((0, 2))] == ["h0", "leaf0", "spine0|spine1", "leaf1", "h2"]


def test_a_machine_of_a_cloud_is_named_as_the_host():
    # [cloud]: VMs vm0, vm1 on machine pm0 (a switch node) and vm4 on pm2, under leaf0; vm2, vm3 on pm1
    # under leaf1. Both connections out of pm0 (vm0 -> vm2, vm1 -> vm3) slow from message 5: pm0>leaf0
    # carries exactly those 20 messages (10 elevated: score 0); leaf0>s0 also carries vm4 -> vm3 (healthy:
    # -10); vm0>pm0 and vm1>pm0 score 5 - 5 = 0 each, so pm0's egress wins the tie by elevated messages
    # (10 against 5). A machine's egress is its sending side: the machine, not a link.
    mach = {"vm0": "pm0", "vm1": "pm0", "vm2": "pm1", "vm3": "pm1", "vm4": "pm2"}
    leaf = {"pm0": "leaf0", "pm1": "leaf1", "pm2": "leaf0"}
    conns = [("vm0", "vm2"), ("vm1", "vm3"), ("vm2", "vm0"), ("vm3", "vm1"), ("vm4", "vm3")]
    rows, routes = [], []
    for a, b in conns:
        for q in range(MSGS):
            slow = (a, b) in conns[:2] and q >= 5
            rows.append({"op_id": q, "src_rank": 0, "dst_rank": 1, "src": a, "dst": b, "seq": 0, "bytes": 1000,
                         "owd_ns": 4 * BASE_NS if slow else BASE_NS, "excess_ns": 0.0, "sender_delay_ns": 1000})
            routes.append([a, mach[a], leaf[mach[a]], "s0", leaf[mach[b]], mach[b], b])
    v, _ = bn.identify(pd.DataFrame(rows), routes, {"pm0", "pm1", "pm2"})
    assert (v.kind, v.component, v.hop, v.elevated) == ("sending_host", "pm0", "pm0>leaf0", 10)
    # Without knowing the machines, the same hop is a link between switches.
    v, _ = bn.identify(pd.DataFrame(rows), routes)
    assert (v.kind, v.component) == ("link", "leaf0-pm0")

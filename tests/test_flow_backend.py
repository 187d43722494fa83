"""Test 7: the flow backend's max-min allocations with two classes, by hand (the fluid model:
no slow-start rounds or queues to blur them)."""

from fabriclab import simulate

from conftest import star_scenario

R = 10_000_000_000
D = 10_000_000  # 10 us per link; a star path has two links


def wire_bytes(size):
    full, rest = divmod(size, 1460)
    return full * 1538 + (max(rest + 58, 64) + 20 if rest else 0)


def ps(bits, rate):
    return bits / rate * 1e12


def fcts(flows):
    s = star_scenario(hosts=4, rate=R, delay=D, backend="flow", flow_model="fluid", flows=flows)
    return simulate(s).flows.sort_values("flow_id")["fct_ps"].tolist()


def test_two_flows_into_one_host_share_then_the_survivor_takes_all():
    s0, s1 = 1_000_000, 2_000_000
    got = fcts([{"src": 0, "dst": 2, "size_bytes": s0}, {"src": 1, "dst": 2, "size_bytes": s1}])
    w0, w1 = wire_bytes(s0) * 8, wire_bytes(s1) * 8
    t0 = ps(w0, R / 2)  # both at R/2 until flow 0 drains
    t1 = t0 + ps(w1 - w0, R)  # then flow 1 alone at R
    assert abs(got[0] - (t0 + 2 * D)) <= 2
    assert abs(got[1] - (t1 + 2 * D)) <= 2


def test_high_class_takes_the_link_low_class_waits():
    size = 1_000_000
    got = fcts([
        {"src": 0, "dst": 2, "size_bytes": size, "class": 1},
        {"src": 1, "dst": 2, "size_bytes": size, "class": 0},
    ])
    w = wire_bytes(size) * 8
    assert abs(got[1] - (ps(w, R) + 2 * D)) <= 2  # class 0 alone at R
    assert abs(got[0] - (2 * ps(w, R) + 2 * D)) <= 2  # class 1 gets nothing, then R


def test_max_min_with_two_bottlenecks_and_classes():
    # f0: h0->h2 class 0; f1: h1->h2 class 1; f2: h1->h3 class 1.
    # Port s0->h2 carries f0 (high) and f1 (low): f0 gets R, f1 nothing while f0 lives.
    # h1's uplink carries f1 and f2 (both low): f2 gets R while f1 is starved.
    # After f0 drains at T0, f1 and f2 share h1's uplink at R/2 each.
    a, b, c = 1_000_000, 1_000_000, 3_000_000
    got = fcts([
        {"src": 0, "dst": 2, "size_bytes": a, "class": 0},
        {"src": 1, "dst": 2, "size_bytes": b, "class": 1},
        {"src": 1, "dst": 3, "size_bytes": c, "class": 1},
    ])
    wa, wb, wc = (wire_bytes(x) * 8 for x in (a, b, c))
    t0 = ps(wa, R)
    # f2 sent wa bits by t0 at rate R, then both at R/2: f1 needs wb bits.
    t1 = t0 + ps(wb, R / 2)
    rem_c = wc - wa - wb  # f2 sent wa bits alone, then wb bits alongside f1
    t2 = t1 + ps(rem_c, R)
    for g, e in zip(got, (t0, t1, t2)):
        assert abs(g - (e + 2 * D)) <= 3, (got, (t0, t1, t2))

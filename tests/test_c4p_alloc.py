"""C4P's path master on a hand-sized fabric: two servers of one GPU and one
two-port NIC, the first NIC on leaves 0 and 1, the second on leaves 2 and 3,
two spines. (With only two leaves, a two-port host sits on both and its
traffic never reaches a spine: the leaves come in pairs so that paths cross
the spines.)"""

import json

import pytest

from fabriclab.systems.c4p.master import Master, ecmp_src_ports, side_of
from fabriclab.systems.c4p import testbed as tb
from fabriclab.systems.c4p.testbed import Router
from fabriclab.sim.pipeline import core_spec

from conftest import c4p_two_server_testbed

SEED = 7
M64 = 2**64 - 1


def small_fabric() -> tb.Testbed:
    return c4p_two_server_testbed(spines=2)


def mix64(z: int) -> int:
    """splitmix64's finalizer (Steele, Lea, Flood, OOPSLA'14), the hash the scenario docs name."""
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def hand_path(src_port: int) -> list[int]:
    """docs/scenario.md's ECMP by hand on this fabric, host 0 to host 1:
    the hash of the 5-tuple (destination port 5001, TCP), the seed, then at
    each node with a choice mix64(hash ^ node) modulo the candidates, taken
    in the order their links were listed."""
    h = mix64(SEED ^ mix64((0 << 32 | 1) ^ mix64(src_port << 24 | 5001 << 8 | 6)))
    pick = lambda node, cands: cands[mix64(h ^ node) % len(cands)]  # noqa: E731
    leaf = pick(8, [2, 3])  # NIC 0 -> its left or right leaf
    spine = pick(leaf, [6, 7])
    far = pick(spine, [4, 5])  # the spine -> the far NIC's left or right leaf
    return [0, 8, leaf, spine, far, 9, 1]


def test_master_puts_one_qp_on_each_port_and_each_spine():
    t = small_fabric()
    m = Master(t, seed=SEED, ecmp_hash_seed=SEED)
    ports = m.allocate(0, 1, qps=2)
    router = Router(t, ecmp_hash_seed=SEED)
    paths = [router.path(0, 1, p) for p in ports]  # where the core's ECMP sends them
    send_ports = sorted(side_of(t, p)[0] for p in paths)
    recv_ports = sorted(side_of(t, p)[1] for p in paths)
    spines = sorted(t.name(p[3]) for p in paths)
    assert send_ports == [0, 1] and recv_ports == [0, 1]
    assert spines == ["spine0", "spine1"]
    assert all(side_of(t, p)[0] == side_of(t, p)[1] for p in paths)  # no left-to-right path


def test_master_balances_four_qps_two_per_port_one_per_link():
    t = small_fabric()
    m = Master(t, seed=1, ecmp_hash_seed=SEED)
    router = Router(t, ecmp_hash_seed=SEED)
    paths = [router.path(0, 1, p) for p in m.allocate(0, 1, qps=4)]
    assert sorted(side_of(t, p) for p in paths) == [(0, 0), (0, 0), (1, 1), (1, 1)]
    # Four QPs over 2 sides x 2 spines: every leaf-spine link used once each way.
    ups = sorted((t.name(p[2]), t.name(p[3])) for p in paths)
    assert ups == [("leaf0", "spine0"), ("leaf0", "spine1"), ("leaf1", "spine0"), ("leaf1", "spine1")]


def test_hand_computed_ecmp_collides_and_the_core_agrees():
    t = small_fabric()
    router = Router(t, ecmp_hash_seed=SEED)
    base = 49152
    # The first source port after `base` whose hand-computed path arrives on
    # the same receiver port as `base`'s: two QPs, one receiver port.
    other = next(p for p in range(base + 1, base + 64) if hand_path(p)[4] == hand_path(base)[4])
    for p in range(base, other + 1):
        assert router.path(0, 1, p) == hand_path(p)
    assert side_of(t, router.path(0, 1, base))[1] == side_of(t, router.path(0, 1, other))[1]


def test_without_master_random_ports_keep_the_bond_sides():
    import random

    t = small_fabric()
    router = Router(t, ecmp_hash_seed=SEED)
    ports = ecmp_src_ports(t, router, 0, 1, 4, random.Random(3))
    assert [side_of(t, router.path(0, 1, p))[0] for p in ports] == [0, 1, 0, 1]


def test_faulty_link_is_never_allocated():
    t = small_fabric()
    m = Master(t, faulty=[("leaf0", "spine0")], ecmp_hash_seed=SEED)
    assert m.catalog[(2, 4)] == [7]  # leaf0 to leaf2 only through spine1
    for p in m.allocate(0, 1, qps=4):
        path = m.router.path(0, 1, p)
        assert (path[2], path[3]) != (2, 6)


def _run_pair(balance: str, link_events=()):
    """A 2-rank ring allreduce of 8 MiB in 1 MiB chunks between the two GPUs,
    each direction over two QPs (one per side, from the master)."""
    from fabriclab._core import Simulator
    from fabriclab.collectives.rings import ring_allreduce
    from fabriclab.sim.apps.collectives import collective_spec
    from fabriclab.scenario.model import Scenario

    t = small_fabric()
    m = Master(t, ecmp_hash_seed=SEED)
    plan = ring_allreduce(2, 8 << 20, chunk_bytes=1 << 20, window=4)
    spec = collective_spec(plan, t, [0, 1], name="pair")
    spec.update({"qps": [{"rank": 0, "peer": 1, "src_ports": m.allocate(0, 1, 2)},
                         {"rank": 1, "peer": 0, "src_ports": m.allocate(1, 0, 2)}],
                 "balance": balance, "qp_depth": 2})
    core = core_spec(Scenario.from_dict({"backend": "flow", "flow_model": "fluid", "link_events": list(link_events),
                               "routing": {"ecmp_hash_seed": SEED, "resilient_hash": True}}), topology_data=t)
    core["collectives"] = [spec]
    sim = Simulator(json.dumps(core))
    sim.run_until(2**63)
    tabs = sim.app_tables()
    sent = sum(s.bytes for s in plan.ranks[0] if s.op == "send")
    return tabs, sent, m, t


@pytest.mark.parametrize("balance", ["split", "dlb"])
def test_qps_carry_every_byte_once(balance):
    tabs, sent, _, _ = _run_pair(balance)
    q = tabs["qps"]
    for rank in (0, 1):
        assert sum(b for r, b in zip(q["rank"], q["bytes"]) if r == rank) == sent
    if balance == "split":
        # Every send of 2^k bytes is cut in two equal halves.
        assert set(q["bytes"]) == {sent // 2}
    assert tabs["collectives"]["end_ps"][0] is not None


def test_dlb_retires_a_qp_whose_link_failed():
    # Rank 0's QP 0 leaves by its left port toward spine0 (the master's first
    # pick); that link is down from the start, so the QP carries nothing.
    tabs, sent, m, t = _run_pair("dlb", [{"at_ps": 0, "link": ["leaf0", "spine0"], "action": "down"}])
    q = tabs["qps"]
    row = {(r, k): b for r, k, b in zip(q["rank"], q["qp"], q["bytes"])}
    assert row[(0, 0)] == 0
    assert row[(0, 1)] == sent


def test_same_seed_same_tables():
    a, _, _, _ = _run_pair("dlb", [{"at_ps": 2_000_000, "link": ["leaf1", "spine1"], "action": "down"}])
    b, _, _, _ = _run_pair("dlb", [{"at_ps": 2_000_000, "link": ["leaf1", "spine1"], "action": "down"}])
    assert a["qps"] == b["qps"] and a["steps"] == b["steps"]

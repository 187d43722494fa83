"""C4P's master re-pathing the QPs a link failure cut (docs/c4p.md), on a
hand-sized fabric: two servers of one GPU and one two-port NIC, the first
NIC on leaves 0 and 1, the second on leaves 2 and 3, four spines."""

import json

from fabriclab.systems.c4p import testbed as tb
from fabriclab.systems.c4p.master import Master, side_of
from fabriclab.systems.c4p.testbed import Router
from fabriclab.sim.pipeline import core_spec

from conftest import c4p_two_server_testbed

SEED = 7
LEAF0, SPINE0, SPINE1, SPINE2, SPINE3 = 2, 6, 7, 8, 9


def fabric() -> tb.Testbed:
    return c4p_two_server_testbed(spines=4)


def test_the_cut_qp_moves_to_the_least_loaded_healthy_spine():
    t = fabric()
    m = Master(t, seed=SEED, ecmp_hash_seed=SEED)
    ports = m.allocate(0, 1, qps=4)
    before = Router(t, SEED, resilient_hash=True)
    # By the rule, with nothing placed yet: QP 0 (left) spine0, QP 1 (right)
    # spine1 (spine0 already carries one QP), QP 2 (left) spine2, QP 3 (right) spine3.
    assert [before.path(0, 1, p)[3] for p in ports] == [SPINE0, SPINE1, SPINE2, SPINE3]
    moved = m.fail([("leaf0", "spine0")])
    # Only QP 0 crossed leaf0-spine0. Its candidates: spine1, 2, 3 from leaf0.
    # Every one shares NIC 0's left port with QP 2 (busiest link: 1 QP each);
    # spines 1, 2, 3 carry one QP each; the sums over the four links are
    # 2, 4 and 2 (spine2's links carry QP 2): spine1 and spine3 tie, lowest first.
    assert list(moved) == [(0, 1, 0)]
    after = Router(t, SEED, down=[("leaf0", "spine0")], resilient_hash=True)
    path = after.path(0, 1, moved[(0, 1, 0)])
    assert path[3] == SPINE1 and side_of(t, path) == (0, 0)
    # The other three keep their ports and, hashed resiliently, their paths.
    assert [after.path(0, 1, p) for p in ports[1:]] == [before.path(0, 1, p) for p in ports[1:]]
    # The master's count: QP 0's old links are free, its new ones taken.
    assert m.load[(LEAF0, SPINE0)] == 0 and m.load[(LEAF0, SPINE1)] == 1
    assert m.spine_load[SPINE0] == 0 and m.spine_load[SPINE1] == 2


def test_two_cut_qps_take_the_two_free_spines():
    t = fabric()
    m = Master(t, seed=SEED, ecmp_hash_seed=SEED)
    ports = m.allocate(0, 1, qps=8)
    before = Router(t, SEED, resilient_hash=True)
    left = {k: before.path(0, 1, p)[3] for k, p in enumerate(ports) if k % 2 == 0}
    # Four left QPs over four leaf0 uplinks: one each.
    assert sorted(left.values()) == [SPINE0, SPINE1, SPINE2, SPINE3]
    # Two uplinks fail: their two QPs must share the two left, one each
    # (two on one link would make it the busiest at 2 where 1 + 1 is possible).
    dead = [k for k, s in left.items() if s in (SPINE0, SPINE3)]
    moved = m.fail([("leaf0", "spine0"), ("leaf0", "spine3")])
    assert sorted(k for _, _, k in moved) == sorted(dead)
    after = Router(t, SEED, down=[("leaf0", "spine0"), ("leaf0", "spine3")], resilient_hash=True)
    new = sorted(after.path(0, 1, p)[3] for p in moved.values())
    assert new == [SPINE1, SPINE2]
    assert m.load[(LEAF0, SPINE1)] == 2 and m.load[(LEAF0, SPINE2)] == 2


def _pair_with_repath(repath_qp: int = 0):
    """A 2-rank ring allreduce of 8 MiB, each direction over two QPs; the
    link of rank 0's QP 0 fails at 20 us, the master re-paths it at 30 us
    (the repath names QP ``repath_qp``)."""
    from fabriclab._core import Simulator
    from fabriclab.collectives.rings import ring_allreduce
    from fabriclab.sim.apps.collectives import collective_spec
    from fabriclab.scenario.model import Scenario

    t = fabric()
    m = Master(t, seed=SEED, ecmp_hash_seed=SEED)
    plan = ring_allreduce(2, 8 << 20, chunk_bytes=1 << 20, window=4)
    spec = collective_spec(plan, t, [0, 1], name="pair")
    groups = [{"rank": 0, "peer": 1, "src_ports": m.allocate(0, 1, 2)},
              {"rank": 1, "peer": 0, "src_ports": m.allocate(1, 0, 2)}]
    assert Router(t, SEED).path(0, 1, groups[0]["src_ports"][0])[2:4] == [LEAF0, SPINE0]
    moved = m.fail([("leaf0", "spine0")])
    # Rank 1's QPs came after rank 0's: spine2 (left, leaf2 -> leaf0) and spine3, not the dead link.
    assert list(moved) == [(0, 1, 0)]
    groups[0]["repaths"] = [{"at_ps": 30_000_000, "qp": repath_qp, "src_port": moved[(0, 1, 0)]}]
    spec.update({"qps": groups, "balance": "dlb", "qp_depth": 2})
    core = core_spec(Scenario.from_dict({"backend": "flow", "flow_model": "fluid",
                               "link_events": [{"at_ps": 20_000_000, "link": ["leaf0", "spine0"], "action": "down"}],
                               "routing": {"ecmp_hash_seed": SEED, "resilient_hash": True}}), topology_data=t)
    core["collectives"] = [spec]
    sim = Simulator(json.dumps(core))
    sim.run_until(2**63)
    return sim, plan, moved


def test_dlb_sends_on_the_repathed_qp_and_loses_no_byte():
    sim, plan, moved = _pair_with_repath()
    tabs = sim.app_tables()
    q = tabs["qps"]
    sent = sum(s.bytes for s in plan.ranks[0] if s.op == "send")
    for rank in (0, 1):
        assert sum(b for r, b in zip(q["rank"], q["bytes"]) if r == rank) == sent
    row = {(r, k): p for r, k, p in zip(q["rank"], q["qp"], q["src_port"])}
    assert row[(0, 0)] == moved[(0, 1, 0)]
    msgs = sim.messages()
    late = [path for src, path, st in zip(msgs["src"], msgs["path"], msgs["start_ps"])
            if src == 0 and st >= 30_000_000]
    # From the re-pathing on, rank 0's left parts go leaf0 > spine1 (the
    # master's pick), none over the dead link.
    assert any("s0.nic0 > leaf0 > spine1 > leaf2" in p for p in late)
    assert not any("leaf0 > spine0" in p for p in late)


def test_repathed_runs_are_identical():
    a, _, _ = _pair_with_repath()
    b, _, _ = _pair_with_repath()
    assert a.app_tables() == b.app_tables() and a.messages() == b.messages()


def test_a_repath_of_a_missing_qp_is_refused_by_name():
    import pytest

    with pytest.raises(ValueError, match=r"qps\[0\]\.repaths: qp 2 out of range \(0\.\.2\)"):
        _pair_with_repath(repath_qp=2)


def _pair_on_one_port(balance: str):
    """A 2-rank ring allreduce of 2 MiB on the packet backend with DCQCN,
    rank 0's two QPs to rank 1 on one source port (as C4P's allocator may
    give them)."""
    from fabriclab._core import Simulator
    from fabriclab.collectives.rings import ring_allreduce
    from fabriclab.sim.apps.collectives import collective_spec
    from fabriclab.scenario.model import Scenario

    t = fabric()
    m = Master(t, seed=SEED, ecmp_hash_seed=SEED)
    plan = ring_allreduce(2, 2 << 20, chunk_bytes=1 << 20, window=1)
    spec = collective_spec(plan, t, [0, 1], name="pair")
    port = m.allocate(0, 1, 1)[0]
    groups = [{"rank": 0, "peer": 1, "src_ports": [port, port]},
              {"rank": 1, "peer": 0, "src_ports": m.allocate(1, 0, 2)}]
    spec.update({"qps": groups, "balance": balance})
    core = core_spec(Scenario.from_dict({"backend": "packet", "transport": {"cc": "dcqcn"},
                               "routing": {"ecmp_hash_seed": SEED}}), topology_data=t)
    core["collectives"] = [spec]
    sim = Simulator(json.dumps(core))
    sim.run_until(2**63)
    return sim


def test_two_qps_on_one_source_port_send_side_by_side():
    # The two parts of rank 0's first send go on QPs 0 and 1, which share
    # a source port and so a path. One QP would send them one after the
    # other: the second's first packet would leave after the first's last
    # and, on the same path, arrive after it. Two QPs send them at once:
    # the second's first byte arrives before the first part has ended.
    sim = _pair_on_one_port("split")
    msgs = sim.messages()
    first = [i for i, s in enumerate(msgs["src"]) if s == 0][:2]
    a, b = sorted(first, key=lambda i: msgs["start_ps"][i])
    assert msgs["path"][a] == msgs["path"][b]
    assert msgs["first_byte_ps"][b] < msgs["end_ps"][a]

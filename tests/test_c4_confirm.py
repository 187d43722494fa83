"""How C4D confirms a communication slowdown sooner (detector.Master._comm_slow,
sixth and eighth passes, docs/c4.md): stalls on two connections of one op
that share a link, and one place (a link, or one switch's fabric links) that
most high connections cross in two ops in a row.
Hand-built rings (test_c4_faults.hand_ring: four ranks on h0..h3, h0 and h1
under leaf0, h2 and h3 under leaf1, every message 100 us, op k at k x 10 ms)
whose answers follow from their construction."""

import pandas as pd

from fabriclab.systems.c4.detector import PERSIST, STRONG, diagnose
from test_c4_faults import STEPS, hand_ring, hand_view, message_rows, route

OP_NS = 10_000_000
STALL_NS = 5_000_000  # a retransmission timeout's worth


def stall(ccl: pd.DataFrame, op: int, sends) -> pd.DataFrame:
    """``ccl`` with the step-0 message of each ``(sender, receiver)`` in op
    ``op`` arriving STALL_NS late (its send's end, its receive's arrival)."""
    ccl = ccl.copy()
    for s, d in sends:
        send = (ccl.op_id == op) & (ccl.kind == "send") & (ccl["rank"] == s) & (ccl.peer == d) & (ccl.step == 0)
        recv = (ccl.op_id == op) & (ccl.kind == "recv") & (ccl["rank"] == d) & (ccl.peer == s) & (ccl.step == 0)
        assert send.sum() == 1 and recv.sum() == 1
        ccl.loc[send, "send_end_mono_ns"] += STALL_NS
        ccl.loc[recv, ["recv_arrival_mono_ns", "recv_done_mono_ns"]] += STALL_NS
    return ccl


def test_two_stalled_connections_of_one_op_that_share_a_link_raise_the_alarm_in_that_op():
    # h2 -> h3 and h3 -> h0 stall in op 8: each busy 5.1 ms for 500 kB where
    # its history says 400 us, 12.75x > STRONG. The one link both cross is
    # h3-leaf1; rank 3's row and column name its host.
    assert (STALL_NS + 100_000) / (STEPS * 100_000) > STRONG
    ccl, view = hand_ring(12)
    a = diagnose(stall(ccl, 8, [(2, 3), (3, 0)]), view, 10**15)
    assert (a.syndrome, a.component_kind, a.component, a.op) == ("comm_slow", "host", "h3", 8)
    # Op 8's last completion: the stalled messages, 5.1 ms in.
    assert a.time_ps == (8 * OP_NS + STALL_NS + 100_000) * 1000


def test_one_stalled_connection_or_two_without_a_common_link_raise_nothing():
    ccl, view = hand_ring(12)
    assert diagnose(stall(ccl, 8, [(2, 3)]), view, 10**15) is None
    # h0 -> h1 crosses only leaf0's host links, h2 -> h3 only leaf1's.
    assert diagnose(stall(ccl, 8, [(0, 1), (2, 3)]), view, 10**15) is None


def test_an_op_where_routing_moved_a_message_is_left_to_the_older_rules():
    # The same two stalls, but a message of the op moved to a new route (a
    # link event): its recorded route is the new one, so the op's stalls are
    # not localised by one op's routes; a single op with stalls confirms nothing.
    ccl, view = hand_ring(12)
    view.rerouted = {(8, 1, 0)}
    assert diagnose(stall(ccl, 8, [(2, 3), (3, 0)]), view, 10**15) is None
    # A message moved in another op leaves op 8 to the rule.
    view.rerouted = {(7, 1, 0)}
    assert diagnose(stall(ccl, 8, [(2, 3), (3, 0)]), view, 10**15).op == 8


def with_connection(ccl: pd.DataFrame, view, s: int, d: int, ops: int):
    """``ccl`` and ``view`` with one more connection, rank s -> rank d (h1 ->
    h3: leaf0, spine st % 2, leaf1), four healthy messages per op as the
    ring's, numbered steps 10-13 so that they keep their own routes."""
    rows = []
    for k in range(ops):
        t0 = k * OP_NS
        for st in range(STEPS):
            rows += message_rows(k, t0, s, d, 10 + st, t0 + st * 100_000, t0 + st * 100_000 + 100_000)
            view.paths[(k, s, 10 + st)] = route(["h1", "leaf0", f"spine{st % 2}", "leaf1", "h3"])
    return pd.concat([ccl, pd.DataFrame(rows)], ignore_index=True), view


def test_the_one_link_most_high_connections_cross_in_two_ops_in_a_row_is_named():
    # h3's link 3x slower from op 10 of 12: h2 -> h3 and h3 -> h0 at 1.5x,
    # high; h1 -> h3 crosses h3-leaf1 too and is left at its usual rate (a
    # connection the slowdown keeps under the threshold), so not every
    # connection through it is high. h3-leaf1 is the one link both high
    # connections cross, in ops 10 and 11: the alarm at op 11, where PERSIST
    # (3) ops in a row would need an op 12 that never comes. Rank 3's column
    # holds the healthy h1 -> h3, so the matrix shows no host: the link.
    assert PERSIST == 3
    ccl, view = with_connection(*hand_ring(12, slow_from=10), 1, 3, 12)
    a = diagnose(ccl, view, 10**15)
    assert (a.syndrome, a.component_kind, a.component, a.op) == ("comm_slow", "link", "h3-leaf1", 11)
    assert a.time_ps == (11 * OP_NS + 600_000) * 1000
    # One op of it is not enough.
    ccl, view = with_connection(*hand_ring(12, slow_from=11), 1, 3, 12)
    assert diagnose(ccl, view, 10**15) is None


LEAF = {"h0": "leaf0", "h1": "leaf0", "h2": "leaf1", "h3": "leaf1", "h4": "leaf2", "h5": "leaf2"}


def three_leaves(ops: int, slow_from: int):
    """Six ranks on h0..h5, two per leaf, and three connections, each four
    messages of 100 us per op (100 us apart), step s through spine s % 2:
    h0 -> h2 and h1 -> h4 leave leaf0, h5 -> h1 enters it. From op
    ``slow_from`` on, leaf0's uplink to spine1 is 3x slower in the leaf-to-
    spine direction only: the odd steps of h0 -> h2 and h1 -> h4 take
    300 us, h5 -> h1 is untouched. (h3 -> h2 inside leaf1 makes every rank
    take part.)"""
    hosts = list(LEAF)
    rows, paths = [], {}
    for k in range(ops):
        t0 = k * OP_NS
        for s, d in ((0, 2), (1, 4), (5, 1)):
            hs, hd = hosts[s], hosts[d]
            for st in range(STEPS):
                slow = k >= slow_from and LEAF[hs] == "leaf0" and st % 2 == 1
                a = t0 + st * 100_000
                rows += message_rows(k, t0, s, d, st, a, a + (3 if slow else 1) * 100_000)
                paths[(k, s, st)] = route([hs, LEAF[hs], f"spine{st % 2}", LEAF[hd], hd])
    # Every rank takes part in an op: h3 sends to h2 inside leaf1, never slow.
    for k in range(ops):
        for st in range(STEPS):
            a = k * OP_NS + st * 100_000
            rows += message_rows(k, k * OP_NS, 3, 2, st, a, a + 100_000)
            paths[(k, 3, st)] = ["h3-leaf1", "h2-leaf1"]
    return hand_view(hosts, LEAF, rows, paths)


def test_one_leafs_uplinks_that_most_high_connections_cross_in_two_ops_in_a_row_are_one_place():
    # h0 -> h2 and h1 -> h4 at 1.5x (busy 600 us against 400) from op 8; each
    # spreads over both spines, so leaf0-spine0 and leaf0-spine1 are the
    # links both high connections cross; h5 -> h1 crosses both too and is
    # not high, so neither link is "every connection high", and no message
    # stalls. Ops 8 and 9 name the same place, leaf0's uplinks: the alarm at
    # op 9 (PERSIST, 3, would need op 10), on the uplink the slow messages
    # took (the route bias: the odd steps, through spine1).
    assert PERSIST == 3
    ccl, view = three_leaves(10, slow_from=8)
    a = diagnose(ccl, view, 10**15)
    assert (a.syndrome, a.component_kind, a.component, a.op) == ("comm_slow", "link", "leaf0-spine1", 9)
    assert a.time_ps == (9 * OP_NS + 600_000) * 1000
    # One op of it raises nothing.
    ccl, view = three_leaves(10, slow_from=9)
    assert diagnose(ccl, view, 10**15) is None


def test_twins_are_fabric_links_of_one_switch():
    from fabriclab.systems.c4.detector import Master

    m = Master(three_leaves(1, slow_from=1)[1])
    assert m._twins({"leaf0-spine0", "leaf0-spine1"}) and m._twins({"leaf0-spine0", "leaf1-spine0"})
    assert not m._twins({"h0-leaf0", "leaf0-spine0"})  # a host's link is its own place
    assert not m._twins({"leaf0-spine0", "leaf1-spine1"})  # no switch in common
    assert not m._twins(set())

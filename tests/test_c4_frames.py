"""Lost frames in C4D (ninth pass, docs/c4.md): a message the transport
retransmitted lost a frame on its route, so the links on every such route
place the fault; lost frames on one link in two ops, each slowing a
connection, confirm a slowdown; and a hang's route tomography does not take
a connection that delivered only after losing frames for a healthy one.
Hand-built jobs of test_c4_faults and test_c4_confirm, whose answers follow
from their construction."""

import numpy as np

from fabriclab.systems.c4.detector import RATE_MIN, STRONG, diagnose
from test_c4_confirm import OP_NS, three_leaves
from test_c4_faults import STEPS, hand_ring


def slow_last_step(ccl, op: int, s: int, d: int, extra_ns: int = 200_000):
    """``ccl`` with the last step of connection s -> d in op ``op``
    delivered ``extra_ns`` late (its send's end, its receive's times)."""
    ccl = ccl.copy()
    st = STEPS - 1
    send = (ccl.op_id == op) & (ccl.kind == "send") & (ccl["rank"] == s) & (ccl.peer == d) & (ccl.step == st)
    recv = (ccl.op_id == op) & (ccl.kind == "recv") & (ccl["rank"] == d) & (ccl.peer == s) & (ccl.step == st)
    assert send.sum() == 1 and recv.sum() == 1
    ccl.loc[send, "send_end_mono_ns"] += extra_ns
    ccl.loc[recv, ["recv_arrival_mono_ns", "recv_done_mono_ns"]] += extra_ns
    return ccl


def two_lossy_ops():
    """three_leaves (h0 -> h2 and h1 -> h4 leave leaf0, h5 -> h1 enters it;
    step s through spine s % 2) with the last step (3: spine1) of h0 -> h2
    in op 8 and of h1 -> h4 in op 10 200 us late: each connection busy
    600 us for its 500 kB where its history says 400 us, 1.5x: high
    (> RATE_MIN), not a stall (< STRONG)."""
    assert RATE_MIN < 600 / 400 < STRONG
    ccl, view = three_leaves(12, slow_from=99)
    ccl = slow_last_step(slow_last_step(ccl, 8, 0, 2), 10, 1, 4)
    return ccl, view


def test_lost_frames_on_one_link_in_two_ops_each_slowing_a_connection_raise_the_alarm():
    # Without the retransmission counts: one high connection in op 8 and one
    # in op 10, never two in an op or three ops in a row: no alarm.
    ccl, view = two_lossy_ops()
    assert diagnose(ccl, view, 10**15) is None
    # The two late messages lost frames: h0 > leaf0 > spine1 > leaf1 > h2 and
    # h1 > leaf0 > spine1 > leaf2 > h4 share one link, leaf0-spine1.
    view.retransmitted = {(8, 0, 3), (10, 1, 3)}
    a = diagnose(ccl, view, 10**15)
    assert (a.syndrome, a.component_kind, a.component, a.op) == ("comm_slow", "link", "leaf0-spine1", 10)
    # Op 10's last completion: the late message, 300 + 100 + 200 us in.
    assert a.time_ps == (10 * OP_NS + 600_000) * 1000


def test_lost_frames_without_a_common_link_or_in_an_op_where_routing_moved_a_message_raise_nothing():
    ccl, view = two_lossy_ops()
    # h5 -> h1's last message in op 10 instead: h5 > leaf2 > spine1 > leaf0 >
    # h1 shares leaf0-spine1 with op 8's, but h5 -> h1 is not slow in op 10:
    # frames count only on a connection they slowed.
    view.retransmitted = {(8, 0, 3), (10, 5, 3)}
    assert diagnose(ccl, view, 10**15) is None
    # Op 10 moved a message (a link event): its frames may be lost to the
    # moved traffic's congestion, so they are not read.
    view.retransmitted = {(8, 0, 3), (10, 1, 3)}
    view.rerouted = {(10, 3, 0)}
    assert diagnose(ccl, view, 10**15) is None


def test_the_link_every_message_that_lost_a_frame_crossed_is_named_among_the_suspects():
    # Both of leaf0's uplinks slow h0 -> h2 and h1 -> h4 (every step 250 us:
    # busy 550 us against 400, 1.375x) from op 8: the most-high suspects are
    # leaf0-spine0 and leaf0-spine1 (one place, ECMP twins) in ops 8 and 9,
    # and the route bias cannot tell them apart (every message as slow).
    ccl, view = three_leaves(10, slow_from=99)
    for op in (8, 9):
        for s, d in ((0, 2), (1, 4)):
            for st in range(STEPS):
                rows = (ccl.op_id == op) & (ccl.step == st) & (
                    ((ccl.kind == "send") & (ccl["rank"] == s) & (ccl.peer == d))
                    | ((ccl.kind == "recv") & (ccl["rank"] == d) & (ccl.peer == s)))
                ccl.loc[rows & (ccl.kind == "send"), "send_end_mono_ns"] += 150_000
                ccl.loc[rows & (ccl.kind == "recv"), ["recv_arrival_mono_ns", "recv_done_mono_ns"]] += 150_000
    assert RATE_MIN < 550 / 400
    a = diagnose(ccl, view, 10**15)
    assert a.op == 9 and a.component in ("leaf0-spine0", "leaf0-spine1")
    # The messages that lost frames all took spine0 (even steps): it is named.
    view.retransmitted = {(8, 0, 0), (9, 1, 2), (9, 0, 2)}
    a = diagnose(ccl, view, 10**15)
    assert (a.syndrome, a.component, a.op) == ("comm_slow", "leaf0-spine0", 9)
    view.retransmitted = {(8, 0, 1), (9, 1, 3)}
    assert diagnose(ccl, view, 10**15).component == "leaf0-spine1"


def test_a_hang_does_not_take_a_connection_that_lost_frames_for_a_healthy_one():
    # Ring of h0..h3 (h0, h1 under leaf0; h2, h3 under leaf1). In op 8,
    # h3 -> h0's step 2 (h3 > leaf1 > spine0 > leaf0 > h0) never arrives.
    ccl, view = hand_ring(12)
    ccl = ccl[ccl.op_id <= 8].copy()
    lost_send = (ccl.op_id == 8) & (ccl.kind == "send") & (ccl["rank"] == 3) & (ccl.step == 2)
    lost_recv = (ccl.op_id == 8) & (ccl.kind == "recv") & (ccl["rank"] == 0) & (ccl.step == 2)
    ccl.loc[lost_send, "send_end_mono_ns"] = np.nan
    ccl.loc[lost_recv, ["recv_arrival_mono_ns", "recv_done_mono_ns"]] = np.nan
    # Connections that delivered after it left (step 3: h0 -> h1, h1 -> h2,
    # h2 -> h3) clear their links: every link of the lost route then scores
    # 1 - 1 = 0, and of the two access links on it (a hang: access links
    # first) the name order picks h0-leaf0.
    a = diagnose(ccl, view, 10**15)
    assert (a.syndrome, a.component) == ("comm_hang", "h0-leaf0")
    # h2 -> h3's step 3 was delivered only after a retransmission: it lost a
    # frame on h2-leaf1 or h3-leaf1, so it clears nothing and is a bad path
    # too; h3-leaf1 is on both bad paths (score 2), h2-leaf1 on one and on
    # h1 -> h2's healthy routes (0).
    view.retransmitted = {(8, 2, 3)}
    a = diagnose(ccl, view, 10**15)
    assert (a.syndrome, a.component) == ("comm_hang", "h3-leaf1")

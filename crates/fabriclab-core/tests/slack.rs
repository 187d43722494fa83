//! The transmit-queue slack of slack-aware jobs, against hand-played
//! single-server schedules.

use fabriclab_core::apps::slack::{min_slack_ps, Pending};

fn piece(ready_ps: u64, deadline_ps: u64, work_ps: u64, layer: u32) -> Pending {
    Pending {
        ready_ps,
        deadline_ps,
        work_ps,
        order: (0, layer as u64, 0),
        layer,
        fwd_before_ps: 0,
        iteration: 0,
    }
}

#[test]
fn nothing_pending_has_unbounded_slack() {
    assert_eq!(min_slack_ps(5, &[], &[]), i128::MAX);
}

#[test]
fn one_piece_in_flight_is_held_to_its_deadline() {
    // Finishes at 10 + 30 = 40; deadline 55 -> 15 to spare; deadline 25 -> 15 late.
    assert_eq!(min_slack_ps(10, &[piece(0, 55, 30, 3)], &[]), 15);
    assert_eq!(min_slack_ps(10, &[piece(0, 25, 30, 3)], &[]), -15);
}

#[test]
fn waiting_piece_pays_for_the_work_ahead_of_it() {
    // In flight: 0..10. Queued piece (ready now, 5 of work) runs 10..15 with
    // deadline 12: 3 late, and only because it waited.
    let s = min_slack_ps(0, &[piece(0, 100, 10, 9)], &[piece(0, 12, 5, 1)]);
    assert_eq!(s, -3);
}

#[test]
fn inherent_lateness_of_a_waiting_piece_is_not_the_work_ahead_of_it() {
    // The lowest layer's piece: ready at 20, needed at 20, 10 of work. It is
    // late by its own transfer time whatever runs before it: with 5 of work
    // in flight it still starts at 20 and ends at 30 = ready + work -> 0.
    assert_eq!(
        min_slack_ps(0, &[piece(0, 100, 5, 9)], &[piece(20, 20, 10, 0)]),
        0
    );
    // With 25 in flight it starts at 25 and ends at 35: 5 late because it waited.
    assert_eq!(
        min_slack_ps(0, &[piece(0, 100, 25, 9)], &[piece(20, 20, 10, 0)]),
        -5
    );
}

#[test]
fn ready_pieces_go_in_order_and_the_server_idles_until_one_is_ready() {
    // t=0: in flight 4 (done 4). Ready at 0: A (order 2, work 3, dl 100) and
    // B (order 1, work 6, dl 9). B first: 4..10 (dl 9: -1). A: 10..13.
    // C ready at 50 (work 2, dl 51): server idles, 50..52 -> ready + work
    // = 52 is its effective deadline -> 0. Minimum: -1. (A's layer is above
    // C's, so A's late deadline does not relax C's.)
    let mut a = piece(0, 100, 3, 8);
    a.order = (0, 2, 0);
    let mut b = piece(0, 9, 6, 4);
    b.order = (0, 1, 0);
    let mut c = piece(50, 51, 2, 6);
    c.order = (0, 0, 0);
    assert_eq!(min_slack_ps(0, &[piece(0, 100, 4, 7)], &[a, c, b]), -1);
    // Without B: A ends 7 (93 to spare), C exactly on its effective deadline.
    assert_eq!(min_slack_ps(0, &[piece(0, 100, 4, 7)], &[a, c]), 0);
}

#[test]
fn a_layer_is_not_needed_before_the_layers_below_it_can_be_used() {
    // Layer 0's piece q: ready 20, needed 20, work 10 -> effective deadline 30.
    // Layer 5's piece p has a forward pass of 4 between them: needed at
    // 24 nominally, but not before 30 + 4 = 34. p runs first (0..3): 31 to
    // spare; q runs 20..30: 0. Without the chain p would show 21.
    let mut q = piece(20, 20, 10, 0);
    q.order = (0, 0, 0);
    let mut p = piece(0, 24, 3, 5);
    p.fwd_before_ps = 4;
    p.order = (0, 5, 0);
    assert_eq!(min_slack_ps(0, &[], &[q, p]), 0);
    // p in flight, late against its nominal deadline 2 (ends at 3), is not
    // late once layer 0 (effective 30) gates it: deadline 34.
    let mut p2 = p;
    p2.deadline_ps = 2;
    assert_eq!(min_slack_ps(0, &[p2], &[q]), 0);
    // Pieces of another iteration do not gate each other.
    let mut q_next = q;
    q_next.iteration = 1;
    assert_eq!(min_slack_ps(0, &[p2], &[q_next]), -1);
}

#[test]
fn huge_work_saturates_instead_of_overflowing() {
    // A slack factor of 1e9 makes work times saturate: both pieces are late.
    let s = min_slack_ps(10, &[piece(0, 100, u64::MAX, 1)], &[piece(0, 50, 5, 2)]);
    assert_eq!(s, 100 - u64::MAX as i128); // the in-flight piece (layer 1) also gates the other
}

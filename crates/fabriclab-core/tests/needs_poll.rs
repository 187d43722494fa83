//! `TcpSender::needs_poll`: the packet backend skips the poll at a host's
//! end of serialization (which frees TCP Small Queues budget) when it says
//! no, so a "no" must mean that a poll with any budget does nothing.

use fabriclab_core::transport::{CongestionControl, Dctcp, NewReno, Segment, TcpSender};

mod common;
use common::{poll, sender_cfg};

const MSS: u64 = 1460;

fn poll_budget(s: &mut TcpSender, now: u64, budget: u64) -> Vec<Segment> {
    let mut v = vec![];
    s.poll(now, budget, &mut |seg| v.push(seg));
    v
}

#[test]
fn a_window_limited_sender_needs_no_poll_until_an_ack() {
    let mut s = TcpSender::new(100 * MSS, &sender_cfg(), Box::new(NewReno));
    assert!(s.needs_poll(0), "never polled");
    assert_eq!(poll(&mut s, 0).len(), 10);
    assert!(!s.needs_poll(5));
    assert!(poll(&mut s, 5).is_empty());
    s.on_ack(10, MSS, false);
    assert!(s.needs_poll(10));
    assert_eq!(poll(&mut s, 10).len(), 2, "slow start: one acked, two sent");
    assert!(!s.needs_poll(10));
}

#[test]
fn a_budget_limited_sender_needs_a_poll_when_budget_frees() {
    let mut s = TcpSender::new(100 * MSS, &sender_cfg(), Box::new(NewReno));
    assert_eq!(poll_budget(&mut s, 0, 3 * MSS).len(), 3);
    assert!(s.needs_poll(1));
    assert_eq!(poll_budget(&mut s, 1, MSS).len(), 1);
    assert!(s.needs_poll(2));
    assert_eq!(poll(&mut s, 2).len(), 6);
    assert!(!s.needs_poll(3));
}

#[test]
fn the_retransmission_deadline_needs_a_poll() {
    let mut s = TcpSender::new(100 * MSS, &sender_cfg(), Box::new(NewReno));
    poll(&mut s, 0);
    let rto = s.poll_at().expect("armed");
    assert!(!s.needs_poll(rto - 1));
    assert!(s.needs_poll(rto));
    let resent = poll(&mut s, rto);
    assert_eq!(
        (resent.len(), resent[0].seq, resent[0].retransmit),
        (1, 0, true)
    );
}

#[test]
fn the_last_segment_sent_leaves_nothing_to_poll_for() {
    let mut s = TcpSender::new(3 * MSS, &sender_cfg(), Box::new(NewReno));
    assert_eq!(poll(&mut s, 0).len(), 3);
    assert!(!s.needs_poll(1));
}

/// Random ACKs (new data, duplicates), polls with random budgets and time
/// steps: whenever the sender says it needs no poll, a poll with unlimited
/// budget emits nothing and leaves its timer, window and counters as they
/// were. Fails if `needs_poll` ignores an ACK, a budget stop or the deadline.
#[test]
fn no_poll_needed_means_a_poll_does_nothing() {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut rnd = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut checked = 0;
    for run in 0..200 {
        let cc: Box<dyn CongestionControl> = if run % 2 == 0 {
            Box::new(NewReno)
        } else {
            Box::new(Dctcp::new(1.0 / 16.0, 1.0))
        };
        let mut s = TcpSender::new((20 + rnd(200)) * MSS, &sender_cfg(), cc);
        let (mut now, mut sent_to) = (0u64, 0u64);
        while !s.is_done() && now < 10_000_000_000_000 {
            match rnd(4) {
                0 => now += rnd(3_000_000_000),
                1 if sent_to > s.snd_una() => {
                    let ack = (s.snd_una() + MSS * (1 + rnd(3))).min(sent_to);
                    s.on_ack(now, ack, rnd(4) == 0);
                }
                1 => s.on_ack(now, s.snd_una(), false),
                _ => {
                    let budget = if rnd(2) == 0 { u64::MAX } else { rnd(6) * MSS };
                    for seg in poll_budget(&mut s, now, budget) {
                        sent_to = sent_to.max(seg.seq + seg.len as u64);
                    }
                }
            }
            if !s.needs_poll(now) {
                let before = (s.poll_at(), s.cwnd_bytes(), s.snd_una(), s.retransmits);
                assert!(
                    poll(&mut s, now).is_empty(),
                    "run {run}: a poll sent something"
                );
                let after = (s.poll_at(), s.cwnd_bytes(), s.snd_una(), s.retransmits);
                assert_eq!(before, after, "run {run}");
                assert!(!s.needs_poll(now));
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "only {checked} states checked");
}

//! Loss-recovery timer rules, each against a hand computation: the
//! retransmission timer restarts on the first partial ACK of a fast recovery
//! only (RFC 6582 §3.2 step 5), a repeated timeout keeps ssthresh (RFC 5681
//! §3.1), and an ACK of new data ends the timer's back-off (ns-3's NewAck).

use fabriclab_core::transport::{NewReno, TcpSender};

mod common;
use common::{poll, sender_cfg};

const MSS: u64 = 1460;
/// Minimum and initial RTO of these tests (common::sender_cfg): 1 ms.
const RTO: u64 = 1_000_000_000;

fn ssthresh(s: &TcpSender) -> f64 {
    s.window_state(0).ssthresh_bytes
}

#[test]
fn only_the_first_partial_ack_restarts_the_retransmission_timer() {
    // Ten segments out at t = 0; segments 0, 2 and 4 are lost, so the
    // receiver answers 1 and 3 with duplicate ACKs of 0, and 5..9 likewise.
    let mut s = TcpSender::new(100 * MSS, &sender_cfg(), Box::new(NewReno));
    assert_eq!(poll(&mut s, 0).len(), 10);
    for _ in 0..3 {
        s.on_ack(10, 0, false);
    }
    // Fast retransmit of segment 0.
    assert_eq!(poll(&mut s, 10)[0].seq, 0);
    // The timer armed at t = 0 still runs: the retransmission did not restart it.
    assert_eq!(s.poll_at(), Some(RTO));
    // First partial ACK (segment 0 repaired, 2 missing) at t = 20: restart, 20 + RTO.
    s.on_ack(20, 2 * MSS, false);
    assert_eq!(poll(&mut s, 20)[0].seq, 2 * MSS);
    assert_eq!(s.poll_at(), Some(20 + RTO));
    // Second partial ACK (4 missing) at t = 30: the deadline stays at 20 + RTO.
    s.on_ack(30, 4 * MSS, false);
    assert_eq!(poll(&mut s, 30)[0].seq, 4 * MSS);
    assert_eq!(s.poll_at(), Some(20 + RTO));
    // The full ACK at t = 40 ends recovery and restarts the timer: 40 + RTO.
    s.on_ack(40, 10 * MSS, false);
    poll(&mut s, 40);
    assert_eq!(s.poll_at(), Some(40 + RTO));
}

#[test]
fn a_repeated_timeout_keeps_ssthresh_and_a_later_one_lowers_it_again() {
    let mut s = TcpSender::new(100 * MSS, &sender_cfg(), Box::new(NewReno));
    assert_eq!(poll(&mut s, 0).len(), 10);
    // First timeout at RTO: ssthresh = flight / 2 = 5 MSS, cwnd 1 MSS, timer doubled.
    let segs = poll(&mut s, RTO);
    assert_eq!(segs.len(), 1);
    assert_eq!(s.timeouts, 1);
    assert_eq!(ssthresh(&s), 5.0 * MSS as f64);
    // The resent head is lost too: the second timeout, 2 RTO later, resends
    // it again. flight / 2 would be max(0.5, 2) MSS; ssthresh stays 5 MSS.
    assert_eq!(s.poll_at(), Some(3 * RTO));
    let segs = poll(&mut s, 3 * RTO);
    assert_eq!((segs.len(), segs[0].seq, s.timeouts), (1, 0, 2));
    assert_eq!(ssthresh(&s), 5.0 * MSS as f64);
    // Everything sent before the first timeout (10 segments) acknowledged:
    // the loss episode is over, and the next timeout halves the flight again.
    s.on_ack(3 * RTO + 10, 10 * MSS, false);
    let segs = poll(&mut s, 3 * RTO + 10);
    // cwnd 1 MSS + 1 MSS of slow start for the ACK = 2 segments (10, 11).
    assert_eq!(
        segs.iter().map(|g| g.seq / MSS).collect::<Vec<_>>(),
        vec![10, 11]
    );
    let t = s.poll_at().unwrap();
    poll(&mut s, t);
    assert_eq!(s.timeouts, 3);
    assert_eq!(ssthresh(&s), 2.0 * MSS as f64); // max(flight 2 MSS / 2, 2 MSS)
}

#[test]
fn an_ack_of_new_data_ends_the_timer_back_off() {
    let mut s = TcpSender::new(100 * MSS, &sender_cfg(), Box::new(NewReno));
    poll(&mut s, 0);
    // Two timeouts: RTO, then 2 RTO later; the timer now runs 4 RTO.
    poll(&mut s, RTO);
    poll(&mut s, 3 * RTO);
    assert_eq!(s.poll_at(), Some(7 * RTO));
    // The resent head is acknowledged at t = 3 RTO + 50: no RTT sample
    // (Karn: it was retransmitted) and no estimate yet, so the RTO returns to
    // the initial RTO and the timer of what is left runs from the ACK.
    let t = 3 * RTO + 50;
    s.on_ack(t, MSS, false);
    poll(&mut s, t);
    assert_eq!(s.poll_at(), Some(t + RTO));
}

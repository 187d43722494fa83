use fabriclab_core::transport::cc::{AckInfo, CcState, CongestionControl};
use fabriclab_core::transport::{Dctcp, NewReno, Segment, SenderConfig, TcpReceiver, TcpSender};

mod common;
use common::{poll, sender_cfg};

const MSS: u64 = 1460;

#[test]
fn initial_window_then_slow_start_doubles_per_round() {
    let mut s = TcpSender::new(1_000 * MSS, &sender_cfg(), Box::new(NewReno));
    let mut round = poll(&mut s, 0);
    let mut sizes = vec![round.len()];
    let mut now = 0;
    for _ in 0..3 {
        now += 1000;
        let mut next = vec![];
        for seg in &round {
            s.on_ack(now, seg.seq + seg.len as u64, false);
            next.extend(poll(&mut s, now));
        }
        sizes.push(next.len());
        round = next;
    }
    assert_eq!(sizes, vec![10, 20, 40, 80]);
}

#[test]
fn three_dupacks_retransmit_and_halve() {
    let mut s = TcpSender::new(100 * MSS, &sender_cfg(), Box::new(NewReno));
    let segs = poll(&mut s, 0);
    assert_eq!(segs.len(), 10);
    // Segment 0 is lost; segments 1..=3 produce three duplicate ACKs of 0.
    for _ in 0..3 {
        s.on_ack(10, 0, false);
    }
    let out = poll(&mut s, 10);
    assert_eq!(
        out[0],
        Segment {
            seq: 0,
            len: MSS as u32,
            retransmit: true,
            syn: false,
        }
    );
    // ssthresh = flight/2 = 5 MSS; cwnd = ssthresh + 3 MSS = 8 MSS, flight 10: nothing new.
    assert_eq!(out.len(), 1);
    assert!((s.cwnd_bytes() - 8.0 * MSS as f64).abs() < 1e-9);
    // The full ACK ends recovery with cwnd = ssthresh = 5 MSS (RFC 6582 §3.2 step 3, option 2).
    s.on_ack(20, 10 * MSS, false);
    assert!((s.cwnd_bytes() - 5.0 * MSS as f64).abs() < 1e-9);
    assert_eq!(s.retransmits, 1);
}

#[test]
fn timeout_collapses_window_and_resends_from_una() {
    let mut s = TcpSender::new(20 * MSS, &sender_cfg(), Box::new(NewReno));
    poll(&mut s, 0);
    let rto_at = s.poll_at().unwrap();
    assert_eq!(rto_at, 1_000_000_000);
    let out = poll(&mut s, rto_at);
    assert_eq!(
        out,
        vec![Segment {
            seq: 0,
            len: MSS as u32,
            retransmit: true,
            syn: false,
        }]
    );
    assert_eq!(s.timeouts, 1);
    // Backed off: next deadline one doubled RTO later.
    assert_eq!(s.poll_at(), Some(rto_at + 2_000_000_000));
}

#[test]
fn dctcp_alpha_converges_to_marked_fraction() {
    for marked_per_ten in [0u64, 3, 7, 10] {
        let mut cc = Dctcp::new(1.0 / 16.0, 1.0);
        let mut st = CcState {
            cwnd_bytes: 10.0 * MSS as f64,
            ssthresh_bytes: f64::INFINITY,
            mss_bytes: MSS as f64,
        };
        let mut una = 0;
        for _window in 0..300 {
            for i in 0..10 {
                una += MSS;
                let ack = AckInfo {
                    acked_bytes: MSS,
                    ece: i < marked_per_ten,
                    snd_una: una,
                    snd_nxt: una + 10 * MSS,
                    in_recovery: false,
                    now_ps: 0,
                    srtt_ps: None,
                    cwnd_limited: true,
                };
                cc.on_ack(&mut st, &ack);
            }
        }
        let p = marked_per_ten as f64 / 10.0;
        let a = cc.alpha().unwrap();
        assert!((a - p).abs() < 0.02, "alpha {a} vs fraction {p}");
    }
}

#[test]
fn dctcp_cuts_window_by_half_alpha_once_per_window() {
    let mut cc = Dctcp::new(1.0 / 16.0, 0.5);
    let w = 20.0 * MSS as f64;
    let mut st = CcState {
        cwnd_bytes: w,
        ssthresh_bytes: 1.0,
        mss_bytes: MSS as f64,
    };
    let ack = |una: u64, ece| AckInfo {
        acked_bytes: MSS,
        ece,
        snd_una: una,
        snd_nxt: 20 * MSS,
        in_recovery: false,
        now_ps: 0,
        srtt_ps: None,
        cwnd_limited: true,
    };
    cc.on_ack(&mut st, &ack(MSS, true));
    // alpha was updated on this first ACK (snd_una passed window_end = 0): 15/16*0.5 + 1/16*1.
    let alpha = 15.0 / 16.0 * 0.5 + 1.0 / 16.0;
    assert!((st.cwnd_bytes - w * (1.0 - alpha / 2.0)).abs() < 1e-6);
    let after = st.cwnd_bytes;
    cc.on_ack(&mut st, &ack(2 * MSS, true)); // same window: no second cut
    assert_eq!(st.cwnd_bytes, after);
}

#[test]
fn receiver_reassembles_out_of_order() {
    let mut r = TcpReceiver::new(5 * MSS);
    assert_eq!(r.on_segment(0, MSS as u32), MSS);
    assert_eq!(r.on_segment(2 * MSS, MSS as u32), MSS);
    assert_eq!(r.on_segment(4 * MSS, MSS as u32), MSS);
    assert_eq!(r.on_segment(MSS, MSS as u32), 3 * MSS);
    assert!(!r.is_complete());
    assert_eq!(r.on_segment(3 * MSS, MSS as u32), 5 * MSS);
    assert!(r.is_complete());
}

fn handshake_cfg() -> SenderConfig {
    SenderConfig {
        handshake: true,
        ..sender_cfg()
    }
}

#[test]
fn handshake_sends_a_syn_first_and_data_only_after_the_syn_ack() {
    let mut s = TcpSender::new(100 * MSS, &handshake_cfg(), Box::new(NewReno));
    let syn = Segment {
        seq: 0,
        len: 0,
        retransmit: false,
        syn: true,
    };
    assert_eq!(poll(&mut s, 0), vec![syn]);
    // Nothing more until the SYN-ACK, however often polled.
    assert!(poll(&mut s, 5_000).is_empty());
    assert!(!s.established());
    // SYN-ACK after 20 us: the first RTT sample, so RTO = srtt + 4 x srtt/2 = 60 us, below the
    // 1 ms minimum: 1 ms (RFC 6298 2.2 and 2.4).
    s.on_syn_ack(20_000_000);
    assert!(s.established());
    let data = poll(&mut s, 20_000_000);
    assert_eq!(data.len(), 10); // the initial window
    assert!(data.iter().all(|d| !d.syn && d.len == MSS as u32));
    assert_eq!(s.poll_at(), Some(20_000_000 + 1_000_000_000));
}

#[test]
fn a_lost_syn_is_sent_again_after_the_initial_rto_and_the_first_window_is_one_segment() {
    let mut s = TcpSender::new(100 * MSS, &handshake_cfg(), Box::new(NewReno));
    assert_eq!(poll(&mut s, 0).len(), 1);
    assert_eq!(s.poll_at(), Some(1_000_000_000)); // initial RTO
    let again = poll(&mut s, 1_000_000_000);
    assert_eq!(
        again,
        vec![Segment {
            seq: 0,
            len: 0,
            retransmit: true,
            syn: true,
        }]
    );
    // Backed off to 2 s for the next try.
    assert_eq!(s.poll_at(), Some(3_000_000_000));
    s.on_syn_ack(1_000_010_000);
    // RFC 5681 3.1: after a lost SYN the initial window is one segment; Karn: no RTT sample.
    assert_eq!(poll(&mut s, 1_000_010_000).len(), 1);
    assert_eq!(s.timeouts, 1);
}

/// A sender held from outside (Packet Rocket's pause) is limited by the
/// hold, not its window: ACKs during the hold grow the window only by slow
/// start's clause, 2 x flight >= cwnd (congestion window validation). By
/// hand, IW = 10 all in flight and acked one by one while held: after ACK k
/// the flight is 10 - k, so ACKs 1-3 grow the window (18 >= 10, 16 >= 11,
/// 14 >= 12) and ACK 4 does not (12 < 13), nor any later: 13 segments leave
/// at the hold's end. Unheld, every ACK grows it: 20.
#[test]
fn acks_during_a_hold_grow_the_window_only_by_slow_starts_clause() {
    for (held, expected) in [(true, 13), (false, 20)] {
        let mut s = TcpSender::new(1_000 * MSS, &sender_cfg(), Box::new(NewReno));
        let first = poll(&mut s, 0);
        assert_eq!(first.len(), 10);
        for seg in &first {
            if held {
                s.hold();
            }
            s.on_ack(1000, seg.seq + seg.len as u64, false);
        }
        assert_eq!(poll(&mut s, 2000).len(), expected, "held: {held}");
    }
}

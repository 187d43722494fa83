//! Selective acknowledgments, each against a hand computation: the
//! receiver's blocks in RFC 2018 §4's order, RFC 6675's IsLost and pipe on a
//! hand-built scoreboard, and a window of ten segments losing 3, 5 and 7
//! played ACK by ACK with SACK (RFC 6675) and without (NewReno, RFC 6582).

use fabriclab_core::transport::sack::{Scoreboard, MAX_SACK_BLOCKS};
use fabriclab_core::transport::{NewReno, SenderConfig, TcpReceiver, TcpSender};

mod common;
use common::{poll, sender_cfg};

const MSS: u64 = 1460;

fn blocks(r: &TcpReceiver) -> Vec<(u64, u64)> {
    let mut out = [(0, 0); MAX_SACK_BLOCKS];
    let n = r.sack_blocks(&mut out);
    out[..n].to_vec()
}

#[test]
fn the_receiver_reports_the_triggering_block_first_then_the_most_recent() {
    // Segments of 1000 bytes; k stands for [1000 k, 1000 (k + 1)).
    const M: u64 = 1000;
    let mut r = TcpReceiver::new(10 * M);
    let mut arrive = |k: u64| {
        let ack = r.on_segment(k * M, M as u32);
        (
            ack / M,
            blocks(&r)
                .iter()
                .map(|&(s, e)| (s / M, e / M))
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(arrive(0), (1, vec![]));
    assert_eq!(arrive(2), (1, vec![(2, 3)]));
    assert_eq!(arrive(4), (1, vec![(4, 5), (2, 3)]));
    assert_eq!(arrive(6), (1, vec![(6, 7), (4, 5), (2, 3)]));
    // Three blocks at most: the oldest, (2, 3), is left out.
    assert_eq!(arrive(8), (1, vec![(8, 9), (6, 7), (4, 5)]));
    // 3 joins (2, 3) and (4, 5): the block holding it leads; (4, 5) is
    // inside it and not repeated.
    assert_eq!(arrive(3), (1, vec![(2, 5), (8, 9), (6, 7)]));
    // 1 moves the cumulative point past (2, 5): no block holds it, so the
    // most recent others follow in order.
    assert_eq!(arrive(1), (5, vec![(8, 9), (6, 7)]));
    assert_eq!(arrive(9), (5, vec![(8, 10), (6, 7)]));
    assert_eq!(arrive(5), (7, vec![(8, 10)]));
    assert_eq!(arrive(7), (10, vec![]));
}

#[test]
fn is_lost_and_pipe_on_a_hand_built_scoreboard() {
    const M: u64 = 1000;
    let mut b = Scoreboard::default();
    // SACKed: 2-4, 6 and 8 of segments 0..9 (HighData = 10 M).
    assert_eq!(
        b.update(0, &[(8 * M, 9 * M), (6 * M, 7 * M), (2 * M, 5 * M)]),
        5 * M
    );
    assert_eq!(
        b.ranges(),
        &[(2 * M, 5 * M), (6 * M, 7 * M), (8 * M, 9 * M)]
    );
    // Above 5: 6 and 8, two segments and 2 SMSS bytes, not "more than
    // (DupThresh - 1) * SMSS": not lost. Above 1: five segments: lost.
    assert!(!b.is_lost(9 * M, 3, M));
    assert!(!b.is_lost(7 * M, 3, M));
    assert!(!b.is_lost(5 * M, 3, M));
    assert!(b.is_lost(M, 3, M));
    assert!(b.is_lost(0, 3, M));
    // pipe, segment 0 retransmitted (HighRxt ends at 1 M): unSACKed 0, 1,
    // 5, 7, 9; 0 and 1 are lost, so 5, 7, 9 count once (3 M) and 0 once
    // more as retransmitted: 4 M.
    assert_eq!(b.pipe(0, 10 * M, M, 3, M), 4 * M);
    // Nothing retransmitted yet: 3 M.
    assert_eq!(b.pipe(0, 10 * M, 0, 3, M), 3 * M);
    // A cumulative ACK at 7 M trims the board: 8 and the byte above remain.
    b.update(7 * M, &[]);
    assert_eq!(b.ranges(), &[(8 * M, 9 * M)]);
    assert_eq!(b.pipe(7 * M, 10 * M, 0, 3, M), 2 * M);
}

/// Plays a message of `segments` full segments: segments sent in round r reach the
/// receiver in round r + 1 in the order they were sent, each answered at
/// once, and the first transmissions of `lost` vanish. Returns, for every
/// delivery, (round, segment delivered, cumulative ACK in segments after
/// it, segments emitted in answer, retransmissions marked).
fn play(
    sack: bool,
    lost: &[u64],
    segments: u64,
) -> (TcpSender, Vec<(u32, u64, u64, Vec<(u64, bool)>)>) {
    let cfg = SenderConfig {
        sack,
        ..sender_cfg()
    };
    let size = segments * MSS;
    let mut s = TcpSender::new(size, &cfg, Box::new(NewReno));
    let mut r = TcpReceiver::new(size);
    let mut in_flight: Vec<(u64, bool)> = poll(&mut s, 0)
        .iter()
        .map(|g| (g.seq, g.retransmit))
        .collect();
    let mut log = vec![];
    let mut round = 0;
    let mut t = 0;
    while !s.is_done() {
        round += 1;
        assert!(round < 100, "stuck");
        let mut next = vec![];
        for (seq, retx) in std::mem::take(&mut in_flight) {
            if !retx && lost.contains(&(seq / MSS)) {
                continue;
            }
            t += 1_000; // 1 ns apart: far inside the 1 ms RTO
            let ack = r.on_segment(seq, MSS as u32);
            let mut out = [(0, 0); MAX_SACK_BLOCKS];
            let n = if sack { r.sack_blocks(&mut out) } else { 0 };
            s.on_ack_sack(t, ack, false, &out[..n]);
            let sent: Vec<(u64, bool)> = poll(&mut s, t)
                .iter()
                .map(|g| (g.seq / MSS, g.retransmit))
                .collect();
            next.extend(sent.iter().map(|&(k, x)| (k * MSS, x)));
            log.push((round, seq / MSS, s.snd_una() / MSS, sent));
        }
        in_flight = next;
    }
    (s, log)
}

fn round_of(log: &[(u32, u64, u64, Vec<(u64, bool)>)], seg: u64) -> u32 {
    log.iter()
        .find(|e| e.3.contains(&(seg, true)))
        .map(|e| e.0)
        .expect("retransmitted")
}

#[test]
fn sack_repairs_three_holes_of_one_window_in_its_first_recovery_round() {
    let (s, log) = play(true, &[3, 5, 7], 100);
    let step = |i: usize| {
        (
            log[i].0,
            log[i].1,
            log[i].2,
            log[i].3.iter().map(|x| x.0).collect::<Vec<_>>(),
        )
    };
    // By hand (docs in the module of sack_recovery): slow start sends two
    // per ACK of 0, 1, 2 (cwnd 11, 12, 13); the duplicate ACKs of 4 and 6
    // each free a SACKed segment from pipe (Limited Transmit) and send one;
    // the third, of 8, enters recovery with FlightSize 18 - 3 = 15, so
    // cwnd = ssthresh = 7.5 segments, and resends 3. pipe = 11 + 1 = 12.
    let r1 = [
        (1, 0, 1, vec![10, 11]),
        (1, 1, 2, vec![12, 13]),
        (1, 2, 3, vec![14, 15]),
        (1, 4, 3, vec![16]),
        (1, 6, 3, vec![17]),
        (1, 8, 3, vec![3]),
        (1, 9, 3, vec![]),
    ];
    // Round 2: each SACK of 10, 11, ... drops pipe by one; at 12 pipe is 6
    // and 5 goes (IsLost: 6, 8-12 SACKed above it), at 13 7 goes (8-13
    // above), then new data one for one, until the resent 3 is acknowledged.
    let r2 = [
        (2, 10, 3, vec![]),
        (2, 11, 3, vec![]),
        (2, 12, 3, vec![5]),
        (2, 13, 3, vec![7]),
        (2, 14, 3, vec![18]),
        (2, 15, 3, vec![19]),
        (2, 16, 3, vec![20]),
        (2, 17, 3, vec![21]),
        (2, 3, 5, vec![22]),
    ];
    // Round 3: the resent 5 moves the ACK to 7, the resent 7 to 18 =
    // RecoveryPoint: recovery ends with cwnd = 7.5 segments.
    let r3 = [(3, 5, 7, vec![23]), (3, 7, 18, vec![24])];
    for (i, want) in r1.iter().chain(&r2).chain(&r3).enumerate() {
        assert_eq!(&step(i), want, "delivery {i}");
    }
    assert_eq!(
        (round_of(&log, 3), round_of(&log, 5), round_of(&log, 7)),
        (1, 2, 2)
    );
    // Every hole resent before the first resent segment's ACK (round 2's last).
    assert_eq!(s.timeouts, 0);
    assert_eq!(s.retransmits, 3);
}

#[test]
fn newreno_repairs_one_hole_per_round_trip() {
    let (s, log) = play(false, &[3, 5, 7], 100);
    // By hand: no Limited Transmit; the third duplicate ACK (of 8) resends
    // 3 in round 1; its partial ACK (round 2) resends 5; 5's (round 3)
    // resends 7; 7's, in round 4, moves the ACK past 10.
    assert_eq!(
        (round_of(&log, 3), round_of(&log, 5), round_of(&log, 7)),
        (1, 2, 3)
    );
    let first_past_10 = log.iter().find(|e| e.2 >= 10).expect("acked").0;
    assert_eq!(first_past_10, 4);
    assert_eq!((s.timeouts, s.retransmits), (0, 3));
}

#[test]
fn without_losses_sack_sends_exactly_what_newreno_sends() {
    // pipe = flight when nothing is SACKed: the same segments at the same ACKs.
    let (a, la) = play(true, &[], 100);
    let (b, lb) = play(false, &[], 100);
    assert_eq!(la, lb);
    assert_eq!((a.retransmits, b.retransmits), (0, 0));
}

#[test]
fn after_a_timeout_sack_keeps_the_scoreboard_and_does_not_resend_sacked_data() {
    // Ten segments out; 0, 2, 4, 6 and 8 are lost, so the receiver holds 1,
    // 3, 5, 7 and 9. The ACKs of 1 and 3 arrive (two duplicates SACKing two
    // segments: not IsLost, no recovery); the rest are lost. At the RTO
    // (1 ms) 0 is resent with cwnd 1 and the scoreboard is kept (our
    // receiver never reneges).
    let cfg = SenderConfig {
        sack: true,
        ..sender_cfg()
    };
    let mut s = TcpSender::new(100 * MSS, &cfg, Box::new(NewReno));
    assert_eq!(poll(&mut s, 0).len(), 10);
    s.on_ack_sack(10, 0, false, &[(MSS, 2 * MSS)]);
    s.on_ack_sack(20, 0, false, &[(3 * MSS, 4 * MSS), (MSS, 2 * MSS)]);
    assert!(!s.in_recovery());
    let rto = 1_000_000_000;
    let segs = poll(&mut s, rto);
    assert_eq!((s.timeouts, segs.len(), segs[0].seq), (1, 1, 0));
    assert_eq!(s.sacked_ranges(), &[(MSS, 2 * MSS), (3 * MSS, 4 * MSS)]);
    // The ACK of the resent 0 is cumulative to 2 and, five blocks being
    // out of order at the receiver, reports the three most recent (RFC
    // 2018 §4): 9, 7, 5, not 3. Slow start: cwnd 2. The resend goes on
    // from 2; 3 is SACKed from before the timeout and skipped, so 4 goes
    // (pipe 1 + 1 = cwnd). An expunged scoreboard would resend 3, which
    // the receiver holds.
    let blocks = [(9 * MSS, 10 * MSS), (7 * MSS, 8 * MSS), (5 * MSS, 6 * MSS)];
    s.on_ack_sack(rto + 10, 2 * MSS, false, &blocks);
    let segs: Vec<u64> = poll(&mut s, rto + 10).iter().map(|g| g.seq / MSS).collect();
    assert_eq!(segs, vec![2, 4]);
    assert_eq!(s.retransmits, 3);
}

#[test]
fn the_rescue_retransmission_repairs_a_lost_tail_without_a_timeout() {
    // A 10-segment message losing 3 and 9. By hand (RFC 6675 §5): the
    // duplicate ACK of 6 enters recovery (FlightSize 7, cwnd 3.5), resends 3
    // and sets HighRxt = RescueRxt = end of 3 (step 4.3). In round 1 HighACK
    // stays at 3, not above RescueRxt, so rule 4 offers nothing. The resent
    // 3 arrives in round 2: HighACK moves to 9 (past RescueRxt), 9 is
    // neither IsLost nor below the highest SACK, no new data is left, so
    // rule 4 resends 9 (pipe 0). The same round as NewReno's partial ACK.
    let (s, log) = play(true, &[3, 9], 10);
    let at: Vec<(u64, Vec<(u64, bool)>)> = log.iter().map(|e| (e.1, e.3.clone())).collect();
    assert_eq!(
        at,
        vec![
            (0, vec![]),
            (1, vec![]),
            (2, vec![]),
            (4, vec![]),
            (5, vec![]),
            (6, vec![(3, true)]),
            (7, vec![]),
            (8, vec![]),
            (3, vec![(9, true)]),
            (9, vec![]),
        ]
    );
    assert_eq!((s.timeouts, s.retransmits), (0, 2));
    assert_eq!((round_of(&log, 3), round_of(&log, 9)), (1, 2));
    let (n, nlog) = play(false, &[3, 9], 10);
    assert_eq!((round_of(&nlog, 3), round_of(&nlog, 9)), (1, 2));
    assert_eq!((n.timeouts, n.retransmits), (0, 2));
}

#[test]
fn losing_only_segment_3_of_10_resends_3_alone() {
    // The review's hand case (B3): recovery on the ACK of 6 resends 3; the
    // ACKs of 7 and 8 leave pipe at 3 then 2 of cwnd 3.5, but RescueRxt =
    // end of 3 and HighACK = 3, so rule 4 does not fire: 9, still in
    // flight, is not resent. The resent 3 completes the message.
    let (s, log) = play(true, &[3], 10);
    let resent: Vec<u64> = log
        .iter()
        .flat_map(|e| e.3.iter().filter(|x| x.1).map(|x| x.0))
        .collect();
    assert_eq!(resent, vec![3]);
    assert_eq!((s.timeouts, s.retransmits), (0, 1));
}

#[test]
fn a_timeout_during_a_sack_recovery_keeps_the_recoverys_ssthresh() {
    let cfg = SenderConfig {
        sack: true,
        ..sender_cfg()
    };
    let mut s = TcpSender::new(100 * MSS, &cfg, Box::new(NewReno));
    assert_eq!(poll(&mut s, 0).len(), 10);
    // 0 lost; the ACKs of 1, 2, 3 SACK them: recovery with FlightSize 10,
    // ssthresh = cwnd = 5 segments, and 0 resent.
    for k in 1..=3 {
        s.on_ack_sack(k * 10, 0, false, &[(MSS, (k + 1) * MSS)]);
    }
    assert!(s.in_recovery());
    assert_eq!(s.window_state(0).ssthresh_bytes, 5.0 * MSS as f64);
    assert_eq!(poll(&mut s, 30).iter().map(|g| g.seq).collect::<Vec<_>>(), vec![0]);
    // The ACKs of 4..9 SACK them: pipe falls to the resent 0 (1 segment),
    // so new data 10..13 go (pipe 5 = cwnd).
    for k in 4..=9 {
        s.on_ack_sack(k * 10, 0, false, &[(MSS, (k + 1) * MSS)]);
    }
    let sent: Vec<u64> = poll(&mut s, 90).iter().map(|g| g.seq / MSS).collect();
    assert_eq!(sent, vec![10, 11, 12, 13]);
    // The resent 0 is lost: the timeout at 1 ms. FlightSize is now 14
    // segments (7 by halving), but the recovery's 5 stay.
    let segs = poll(&mut s, 1_000_000_000);
    assert_eq!((s.timeouts, segs[0].seq), (1, 0));
    assert_eq!(s.window_state(0).ssthresh_bytes, 5.0 * MSS as f64);
}

//! DCQCN's reaction point against a hand-played sequence of CNPs and timer
//! ticks (Zhu et al., SIGCOMM'15, section 3, with the ns-3 HPCC
//! repository's defaults), its notification point's CNP spacing, and the
//! paced sender.

use fabriclab_core::transport::dcqcn::{CnpPacer, DcqcnParams, DcqcnRp};
use fabriclab_core::transport::{Dcqcn, Segment, TcpSender};

mod common;
use common::sender_cfg;

const US: u64 = 1_000_000;
const LINE: f64 = 100e9;

fn close(a: f64, b: f64) {
    assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{a} != {b}");
}

#[test]
fn first_cnp_then_decrease_check_then_fast_recovery_and_increases() {
    let p = DcqcnParams::default();
    let mut rp = DcqcnRp::new(LINE, p);
    // First CNP at 10 us: alpha = 1, timers start; the rate is cut at the
    // first decrease check, 4 us later, by alpha / 2.
    rp.on_cnp(10 * US);
    rp.advance(13 * US);
    close(rp.rate_bps(), LINE);
    rp.advance(14 * US);
    close(rp.rate_bps(), 50e9);
    close(rp.target_bps(), LINE); // no clamping at stage 0
                                  // Alpha tick at 65 us without a CNP in the period: alpha = 15/16.
    rp.advance(65 * US);
    close(rp.alpha(), 15.0 / 16.0);
    // A CNP at 100 us is acted on at the next decrease check of the 4 us
    // grid started at 14 us: 102 us. rate = 50 x (1 - 0.9375 / 2).
    rp.on_cnp(100 * US);
    rp.advance(101 * US);
    close(rp.rate_bps(), 50e9);
    rp.advance(102 * US);
    close(rp.rate_bps(), 26.5625e9);
    // The alpha tick at 120 us saw the CNP: alpha = 0.9375 x 15/16 + 1/16.
    rp.advance(120 * US);
    let a120 = 0.9375 * 15.0 / 16.0 + 1.0 / 16.0;
    close(rp.alpha(), a120);
    // Increase timer: 1500 us after the last decrease (102 us), then every
    // 1500 us. Five fast-recovery steps halve the gap to the target (100 G).
    let mut rate: f64 = 26.5625e9;
    for k in 1..=5u64 {
        rp.advance((102 + 1500 * k) * US);
        rate = (rate + LINE) / 2.0;
        close(rp.rate_bps(), rate);
        assert_eq!(rp.stage(), k as u32);
    }
    // Additive increase (stage 5), then hyper increase: the target is
    // already the line rate, where it is capped; the rate keeps halving the gap.
    rp.advance((102 + 1500 * 6) * US);
    close(rp.target_bps(), LINE);
    close(rp.rate_bps(), (rate + LINE) / 2.0);
    // Alpha decayed at every tick since 120 us: 55 us apart up to 9102 us.
    let ticks = (9102 - 120) / 55;
    close(rp.alpha(), a120 * (15.0f64 / 16.0).powi(ticks));
}

#[test]
fn a_cnp_during_recovery_clamps_the_target_to_the_current_rate() {
    let mut rp = DcqcnRp::new(LINE, DcqcnParams::default());
    rp.on_cnp(0);
    rp.advance(4 * US); // rate 50 G, increase timer at 1504 us
    rp.advance(1504 * US); // fast recovery: (50 + 100) / 2 = 75 G, stage 1
    close(rp.rate_bps(), 75e9);
    // Alpha: 1 at 0, no CNP since: (15/16)^k after k ticks at 55 us.
    rp.on_cnp(1700 * US);
    // Decrease grid: 4, 8, ... us; the first check after 1700 us is 1704 us.
    rp.advance(1704 * US);
    let alpha = (15.0f64 / 16.0).powi(1704 / 55);
    close(rp.target_bps(), 75e9); // clamped: stage was 1
    close(rp.rate_bps(), 75e9 * (1.0 - alpha / 2.0));
    assert_eq!(rp.stage(), 0);
}

#[test]
fn at_equal_times_the_increase_tick_comes_before_the_decrease_check() {
    // As in an event queue: the increase tick due at 1504 us was scheduled
    // at 4 us, the decrease check due then only at 1500 us.
    let mut rp = DcqcnRp::new(LINE, DcqcnParams::default());
    rp.on_cnp(0);
    rp.advance(4 * US); // 50 G; increase timer at 1504 us
    rp.on_cnp(1502 * US); // acted on at the decrease check of 1504 us
    rp.advance(1504 * US);
    // First the fast-recovery step (stage 0 -> 1): (50 + 100) / 2 = 75 G;
    // then the cut, clamping the target to 75 G since the stage is 1.
    let alpha = (15.0f64 / 16.0).powi(1504 / 55);
    close(rp.target_bps(), 75e9);
    close(rp.rate_bps(), 75e9 * (1.0 - alpha / 2.0));
    assert_eq!(rp.stage(), 0);
}

#[test]
fn the_rate_never_falls_below_the_minimum() {
    let p = DcqcnParams {
        min_rate_bps: 30e9,
        ..DcqcnParams::default()
    };
    let mut rp = DcqcnRp::new(LINE, p);
    rp.on_cnp(0);
    rp.advance(4 * US); // 50 G
    rp.on_cnp(5 * US);
    rp.advance(8 * US); // 50 x (1 - alpha/2) with alpha = 1: 25 G, floored at 30 G
    close(rp.rate_bps(), 30e9);
}

#[test]
fn the_notification_point_sends_at_most_one_cnp_per_interval() {
    let mut np = CnpPacer::default();
    let i = 50 * US;
    let got: Vec<bool> = [
        (0, true),
        (10, true),
        (49, true),
        (50, true),
        (60, false),
        (120, true),
    ]
    .iter()
    .map(|&(t, marked)| np.on_packet(t * US, marked, i))
    .collect();
    assert_eq!(got, vec![true, false, false, true, false, true]);
}

#[test]
fn a_dcqcn_sender_paces_one_packet_per_wire_time() {
    let cfg = sender_cfg();
    let mut s = TcpSender::new(
        100 * 1460,
        &cfg,
        Box::new(Dcqcn::new(10e9, DcqcnParams::default())),
    );
    let mut out: Vec<Segment> = vec![];
    s.poll(0, u64::MAX, &mut |seg| out.push(seg));
    assert_eq!(out.len(), 1);
    // 1538 wire bytes at 10 Gbit/s: 1,230,400 ps.
    assert_eq!(s.poll_at(), Some(1_230_400));
    s.poll(1_000_000, u64::MAX, &mut |seg| out.push(seg));
    assert_eq!(out.len(), 1);
    s.poll(1_230_400, u64::MAX, &mut |seg| out.push(seg));
    assert_eq!(out.len(), 2);
    // After a CNP and the decrease check (alpha = 1: half rate), gaps double.
    s.on_ack(2_000_000, 1460, true);
    s.poll(2_460_800, u64::MAX, &mut |seg| out.push(seg));
    assert_eq!(out.len(), 3);
    let t = 2_000_000 + 4 * US;
    s.poll(t, u64::MAX, &mut |seg| out.push(seg));
    assert_eq!(out.len(), 4);
    assert_eq!(s.poll_at(), Some(t + 2 * 1_230_400));
}

#[test]
fn after_a_timeout_a_dcqcn_sender_resends_at_its_rate_without_a_window() {
    let cfg = sender_cfg();
    let gap = 1_230_400; // 1538 wire bytes at 10 Gbit/s
                         // A 3-segment message: all sent, none acknowledged.
    let mut s = TcpSender::new(
        3 * 1460,
        &cfg,
        Box::new(Dcqcn::new(10e9, DcqcnParams::default())),
    );
    let mut out: Vec<Segment> = vec![];
    for k in 0..3 {
        s.poll(k * gap, u64::MAX, &mut |seg| out.push(seg));
    }
    assert_eq!(out.len(), 3);
    // Nothing acknowledged: the RTO (1 s from the first send) fires and the
    // sender goes back to byte 0, one packet per gap, with no window to wait on.
    let rto = s.poll_at().unwrap();
    assert_eq!(rto, 1_000_000_000);
    s.poll(rto, u64::MAX, &mut |seg| out.push(seg));
    s.poll(rto + gap, u64::MAX, &mut |seg| out.push(seg));
    s.poll(rto + 2 * gap, u64::MAX, &mut |seg| out.push(seg));
    let again: Vec<u64> = out[3..].iter().map(|x| x.seq).collect();
    assert_eq!(again, vec![0, 1460, 2920]);
}

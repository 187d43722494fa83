//! CUBIC (RFC 9438) against numbers worked out by hand from the RFC's
//! formulas: K from Figure 2, the window function of Figure 1, the
//! Reno-friendly estimate of Figure 4, fast convergence (Figure 6) and the
//! timeout rule of §4.8.

use fabriclab_core::transport::cc::{AckInfo, CcState, CongestionControl};
use fabriclab_core::transport::cubic::{cbrt, Cubic};

const MSS: f64 = 1000.0;

fn ack(now_ps: u64, srtt_ps: f64) -> AckInfo {
    AckInfo {
        acked_bytes: MSS as u64,
        ece: false,
        snd_una: 0,
        snd_nxt: 0,
        in_recovery: false,
        now_ps,
        srtt_ps: Some(srtt_ps),
        cwnd_limited: true,
    }
}

/// A congestion event at a window of `cwnd` segments with as many in
/// flight; the window then restarts at the new ssthresh, as the
/// transport's recovery ends (RFC 6582 §3.2 step 3).
fn loss(cc: &mut Cubic, st: &mut CcState, cwnd: f64) {
    st.cwnd_bytes = cwnd * MSS;
    st.ssthresh_bytes = cc.ssthresh_after_loss(st, (cwnd * MSS) as u64);
    st.cwnd_bytes = st.ssthresh_bytes;
}

/// A lone window-limited flow over a path of fixed round trip `rtt_s`: one
/// segment is acknowledged every `rtt / cwnd` (the ACK clock). Returns the
/// window (segments) at each instant of `at_s` (seconds after `t0_s`).
fn ack_clock(cc: &mut Cubic, st: &mut CcState, t0_s: f64, rtt_s: f64, at_s: &[f64]) -> Vec<f64> {
    let mut t = t0_s;
    let mut out = Vec::new();
    for &want in at_s {
        while t < t0_s + want {
            cc.on_ack(st, &ack((t * 1e12) as u64, rtt_s * 1e12));
            t += rtt_s / (st.cwnd_bytes / MSS);
        }
        out.push(st.cwnd_bytes / MSS);
    }
    out
}

#[test]
fn cube_root_is_exact_to_rounding() {
    assert_eq!(cbrt(27.0), 3.0);
    assert_eq!(cbrt(-8.0), -2.0);
    assert_eq!(cbrt(0.0), 0.0);
    for v in [1e-9, 0.3, 2.0, 75.0, 1e6, 123_456_789.0] {
        let r = cbrt(v);
        assert!(((r * r * r - v) / v).abs() < 4e-16, "cbrt({v}) = {r}");
    }
}

#[test]
fn window_after_a_loss_follows_the_cubic_function() {
    // Loss at 100 segments, the first congestion event: W_max = 100 (no
    // fast convergence without a previous W_max), ssthresh = cwnd_epoch =
    // 0.7 * 100 = 70, K = cbrt((100 - 70) / 0.4) = cbrt(75). By hand:
    // 4.217^3 = 74.991, 4.2172^3 = 75.002, so 4.217 < K < 4.2172.
    let k = 4.2171633;
    let w = |t: f64| 0.4 * (t - k) * (t - k) * (t - k) + 100.0;
    let mut cc = Cubic::default();
    let mut st = CcState {
        cwnd_bytes: 0.0,
        ssthresh_bytes: f64::INFINITY,
        mss_bytes: MSS,
    };
    loss(&mut cc, &mut st, 100.0);
    assert_eq!(st.ssthresh_bytes, 70.0 * MSS);
    assert_eq!(cc.w_max(), Some(100.0));
    // RTT 100 ms. W_est grows by alpha = 3 * 0.3 / 1.7 = 0.5294 segment per
    // RTT (one ACK per segment of the window, alpha / cwnd each): 70 + 5.294 t,
    // until it reaches cwnd_prior = 100 at t1 = 30 / 5.294 = 5.667 s, then
    // one segment per RTT: 100 + 10 (t - t1). Up to t1 it stays below W_cubic
    // (at 1 s: 75.3 against 86.7), so the concave then convex regions set
    // the window; from there W_est overtakes W_cubic (at 6 s: 103.33
    // against 102.27) and the Reno-friendly region rules. With the target one
    // RTT ahead the window tracks W_cubic(t) itself, within R^2 |W''| / 2 <
    // 0.01 * 6 * 0.4 * 4.3 / 2 = 0.05 segment on this curve.
    let alpha = 0.9 / 1.7;
    let t1 = 30.0 / (alpha * 10.0);
    let w_est = |t: f64| {
        if t < t1 {
            70.0 + alpha * 10.0 * t
        } else {
            100.0 + 10.0 * (t - t1)
        }
    };
    let at = [0.5, 1.0, 2.0, 3.0, k, 5.0, 5.5, 6.0, 7.0, 8.0];
    let got = ack_clock(&mut cc, &mut st, 10.0, 0.1, &at);
    let ks = cc.k_s().unwrap();
    assert!(ks > 4.217 && ks < 4.2172, "K = {ks}");
    for (t, g) in at.iter().zip(&got) {
        let hand = w(*t).max(w_est(*t));
        assert!(
            *t >= t1 || w(*t) > w_est(*t) + 1.0,
            "t = {t}: the cubic region"
        );
        assert!(
            (g - hand).abs() < 0.3,
            "t = {t} s: cwnd {g} segments, by hand {hand}"
        );
    }
    // Spot values by hand: W(2 s) = 100 - 0.4 * 2.2172^3 = 95.64 (NewReno
    // would be at 70 + 20 = 90); W_est(8 s) = 100 + 10 * 2.333 = 123.33.
    assert!((got[2] - 95.64).abs() < 0.3 && (got[9] - 123.33).abs() < 0.3);
}

#[test]
fn reno_friendly_region_rules_a_small_window_on_a_short_path() {
    // Loss at 20 segments on a 100 us path (a small BDP, RFC 9438 §4.3 and
    // §5.2: there CUBIC must be as fast as Reno). W_max = 20, cwnd_epoch = 14,
    // K = cbrt(6 / 0.4) = cbrt(15): 2.466^3 = 14.996, 2.4663^3 = 15.002. In
    // 40 ms W_cubic rises from 14 to 14 + 3 * 0.4 * K^2 * 0.04 < 14.3 segments.
    let mut cc = Cubic::default();
    let mut st = CcState {
        cwnd_bytes: 0.0,
        ssthresh_bytes: f64::INFINITY,
        mss_bytes: MSS,
    };
    loss(&mut cc, &mut st, 20.0);
    let rtt = 100e-6;
    // W_est grows by alpha / W per ACK, so W^2 by 2 alpha per ACK (plus
    // alpha^2 / W^2, under 0.002): after n ACKs W = sqrt(14^2 + 2 alpha n),
    // alpha = 3 * 0.3 / 1.7 = 0.52941, until W reaches cwnd_prior = 20 at
    // n1 = (400 - 196) / (2 alpha) = 192.67 ACKs; from there alpha = 1 and
    // W = sqrt(400 + 2 (n - n1)).
    let alpha = 0.9 / 1.7;
    let n1 = 204.0 / (2.0 * alpha);
    let mut now = 1.0;
    for n in 1..=600u32 {
        cc.on_ack(&mut st, &ack((now * 1e12) as u64, rtt * 1e12));
        now += rtt / (st.cwnd_bytes / MSS);
        let n = n as f64;
        let hand = if n < n1 {
            (196.0 + 2.0 * alpha * n).sqrt()
        } else {
            (400.0 + 2.0 * (n - n1)).sqrt()
        };
        assert!(
            (st.cwnd_bytes / MSS - hand).abs() < 0.05,
            "after {n} ACKs: {} vs {hand}",
            st.cwnd_bytes / MSS
        );
    }
    let ks = cc.k_s().unwrap();
    assert!(ks > 2.466 && ks < 2.4663, "K = {ks}");
    // 600 ACKs took well under 40 ms, and the window (about 32 segments) is far
    // above W_cubic (under 14.3): the Reno-friendly region throughout.
    assert!(now - 1.0 < 0.04 && st.cwnd_bytes / MSS > 30.0);
}

#[test]
fn fast_convergence_lowers_w_max_and_k() {
    // Losses at 100 then 90 segments: 90 < W_max = 100, so W_max = 90 * 1.7 / 2
    // = 76.5 and ssthresh = 63: K = cbrt((76.5 - 63) / 0.4) = cbrt(33.75),
    // 3.2316^3 = 33.748, 3.2317^3 = 33.7515.
    let mut cc = Cubic::default();
    let mut st = CcState {
        cwnd_bytes: 0.0,
        ssthresh_bytes: f64::INFINITY,
        mss_bytes: MSS,
    };
    loss(&mut cc, &mut st, 100.0);
    loss(&mut cc, &mut st, 90.0);
    assert!((cc.w_max().unwrap() - 76.5).abs() < 1e-9);
    assert!((st.ssthresh_bytes / MSS - 63.0).abs() < 1e-9);
    cc.on_ack(&mut st, &ack(1, 1e11));
    let ks = cc.k_s().unwrap();
    assert!(ks > 3.2316 && ks < 3.2317, "K = {ks}");
    // Without fast convergence W_max stays at the window: 90.
    let mut plain = Cubic::new(false);
    loss(&mut plain, &mut st, 100.0);
    loss(&mut plain, &mut st, 90.0);
    assert_eq!(plain.w_max(), Some(90.0));
}

#[test]
fn after_a_timeout_k_is_zero_and_w_max_the_stage_start() {
    // §4.8: ssthresh = 0.7 * 100 = 70; slow start from one segment (one more
    // per ACK) reaches 70 after 69 ACKs; the stage then starts at cwnd_epoch =
    // 70 with K = 0 and W_max = 70: W(t) = 70 + 0.4 t^3, a convex rise, and
    // W_est starts at 70 too.
    let mut cc = Cubic::default();
    let mut st = CcState {
        cwnd_bytes: 100.0 * MSS,
        ssthresh_bytes: f64::INFINITY,
        mss_bytes: MSS,
    };
    st.ssthresh_bytes = cc.ssthresh_after_loss(&st, (100.0 * MSS) as u64);
    cc.on_timeout();
    st.cwnd_bytes = MSS;
    for i in 0..69 {
        cc.on_ack(&mut st, &ack(i, 1e11));
    }
    assert_eq!(st.cwnd_bytes, 70.0 * MSS);
    assert_eq!(cc.k_s(), None);
    // RTT 1 s: W_est (70 + 0.53 t) stays under 70 + 0.4 t^3 from t = 1.2 s on.
    let got = ack_clock(&mut cc, &mut st, 100.0, 1.0, &[2.0, 3.0, 4.0]);
    assert_eq!(cc.k_s(), Some(0.0));
    assert_eq!(cc.w_max(), Some(70.0));
    for (t, g) in [2.0f64, 3.0, 4.0].iter().zip(&got) {
        // The lag behind a curve this steep on a 1 s round trip: R^2 W'' / 2
        // = 0.4 * 3 * t segments.
        let hand = 70.0 + 0.4 * t * t * t;
        assert!((g - hand).abs() < 1.2 * t + 0.5, "t = {t}: {g} vs {hand}");
    }
}

#[test]
fn application_limited_time_does_not_count() {
    // Two flows lose at 100 segments. Flow b sends window-limited for 0.5 s,
    // then for 0.5 s its ACKs come while the window is not its limit, then
    // window-limited again for 0.5 s: t excludes the middle part (RFC 9438
    // §4.2), so at 1.5 s b has the window a, never idle, has at 1.0 s.
    let mk = || {
        let mut cc = Cubic::default();
        let mut st = CcState {
            cwnd_bytes: 0.0,
            ssthresh_bytes: f64::INFINITY,
            mss_bytes: MSS,
        };
        loss(&mut cc, &mut st, 100.0);
        (cc, st)
    };
    let (mut a, mut sa) = mk();
    let (mut b, mut sb) = mk();
    let wa = ack_clock(&mut a, &mut sa, 0.0, 0.1, &[1.0])[0];
    ack_clock(&mut b, &mut sb, 0.0, 0.1, &[0.5]);
    let mut t = 0.5;
    while t < 1.0 {
        let mut idle = ack((t * 1e12) as u64, 1e11);
        idle.cwnd_limited = false;
        b.on_ack(&mut sb, &idle);
        t += 0.01;
    }
    let wb = ack_clock(&mut b, &mut sb, t, 0.1, &[1.5 - t])[0];
    assert!((wb - wa).abs() < 0.3, "{wb} vs {wa}");
    // Counting the idle time would have put b 0.5 s further along the
    // concave curve: W(1.5) - W(1.0) = 0.4 (3.2172^3 - 2.7172^3) = 5.3 segments more.
    assert!(wb < wa + 2.0);
}

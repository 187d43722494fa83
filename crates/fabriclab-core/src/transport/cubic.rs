//! CUBIC, as RFC 9438 ("CUBIC for Fast and Long-Distance Networks", 2023)
//! specifies it, behind the transport's congestion control trait.
//!
//! Windows are kept in segments (the RFC's unit) and time in seconds for
//! the window function; the sender's window stays in bytes.
//!
//! - **Window increase function** (§4.2, Figures 1 and 2):
//!   `W_cubic(t) = C (t - K)^3 + W_max` with `K = cbrt((W_max - cwnd_epoch) / C)`,
//!   `C = 0.4`, where `t` is the time since the current congestion
//!   avoidance stage began (`t_epoch`) and `cwnd_epoch` the window then. On
//!   each new ACK in congestion avoidance the target is
//!   `W_cubic(t + RTT)` (RTT: the smoothed RTT), bounded below by `cwnd`
//!   and above by `1.5 cwnd` (§4.2, "the lower and upper bounds ensure that
//!   CUBIC's congestion window increase rate is non-decreasing and is less
//!   than the increase rate of slow start").
//! - **Reno-friendly region** (§4.3, Figures 3 and 4): `W_est` starts at
//!   `cwnd_epoch` and grows by `alpha_cubic * segments_acked / cwnd` per ACK,
//!   `alpha_cubic = 3 (1 - beta_cubic) / (1 + beta_cubic)`; once `W_est`
//!   reaches `cwnd_prior` (the window when ssthresh was last set), alpha is
//!   1. If `W_cubic(t) < W_est`, `cwnd = W_est`.
//! - **Concave and convex regions** (§4.4, §4.5): otherwise `cwnd` grows by
//!   `(target - cwnd) / cwnd` per ACK, per segment acknowledged (byte
//!   counting, as `W_est`'s `segments_acked`).
//! - **Multiplicative decrease** (§4.6, Figure 5): ssthresh is
//!   `flight_size` times `beta_cubic = 0.7` (at least 2 segments) and
//!   `cwnd_prior = cwnd`; the transport sets `cwnd` from ssthresh (RFC
//!   6582's recovery).
//! - **Fast convergence** (§4.7, Figure 6), on unless the scenario turns it
//!   off (§4.7 gives it for competing CUBIC flows; for one flow alone it
//!   only lowers W_max every other cycle): at a congestion event with
//!   `cwnd < W_max`, `W_max = cwnd (1 + beta_cubic) / 2`, else `W_max = cwnd`.
//! - **Timeout** (§4.8): ssthresh as in §4.6; in the first congestion
//!   avoidance stage after it, `K = 0`, `W_max` = the window at the start of
//!   the stage, and `W_est` starts there too.
//! - **Slow start** (§4.10): the transport's RFC 5681 slow start (with RFC
//!   3465's one segment per ACK), which §4.10 allows ("MAY use the Reno TCP
//!   slow start algorithm"); HyStart++ (RFC 9406, the RFC's SHOULD) is not
//!   implemented.
//! - **Application-limited periods** (§4.2: `t` "MUST NOT include periods
//!   during which cwnd has not been updated due to application-limited
//!   behavior"): an ACK arriving while the window was not the sender's limit
//!   moves `t_epoch` forward by the time since the previous ACK and grows
//!   neither `cwnd` nor `W_est`.
//! - Not modelled: §4.9's undo of spurious congestion events (the transport
//!   has no timestamps or DSACK), and ECN: CUBIC here is not ECN-capable,
//!   as Linux's default `tcp_ecn = 2` leaves a client's connections (the
//!   public-cloud VMs of issue 27). Before any congestion event there is no
//!   `W_max`: a congestion avoidance stage then starts as after a timeout
//!   (`K = 0`, `W_max = cwnd_epoch`).
//!
//! Determinism: the cube root is [`cbrt`], Newton's iteration in plain
//! IEEE-754 arithmetic, so it does not depend on the platform's libm.

use super::cc::{AckInfo, CcState, CongestionControl};

/// RFC 9438 §5's constants: C (segments per second cubed) and beta_cubic.
pub const C_CUBIC: f64 = 0.4;
pub const BETA_CUBIC: f64 = 0.7;
/// RFC 9438 §4.3 Figure 3: alpha_cubic = 3 (1 - beta) / (1 + beta).
pub const ALPHA_CUBIC: f64 = 3.0 * (1.0 - BETA_CUBIC) / (1.0 + BETA_CUBIC);

/// The cube root of `v` by Newton's iteration from an exponent-based first
/// guess: only +, -, *, / on f64, so the same bits on every platform.
pub fn cbrt(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let a = v.abs();
    // First guess: 2^(e/3) from the binary exponent (within a factor 2).
    let e = ((a.to_bits() >> 52) & 0x7ff) as i64 - 1023;
    let mut x = f64::from_bits(((e.div_euclid(3) + 1023) as u64) << 52);
    for _ in 0..60 {
        let next = x - (x * x * x - a) / (3.0 * x * x);
        if next == x {
            break;
        }
        x = next;
    }
    if v < 0.0 {
        -x
    } else {
        x
    }
}

/// One congestion avoidance stage: its start and its window function.
#[derive(Debug, Clone, Copy)]
struct Epoch {
    t_epoch_ps: u64,
    k_s: f64,
    w_max: f64,
}

impl Epoch {
    /// RFC 9438 Figure 1, in segments, `t_s` seconds into the stage.
    fn w_cubic(&self, t_s: f64) -> f64 {
        let d = t_s - self.k_s;
        C_CUBIC * d * d * d + self.w_max
    }
}

#[derive(Debug)]
pub struct Cubic {
    fast_convergence: bool,
    /// W_max after the last congestion event (None before the first).
    w_max: Option<f64>,
    cwnd_prior: f64,
    w_est: f64,
    alpha: f64,
    /// The next congestion avoidance stage follows a timeout (§4.8).
    after_rto: bool,
    epoch: Option<Epoch>,
    last_ack_ps: u64,
}

impl Default for Cubic {
    fn default() -> Self {
        Cubic::new(true)
    }
}

impl Cubic {
    pub fn new(fast_convergence: bool) -> Cubic {
        Cubic {
            fast_convergence,
            w_max: None,
            cwnd_prior: 0.0,
            w_est: 0.0,
            alpha: ALPHA_CUBIC,
            after_rto: false,
            epoch: None,
            last_ack_ps: 0,
        }
    }

    /// W_max (segments) after the last congestion event.
    pub fn w_max(&self) -> Option<f64> {
        self.w_max
    }

    /// K (seconds) of the current congestion avoidance stage.
    pub fn k_s(&self) -> Option<f64> {
        self.epoch.map(|e| e.k_s)
    }

    /// The Reno-friendly estimate W_est (segments).
    pub fn w_est(&self) -> f64 {
        self.w_est
    }

    fn start_epoch(&mut self, now: u64, cwnd: f64) {
        let (w_max, k_s) = match self.w_max {
            Some(w) if !self.after_rto => (w, cbrt((w - cwnd) / C_CUBIC)),
            _ => {
                self.w_max = Some(cwnd);
                (cwnd, 0.0)
            }
        };
        self.after_rto = false;
        self.w_est = cwnd;
        self.epoch = Some(Epoch {
            t_epoch_ps: now,
            k_s,
            w_max,
        });
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }
    fn ecn_capable(&self) -> bool {
        false
    }

    fn on_ack(&mut self, st: &mut CcState, ack: &AckInfo) {
        if ack.in_recovery {
            return;
        }
        if st.cwnd_bytes < st.ssthresh_bytes {
            // §4.10: slow start (RFC 5681 with RFC 3465's limit).
            st.cwnd_bytes += (ack.acked_bytes as f64).min(st.mss_bytes);
            self.epoch = None;
            return;
        }
        let mss = st.mss_bytes;
        let cwnd = st.cwnd_bytes / mss;
        let since_last = ack.now_ps.saturating_sub(self.last_ack_ps);
        self.last_ack_ps = ack.now_ps;
        let Some(epoch) = self.epoch.as_mut() else {
            self.start_epoch(ack.now_ps, cwnd);
            return self.on_ack(st, ack);
        };
        if !ack.cwnd_limited {
            epoch.t_epoch_ps = epoch.t_epoch_ps.saturating_add(since_last).min(ack.now_ps);
            return;
        }
        let epoch = *epoch;
        let segs = ack.acked_bytes as f64 / mss;
        let t = (ack.now_ps - epoch.t_epoch_ps) as f64 * 1e-12;
        // §4.3 Figure 4, then alpha to 1 once W_est reaches cwnd_prior.
        self.w_est += self.alpha * segs / cwnd;
        if self.w_est >= self.cwnd_prior {
            self.alpha = 1.0;
        }
        let next = if epoch.w_cubic(t) < self.w_est {
            self.w_est
        } else {
            let rtt = ack.srtt_ps.unwrap_or(0.0) * 1e-12;
            let target = epoch.w_cubic(t + rtt).clamp(cwnd, 1.5 * cwnd);
            cwnd + (target - cwnd) / cwnd * segs
        };
        st.cwnd_bytes = next * mss;
    }

    fn ssthresh_after_loss(&mut self, st: &CcState, flight_bytes: u64) -> f64 {
        let cwnd = st.cwnd_bytes / st.mss_bytes;
        // §4.7 Figure 6 (fast convergence), §4.6 Figure 5.
        self.w_max = Some(match self.w_max {
            Some(w) if self.fast_convergence && cwnd < w => cwnd * (1.0 + BETA_CUBIC) / 2.0,
            _ => cwnd,
        });
        self.cwnd_prior = cwnd;
        self.alpha = ALPHA_CUBIC;
        self.epoch = None;
        (flight_bytes as f64 * BETA_CUBIC).max(2.0 * st.mss_bytes)
    }

    fn on_timeout(&mut self) {
        self.after_rto = true;
        self.epoch = None;
    }
}

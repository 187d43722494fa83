//! Congestion control behind a small trait, NewReno and DCTCP (CUBIC in
//! [`super::cubic`], DCQCN in [`super::dcqcn`]).
//!
//! NewReno follows RFC 5681 (slow start and congestion avoidance, with the
//! RFC 3465 byte-counting limit of one SMSS per ACK in slow start) and the
//! loss response of RFC 6582. DCTCP follows RFC 8257 §3.3: the fraction of
//! ECN-marked bytes is averaged once per window of data with gain `g`, and on
//! an ECN echo the window is cut once per window by `alpha/2`.

/// Window state shared between the sender and its congestion controller.
#[derive(Debug, Clone)]
pub struct CcState {
    pub cwnd_bytes: f64,
    pub ssthresh_bytes: f64,
    pub mss_bytes: f64,
}

/// An ACK that advanced the cumulative acknowledgment point.
#[derive(Debug, Clone, Copy)]
pub struct AckInfo {
    pub acked_bytes: u64,
    pub ece: bool,
    pub snd_una: u64,
    pub snd_nxt: u64,
    /// During loss recovery the controller accounts but must not grow the window.
    pub in_recovery: bool,
    /// When the ACK arrived.
    pub now_ps: u64,
    /// The smoothed RTT after this ACK's sample, if any (RFC 6298).
    pub srtt_ps: Option<f64>,
    /// Whether the window was the sender's limit (RFC 7661): if not, the
    /// transport keeps any growth from the window (false during recovery).
    pub cwnd_limited: bool,
}

pub trait CongestionControl: Send + Sync {
    fn name(&self) -> &'static str;
    /// Whether the transport sets ECT on its data packets.
    fn ecn_capable(&self) -> bool;
    fn on_ack(&mut self, st: &mut CcState, ack: &AckInfo);
    /// New ssthresh after a loss (fast retransmit or timeout), RFC 5681 eq. (4).
    fn ssthresh_after_loss(&mut self, st: &CcState, flight_bytes: u64) -> f64 {
        (flight_bytes as f64 / 2.0).max(2.0 * st.mss_bytes)
    }
    /// A retransmission timeout fired (after `ssthresh_after_loss` on its
    /// first firing for one loss).
    fn on_timeout(&mut self) {}
    /// DCTCP's congestion estimate, for telemetry and tests.
    fn alpha(&self) -> Option<f64> {
        None
    }
    /// Congestion feedback carried by an ACK arriving at `now` (its ECN
    /// echo, or for DCQCN a CNP), whether or not it acknowledges new data.
    fn on_feedback(&mut self, _now: u64, _ece: bool) {}
    /// A rate-based controller's sending rate at `now` (bits per second);
    /// None for a window-based one.
    fn pacing_rate_bps(&mut self, _now: u64) -> Option<f64> {
        None
    }
    /// A rate-based controller keeps no window: the sender starts without one.
    fn windowless(&self) -> bool {
        false
    }
}

/// RFC 5681 window growth, shared by NewReno and DCTCP.
fn reno_grow(st: &mut CcState, acked_bytes: u64) {
    let acked = acked_bytes as f64;
    if st.cwnd_bytes < st.ssthresh_bytes {
        st.cwnd_bytes += acked.min(st.mss_bytes);
    } else {
        st.cwnd_bytes += st.mss_bytes * acked.min(st.mss_bytes) / st.cwnd_bytes;
    }
}

#[derive(Debug, Default)]
pub struct NewReno;

impl CongestionControl for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }
    fn ecn_capable(&self) -> bool {
        false
    }
    fn on_ack(&mut self, st: &mut CcState, ack: &AckInfo) {
        if !ack.in_recovery {
            reno_grow(st, ack.acked_bytes);
        }
    }
}

#[derive(Debug)]
pub struct Dctcp {
    g: f64,
    alpha: f64,
    bytes_acked: u64,
    bytes_marked: u64,
    /// End of the current observation window (RFC 8257 DCTCP.WindowEnd).
    window_end: u64,
    /// No further cut until snd_una passes this point (one cut per window).
    cwr_end: Option<u64>,
}

impl Dctcp {
    pub fn new(g: f64, initial_alpha: f64) -> Dctcp {
        Dctcp {
            g,
            alpha: initial_alpha,
            bytes_acked: 0,
            bytes_marked: 0,
            window_end: 0,
            cwr_end: None,
        }
    }
}

impl CongestionControl for Dctcp {
    fn name(&self) -> &'static str {
        "dctcp"
    }
    fn ecn_capable(&self) -> bool {
        true
    }
    fn on_ack(&mut self, st: &mut CcState, ack: &AckInfo) {
        self.bytes_acked += ack.acked_bytes;
        if ack.ece {
            self.bytes_marked += ack.acked_bytes;
        }
        if ack.snd_una > self.window_end {
            if self.bytes_acked > 0 {
                let m = self.bytes_marked as f64 / self.bytes_acked as f64;
                self.alpha = (1.0 - self.g) * self.alpha + self.g * m;
            }
            self.bytes_acked = 0;
            self.bytes_marked = 0;
            self.window_end = ack.snd_nxt;
        }
        if ack.in_recovery {
            return;
        }
        let may_cut = self.cwr_end.is_none_or(|e| ack.snd_una > e);
        if ack.ece && may_cut {
            st.cwnd_bytes = (st.cwnd_bytes * (1.0 - self.alpha / 2.0)).max(2.0 * st.mss_bytes);
            st.ssthresh_bytes = st.cwnd_bytes;
            self.cwr_end = Some(ack.snd_nxt);
        } else if !ack.ece {
            reno_grow(st, ack.acked_bytes);
        }
    }
    fn alpha(&self) -> Option<f64> {
        Some(self.alpha)
    }
}

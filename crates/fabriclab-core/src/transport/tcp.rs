//! A window-based reliable transport for one message, in smoltcp's shape:
//! the sender is fed ACKs (`on_ack`), emits segments when polled
//! (`poll(now, emit)`), and says when it next needs a poll (`poll_at`). It
//! never reads a clock, so the same logic runs on simulated or real time.
//!
//! One message is one connection; data starts at sequence number 0. With
//! `handshake` the sender first sends a SYN and starts its data when the
//! SYN-ACK arrives (RFC 9293 §3.5's three-way handshake, the third segment
//! riding on the first data); otherwise data starts at once. The receiver
//! acknowledges every segment (no delayed ACKs), so each ACK covers at most
//! one segment in the absence of loss.

use super::cc::{AckInfo, CcState, CongestionControl};
use super::dcqcn::SharedNp;
use super::sack;

mod sack_recovery;

/// Congestion and timer state carried from one message to the next on the
/// same host pair and class when connections are persistent.
#[derive(Debug, Clone, Copy)]
pub struct WindowState {
    pub cwnd_bytes: f64,
    pub ssthresh_bytes: f64,
    pub srtt_ps: Option<f64>,
    pub rttvar_ps: f64,
    pub rto_ps: u64,
    /// When the previous message's last byte was acknowledged.
    pub idle_since_ps: u64,
}

/// A data segment to transmit: bytes `[seq, seq + len)` of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub seq: u64,
    pub len: u32,
    pub retransmit: bool,
    /// A SYN (no data): the receiver answers with a SYN-ACK.
    pub syn: bool,
}

/// Where a connection stands in its opening handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opening {
    /// The SYN is still to be sent.
    SynToSend,
    /// The SYN left at `at`; `retried` once it was sent again.
    SynSent {
        at: u64,
        retried: bool,
    },
    Established,
}

#[derive(Debug, Clone)]
pub struct SenderConfig {
    pub mss_bytes: u32,
    pub init_cwnd_packets: u32,
    pub min_rto_ps: u64,
    pub initial_rto_ps: u64,
    pub max_rto_ps: u64,
    pub dupack_threshold: u32,
    /// Open each connection with a SYN / SYN-ACK exchange before its data.
    pub handshake: bool,
    /// Framing bytes a paced sender adds to each segment's payload to time
    /// its packets on the wire (78 for TCP/IPv4 over Ethernet with preamble
    /// and gap, at least 84 bytes in all).
    pub wire_overhead_bytes: u32,
    /// Loss recovery with selective acknowledgments (RFC 2018, RFC 6675;
    /// see [`sack_recovery`]) instead of NewReno's (RFC 6582).
    pub sack: bool,
}

pub struct TcpSender {
    opening: Opening,
    /// A rate-paced sender sends its next new segment no earlier than this.
    next_send_ps: u64,
    /// The last poll stopped at the pacer: poll again at `next_send_ps`.
    paced_wait: bool,
    /// A rate-based sender keeps no window (not even after a timeout).
    windowless: bool,
    wire_overhead_bytes: u32,
    size: u64,
    mss: u64,
    snd_una: u64,
    snd_nxt: u64,
    /// Highest sequence number sent so far (RFC 6582's "highest sequence transmitted").
    high_tx: u64,
    st: CcState,
    cc: Box<dyn CongestionControl>,
    dupacks: u32,
    dupack_threshold: u32,
    in_recovery: bool,
    /// A partial ACK of the current fast recovery already restarted the
    /// retransmission timer (RFC 6582 §3.2 step 5 restarts it for the first
    /// one only, the "Impatient" variant of §4).
    partial_acked: bool,
    /// Between a retransmission timeout and the ACK of everything sent
    /// before it: a further timeout resends the same head and keeps
    /// ssthresh (RFC 5681 §3.1).
    in_loss: bool,
    recover: Option<u64>,
    retransmit_head: bool,
    srtt_ps: Option<f64>,
    rttvar_ps: f64,
    rto_ps: u64,
    /// The RTO without back-off: the initial RTO, then SRTT + 4 RTTVAR.
    base_rto_ps: u64,
    min_rto_ps: u64,
    max_rto_ps: u64,
    rto_deadline: Option<u64>,
    /// Karn's algorithm: time one segment that is never retransmitted.
    rtt_probe: Option<(u64, u64)>,
    /// Whether the window (not the device budget or a lack of data) limited
    /// the last transmission; the window only grows while it is the limit
    /// (congestion window validation, RFC 7661 §4.1's spirit, as Linux's
    /// `tcp_is_cwnd_limited`).
    cwnd_limited: bool,
    /// The last poll stopped at the window or at the end of the data, not
    /// at the device budget or the pacer, and no ACK or other change came
    /// since: a poll before the retransmission deadline would do nothing.
    settled: bool,
    pub retransmits: u64,
    pub timeouts: u64,
    /// SACK-based recovery (RFC 6675) and its state.
    sack: bool,
    board: sack::Scoreboard,
    /// RFC 6675's HighRxt, as the end of the segment it names.
    high_rxt: u64,
    /// RFC 6675's RescueRxt, as a half-open end (RecoveryPoint).
    rescue_rxt: Option<u64>,
}

impl TcpSender {
    pub fn new(size_bytes: u64, cfg: &SenderConfig, cc: Box<dyn CongestionControl>) -> TcpSender {
        let mss = cfg.mss_bytes as f64;
        let windowless = cc.windowless();
        let cwnd = if windowless {
            f64::INFINITY
        } else {
            mss * cfg.init_cwnd_packets as f64
        };
        TcpSender {
            opening: if cfg.handshake {
                Opening::SynToSend
            } else {
                Opening::Established
            },
            next_send_ps: 0,
            paced_wait: false,
            windowless,
            wire_overhead_bytes: cfg.wire_overhead_bytes,
            size: size_bytes,
            mss: cfg.mss_bytes as u64,
            snd_una: 0,
            snd_nxt: 0,
            high_tx: 0,
            st: CcState {
                cwnd_bytes: cwnd,
                ssthresh_bytes: f64::INFINITY,
                mss_bytes: mss,
            },
            cc,
            dupacks: 0,
            dupack_threshold: cfg.dupack_threshold,
            in_recovery: false,
            partial_acked: false,
            in_loss: false,
            recover: None,
            retransmit_head: false,
            srtt_ps: None,
            rttvar_ps: 0.0,
            rto_ps: cfg.initial_rto_ps.max(cfg.min_rto_ps),
            base_rto_ps: cfg.initial_rto_ps.max(cfg.min_rto_ps),
            min_rto_ps: cfg.min_rto_ps,
            max_rto_ps: cfg.max_rto_ps,
            rto_deadline: None,
            rtt_probe: None,
            cwnd_limited: true,
            settled: false,
            retransmits: 0,
            timeouts: 0,
            sack: cfg.sack,
            board: sack::Scoreboard::default(),
            high_rxt: 0,
            rescue_rxt: None,
        }
    }

    pub fn is_done(&self) -> bool {
        self.snd_una >= self.size
    }

    /// The state a persistent connection carries to its next message.
    pub fn window_state(&self, now: u64) -> WindowState {
        WindowState {
            cwnd_bytes: self.st.cwnd_bytes,
            ssthresh_bytes: self.st.ssthresh_bytes,
            srtt_ps: self.srtt_ps,
            rttvar_ps: self.rttvar_ps,
            rto_ps: self.rto_ps,
            idle_since_ps: now,
        }
    }

    /// Continues a persistent connection: RTT estimates and ssthresh carry
    /// over; the window too unless the connection sat idle for longer than
    /// an RTO, when it restarts from the initial window (RFC 5681 §4.1, as
    /// Linux's default tcp_slow_start_after_idle).
    pub fn resume(&mut self, prev: &WindowState, now: u64) {
        self.settled = false;
        self.opening = Opening::Established;
        self.st.ssthresh_bytes = prev.ssthresh_bytes;
        self.srtt_ps = prev.srtt_ps;
        self.rttvar_ps = prev.rttvar_ps;
        self.rto_ps = prev.rto_ps;
        self.base_rto_ps = prev.rto_ps;
        if now.saturating_sub(prev.idle_since_ps) <= prev.rto_ps {
            self.st.cwnd_bytes = prev.cwnd_bytes;
        }
    }
    pub fn ecn_capable(&self) -> bool {
        self.cc.ecn_capable()
    }
    pub fn cwnd_bytes(&self) -> f64 {
        self.st.cwnd_bytes
    }
    pub fn alpha(&self) -> Option<f64> {
        self.cc.alpha()
    }
    pub fn snd_una(&self) -> u64 {
        self.snd_una
    }
    /// Whether every byte of the message has been sent at least once.
    pub fn all_sent(&self) -> bool {
        self.high_tx >= self.size
    }
    /// When a paced sender may send its next new segment.
    pub fn next_send_ps(&self) -> u64 {
        self.next_send_ps
    }
    /// Continues the pacing of the message before it on the same queue
    /// pair: its first new segment goes no earlier than `next_send_ps`.
    pub fn pace_from(&mut self, next_send_ps: u64) {
        self.settled = false;
        self.next_send_ps = next_send_ps;
    }
    fn flight(&self) -> u64 {
        self.snd_nxt - self.snd_una
    }

    /// RFC 6298 §2: SRTT, RTTVAR and RTO from one sample; clock granularity
    /// is taken as zero (simulated time is exact).
    fn rtt_sample(&mut self, r: f64) {
        match self.srtt_ps {
            None => {
                self.srtt_ps = Some(r);
                self.rttvar_ps = r / 2.0;
            }
            Some(s) => {
                self.rttvar_ps = 0.75 * self.rttvar_ps + 0.25 * (s - r).abs();
                self.srtt_ps = Some(0.875 * s + 0.125 * r);
            }
        }
        let rto = self.srtt_ps.unwrap() + 4.0 * self.rttvar_ps;
        self.base_rto_ps = (rto as u64).clamp(self.min_rto_ps, self.max_rto_ps);
        self.rto_ps = self.base_rto_ps;
    }

    /// The SYN-ACK arrived: the connection is open. Its round trip is the
    /// first RTT sample unless the SYN was sent twice (Karn); after a lost
    /// SYN or SYN-ACK the first window is one segment (RFC 5681 §3.1).
    pub fn on_syn_ack(&mut self, now: u64) {
        self.settled = false;
        let Opening::SynSent { at, retried } = self.opening else {
            return; // a duplicate SYN-ACK
        };
        self.opening = Opening::Established;
        self.rto_deadline = None;
        if retried {
            self.st.cwnd_bytes = self.st.mss_bytes;
        } else {
            self.rtt_sample((now - at) as f64);
        }
    }

    /// Whether the opening handshake is done (always, without one).
    pub fn established(&self) -> bool {
        self.opening == Opening::Established
    }

    /// Processes a cumulative ACK carrying acknowledgment number `ack`.
    pub fn on_ack(&mut self, now: u64, ack: u64, ece: bool) {
        if self.sack {
            return self.on_sack_ack(now, ack, ece, &[]);
        }
        self.settled = false;
        self.cc.on_feedback(now, ece);
        if ack > self.snd_una {
            let mut info = self.advance(now, ack, ece);
            let mut restart_timer = true;
            if self.in_recovery {
                self.cc.on_ack(&mut self.st, &info);
                if ack >= self.recover.unwrap_or(0) {
                    // RFC 6582 §3.2 step 3, full acknowledgment: deflate the
                    // window to ssthresh (the RFC's option 2, as Linux ends recovery).
                    self.st.cwnd_bytes = self.st.ssthresh_bytes;
                    self.in_recovery = false;
                    self.dupacks = 0;
                } else {
                    // Partial acknowledgment: retransmit the next hole, deflate by
                    // the amount acknowledged and add back one SMSS; only the
                    // first one restarts the timer (step 5), so a window with
                    // many holes ends in a timeout rather than one hole per RTT.
                    restart_timer = !self.partial_acked;
                    self.partial_acked = true;
                    self.retransmit_head = true;
                    self.st.cwnd_bytes = (self.st.cwnd_bytes - info.acked_bytes as f64 + self.st.mss_bytes)
                        .max(self.st.mss_bytes);
                }
            } else {
                self.dupacks = 0;
                self.open_window(&mut info);
            }
            if self.is_done() {
                self.rto_deadline = None;
            } else if restart_timer {
                self.restart_timer(now);
            }
        } else if ack == self.snd_una && self.snd_nxt > self.snd_una {
            self.dupacks += 1;
            if self.in_recovery {
                self.st.cwnd_bytes += self.st.mss_bytes; // RFC 6582 §3.2 step 4
            } else if self.dupacks == self.dupack_threshold
                && self.recover.is_none_or(|r| self.snd_una > r)
            {
                let flight = self.flight();
                self.st.ssthresh_bytes = self.cc.ssthresh_after_loss(&self.st, flight);
                self.st.cwnd_bytes = self.st.ssthresh_bytes + 3.0 * self.st.mss_bytes;
                self.recover = Some(self.high_tx);
                self.in_recovery = true;
                self.partial_acked = false;
                self.retransmit_head = true;
                self.rtt_probe = None;
            }
        }
    }

    /// The cumulative ACK point moves forward to `ack`: advances snd_una
    /// (and snd_nxt, which after a go-back-N timeout the receiver may be
    /// ahead of), ends a timeout's loss phase once `ack` passes its
    /// recovery point, takes the RTT sample it completes (Karn) and
    /// describes the ACK to the congestion control.
    fn advance(&mut self, now: u64, ack: u64, ece: bool) -> AckInfo {
        let acked = ack - self.snd_una;
        self.snd_una = ack;
        if self.snd_nxt < ack {
            self.snd_nxt = ack;
        }
        if self.in_loss && ack >= self.recover.unwrap_or(0) {
            self.in_loss = false;
        }
        if let Some((end, t0)) = self.rtt_probe {
            if ack >= end {
                self.rtt_sample((now - t0) as f64);
                self.rtt_probe = None;
            }
        }
        AckInfo {
            acked_bytes: acked,
            ece,
            snd_una: ack,
            snd_nxt: self.snd_nxt,
            in_recovery: self.in_recovery,
            now_ps: now,
            srtt_ps: self.srtt_ps,
            cwnd_limited: false,
        }
    }

    /// An ACK of new data outside recovery: the congestion control may
    /// grow the window, and keeps the growth only while the window was the
    /// limit (or slow start's clause holds).
    fn open_window(&mut self, info: &mut AckInfo) {
        let grow = self.cwnd_limited
            || (self.st.cwnd_bytes < self.st.ssthresh_bytes
                && 2.0 * self.flight() as f64 >= self.st.cwnd_bytes);
        info.cwnd_limited = grow;
        let before = self.st.cwnd_bytes;
        self.cc.on_ack(&mut self.st, info);
        if !grow && self.st.cwnd_bytes > before {
            self.st.cwnd_bytes = before;
        }
    }

    /// An ACK of new data ends a timer back-off: the RTO returns to its
    /// estimate (ns-3's TcpSocketBase::NewAck; Linux's default timestamps
    /// give that ACK an RTT sample, RFC 7323 §4).
    fn restart_timer(&mut self, now: u64) {
        self.rto_ps = self.base_rto_ps;
        self.rto_deadline = Some(now + self.rto_ps);
    }

    fn on_timeout(&mut self, now: u64) {
        // RFC 5681 §3.1 eq. (4) and RFC 6298 §5.5-5.7: collapse to one
        // segment, back off the timer, resend from the first unacknowledged
        // byte. ssthresh falls only when the head was not yet resent by the
        // timer: a repeated timeout of the same loss keeps it (RFC 5681 §3.1,
        // as ns-3's and Linux's TCP), else it would fall to 2 SMSS.
        // With SACK, a timeout during a recovery is the same loss event
        // too (a retransmission was lost): the recovery's ssthresh stays,
        // as Linux's tcp_enter_loss keeps it, rather than halving a flight
        // that kept growing by new data while the hole stayed open.
        let same_loss = self.in_loss || (self.sack && self.in_recovery);
        if !same_loss {
            let flight = self.flight();
            self.st.ssthresh_bytes = self.cc.ssthresh_after_loss(&self.st, flight);
        }
        self.in_loss = true;
        self.cc.on_timeout();
        if !self.windowless {
            self.st.cwnd_bytes = self.st.mss_bytes;
        }
        self.snd_nxt = self.snd_una;
        if self.sack {
            self.sack_on_timeout();
        }
        self.in_recovery = false;
        self.dupacks = 0;
        self.recover = Some(self.high_tx);
        self.retransmit_head = false;
        self.rtt_probe = None;
        self.rto_ps = (self.rto_ps * 2).min(self.max_rto_ps);
        self.timeouts += 1;
        self.rto_deadline = Some(now + self.rto_ps);
    }

    fn seg_len(&self, seq: u64) -> u32 {
        (self.size - seq).min(self.mss) as u32
    }

    /// Something outside the sender holds it (Packet Rocket's pause: it is
    /// not polled until the hold ends). The hold, not the window, limits
    /// transmission meanwhile, so ACKs arriving during it grow the window
    /// only by slow start's own clause, as when the device budget or the
    /// pacer stopped the last poll (congestion window validation, RFC 7661
    /// §4.1's spirit, as Linux's `tcp_is_cwnd_limited`).
    pub fn hold(&mut self) {
        self.cwnd_limited = false;
    }

    /// Emits every segment the window allows at `now`, new data only while
    /// `budget_bytes` of payload remain (the device's room, e.g. TCP Small
    /// Queues' per-connection limit). Retransmissions ignore the budget.
    pub fn poll(&mut self, now: u64, mut budget_bytes: u64, emit: &mut impl FnMut(Segment)) {
        if self.is_done() {
            return;
        }
        if self.opening != Opening::Established {
            self.poll_opening(now, emit);
            return;
        }
        if self.rto_deadline.is_some_and(|d| d <= now) {
            self.on_timeout(now);
        }
        if self.sack {
            return self.poll_sack(now, budget_bytes, emit);
        }
        if self.retransmit_head {
            self.retransmit_head = false;
            let len = self.seg_len(self.snd_una);
            self.retransmits += 1;
            emit(Segment {
                seq: self.snd_una,
                len,
                retransmit: true,
                syn: false,
            });
        }
        self.cwnd_limited = false;
        let pacing = self.cc.pacing_rate_bps(now);
        self.paced_wait = false;
        let mut budget_stop = false;
        while self.snd_nxt < self.size {
            let len = self.seg_len(self.snd_nxt);
            if pacing.is_some() && now < self.next_send_ps {
                self.paced_wait = true;
                break;
            }
            if (self.flight() + len as u64) as f64 > self.st.cwnd_bytes && self.flight() > 0 {
                self.cwnd_limited = true;
                break;
            }
            if budget_bytes < len as u64 {
                budget_stop = true;
                break;
            }
            budget_bytes -= len as u64;
            let retransmit = self.snd_nxt < self.high_tx;
            if retransmit {
                self.retransmits += 1;
            } else if self.rtt_probe.is_none() {
                self.rtt_probe = Some((self.snd_nxt + len as u64, now));
            }
            emit(Segment {
                seq: self.snd_nxt,
                len,
                retransmit,
                syn: false,
            });
            if let Some(rate) = pacing {
                // One packet per pacing gap: its wire time at the current rate.
                let wire = (len + self.wire_overhead_bytes).max(84) as f64 * 8.0;
                self.next_send_ps = now + (wire / rate * 1e12).round() as u64;
            }
            self.snd_nxt += len as u64;
            self.high_tx = self.high_tx.max(self.snd_nxt);
        }
        if self.rto_deadline.is_none() && self.flight() > 0 {
            self.rto_deadline = Some(now + self.rto_ps);
        }
        self.settled = !budget_stop && pacing.is_none();
    }

    /// Whether a poll at `now` may emit a segment or change the sender:
    /// false after a poll that stopped at the window or the end of the
    /// data, with nothing fed to the sender since and its retransmission
    /// deadline still ahead (more device budget changes nothing then).
    pub fn needs_poll(&self, now: u64) -> bool {
        !self.settled || self.rto_deadline.is_some_and(|d| d <= now)
    }

    /// Sends the SYN, or sends it again when its timer ran out (the timer
    /// starts at the initial RTO and doubles per try, RFC 6298 §5.5).
    fn poll_opening(&mut self, now: u64, emit: &mut impl FnMut(Segment)) {
        let retry = match self.opening {
            Opening::SynToSend => false,
            Opening::SynSent { .. } if self.rto_deadline.is_some_and(|d| d <= now) => {
                self.rto_ps = (self.rto_ps * 2).min(self.max_rto_ps);
                self.timeouts += 1;
                true
            }
            _ => return,
        };
        self.opening = Opening::SynSent {
            at: now,
            retried: retry,
        };
        if retry {
            self.retransmits += 1;
        }
        emit(Segment {
            seq: 0,
            len: 0,
            retransmit: retry,
            syn: true,
        });
        self.rto_deadline = Some(now + self.rto_ps);
    }

    /// When the sender next needs `poll`, if ever (its retransmission timer).
    pub fn poll_at(&self) -> Option<u64> {
        if self.is_done() {
            return None;
        }
        let paced = self.paced_wait.then_some(self.next_send_ps);
        match (self.rto_deadline, paced) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The receiving side: cumulative acknowledgment with an out-of-order
/// reassembly list.
#[derive(Debug, Default)]
pub struct TcpReceiver {
    /// DCQCN's notification point (its queue pair's, shared by the
    /// messages of one QP): CNPs at most every this many picoseconds.
    cnp: Option<(SharedNp, u64)>,
    /// CNPs sent (with a notification point).
    pub cnps: u64,
    size: u64,
    rcv_nxt: u64,
    /// Received ranges above `rcv_nxt`, sorted by start, disjoint, each
    /// with the arrival count when a segment last landed in it (the order
    /// of RFC 2018's SACK blocks).
    ooo: Vec<(u64, u64, u64)>,
    arrivals: u64,
}

impl TcpReceiver {
    pub fn new(size_bytes: u64) -> TcpReceiver {
        TcpReceiver {
            cnp: None,
            cnps: 0,
            size: size_bytes,
            rcv_nxt: 0,
            ooo: Vec::new(),
            arrivals: 0,
        }
    }

    /// Accepts bytes `[seq, seq+len)`; returns the cumulative ACK number.
    pub fn on_segment(&mut self, seq: u64, len: u32) -> u64 {
        let end = seq + len as u64;
        self.arrivals += 1;
        if seq <= self.rcv_nxt {
            if end > self.rcv_nxt {
                self.rcv_nxt = end;
                while let Some(&(s, e, _)) = self.ooo.first() {
                    if s > self.rcv_nxt {
                        break;
                    }
                    self.rcv_nxt = self.rcv_nxt.max(e);
                    self.ooo.remove(0);
                }
            }
        } else {
            let i = self.ooo.partition_point(|&(s, _, _)| s < seq);
            self.ooo.insert(i, (seq, end, self.arrivals));
            // Merge neighbours so that ranges stay disjoint.
            let mut merged: Vec<(u64, u64, u64)> = Vec::with_capacity(self.ooo.len());
            for &(s, e, t) in &self.ooo {
                match merged.last_mut() {
                    Some(last) if s <= last.1 => {
                        last.1 = last.1.max(e);
                        last.2 = last.2.max(t);
                    }
                    _ => merged.push((s, e, t)),
                }
            }
            self.ooo = merged;
        }
        self.rcv_nxt
    }

    /// The SACK blocks of the ACK of the segment just accepted (RFC 2018
    /// §4's order, see [`sack::blocks_by_recency`]); returns how many.
    pub fn sack_blocks(&self, out: &mut [(u64, u64); sack::MAX_SACK_BLOCKS]) -> usize {
        sack::blocks_by_recency(&self.ooo, out)
    }

    /// Echoes congestion as DCQCN's notification point does: at most one
    /// CNP per `interval_ps` while marked packets arrive.
    pub fn with_cnp_interval(self, interval_ps: u64) -> TcpReceiver {
        self.with_notification_point(SharedNp::default(), interval_ps)
    }

    /// Echoes congestion through notification point `np`, which the other
    /// messages of its queue pair share: at most one CNP per `interval_ps`
    /// across them.
    pub fn with_notification_point(mut self, np: SharedNp, interval_ps: u64) -> TcpReceiver {
        self.cnp = Some((np, interval_ps));
        self
    }

    /// Whether the ACK of a packet arriving at `now` (CE-marked or not)
    /// echoes congestion: every marked packet (DCTCP), or a paced CNP.
    pub fn echo_congestion(&mut self, now: u64, marked: bool) -> bool {
        match self.cnp.as_mut() {
            Some((np, interval)) => {
                let cnp = np
                    .lock()
                    .expect("a notification point is never left mid-update")
                    .on_packet(now, marked, *interval);
                self.cnps += cnp as u64;
                cnp
            }
            None => marked,
        }
    }

    pub fn rcv_nxt(&self) -> u64 {
        self.rcv_nxt
    }
    /// Bytes delivered in order so far (the next expected sequence number).
    pub fn delivered_bytes(&self) -> u64 {
        self.rcv_nxt
    }

    pub fn is_complete(&self) -> bool {
        self.rcv_nxt >= self.size
    }
}

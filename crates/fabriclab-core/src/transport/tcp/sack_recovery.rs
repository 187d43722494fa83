//! The sender's loss recovery with selective acknowledgments (RFC 6675, "A
//! Conservative Loss Recovery Algorithm Based on Selective Acknowledgment
//! (SACK) for TCP"), used when `SenderConfig::sack` is set; the scoreboard
//! and its routines are [`super::sack`].
//!
//! - **Duplicate ACKs** (§2): an ACK that does not move the cumulative
//!   point counts only when its SACK blocks SACK new data.
//! - **Entering recovery** (§5 steps 2-4): on DupThresh duplicate ACKs or
//!   when IsLost (HighACK + 1) holds (checked on every ACK outside recovery,
//!   as Linux's `tcp_time_to_recover`), unless a recovery or a timeout's
//!   loss phase is still repairing an earlier window ("a new recovery phase
//!   ... MUST NOT be initiated until HighACK is greater than or equal to the
//!   new value of RecoveryPoint", §5.1). RecoveryPoint = HighData;
//!   ssthresh from the congestion control's own decrease (NewReno's and
//!   DCTCP's FlightSize / 2, CUBIC's 0.7 x FlightSize: only which segments
//!   are sent, and when, is RFC 6675's), cwnd = ssthresh (§5 step 4.2); the
//!   segment at HighACK + 1 is retransmitted at once (step 4.3).
//! - **During recovery** (§5 steps A-C): while cwnd - pipe >= 1 SMSS,
//!   NextSeg () rules 1-4 choose what to send; HighRxt and RescueRxt start
//!   at the end of the segment resent at entry (step 4.3, so no rescue in
//!   the first round) and move as steps C.2 and rule 4 say. The window does not grow; recovery ends on
//!   the cumulative ACK of RecoveryPoint, with cwnd = ssthresh. Every ACK of
//!   new data restarts the retransmission timer (RFC 6298 §5.3; Linux's
//!   `tcp_rearm_rto`), partial ones included.
//! - **Outside recovery** the window is filled against `pipe`, not the
//!   flight (§5 step 3's Limited Transmit): SACKed bytes leave the pipe.
//!   Without SACKed bytes pipe is the flight, so a loss-free connection
//!   sends exactly what it sends without SACK.
//! - **Timeout** (§5.1): "RecoveryPoint MUST be set to HighData" with the
//!   recovery terminated; the sender resends from HighACK + 1 in slow start
//!   (as without SACK), skipping what is SACKed. The scoreboard is *kept*:
//!   a departure from §5.1's "[RFC2018] suggests that a TCP sender SHOULD
//!   expunge the SACK information gathered from a receiver upon a
//!   retransmission timeout (RTO) 'since the timeout might indicate that
//!   the data receiver has reneged.' Additionally, a TCP sender MUST
//!   'ignore prior SACK information in determining which data to
//!   retransmit.'" Reneging is the only reason given, and our receiver
//!   cannot renege (`TcpReceiver` never discards out-of-order data), which
//!   is the strongest form of §5.1's own escape: "as long as robust tests
//!   for reneging are present, an implementation can retain and use SACK
//!   information across a timeout event [Errata1610]". Linux likewise keeps
//!   its SACKed marks at a timeout and clears them only when it detects
//!   reneging (from memory of `tcp_timeout_mark_lost` /
//!   `tcp_check_sack_reneging`, not re-read). Expunging cost one spurious
//!   resend per hole left after a timeout (review_sack B2).
//! - Not modelled: D-SACK (RFC 2883), RACK-TLP (RFC 8985), PRR (RFC 6937),
//!   rate pacing (DCQCN, the only paced control, refuses SACK).

use super::{Segment, TcpSender};

/// What NextSeg () chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Rules 1 and 3: a retransmission that moves HighRxt.
    Hole(u64),
    /// Rule 2: new data at HighData.
    New,
    /// Rule 4: the rescue retransmission of the last segment.
    Rescue(u64),
}

impl TcpSender {
    /// RFC 6675's SACK-bearing ACK: the cumulative point `ack` and up to
    /// three SACK blocks.
    pub fn on_ack_sack(&mut self, now: u64, ack: u64, ece: bool, blocks: &[(u64, u64)]) {
        if self.sack {
            self.on_sack_ack(now, ack, ece, blocks);
        } else {
            self.on_ack(now, ack, ece);
        }
    }

    /// Bytes SACKed and not yet cumulatively acknowledged (for tests and telemetry).
    pub fn sacked_ranges(&self) -> &[(u64, u64)] {
        self.board.ranges()
    }

    /// Whether the sender is in fast (SACK or NewReno) recovery.
    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// RFC 6675's pipe: bytes the sender deems in the network.
    pub fn pipe_bytes(&self) -> u64 {
        if self.in_loss {
            // After a timeout everything above snd_nxt counts as lost, and
            // what was resent since is in flight unless SACKed.
            return self.board.unsacked_in(self.snd_una, self.snd_nxt);
        }
        self.board.pipe(
            self.snd_una,
            self.high_tx,
            self.high_rxt,
            self.dupack_threshold,
            self.mss,
        )
    }

    pub(super) fn on_sack_ack(&mut self, now: u64, ack: u64, ece: bool, blocks: &[(u64, u64)]) {
        self.settled = false;
        self.cc.on_feedback(now, ece);
        let newly_sacked = self.board.update(ack.max(self.snd_una), blocks);
        if ack > self.snd_una {
            let mut info = self.advance(now, ack, ece);
            if self.in_recovery {
                self.cc.on_ack(&mut self.st, &info);
                if ack >= self.recover.unwrap_or(0) {
                    // §5 step A: the end of recovery.
                    self.st.cwnd_bytes = self.st.ssthresh_bytes;
                    self.in_recovery = false;
                }
            } else {
                self.open_window(&mut info);
            }
            self.dupacks = 0;
            if self.is_done() {
                self.rto_deadline = None;
            } else {
                self.restart_timer(now);
            }
        } else if ack == self.snd_una && self.high_tx > self.snd_una && newly_sacked > 0 {
            self.dupacks += 1;
        }
        let may_enter = !self.in_recovery
            && self.high_tx > self.snd_una
            && self.recover.is_none_or(|r| self.snd_una >= r);
        if may_enter
            && (self.dupacks >= self.dupack_threshold
                || self
                    .board
                    .is_lost(self.snd_una, self.dupack_threshold, self.mss))
        {
            self.enter_sack_recovery();
        }
    }

    /// §5 step 4.
    fn enter_sack_recovery(&mut self) {
        let flight = self.high_tx - self.snd_una;
        self.st.ssthresh_bytes = self.cc.ssthresh_after_loss(&self.st, flight);
        self.st.cwnd_bytes = self.st.ssthresh_bytes;
        self.recover = Some(self.high_tx);
        self.in_recovery = true;
        self.high_rxt = self.snd_una;
        // Step 4.3: "To prevent repeated retransmission of the same data or
        // a premature rescue retransmission, set both HighRxt and RescueRxt
        // to the highest sequence number in the retransmitted segment"
        // (kept here as its exclusive end; rule 4 tests HighACK > RescueRxt
        // as `snd_una > rescue_rxt`, the same off-by-one on both sides).
        self.rescue_rxt = Some(self.snd_una + self.seg_len(self.snd_una) as u64);
        self.retransmit_head = true;
        self.rtt_probe = None;
    }

    /// §5.1 (see the module's notes): the scoreboard is kept, as our
    /// receiver never reneges; only HighRxt falls back to HighACK.
    pub(super) fn sack_on_timeout(&mut self) {
        self.high_rxt = self.snd_una;
    }

    /// NextSeg () (§4), in recovery.
    fn next_seg(&self) -> Option<Next> {
        let high_sacked = self.board.high_sacked().unwrap_or(self.snd_una);
        let lost_end = self
            .board
            .lost_below(self.dupack_threshold, self.mss)
            .unwrap_or(self.snd_una);
        let s = self.board.next_unsacked(self.high_rxt.max(self.snd_una));
        if s < high_sacked && s < lost_end {
            return Some(Next::Hole(s)); // rule 1
        }
        if self.high_tx < self.size {
            return Some(Next::New); // rule 2
        }
        if s < high_sacked {
            return Some(Next::Hole(s)); // rule 3
        }
        // Rule 4: one segment holding the final octet of outstanding data,
        // once per recovery ("If HighACK > RescueRxt (or RescueRxt is
        // undefined)"), unless that octet is SACKed already.
        let last = self.high_tx - 1;
        let rescue_due = self.rescue_rxt.is_none_or(|r| self.snd_una > r);
        if rescue_due && last >= self.snd_una && !self.board.is_sacked(last) {
            return Some(Next::Rescue(
                ((last / self.mss) * self.mss).max(self.snd_una),
            ));
        }
        None
    }

    /// `poll`'s body with SACK: the retransmission of step 4.3 if due, then
    /// what the window against `pipe` allows.
    pub(super) fn poll_sack(
        &mut self,
        now: u64,
        mut budget_bytes: u64,
        emit: &mut impl FnMut(Segment),
    ) {
        if self.retransmit_head {
            self.retransmit_head = false;
            let len = self.seg_len(self.snd_una);
            self.retransmits += 1;
            self.high_rxt = self.high_rxt.max(self.snd_una + len as u64);
            emit(Segment {
                seq: self.snd_una,
                len,
                retransmit: true,
                syn: false,
            });
        }
        self.cwnd_limited = false;
        self.paced_wait = false;
        let mut budget_stop = false;
        loop {
            let next = if self.in_recovery {
                match self.next_seg() {
                    Some(n) => n,
                    None => break,
                }
            } else {
                // Outside recovery: resend after a timeout (skipping what
                // was SACKed since), else new data.
                if self.snd_nxt < self.high_tx {
                    self.snd_nxt = self.board.next_unsacked(self.snd_nxt);
                }
                if self.snd_nxt < self.high_tx {
                    Next::Hole(self.snd_nxt)
                } else if self.snd_nxt < self.size {
                    Next::New
                } else {
                    break;
                }
            };
            let seq = match next {
                Next::New => self.high_tx.max(self.snd_nxt),
                Next::Hole(s) | Next::Rescue(s) => s,
            };
            let len = self.seg_len(seq);
            let pipe = self.pipe_bytes();
            if (pipe + len as u64) as f64 > self.st.cwnd_bytes && pipe > 0 {
                self.cwnd_limited = true;
                break;
            }
            match next {
                Next::New => {
                    if budget_bytes < len as u64 {
                        budget_stop = true;
                        break;
                    }
                    budget_bytes -= len as u64;
                    if self.rtt_probe.is_none() {
                        self.rtt_probe = Some((seq + len as u64, now));
                    }
                    self.snd_nxt = seq + len as u64;
                    self.high_tx = self.snd_nxt;
                }
                Next::Hole(_) if !self.in_recovery => {
                    self.retransmits += 1;
                    self.snd_nxt = seq + len as u64;
                }
                Next::Hole(_) => {
                    self.retransmits += 1;
                    self.high_rxt = seq + len as u64; // step C.2
                }
                Next::Rescue(_) => {
                    self.retransmits += 1;
                    self.rescue_rxt = self.recover; // rule 4: RescueRxt = RecoveryPoint
                }
            }
            emit(Segment {
                seq,
                len,
                retransmit: next != Next::New,
                syn: false,
            });
        }
        if self.rto_deadline.is_none() && self.high_tx > self.snd_una {
            self.rto_deadline = Some(now + self.rto_ps);
        }
        self.settled = !budget_stop;
    }
}

//! Packet Rocket: edge flow control on one-way delay, after On-Ramp (Liu et
//! al., NSDI'21, "Breaking the Transience-Equilibrium Nexus: A New Approach
//! to Datacenter Packet Transport"), as the Clockwork talk names it.
//!
//! The rule, per flow at the sender (docs/clockwork-control.md, "Packet
//! Rocket (On-Ramp's rule) in the packet backend", gives each point's source
//! and what is unverified):
//!
//! - each data packet carries its send time on the sender's clock, and the
//!   receiver echoes the one-way delay (its own clock minus that stamp) in
//!   the ACK;
//! - the path's base OWD is the minimum echoed so far, so a constant offset
//!   between the two clocks cancels;
//! - when an echoed OWD exceeds the base by more than the threshold T, the
//!   flow is held for `(OWD - base) - T`;
//! - echoes of packets sent before the last pause ended are ignored, so one
//!   queue build-up causes one pause;
//! - the congestion control below is untouched: it still sees every ACK.
//!
//! [`Ignore`] selects which echoes a pause ignores: the reading above
//! (`BeforeEnd`, the default) or one of two variants of ours, which are not
//! the paper's (docs/clockwork-control.md, "Which echoes a pause ignores").
//!
//! In smoltcp's shape like the simulator's transport: it is fed echoes and
//! never reads a clock; every time is the sender's local clock reading, in
//! picoseconds (signed: a host clock may read before zero). The runtime's
//! connections use it too (fabriclab-runtime's edge.rs), and both correct
//! host clocks with one [`correction::ClockCorrection`].

pub mod correction;

/// Which echoes a pause ignores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Ignore {
    /// Echoes of packets sent before the last pause ended (issue 27's
    /// reading of On-Ramp).
    #[default]
    BeforeEnd,
    /// As `BeforeEnd`, but an ignored echo that arrives while the flow is
    /// held and implies a later end (`now + excess - T`) moves the end
    /// there: one build-up, one pause, as long as its largest echo asks.
    /// Ours, not the paper's.
    Extend,
    /// Only echoes of packets sent during a pause; any other echo over T
    /// starts a pause, or extends the current one to a later end. Ours, not
    /// the paper's.
    During,
}

/// One flow's Packet Rocket state.
#[derive(Debug, Clone, Default)]
pub struct Rocket {
    threshold_ps: i64,
    ignore: Ignore,
    /// Sender-clock time the last pause started.
    pause_start_ps: Option<i64>,
    base_owd_ps: Option<i64>,
    /// Sender-clock time the last pause ends (or ended); echoes of packets
    /// stamped before it are ignored.
    pause_end_ps: Option<i64>,
    /// Pauses taken, and their total length (ps).
    pub pauses: u64,
    pub paused_ps: u64,
}

impl Rocket {
    pub fn new(threshold_ps: u64) -> Rocket {
        Rocket {
            threshold_ps: threshold_ps as i64,
            ..Rocket::default()
        }
    }

    /// Continues a path whose base OWD is already known (another message
    /// between the same hosts).
    pub fn with_base(mut self, base_owd_ps: Option<i64>) -> Rocket {
        self.base_owd_ps = base_owd_ps;
        self
    }

    /// Which echoes a pause ignores (default: [`Ignore::BeforeEnd`]).
    pub fn with_ignore(mut self, ignore: Ignore) -> Rocket {
        self.ignore = ignore;
        self
    }

    pub fn base_owd_ps(&self) -> Option<i64> {
        self.base_owd_ps
    }

    /// An ACK arriving at `now_ps` echoes `owd_ps` for a data packet stamped
    /// `stamp_ps`. Returns the end of the pause it starts (or, with a
    /// variant, the new end of the pause it extends), if any.
    pub fn on_echo(&mut self, now_ps: i64, stamp_ps: i64, owd_ps: i64) -> Option<i64> {
        let base = self.base_owd_ps.map_or(owd_ps, |b| b.min(owd_ps));
        self.base_owd_ps = Some(base);
        let ignored = match self.ignore {
            Ignore::BeforeEnd | Ignore::Extend => {
                self.pause_end_ps.is_some_and(|end| stamp_ps < end)
            }
            Ignore::During => self
                .pause_start_ps
                .zip(self.pause_end_ps)
                .is_some_and(|(start, end)| start <= stamp_ps && stamp_ps < end),
        };
        let held = self.poll_at(now_ps);
        if ignored && !(self.ignore == Ignore::Extend && held.is_some()) {
            return None;
        }
        let over = owd_ps - base - self.threshold_ps;
        if over <= 0 {
            return None;
        }
        let end = now_ps + over;
        match held {
            Some(current) if end <= current => None,
            Some(current) => {
                self.pause_end_ps = Some(end);
                self.paused_ps += (end - current) as u64;
                Some(end)
            }
            None => {
                self.pause_start_ps = Some(now_ps);
                self.pause_end_ps = Some(end);
                self.pauses += 1;
                self.paused_ps += over as u64;
                Some(end)
            }
        }
    }

    /// Whether the flow may send at `now_ps`.
    pub fn may_send(&self, now_ps: i64) -> bool {
        self.pause_end_ps.is_none_or(|end| now_ps >= end)
    }

    /// When the current pause ends, if the flow is held at `now_ps`.
    pub fn poll_at(&self, now_ps: i64) -> Option<i64> {
        self.pause_end_ps.filter(|&end| now_ps < end)
    }
}

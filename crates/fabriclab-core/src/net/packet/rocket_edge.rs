//! Packet Rocket at the packet backend's edge (docs/clockwork-control.md, "Packet
//! Rocket"): the rule ([`crate::transport::rocket::Rocket`]) fed with real
//! stamps and echoes.
//!
//! - A data packet is stamped on its sender's clock as it leaves the
//!   sender's NIC (so the sender's own NIC queue is not part of its one-way
//!   delay: the hold happens at that edge).
//! - At the receiver, its one-way delay is the receiver's clock minus that
//!   stamp; the ACK of the packet carries it back, and the sender feeds it
//!   to the rule when the ACK arrives.
//! - A pause holds the connection: it is not polled until the pause ends
//!   (its one timer is the pause's end), so neither new data nor
//!   retransmissions leave meanwhile; ACKs still reach its congestion
//!   control.
//!
//! - Clocks: true time (`"ideal"`), each host's `[clocks]` reading
//!   (`"host"`), or that reading less the given correction table
//!   (`"estimated"`, [`crate::transport::ClockCorrection`]: Python's
//!   estimator makes the table, this only applies it).
//!
//! The stamp and the echo travel in a per-connection side table of 256
//! slots, which the packet's one-byte `tag` names, so the header does not
//! grow and a run without Packet Rocket does none of this. A slot is reused
//! 256 packets later: a slot whose stamp was overwritten before its packet
//! arrived (more than 256 packets of one connection in flight) gives no
//! echo, never a wrong one.

use crate::engine::{Clocks, Column, Table};
use crate::transport::rocket::{Ignore, Rocket};
use crate::transport::{ClockCorrection, Segment};
use std::collections::HashMap;

const SLOTS: usize = 256;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    seq: u64,
    /// The sender's clock when the packet left its NIC.
    stamp: Option<i64>,
    /// The receiver's clock at its arrival minus `stamp`.
    echo: Option<i64>,
}

/// One connection's Packet Rocket state.
pub(super) struct ConnRocket {
    rule: Rocket,
    src: u32,
    dst: u32,
    slots: Vec<Slot>,
    next: u8,
    /// True time the current hold ends (0: never held).
    pub held_until: u64,
}

impl ConnRocket {
    /// Tags the segments about to be queued at the NIC, in order, with
    /// consecutive slots; returns the first one's tag.
    // Out of line: with Packet Rocket off the hot paths keep only a test.
    #[inline(never)]
    pub fn tag_all(&mut self, segs: &[Segment]) -> u8 {
        let first = self.next;
        for s in segs {
            self.slots[self.next as usize] = Slot {
                seq: s.seq,
                stamp: None,
                echo: None,
            };
            self.next = self.next.wrapping_add(1);
        }
        first
    }
}

/// The backend's Packet Rocket: threshold, clocks, each path's base OWD,
/// and the counters of finished connections.
pub(super) struct EdgeRocket {
    threshold_ps: u64,
    ignore: Ignore,
    /// Host clocks (`packet_rocket_clock = "host"` with `[clocks]`); `None`:
    /// true time.
    clocks: Option<Clocks>,
    /// With `packet_rocket_clock = "estimated"`: each reading less its
    /// host's correction (what the estimator recovered of its clock).
    correction: Option<ClockCorrection>,
    /// Host index of each node.
    host_of: HashMap<u32, u32>,
    /// Per host index: do its senders run Packet Rocket.
    runs_on: Vec<bool>,
    /// The least OWD echoed on each (source host, destination host) so far
    /// by connections that finished, which new ones continue.
    bases: HashMap<(u32, u32), i64>,
    /// (message, source host, destination host, pauses, paused ps).
    finished: Vec<(u32, u32, u32, u64, u64)>,
}

impl EdgeRocket {
    pub fn new(
        threshold_ps: u64,
        ignore: Ignore,
        clocks: Option<Clocks>,
        correction: Option<ClockCorrection>,
        hosts: &[u32],
        senders: Option<&[u32]>,
    ) -> EdgeRocket {
        let mut runs_on = vec![senders.is_none(); hosts.len()];
        for &h in senders.unwrap_or_default() {
            if let Some(r) = runs_on.get_mut(h as usize) {
                *r = true;
            }
        }
        EdgeRocket {
            runs_on,
            threshold_ps,
            ignore,
            clocks,
            correction,
            host_of: hosts
                .iter()
                .enumerate()
                .map(|(i, &n)| (n, i as u32))
                .collect(),
            bases: HashMap::new(),
            finished: Vec::new(),
        }
    }

    fn read(&mut self, host: u32, now: u64) -> i64 {
        let local = match self.clocks.as_mut() {
            Some(c) => c.read_ps(host, now),
            None => now as i64,
        };
        match &self.correction {
            Some(k) => k.corrected_ps(host, local),
            None => local,
        }
    }

    /// The state of a new connection from node `src` to node `dst`; `None`
    /// when its sender's host does not run Packet Rocket (the connection
    /// then runs exactly as with Packet Rocket off).
    pub fn open(&self, src: u32, dst: u32) -> Option<Box<ConnRocket>> {
        let (src, dst) = (self.host_of[&src], self.host_of[&dst]);
        if !self.runs_on[src as usize] {
            return None;
        }
        Some(Box::new(ConnRocket {
            rule: Rocket::new(self.threshold_ps)
                .with_ignore(self.ignore)
                .with_base(self.bases.get(&(src, dst)).copied()),
            src,
            dst,
            slots: vec![Slot::default(); SLOTS],
            next: 0,
            held_until: 0,
        }))
    }

    /// Data packet `seq` with `tag` left the sender's NIC at `now`.
    // Out of line: with Packet Rocket off the hot paths keep only a test.
    #[inline(never)]
    pub fn departed(&mut self, c: &mut ConnRocket, tag: u8, seq: u64, now: u64) {
        let stamp = self.read(c.src, now);
        let s = &mut c.slots[tag as usize];
        if s.seq == seq && s.stamp.is_none() {
            s.stamp = Some(stamp);
        }
    }

    /// Data packet `seq` with `tag` reached the receiver at `now`: its echo.
    // Out of line: with Packet Rocket off the hot paths keep only a test.
    #[inline(never)]
    pub fn arrived(&mut self, c: &mut ConnRocket, tag: u8, seq: u64, now: u64) {
        let rx = self.read(c.dst, now);
        let s = &mut c.slots[tag as usize];
        if let (true, Some(stamp), None) = (s.seq == seq, s.stamp, s.echo) {
            s.echo = Some(rx.saturating_sub(stamp));
        }
    }

    /// The ACK of the packet with `tag` reached the sender at `now`: the rule
    /// reads its echo. Returns true when a pause starts (`held_until` set).
    // Out of line: with Packet Rocket off the hot paths keep only a test.
    #[inline(never)]
    pub fn acked(&mut self, c: &mut ConnRocket, tag: u8, now: u64) -> bool {
        let s = &mut c.slots[tag as usize];
        let (Some(stamp), Some(owd)) = (s.stamp, s.echo.take()) else {
            return false;
        };
        let local = self.read(c.src, now);
        match c.rule.on_echo(local, stamp, owd) {
            Some(end) => {
                // The pause is timed on the sender's clock; over its few µs
                // a drift of ppm moves the end by ps, so true time adds the
                // same length.
                c.held_until = now + (end - local) as u64;
                true
            }
            None => false,
        }
    }

    /// A connection finished: keep its path's base and its counters.
    pub fn close(&mut self, msg: u32, c: &ConnRocket) {
        if let Some(b) = c.rule.base_owd_ps() {
            let e = self.bases.entry((c.src, c.dst)).or_insert(b);
            *e = (*e).min(b);
        }
        self.finished
            .push((msg, c.src, c.dst, c.rule.pauses, c.rule.paused_ps));
    }

    /// `packet_rocket`: one row per finished connection, by message.
    pub fn table(&self) -> Table {
        let mut rows = self.finished.clone();
        rows.sort_unstable();
        Table::new("packet_rocket")
            .col("msg", Column::U32(rows.iter().map(|r| r.0).collect()))
            .col("src", Column::U32(rows.iter().map(|r| r.1).collect()))
            .col("dst", Column::U32(rows.iter().map(|r| r.2).collect()))
            .col("pauses", Column::U64(rows.iter().map(|r| r.3).collect()))
            .col("paused_ps", Column::U64(rows.iter().map(|r| r.4).collect()))
    }
}

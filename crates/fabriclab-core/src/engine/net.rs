//! What the engine asks of a network backend, and what a backend may use of
//! the engine while it handles one of its events. The engine never looks
//! inside a backend's events ([`NetEv`] is opaque to it) and knows nothing
//! of packets, queues or transports.

use super::events::{Ev, NetEv, PackedEv};
use super::probe::{PortEvent, Probe};
use super::table::Table;
use crate::event::{EventKey, EventQueue, Position};
use crate::fabric::topology::Topology;

/// A message fully arrived at its destination at `Ctx::now`.
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub msg: u32,
    pub retransmits: u64,
    /// Congestion notifications (DCQCN's CNPs) its receiver sent.
    pub cnps: u64,
}

/// In-order bytes of a message reached its destination: `bytes` is the
/// number delivered so far. Reported for the first arrival of every message
/// and, for messages sent with `notify_packets`, for every advance.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub msg: u32,
    pub bytes: u64,
}

/// Counters of one directed link (egress port).
#[derive(Debug, Clone, Default)]
pub struct LinkStats {
    pub from: u32,
    pub to: u32,
    pub rate_bps: u64,
    /// Wire bytes transmitted (headers, preamble and gap included).
    pub bytes: u64,
    pub packets: u64,
    pub drops: u64,
    pub ecn_marks: u64,
    pub max_queue_bytes: u64,
    /// Time integral of the queue length, in byte-picoseconds.
    pub queue_area: u128,
    /// PAUSE frames this port sent upstream (PFC), and how long its bands
    /// were paused by frames it received, summed over bands.
    pub pause_frames_sent: u64,
    pub paused_ps: u64,
}

/// Wire bytes one egress port has transmitted of one traffic class, at a
/// sampling instant (cumulative): who got what share of a link over time,
/// whatever the queue discipline mixes in a band.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassSample {
    pub port: u32,
    pub class: u8,
    pub tx_bytes: u64,
}

/// One band of one egress port at a sampling instant (cumulative counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BandSample {
    pub port: u32,
    pub band: u8,
    pub queue_bytes: u64,
    pub tx_bytes: u64,
    pub drops: u64,
    pub ecn_marks: u64,
    pub paused: bool,
}

/// The engine's services to a backend handling an event or a send.
pub struct Ctx<'a> {
    pub now: u64,
    pub(super) queue: &'a mut EventQueue<PackedEv>,
    pub completions: &'a mut Vec<Completion>,
    pub arrivals: &'a mut Vec<Arrival>,
    pub(super) probes: &'a mut [Box<dyn Probe>],
    /// The fabric as routing knows it now (next hops of packets that are not
    /// source-routed, e.g. those a switch's logic emits).
    pub topo: &'a Topology,
}

impl Ctx<'_> {
    /// Schedules one of the backend's own events at `at_ps`.
    #[inline]
    pub fn schedule(&mut self, at_ps: u64, ev: NetEv) -> EventKey {
        self.queue.schedule(at_ps, Ev::Net(ev).pack())
    }
    /// Reserves the place of an event the backend may not need to schedule
    /// (see [`EventQueue::reserve`]).
    #[inline]
    pub fn reserve(&mut self) -> EventKey {
        self.queue.reserve()
    }
    /// Schedules an event in the place `key` reserved, at `at_ps`.
    #[inline]
    pub fn schedule_reserved(&mut self, at_ps: u64, key: EventKey, ev: NetEv) {
        self.queue.schedule_reserved(at_ps, key, Ev::Net(ev).pack())
    }
    /// Whether an event at `at_ps` with `key` would have happened by now.
    #[inline]
    pub fn passed(&self, at_ps: u64, key: EventKey) -> bool {
        self.queue.passed(Position::of(at_ps, key))
    }
    /// Cancels a pending event of this backend.
    #[inline]
    pub fn cancel(&mut self, key: EventKey) {
        self.queue.cancel(key)
    }
    /// Pops the next event if it is the backend's and at or before
    /// `until_ps`, and moves `now` to its time.
    #[inline]
    pub fn next_event(&mut self, until_ps: u64) -> Option<NetEv> {
        let (t, ev) = self.queue.pop_until_if(until_ps, |e| e.net().is_some())?;
        self.now = t;
        ev.net()
    }
    /// Whether any probe listens to port events (skip building them if not).
    #[inline]
    pub fn probed(&self) -> bool {
        !self.probes.is_empty()
    }
    /// Tells every probe about a queue event on `port`'s band `band`.
    #[inline]
    pub fn port_event(&mut self, port: u32, band: u8, kind: PortEvent, wire_bytes: u32) {
        let now = self.now;
        for p in self.probes.iter_mut() {
            p.port_event(now, port, band, kind, wire_bytes);
        }
    }
}

/// A change of one link (both directions), applied by the backend at once;
/// routing follows after the convergence delay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LinkChange {
    /// Packets on the link and in its queues are lost; nothing passes.
    Down,
    Up,
    /// A degraded (or restored) link: serialization at this rate.
    Rate(u64),
    /// Each packet sent on the link is lost with this probability.
    Loss(f64),
}

/// A network backend: moves messages along routes and reports arrivals.
pub trait Backend: Send + Sync {
    /// Starts moving message `msg` along `fwd` (its ACKs, if any, along `rev`).
    fn send(&mut self, ctx: &mut Ctx, send: BackendSend);
    /// Moves message `msg`'s later traffic to `class`, like re-marking a
    /// live socket's DSCP; false (and nothing done) once it has left its sender.
    fn set_class(&mut self, ctx: &mut Ctx, msg: u32, class: u8) -> bool;
    /// Handles one of this backend's events; returns false when the event
    /// was stale (a timer re-armed since it was scheduled) and did nothing.
    fn handle(&mut self, ctx: &mut Ctx, ev: NetEv) -> bool;
    /// Handles `ev`, then (with `until_ps`) each next event while it is
    /// this backend's, at or before `until_ps`, and no completion or arrival
    /// waits for the engine: the engine's loop would have done the same
    /// without a call through the trait object per event (issue 13, sixth
    /// pass). Returns the number of effective events and the time of the
    /// last one.
    fn handle_run(&mut self, ctx: &mut Ctx, mut ev: NetEv, until_ps: Option<u64>) -> (u64, u64) {
        let (mut n, mut last) = (0, 0);
        loop {
            if self.handle(ctx, ev) {
                n += 1;
                last = ctx.now;
            }
            if !ctx.completions.is_empty() || !ctx.arrivals.is_empty() {
                return (n, last);
            }
            match until_ps.and_then(|u| ctx.next_event(u)) {
                Some(e) => ev = e,
                None => return (n, last),
            }
        }
    }
    /// Per-port counters up to `now_ps`.
    fn link_stats(&self, now_ps: u64) -> Vec<LinkStats>;
    /// Appends every band of every port with its queue and counters now
    /// (backends without queues append nothing).
    fn sample_bands(&self, _out: &mut Vec<BandSample>) {}
    /// Appends every port's transmitted bytes per class (backends with ports).
    fn sample_classes(&self, _out: &mut Vec<ClassSample>) {}
    /// Packets (packet backend) or flows (flow backend) still in the network.
    fn in_flight(&self) -> usize;
    /// Completes the work the backend left without an event (reserved
    /// places, [`Ctx::reserve`]) up to `upto`, so that counters read now are
    /// those of a run that had scheduled every event; returns the time of
    /// the latest such work, which counts as activity.
    fn settle(&mut self, _upto: Position) -> Option<u64> {
        None
    }
    /// Applies a change of link `link` (egress ports `2 * link` and `2 * link + 1`).
    fn link_change(&mut self, ctx: &mut Ctx, link: u32, change: LinkChange);
    /// The backend's own result tables (e.g. switch logic's counters).
    fn tables(&self) -> Vec<Table> {
        Vec::new()
    }
    /// Appends the messages that still have traffic in the network.
    fn live_messages(&self, out: &mut Vec<u32>);
    /// Moves a live message's later traffic onto new routes (packets already
    /// in the network finish on the route they took); false (nothing done)
    /// when the message has no traffic left in the network.
    fn reroute(&mut self, ctx: &mut Ctx, msg: u32, fwd: Vec<u32>, rev: Vec<u32>) -> bool;
}

/// A message handed to a backend, its route resolved to egress ports.
#[derive(Debug, Clone)]
pub struct BackendSend {
    pub msg: u32,
    pub size_bytes: u64,
    pub class: u8,
    /// Continue the host pair's connection state (transport backends).
    pub persistent: bool,
    /// Report every in-order advance at the destination, not only the first.
    pub notify_packets: bool,
    pub fwd: Vec<u32>,
    pub rev: Vec<u32>,
    /// An in-network aggregation contribution of this aggregation job
    /// (`fwd` is then the worker's uplink; nothing has a destination).
    pub aggregate: Option<u16>,
    /// The application's queue-pair identity (its message's `qp`) with
    /// the index of the app that named it; a backend may keep per-QP state
    /// across the messages naming one QP.
    pub qp: Option<(u16, u64)>,
}

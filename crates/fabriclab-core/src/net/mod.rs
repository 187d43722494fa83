//! Network backends behind one interface: a message enters with its route
//! and leaves as a [`Completion`](crate::sim::Completion).

pub mod flow;
pub mod maxmin;
pub mod packet;

use crate::sim::{Ctx, Ev};

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
}

pub trait Backend: Send + Sync {
    /// Starts moving message `msg` along `fwd` (its ACKs, if any, along `rev`).
    /// `persistent`: continue the host pair's connection state (transport backends).
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        ctx: &mut Ctx,
        msg: u32,
        size_bytes: u64,
        class: u8,
        persistent: bool,
        fwd: Vec<u32>,
        rev: Vec<u32>,
    );
    /// Moves message `msg`'s later traffic to `class`, like re-marking a
    /// live socket's DSCP; false (and nothing done) once it has left its sender.
    fn set_class(&mut self, ctx: &mut Ctx, msg: u32, class: u8) -> bool;
    /// Handles one of this backend's events; returns false when the event
    /// was stale (a timer re-armed since it was scheduled) and did nothing.
    fn handle(&mut self, ctx: &mut Ctx, ev: Ev) -> bool;
    /// Per-port counters up to `now_ps`.
    fn link_stats(&self, now_ps: u64) -> Vec<LinkStats>;
    /// Packets (packet backend) or flows (flow backend) still in the network.
    fn in_flight(&self) -> usize;
}

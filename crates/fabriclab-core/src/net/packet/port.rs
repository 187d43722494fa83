//! Egress ports of the packet backend: a queue discipline, a serializer, a
//! wire, PFC pause state, and pending MAC control frames (PAUSE), which go
//! before any queued data once the frame being serialized is done.
//!
//! A frame that starts with nothing queued behind it and behind another
//! frame still on the wire goes onto the wire when it starts, and its end of
//! serialization gets no event, only a reserved place in the event order
//! ([`Ctx::reserve`]): at that end the port would only count it and find
//! nothing to send. If something arrives behind it, the event is scheduled
//! in that place; counters catch up when the port is next looked at
//! ([`PacketNet::settle_ports`]). The frame's arrival is handled by the
//! wire's own event, which the frame ahead of it schedules as before, so
//! every other event keeps its time and its place (issue 13).

use super::header::{Packet, NO_PORT, PROTO_AGG, PROTO_PAUSE, PROTO_TCP};
use super::pfc::{Signal, QUANTUM_BITS};
use super::qdisc::{Enqueued, Qdisc};
use super::{PacketNet, EV_PAUSE_END, EV_PFC_REFRESH, EV_PORT_TX, EV_WIRE_HEAD};
use crate::engine::{Ctx, LinkStats, NetEv, PortEvent};
use crate::event::{EventKey, Position};
use crate::time::{ser_time_ps, PS_PER_S};
use rand::Rng;
use std::collections::VecDeque;

pub(super) struct Port {
    /// A host's NIC port: its departures release the sender's TSQ budget.
    pub host_port: bool,
    rate_bps: u64,
    /// Serialization times at `rate_bps` of the last frame sizes seen.
    ser: SerTimes,
    pub delay_ps: u64,
    pub qdisc: Qdisc,
    /// Packet (or control frame) being serialized, if any.
    pub tx: Option<Packet>,
    /// MAC control frames waiting to be sent.
    pub ctrl: VecDeque<Packet>,
    /// Packets propagating on the wire with their arrival times (non-decreasing).
    pub wire: VecDeque<(u64, Packet)>,
    pub stats: LinkStats,
    /// Wire bytes transmitted per traffic class.
    pub class_tx: [u64; 8],
    pub q_changed_ps: u64,
    /// The link is up (timed link events); when down, nothing passes.
    pub up: bool,
    /// Probability that a frame sent is lost on the wire.
    pub loss: f64,
    /// When the frame in `tx` finishes (a PortTx event at another time is stale).
    pub tx_done_ps: u64,
    /// The place of the PortTx event of the frame in `tx`.
    tx_key: EventKey,
    /// The frame in `tx` went onto the wire when it started (not counted yet).
    tx_on_wire: bool,
    /// The PortTx event of the frame in `tx` is in the event queue.
    tx_event: bool,
    /// Classes paused by PFC (bit c); when each pause ends and began (kept
    /// apart, allocated on the first pause: most ports are never paused).
    paused: u8,
    pause_times: Option<Box<PauseTimes>>,
}

/// The serialization times of the last two frame sizes a port sent, one
/// slot for short frames (ACKs, PAUSE) and one for the others (mostly full
/// data frames): a u64 division per frame was 3 % of a run's time (sixth
/// pass). Exact: a size is looked up by its own value.
#[derive(Clone, Copy, Default)]
struct SerTimes {
    wire: [u32; 2],
    ps: [u64; 2],
}

impl SerTimes {
    #[inline]
    fn get(&mut self, wire: u32, rate_bps: u64) -> u64 {
        let i = (wire < 256) as usize;
        if self.wire[i] != wire {
            self.wire[i] = wire;
            self.ps[i] = ser_time_ps(wire as u64, rate_bps);
        }
        self.ps[i]
    }
}

#[derive(Default)]
struct PauseTimes {
    end_ps: [u64; 8],
    since_ps: [u64; 8],
}

impl Port {
    pub fn new(
        host_port: bool,
        from: u32,
        to: u32,
        rate_bps: u64,
        delay_ps: u64,
        qdisc: Qdisc,
    ) -> Port {
        Port {
            host_port,
            rate_bps,
            ser: SerTimes::default(),
            delay_ps,
            qdisc,
            tx: None,
            ctrl: VecDeque::new(),
            wire: VecDeque::new(),
            class_tx: [0; 8],
            stats: LinkStats {
                from,
                to,
                rate_bps,
                ..Default::default()
            },
            q_changed_ps: 0,
            up: true,
            loss: 0.0,
            tx_done_ps: 0,
            tx_key: EventKey::default(),
            tx_on_wire: false,
            tx_event: false,
            paused: 0,
            pause_times: None,
        }
    }

    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// Serializes at `rate_bps` from now on.
    pub fn set_rate(&mut self, rate_bps: u64) {
        self.rate_bps = rate_bps;
        self.ser = SerTimes::default();
    }

    pub fn account_queue(&mut self, now: u64) {
        let dt = now - self.q_changed_ps;
        self.stats.queue_area += self.qdisc.bytes() as u128 * dt as u128;
        self.q_changed_ps = now;
    }

    /// Counters up to `now_ps` (queue area and pauses still running included).
    pub fn stats_at(&self, now_ps: u64) -> LinkStats {
        let mut s = self.stats.clone();
        s.queue_area +=
            self.qdisc.bytes() as u128 * now_ps.saturating_sub(self.q_changed_ps) as u128;
        if let Some(t) = &self.pause_times {
            for c in 0..8 {
                if self.paused & (1 << c) != 0 {
                    s.paused_ps += now_ps.saturating_sub(t.since_ps[c]);
                }
            }
        }
        s
    }

    /// Counts a frame whose serialization ended.
    fn count_sent(&mut self, pkt: &Packet) {
        self.stats.bytes += pkt.wire as u64;
        if pkt.proto == PROTO_PAUSE {
            self.stats.pause_frames_sent += 1;
        } else {
            self.stats.packets += 1;
            self.class_tx[(pkt.class & 7) as usize] += pkt.wire as u64;
        }
    }

    /// Whether `pkt`, just dequeued to end at `done_ps` and arrive at
    /// `arrive_ps`, needs no event at its end: nothing waits behind it, the
    /// link loses nothing, a host's end is not its own data (which releases
    /// its sender's budget at the end), and the frame ahead of it on the
    /// wire arrives after it ends (so its arrival event is scheduled when
    /// that frame arrives, as if it had been put on the wire at its end).
    fn quiet_end(&self, pkt: &Packet, done_ps: u64) -> bool {
        self.qdisc.bytes() == 0
            && self.ctrl.is_empty()
            && self.loss == 0.0
            && (!self.host_port || (pkt.proto == PROTO_TCP && pkt.is_ack()))
            && self.wire.back().is_some_and(|&(t, _)| t > done_ps)
    }

    /// Counts a packet the queue discipline took (`res`: queued or marked);
    /// whether the port was idle then (see [`idle`](Self::idle)).
    #[inline(always)]
    fn count_queued(&mut self, ctx: &Ctx, res: Enqueued) -> bool {
        if res == Enqueued::Marked {
            self.stats.ecn_marks += 1;
        }
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.qdisc.bytes());
        self.idle(ctx)
    }

    /// Whether nothing is being serialized, once a frame without an event
    /// whose end has passed is counted.
    pub fn idle(&mut self, ctx: &Ctx) -> bool {
        if self.tx_on_wire && !self.tx_event && ctx.passed(self.tx_done_ps, self.tx_key) {
            self.finish_quiet();
        }
        self.tx.is_none()
    }

    fn finish_quiet(&mut self) {
        let pkt = self.tx.take().expect("a frame in serialization");
        self.tx_on_wire = false;
        self.count_sent(&pkt);
    }

    /// Starts serializing `frame` until `done`, with its end-of-serialization event.
    #[inline(always)]
    fn serialize_with_end_event(&mut self, ctx: &mut Ctx, port: u32, frame: Packet, done: u64) {
        self.tx = Some(frame);
        self.tx_done_ps = done;
        self.tx_on_wire = false;
        self.tx_event = true;
        self.tx_key = ctx.schedule(
            done,
            NetEv {
                kind: EV_PORT_TX,
                id: port,
            },
        );
    }

    /// The frame in serialization gets its PortTx event (in its place) if
    /// it has none: something now waits behind it. The test inline, the
    /// scheduling (one call in six here) out of line.
    #[inline(always)]
    pub fn keep_end_event(&mut self, ctx: &mut Ctx, port: u32) {
        if self.tx.is_some() && !self.tx_event {
            self.schedule_end_event(ctx, port);
        }
    }

    #[inline(never)]
    fn schedule_end_event(&mut self, ctx: &mut Ctx, port: u32) {
        self.tx_event = true;
        let ev = NetEv {
            kind: EV_PORT_TX,
            id: port,
        };
        ctx.schedule_reserved(self.tx_done_ps, self.tx_key, ev);
    }

    /// Takes the frame in serialization back off the wire (it is lost or
    /// will be drawn for loss at its end); its end gets an event.
    pub fn recall_from_wire(&mut self, ctx: &mut Ctx, port: u32) {
        if self.tx_on_wire && !self.idle(ctx) {
            self.wire.pop_back().expect("the frame in serialization");
            self.tx_on_wire = false;
            self.keep_end_event(ctx, port);
        }
    }

    /// Time `quanta` pause quanta last at this port's rate.
    fn pause_ps(&self, quanta: u16) -> u64 {
        let bits = quanta as u128 * QUANTUM_BITS as u128 * PS_PER_S as u128;
        ((bits + self.rate_bps as u128 / 2) / self.rate_bps as u128) as u64
    }
}

impl PacketNet {
    /// Queues `pkt` at egress `port` (or drops it) and starts the port if idle.
    #[inline]
    pub(super) fn enqueue(&mut self, ctx: &mut Ctx, port: u32, pkt: Packet) {
        if self.pfc.is_some() || self.buffers.is_some() {
            self.enqueue_shared_or_lossless(ctx, port, pkt);
            return;
        }
        // Without PFC and shared buffers: what `enqueue_shared_or_lossless`
        // does when no class is lossless and no switch shares a buffer.
        let p = &mut self.ports[port as usize];
        p.account_queue(ctx.now);
        let res = if p.up {
            p.qdisc.enqueue_inlined(pkt)
        } else {
            p.qdisc.count_drop(pkt.class); // the link is down
            Enqueued::Dropped
        };
        if res == Enqueued::Dropped {
            self.dropped(ctx, port, &pkt);
            return;
        }
        let idle = p.count_queued(ctx, res);
        if ctx.probed() {
            queued_events(ctx, p, port, &pkt, res);
        }
        if idle && p.tx.is_none() {
            self.start_tx(ctx, port);
        } else {
            p.keep_end_event(ctx, port);
        }
    }

    /// A packet dropped on its way into `port`'s queue.
    fn dropped(&mut self, ctx: &mut Ctx, port: u32, pkt: &Packet) {
        let p = &mut self.ports[port as usize];
        p.stats.drops += 1;
        if ctx.probed() {
            let band = p.qdisc.band_of(pkt.class) as u8;
            ctx.port_event(port, band, PortEvent::Drop, pkt.wire);
        }
        self.lost(port, pkt);
    }

    /// [`enqueue`](Self::enqueue) with PFC or switches' shared buffers.
    fn enqueue_shared_or_lossless(&mut self, ctx: &mut Ctx, port: u32, pkt: Packet) {
        let lossless = self
            .pfc
            .as_ref()
            .is_some_and(|f| pkt.ingress != NO_PORT && f.is_lossless(pkt.class));
        // Aggregation packets a switch's accelerator (or a worker) sends in a
        // lossless class: their number is bounded by the workers' windows,
        // and the accelerator's buffer stands in for the ingress PFC counts.
        let agg_lossless = pkt.proto == PROTO_AGG
            && pkt.ingress == NO_PORT
            && self.pfc.as_ref().is_some_and(|f| f.is_lossless(pkt.class));
        let p = &mut self.ports[port as usize];
        p.account_queue(ctx.now);
        // The switch's shared buffer, if it has one (host NICs are outside it).
        let shared = self
            .buffers
            .as_ref()
            .filter(|_| !p.host_port)
            .map(|_| self.port_ends[port as usize].0);
        let res = if !p.up {
            p.qdisc.count_drop(pkt.class); // the link is down
            Enqueued::Dropped
        } else if agg_lossless {
            p.qdisc.enqueue_lossless(pkt)
        } else if lossless {
            let pfc = self.pfc.as_mut().expect("lossless needs PFC");
            if pfc.admits(pkt.ingress, pkt.class, pkt.wire) {
                p.qdisc.enqueue_lossless(pkt)
            } else {
                p.qdisc.count_drop(pkt.class); // headroom overflow
                Enqueued::Dropped
            }
        } else if let Some(node) = shared {
            let band = p.qdisc.band_of(pkt.class);
            if self.buffers.as_ref().expect("shared").admits(
                node,
                p.qdisc.band_bytes(band),
                pkt.wire,
            ) {
                p.qdisc.enqueue(pkt)
            } else {
                p.qdisc.count_drop(pkt.class); // above the dynamic threshold
                Enqueued::Dropped
            }
        } else {
            p.qdisc.enqueue(pkt)
        };
        if res == Enqueued::Dropped {
            self.dropped(ctx, port, &pkt);
            return;
        }
        let idle = p.count_queued(ctx, res);
        if let (Some(node), Some(buf)) = (shared, self.buffers.as_mut()) {
            buf.add(node, pkt.wire);
        }
        if ctx.probed() {
            queued_events(ctx, p, port, &pkt, res);
        }
        if lossless {
            let pfc = self.pfc.as_mut().expect("lossless needs PFC");
            let free = shared.and_then(|node| self.buffers.as_ref().map(|b| b.free(node)));
            if pfc.arrived(pkt.ingress, pkt.class, pkt.wire, free) == Signal::Xoff {
                let q = pfc.spec.pause_quanta;
                self.send_pause(ctx, pkt.ingress, pkt.class, q);
            }
        }
        if idle && self.ports[port as usize].tx.is_none() {
            self.start_tx(ctx, port);
        } else {
            self.ports[port as usize].keep_end_event(ctx, port);
        }
    }

    /// Starts serializing the next frame: a pending control frame first,
    /// else the next packet of a band that is not paused.
    pub(super) fn start_tx(&mut self, ctx: &mut Ctx, port: u32) {
        let p = &mut self.ports[port as usize];
        if !p.up {
            return;
        }
        if let Some(frame) = p.ctrl.pop_front() {
            let done = ctx.now + p.ser.get(frame.wire, p.rate_bps);
            p.serialize_with_end_event(ctx, port, frame, done);
            return;
        }
        p.account_queue(ctx.now);
        let Some(pkt) = p.qdisc.dequeue() else { return };
        let done = ctx.now + p.ser.get(pkt.wire, p.rate_bps);
        let host_port = p.host_port;
        if p.quiet_end(&pkt, done) {
            p.tx = Some(pkt);
            p.tx_done_ps = done;
            p.tx_key = ctx.reserve();
            p.tx_on_wire = true;
            p.tx_event = false;
            p.wire.push_back((done + p.delay_ps, pkt));
        } else {
            p.serialize_with_end_event(ctx, port, pkt, done);
        }
        if let Some(buf) = self.buffers.as_mut().filter(|_| !host_port) {
            buf.remove(self.port_ends[port as usize].0, pkt.wire);
        }
        if ctx.probed() {
            let band = p.qdisc.band_of(pkt.class) as u8;
            ctx.port_event(port, band, PortEvent::Dequeue, pkt.wire);
        }
        if let Some(pfc) = self
            .pfc
            .as_mut()
            .filter(|f| pkt.ingress != NO_PORT && f.is_lossless(pkt.class))
        {
            if pfc.departed(pkt.ingress, pkt.class, pkt.wire) == Signal::Xon {
                self.send_pause(ctx, pkt.ingress, pkt.class, 0);
            }
        }
    }

    /// Returns false for a stale event (the frame was lost when its link went down).
    #[inline]
    pub(super) fn on_tx_done(&mut self, ctx: &mut Ctx, port: u32) -> bool {
        let p = &mut self.ports[port as usize];
        if p.tx.is_none() || p.tx_done_ps != ctx.now {
            return false;
        }
        let pkt = p.tx.take().expect("checked");
        p.count_sent(&pkt);
        if std::mem::take(&mut p.tx_on_wire) {
            // On the wire since it started; something waits behind it.
            self.start_tx(ctx, port);
            return true;
        }
        let lost = p.loss > 0.0 && self.loss_rng.gen::<f64>() < p.loss;
        if lost {
            p.stats.drops += 1;
        } else {
            let arrive = ctx.now + p.delay_ps;
            p.wire.push_back((arrive, pkt));
            if p.wire.len() == 1 {
                ctx.schedule(
                    arrive,
                    NetEv {
                        kind: EV_WIRE_HEAD,
                        id: port,
                    },
                );
            }
        }
        let host_data = p.host_port && pkt.proto == PROTO_TCP && !pkt.is_ack();
        if lost && pkt.proto != PROTO_PAUSE {
            // Lost on the wire: out of the network; a host's data still left its NIC (below).
            self.packets_in_network -= 1;
            self.free_vector(&pkt);
        }
        self.start_tx(ctx, port);
        if p_host_agg(&self.ports[port as usize], &pkt) {
            self.agg_left_nic(ctx, self.port_ends[port as usize].0, &pkt);
        }
        if host_data {
            if let Some(conn) = self.conns[pkt.conn as usize].as_deref_mut() {
                conn.nic_bytes -= pkt.payload as u64;
                if let Some(r) = conn.rocket.as_deref_mut() {
                    let edge = self
                        .rocket
                        .as_mut()
                        .expect("a connection's rocket has the backend's");
                    edge.departed(r, pkt.tag, pkt.seq, ctx.now);
                }
                // The budget it frees matters only to a sender it limited.
                if conn.sender.needs_poll(ctx.now) {
                    self.poll_conn(ctx, pkt.conn);
                }
            }
        }
        true
    }

    /// Bookkeeping of a TCP packet lost before or in a queue: out of the
    /// network, and a host's data no longer counts against its connection's
    /// NIC budget (TCP Small Queues). Its sender learns by timeout or
    /// duplicate ACKs, as with any loss.
    pub(super) fn lost(&mut self, port: u32, pkt: &Packet) {
        if pkt.proto == PROTO_PAUSE {
            return;
        }
        self.free_vector(pkt);
        self.packets_in_network -= 1;
        if p_host_agg(&self.ports[port as usize], pkt) {
            let host = self.port_ends[port as usize].0;
            if let Some(hosts) = self.agg.as_mut() {
                hosts.forget_nic(host, pkt);
            }
        }
        if self.ports[port as usize].host_port
            && pkt.proto == PROTO_TCP
            && !pkt.is_ack()
            && pkt.ingress == NO_PORT
        {
            if let Some(conn) = self.conns[pkt.conn as usize].as_deref_mut() {
                conn.nic_bytes -= pkt.payload as u64;
            }
        }
    }

    /// Sends a PAUSE for `class` (`quanta` 0: XON) back over the link that
    /// `ingress` arrives on; an XOFF is refreshed every half pause time.
    pub(super) fn send_pause(&mut self, ctx: &mut Ctx, ingress: u32, class: u8, quanta: u16) {
        let out = ingress ^ 1;
        let p = &mut self.ports[out as usize];
        p.ctrl.push_back(Packet::pause(class, quanta));
        if quanta > 0 {
            let half = (p.pause_ps(quanta) / 2).max(1);
            let at = ctx.now + half;
            self.pfc
                .as_mut()
                .expect("PFC on")
                .arm_refresh(ingress, class, at);
            ctx.schedule(
                at,
                NetEv {
                    kind: EV_PFC_REFRESH,
                    id: ingress * 8 + class as u32,
                },
            );
        }
        if self.ports[out as usize].idle(ctx) {
            self.start_tx(ctx, out);
        } else {
            self.ports[out as usize].keep_end_event(ctx, out);
        }
    }

    pub(super) fn on_pfc_refresh(&mut self, ctx: &mut Ctx, ingress: u32, class: u8) -> bool {
        let pfc = self.pfc.as_ref().expect("PFC on");
        if !pfc.refresh_due(ingress, class, ctx.now) {
            return false; // XON sent since, or re-armed
        }
        let q = pfc.spec.pause_quanta;
        self.send_pause(ctx, ingress, class, q);
        true
    }

    /// A PAUSE frame for `class` arrived at the node owning egress `port`.
    pub(super) fn on_pause(&mut self, ctx: &mut Ctx, port: u32, class: u8, quanta: u16) {
        if quanta == 0 {
            self.resume(ctx, port, class);
            return;
        }
        let p = &mut self.ports[port as usize];
        let c = class as usize & 7;
        let end = ctx.now + p.pause_ps(quanta);
        let times = p.pause_times.get_or_insert_with(Default::default);
        if p.paused & (1 << c) == 0 {
            p.paused |= 1 << c;
            times.since_ps[c] = ctx.now;
            p.qdisc.set_paused_classes(p.paused);
            if ctx.probed() {
                let band = p.qdisc.band_of(class) as u8;
                ctx.port_event(port, band, PortEvent::Pause, 0);
            }
        }
        times.end_ps[c] = end;
        ctx.schedule(
            end,
            NetEv {
                kind: EV_PAUSE_END,
                id: port * 8 + c as u32,
            },
        );
    }

    pub(super) fn on_pause_end(&mut self, ctx: &mut Ctx, port: u32, class: u8) -> bool {
        let p = &self.ports[port as usize];
        let c = class as usize & 7;
        if p.paused & (1 << c) == 0
            || p.pause_times
                .as_ref()
                .is_none_or(|t| t.end_ps[c] != ctx.now)
        {
            return false; // resumed by XON, or extended by a refresh
        }
        self.resume(ctx, port, class);
        true
    }

    fn resume(&mut self, ctx: &mut Ctx, port: u32, class: u8) {
        let p = &mut self.ports[port as usize];
        let c = class as usize & 7;
        if p.paused & (1 << c) == 0 {
            return;
        }
        p.paused &= !(1 << c);
        p.stats.paused_ps += ctx.now - p.pause_times.as_ref().expect("paused").since_ps[c];
        p.qdisc.set_paused_classes(p.paused);
        if ctx.probed() {
            let band = p.qdisc.band_of(class) as u8;
            ctx.port_event(port, band, PortEvent::Resume, 0);
        }
        if p.idle(ctx) {
            self.start_tx(ctx, port);
        } else {
            p.keep_end_event(ctx, port);
        }
    }

    /// Counts every frame that went onto the wire at its start and whose
    /// end lies before `upto`; returns the latest such end.
    pub(super) fn settle_ports(&mut self, upto: Position) -> Option<u64> {
        let mut last = None;
        for p in self.ports.iter_mut() {
            if p.tx_on_wire && !p.tx_event && Position::of(p.tx_done_ps, p.tx_key) < upto {
                last = last.max(Some(p.tx_done_ps));
                p.finish_quiet();
            }
        }
        last
    }
}

/// Tells the probes that `pkt` was queued (and marked) at `port`.
fn queued_events(ctx: &mut Ctx, p: &Port, port: u32, pkt: &Packet, res: Enqueued) {
    let band = p.qdisc.band_of(pkt.class) as u8;
    if res == Enqueued::Marked {
        ctx.port_event(port, band, PortEvent::Mark, pkt.wire);
    }
    ctx.port_event(port, band, PortEvent::Enqueue, pkt.wire);
}

/// A worker's own aggregation packet at its NIC port.
fn p_host_agg(p: &Port, pkt: &Packet) -> bool {
    p.host_port && pkt.proto == PROTO_AGG && pkt.ingress == NO_PORT
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::packet::qdisc::{Discipline, QueueSpec};

    /// Every frame size gets its exact serialization time, whatever sizes
    /// came before (sizes sharing a slot included), and a port whose rate
    /// changes serializes at the new rate from the next frame on.
    #[test]
    fn cached_serialization_times_are_exact_across_sizes_and_rate_changes() {
        let spec = QueueSpec {
            discipline: Discipline::Fifo,
            bands: 1,
            priomap: [0; 8],
            limit_bytes: None,
            limit_packets: None,
            ecn_threshold_bytes: None,
            ecn_threshold_packets: None,
            ecn_kmin_bytes: None,
            ecn_kmax_bytes: None,
            ecn_pmax: None,
        };
        let mut p = Port::new(false, 0, 1, 10_000_000_000, 0, Qdisc::new(&spec));
        let sizes = [1538, 84, 84, 1538, 300, 1538, 255, 256, 0, 9038, 84, 1538];
        for rate in [10_000_000_000, 25_000_000_000, 1_000_000_007] {
            p.set_rate(rate);
            for &w in sizes.iter().chain(sizes.iter().rev()) {
                assert_eq!(
                    p.ser.get(w, p.rate_bps),
                    ser_time_ps(w as u64, rate),
                    "{w} B at {rate}"
                );
            }
        }
    }
}

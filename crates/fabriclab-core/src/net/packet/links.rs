//! Link events in the packet backend: a link goes down (its queues, the
//! frames in serialization and on its wire are lost) or up, changes its
//! rate, or starts losing frames; routing moves connections onto new routes.

use super::header::{Packet, NO_PORT, PROTO_PAUSE};
use super::pfc::Signal;
use super::PacketNet;
use crate::engine::{Ctx, LinkChange, PortEvent};

impl PacketNet {
    pub(super) fn apply_link_change(&mut self, ctx: &mut Ctx, link: u32, change: LinkChange) {
        for port in [2 * link, 2 * link + 1] {
            match change {
                LinkChange::Down => self.port_down(ctx, port),
                LinkChange::Up => {
                    let p = &mut self.ports[port as usize];
                    p.up = true;
                    if p.idle(ctx) {
                        self.start_tx(ctx, port);
                    }
                }
                LinkChange::Rate(r) => self.ports[port as usize].set_rate(r),
                LinkChange::Loss(x) => {
                    // A frame in serialization is drawn for loss at its end.
                    let p = &mut self.ports[port as usize];
                    p.recall_from_wire(ctx, port);
                    p.loss = x;
                }
            }
        }
    }

    /// Everything queued at, in serialization on, or on the wire of `port` is lost.
    fn port_down(&mut self, ctx: &mut Ctx, port: u32) {
        let p = &mut self.ports[port as usize];
        // The frame in serialization is lost, not the wire's (it has not ended).
        p.recall_from_wire(ctx, port);
        p.up = false;
        p.account_queue(ctx.now);
        let queued: Vec<Packet> = std::iter::from_fn(|| p.qdisc.dequeue_any()).collect();
        let in_tx = p.tx.take();
        let on_wire: Vec<Packet> = p.wire.drain(..).map(|(_, pkt)| pkt).collect();
        p.ctrl.clear();
        p.stats.drops += (queued.len() + in_tx.iter().count() + on_wire.len()) as u64;
        if ctx.probed() {
            for pkt in queued.iter().chain(in_tx.iter()).chain(on_wire.iter()) {
                let band = self.ports[port as usize].qdisc.band_of(pkt.class) as u8;
                ctx.port_event(port, band, PortEvent::Drop, pkt.wire);
            }
        }
        if let Some(buf) = self
            .buffers
            .as_mut()
            .filter(|_| !self.ports[port as usize].host_port)
        {
            for pkt in &queued {
                buf.remove(self.port_ends[port as usize].0, pkt.wire);
            }
        }
        for pkt in &queued {
            // A packet queued at a switch held PFC buffer for its ingress.
            if pkt.ingress != NO_PORT {
                if let Some(pfc) = self.pfc.as_mut().filter(|f| f.is_lossless(pkt.class)) {
                    if pfc.departed(pkt.ingress, pkt.class, pkt.wire) == Signal::Xon {
                        self.send_pause(ctx, pkt.ingress, pkt.class, 0);
                    }
                }
            }
            self.lost(port, pkt);
        }
        if let Some(pkt) = in_tx {
            self.lost(port, &pkt);
        }
        // Frames on the wire had left their NIC already: only out of the network.
        self.packets_in_network -= on_wire.iter().filter(|p| p.proto != PROTO_PAUSE).count();
        for pkt in &on_wire {
            self.free_vector(pkt);
        }
    }

    pub(super) fn live(&self, out: &mut Vec<u32>) {
        out.extend(
            self.conns
                .iter()
                .enumerate()
                .filter(|(_, c)| c.is_some())
                .map(|(i, _)| i as u32),
        );
    }

    /// New packets of `msg` (data, retransmissions, ACKs) take the new
    /// routes; false when its connection has finished.
    pub(super) fn set_routes(&mut self, msg: u32, fwd: Vec<u32>, rev: Vec<u32>) -> bool {
        let Some(Some(conn)) = self.conns.get(msg as usize) else {
            return false;
        };
        let (at_fwd, at_rev) = (conn.fwd, conn.rev);
        if *self.route(at_fwd) == *fwd && *self.route(at_rev) == *rev {
            return true;
        }
        let (at_fwd, at_rev) = (self.add_route(&fwd), self.add_route(&rev));
        let conn = self.conns[msg as usize].as_deref_mut().expect("live");
        conn.old_routes
            .push(std::mem::replace(&mut conn.fwd, at_fwd));
        conn.old_routes
            .push(std::mem::replace(&mut conn.rev, at_rev));
        true
    }
}

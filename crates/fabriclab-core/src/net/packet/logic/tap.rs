//! A tap: counts the packets of one class a switch receives, mirrors each
//! to a port (as a port-mirroring session does, toward an analyzer), and
//! optionally absorbs them instead of forwarding (a sink).

use super::{LogicCtx, SwitchLogic, Verdict};
use crate::net::packet::header::{Packet, PROTO_MIRROR};

pub struct Tap {
    class: u8,
    mirror_port: Option<u32>,
    absorb: bool,
    seen: u64,
    seen_bytes: u64,
    mirrored: u64,
}

impl Tap {
    pub fn new(class: u8, mirror_port: Option<u32>, absorb: bool) -> Tap {
        Tap {
            class,
            mirror_port,
            absorb,
            seen: 0,
            seen_bytes: 0,
            mirrored: 0,
        }
    }
}

impl SwitchLogic for Tap {
    fn on_packet(&mut self, ctx: &mut LogicCtx, _ingress: u32, pkt: &Packet) -> Verdict {
        if pkt.class != self.class {
            return Verdict::Forward;
        }
        self.seen += 1;
        self.seen_bytes += pkt.wire as u64;
        if let Some(port) = self.mirror_port {
            let mut copy = *pkt;
            copy.proto = PROTO_MIRROR;
            ctx.emit.push((port, copy));
            self.mirrored += 1;
        }
        if self.absorb {
            Verdict::Absorb
        } else {
            Verdict::Forward
        }
    }

    fn counters(&self) -> Vec<(String, u64)> {
        vec![
            ("packets".into(), self.seen),
            ("wire_bytes".into(), self.seen_bytes),
            ("mirrored".into(), self.mirrored),
        ]
    }
}

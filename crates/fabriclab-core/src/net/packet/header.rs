//! The packet header carried through the packet backend's ports and wires.

pub const FLAG_ACK: u8 = 1;
/// ECN-capable transport (RFC 3168 ECT codepoint).
pub const FLAG_ECT: u8 = 2;
/// Congestion experienced, set by a marking queue.
pub const FLAG_CE: u8 = 4;
/// ECN echo on an ACK.
pub const FLAG_ECE: u8 = 8;
/// A TCP SYN (with [`FLAG_ACK`]: a SYN-ACK); no payload.
pub const FLAG_SYN: u8 = 64;

/// Protocol of a packet: a TCP segment or ACK of a connection.
pub const PROTO_TCP: u8 = 0;
/// An IEEE 802.1Qbb PFC PAUSE frame (MAC control): `class` is the priority
/// it pauses, `seq` its pause time in quanta of 512 bit times (0 resumes).
pub const PROTO_PAUSE: u8 = 1;

/// A copy made by a switch's logic (port mirroring). Packets of protocols
/// other than TCP and PAUSE are not source-routed: the node they reach
/// hands them to its logic, or absorbs them if it has none.
pub const PROTO_MIRROR: u8 = 2;

/// Wire bytes of a MAC control frame: the 64-byte minimum frame plus
/// preamble and inter-frame gap.
pub const PAUSE_WIRE_BYTES: u32 = 84;

/// No ingress port: the packet has not yet crossed a link.
pub const NO_PORT: u32 = u32::MAX;

/// A packet in flight. TCP data packets carry `seq` = first byte; ACKs carry
/// `seq` = cumulative acknowledgment number.
#[derive(Debug, Clone, Copy)]
pub struct Packet {
    pub conn: u32,
    pub seq: u64,
    pub payload: u32,
    pub wire: u32,
    /// The port (link direction) it last arrived over, while held by a switch.
    pub ingress: u32,
    /// Where in the backend's route arena the egress port it was last
    /// queued at lies (a source-routed packet's next hop is the entry after
    /// it); it keeps the route it was sent on when routing moves its
    /// connection. An aggregation packet keeps its vector's slot here.
    pub at: u32,
    pub class: u8,
    pub flags: u8,
    pub proto: u8,
    /// Packet Rocket's slot (data and its ACK): where the connection's side
    /// table keeps this packet's send stamp and echoed one-way delay. It
    /// fills the header's spare byte, so the header stays 32 bytes.
    pub tag: u8,
}

impl Packet {
    /// A TCP packet of connection `conn` that has not left its host yet.
    pub fn tcp(conn: u32, seq: u64, payload: u32, wire: u32, class: u8, flags: u8) -> Packet {
        Packet {
            conn,
            seq,
            payload,
            wire,
            ingress: NO_PORT,
            at: 0,
            class,
            flags,
            proto: PROTO_TCP,
            tag: 0,
        }
    }
    /// A PFC PAUSE frame for priority `class`.
    pub fn pause(class: u8, quanta: u16) -> Packet {
        Packet {
            conn: 0,
            seq: quanta as u64,
            payload: 0,
            wire: PAUSE_WIRE_BYTES,
            ingress: NO_PORT,
            at: 0,
            class,
            flags: 0,
            proto: PROTO_PAUSE,
            tag: 0,
        }
    }
    #[inline]
    pub fn is_ack(&self) -> bool {
        self.flags & FLAG_ACK != 0
    }
}

/// An in-network aggregation packet (PANAMA's figure 4), not source-routed:
/// the aggregation logic of each switch it reaches forwards it, and a
/// worker host's aggregation transport takes it at the end. Its header
/// lives in the copyable fields: `conn` = job << 8 | tree, `seq` = VID |
/// cwnd_cap << 32 | workers << 48, `payload` = the UDP payload (16-byte
/// header and the vector), `flags` the ECN bits ([`FLAG_ECT`], [`FLAG_CE`])
/// with [`FLAG_FIN`] and [`FLAG_RESULT`].
pub const PROTO_AGG: u8 = 3;
/// The worker's last VID of a round (aggregation packets).
pub const FLAG_FIN: u8 = 16;
/// A result on its way down the tree (aggregation packets).
pub const FLAG_RESULT: u8 = 32;

impl Packet {
    /// The aggregation packet with header `h`, in traffic class `class`.
    pub fn agg(h: &fabriclab_agg::wire::Header, class: u8) -> Packet {
        use fabriclab_agg::wire::{ECN_CE, ECN_NOT_ECT};
        let mut flags = match h.ecn {
            ECN_NOT_ECT => 0,
            ECN_CE => FLAG_ECT | FLAG_CE,
            _ => FLAG_ECT,
        };
        if h.fin {
            flags |= FLAG_FIN;
        }
        if h.result {
            flags |= FLAG_RESULT;
        }
        Packet {
            conn: (h.job as u32) << 8 | h.tree as u32,
            seq: h.vid as u64 | (h.cwnd_cap as u64) << 32 | (h.workers as u64) << 48,
            payload: h.payload_bytes(),
            wire: h.wire_bytes(),
            ingress: NO_PORT,
            at: 0,
            class,
            flags,
            proto: PROTO_AGG,
            tag: 0,
        }
    }

    /// The figure-4 header of an aggregation packet.
    pub fn agg_header(&self) -> fabriclab_agg::wire::Header {
        use fabriclab_agg::wire::{Header, ECN_CE, ECN_ECT0, ECN_NOT_ECT, HEADER_BYTES};
        Header {
            job: (self.conn >> 8) as u16,
            tree: self.conn as u8,
            vid: self.seq as u32,
            fin: self.flags & FLAG_FIN != 0,
            result: self.flags & FLAG_RESULT != 0,
            ecn: if self.flags & FLAG_CE != 0 {
                ECN_CE
            } else if self.flags & FLAG_ECT != 0 {
                ECN_ECT0
            } else {
                ECN_NOT_ECT
            },
            cwnd_cap: (self.seq >> 32) as u16,
            count: ((self.payload - HEADER_BYTES as u32) / 4) as u16,
            workers: (self.seq >> 48) as u16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabriclab_agg::wire::{Header, ECN_CE};

    #[test]
    fn the_header_stays_32_bytes() {
        // 8 + 5 x 4 + 4 x 1 bytes: Packet Rocket's tag took the spare byte.
        assert_eq!(std::mem::size_of::<Packet>(), 32);
    }

    #[test]
    fn an_aggregation_header_survives_the_packet_fields() {
        let h = Header {
            job: 513,
            tree: 7,
            vid: 0xdead_beef,
            fin: true,
            result: true,
            ecn: ECN_CE,
            cwnd_cap: 40_000,
            count: 256,
            workers: 65_000,
        };
        let p = Packet::agg(&h, 3);
        assert_eq!(p.agg_header(), h);
        assert_eq!((p.payload, p.wire), (16 + 1024, 16 + 1024 + 66));
        assert_eq!(p.flags & (FLAG_ECT | FLAG_CE), FLAG_ECT | FLAG_CE);
    }
}

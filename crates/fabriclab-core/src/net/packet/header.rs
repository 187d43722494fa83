//! The packet header carried through the packet backend's ports and wires.

pub const FLAG_ACK: u8 = 1;
/// ECN-capable transport (RFC 3168 ECT codepoint).
pub const FLAG_ECT: u8 = 2;
/// Congestion experienced, set by a marking queue.
pub const FLAG_CE: u8 = 4;
/// ECN echo on an ACK.
pub const FLAG_ECE: u8 = 8;

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
    pub hop: u16,
    /// Which of its connection's routes it follows (routes change when
    /// routing converges after a link event; packets finish on theirs).
    pub route: u16,
    pub class: u8,
    pub flags: u8,
    pub proto: u8,
}

impl Packet {
    /// A TCP packet of connection `conn` that has not left its host yet.
    pub fn tcp(conn: u32, seq: u64, payload: u32, wire: u32, class: u8, flags: u8) -> Packet {
        Packet { conn, seq, payload, wire, ingress: NO_PORT, hop: 0, route: 0, class, flags, proto: PROTO_TCP }
    }
    /// A PFC PAUSE frame for priority `class`.
    pub fn pause(class: u8, quanta: u16) -> Packet {
        Packet {
            conn: 0,
            seq: quanta as u64,
            payload: 0,
            wire: PAUSE_WIRE_BYTES,
            ingress: NO_PORT,
            hop: 0,
            route: 0,
            class,
            flags: 0,
            proto: PROTO_PAUSE,
        }
    }
    #[inline]
    pub fn is_ack(&self) -> bool {
        self.flags & FLAG_ACK != 0
    }
}

//! The packet header carried through the packet backend's ports and wires.

pub const FLAG_ACK: u8 = 1;
/// ECN-capable transport (RFC 3168 ECT codepoint).
pub const FLAG_ECT: u8 = 2;
/// Congestion experienced, set by a marking queue.
pub const FLAG_CE: u8 = 4;
/// ECN echo on an ACK.
pub const FLAG_ECE: u8 = 8;

/// A packet in flight. Data packets carry `seq` = first byte; ACKs carry
/// `seq` = cumulative acknowledgment number.
#[derive(Debug, Clone, Copy)]
pub struct Packet {
    pub conn: u32,
    pub seq: u64,
    pub payload: u32,
    pub wire: u32,
    pub hop: u16,
    pub class: u8,
    pub flags: u8,
}

impl Packet {
    #[inline]
    pub fn is_ack(&self) -> bool {
        self.flags & FLAG_ACK != 0
    }
}

//! Frame sizes on the wire (used by routing's ideal FCT, both backends and
//! the packet header).
//!
//! A data segment carries `payload` bytes behind 20 bytes of IPv4 and 20 of
//! TCP header (RFC 791, RFC 9293), inside an Ethernet frame with 14 bytes of
//! header and 4 of FCS, padded to the 64-byte minimum frame, plus 8 bytes of
//! preamble and 12 of inter-frame gap (IEEE 802.3). A full 1460-byte MSS
//! segment (1500-byte MTU) thus occupies 1538 bytes of wire time; a pure ACK
//! occupies 84.

pub const IP_TCP_HEADER_BYTES: u32 = 40;
pub const ETH_HEADER_FCS_BYTES: u32 = 18;
pub const ETH_MIN_FRAME_BYTES: u32 = 64;
pub const ETH_PREAMBLE_IFG_BYTES: u32 = 20;

/// Bytes of wire time taken by a TCP/IP packet with `payload` bytes of data.
#[inline]
pub const fn wire_bytes(payload: u32) -> u32 {
    let frame = payload + IP_TCP_HEADER_BYTES + ETH_HEADER_FCS_BYTES;
    let frame = if frame < ETH_MIN_FRAME_BYTES {
        ETH_MIN_FRAME_BYTES
    } else {
        frame
    };
    frame + ETH_PREAMBLE_IFG_BYTES
}

//! The aggregation packet (PANAMA's figure 4). On a real network it is the
//! payload of a UDP datagram whose IPv4 header has DSCP 56 (the class the
//! accelerator's parser looks for) and the ECN field; the header below
//! follows, then the gradient vector as little-endian float32.
//!
//! ```text
//!  0      2     3      4          8          10        12        14     16
//!  | JID  | TID | flags| VID      | cwnd_cap | count   | workers | rsvd |  f32 x count ...
//! ```
//!
//! `flags`: bit 0 FIN (the worker's last VID on this tree), bit 1 RESULT
//! (an aggregated result going down the tree), bits 2-3 the ECN codepoint
//! (RFC 3168: 01/10 ECT, 11 CE), mirrored from the IP header by the
//! software aggregator, carried as is by the simulator. `count` is the
//! number of floats; `workers` how many workers' vectors the packet sums
//! (1 from a worker), so partial aggregation can say what it covered.

/// DSCP of aggregation packets (section 5: "DSCP value 56").
pub const DSCP_AGG: u8 = 56;
pub const HEADER_BYTES: usize = 16;
/// Bytes a packet adds on an Ethernet wire beyond its aggregation header and
/// vector: preamble and gap 20, Ethernet header 14 and FCS 4, IPv4 20, UDP 8.
pub const WIRE_OVERHEAD_BYTES: u32 = 20 + 14 + 4 + 20 + 8;

pub const FLAG_FIN: u8 = 1;
pub const FLAG_RESULT: u8 = 2;
pub const ECN_SHIFT: u8 = 2;
/// RFC 3168 codepoints.
pub const ECN_NOT_ECT: u8 = 0;
pub const ECN_ECT0: u8 = 2;
pub const ECN_CE: u8 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    pub job: u16,
    pub tree: u8,
    pub vid: u32,
    pub fin: bool,
    pub result: bool,
    pub ecn: u8,
    pub cwnd_cap: u16,
    pub count: u16,
    pub workers: u16,
}

impl Header {
    pub fn ce(&self) -> bool {
        self.ecn == ECN_CE
    }
    /// Bytes of header and vector (the UDP payload).
    pub fn payload_bytes(&self) -> u32 {
        HEADER_BYTES as u32 + 4 * self.count as u32
    }
    /// Bytes on an Ethernet wire, preamble and gap included.
    pub fn wire_bytes(&self) -> u32 {
        self.payload_bytes() + WIRE_OVERHEAD_BYTES
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.job.to_be_bytes());
        out.push(self.tree);
        out.push((self.fin as u8) | (self.result as u8) << 1 | (self.ecn & 3) << ECN_SHIFT);
        out.extend_from_slice(&self.vid.to_be_bytes());
        out.extend_from_slice(&self.cwnd_cap.to_be_bytes());
        out.extend_from_slice(&self.count.to_be_bytes());
        out.extend_from_slice(&self.workers.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
    }

    pub fn decode(b: &[u8]) -> Result<Header, WireError> {
        if b.len() < HEADER_BYTES {
            return Err(WireError::Short {
                got: b.len(),
                need: HEADER_BYTES,
            });
        }
        let u16_at = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let flags = b[3];
        if flags >> 4 != 0 {
            return Err(WireError::Flags(flags));
        }
        let h = Header {
            job: u16_at(0),
            tree: b[2],
            fin: flags & FLAG_FIN != 0,
            result: flags & FLAG_RESULT != 0,
            ecn: (flags >> ECN_SHIFT) & 3,
            vid: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            cwnd_cap: u16_at(8),
            count: u16_at(10),
            workers: u16_at(12),
        };
        let need = h.payload_bytes() as usize;
        if b.len() != need {
            return Err(WireError::Length { got: b.len(), need });
        }
        Ok(h)
    }
}

/// A whole packet: header and vector.
pub fn encode_packet(h: &Header, v: &[f32], out: &mut Vec<u8>) {
    debug_assert_eq!(v.len(), h.count as usize);
    out.clear();
    h.encode(out);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

pub fn decode_packet(b: &[u8]) -> Result<(Header, Vec<f32>), WireError> {
    let h = Header::decode(b)?;
    let v = b[HEADER_BYTES..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok((h, v))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    Short { got: usize, need: usize },
    Length { got: usize, need: usize },
    Flags(u8),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Short { got, need } => write!(
                f,
                "aggregation packet of {got} bytes, shorter than its {need}-byte header"
            ),
            WireError::Length { got, need } => write!(
                f,
                "aggregation packet of {got} bytes; its header's count says {need}"
            ),
            WireError::Flags(x) => write!(f, "aggregation packet with unknown flag bits {x:#04x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_sizes_follow_the_layout() {
        let h = Header {
            job: 513,
            tree: 3,
            vid: 0x0102_0304,
            fin: true,
            result: false,
            ecn: ECN_CE,
            cwnd_cap: 77,
            count: 2,
            workers: 5,
        };
        let mut b = Vec::new();
        encode_packet(&h, &[1.5, -2.0], &mut b);
        // 16 header bytes + 2 floats; JID big-endian first, then TID, then flags FIN | CE << 2.
        assert_eq!(b.len(), 24);
        assert_eq!(&b[..4], &[2, 1, 3, 1 | 3 << 2]);
        assert_eq!(&b[4..8], &[1, 2, 3, 4]);
        assert_eq!(&b[16..20], &1.5f32.to_le_bytes());
        let (g, v) = decode_packet(&b).unwrap();
        assert_eq!(g, h);
        assert_eq!(v, vec![1.5, -2.0]);
        assert!(g.ce());
        // On the wire: 24 + preamble/gap 20 + Ethernet 18 + IPv4 20 + UDP 8.
        assert_eq!(h.wire_bytes(), 24 + 66);
    }

    #[test]
    fn bad_packets_are_refused() {
        assert_eq!(
            Header::decode(&[0; 8]),
            Err(WireError::Short { got: 8, need: 16 })
        );
        let mut b = Vec::new();
        Header {
            count: 3,
            ..Default::default()
        }
        .encode(&mut b);
        assert_eq!(
            Header::decode(&b),
            Err(WireError::Length { got: 16, need: 28 })
        );
        b[3] = 0x10;
        assert_eq!(Header::decode(&b), Err(WireError::Flags(0x10)));
    }
}

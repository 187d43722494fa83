//! The wire format: control frames for the handshakes and the fixed
//! 48-byte header of every data and abort message. See docs/runtime.md.

use serde::{de::DeserializeOwned, Serialize};
use std::io::{Read, Write};

/// `FLRT` in little endian: the first four bytes of every message header.
pub const MAGIC: u32 = u32::from_le_bytes(*b"FLRT");
/// The handshake protocol name, checked on every connection.
pub const PROTOCOL: &str = "fabriclab-runtime/1";
pub const HEADER_BYTES: usize = 48;
/// Largest control frame accepted (handshakes carry an address table).
pub const MAX_CONTROL_BYTES: u32 = 1 << 20;

pub const KIND_DATA: u8 = 1;
pub const KIND_ABORT: u8 = 2;
/// A liveness beat: header only, sent when the connection is otherwise idle.
pub const KIND_HEARTBEAT: u8 = 3;
/// Packet Rocket's echo, header only: `aux` is the echoed data message's
/// send stamp, `offset` the one-way delay the receiver read (i64 ns).
pub const KIND_ECHO: u8 = 4;
pub const FLAG_CHECKSUM: u8 = 1;
/// On an abort: the sender is still tracing whom to blame (docs/runtime.md).
pub const FLAG_PROVISIONAL: u8 = 2;
/// On data: `aux` is the send stamp (the low 32 bits of the sender's
/// CLOCK_REALTIME in ns, read modulo 2^32: crate::edge), to be echoed.
pub const FLAG_STAMPED: u8 = 4;

/// A message header. Data: `seq` is the message's index among this op's
/// messages from the sender to the receiver (the k of "k-th send matches
/// k-th receive"); `offset` and `len_bytes` the byte range of the buffer.
/// Abort: `aux` is the rank the sender blames, the payload a UTF-8 reason.
/// Data with FLAG_STAMPED, and echoes: `aux` is a send stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: u8,
    pub flags: u8,
    pub op_id: u64,
    pub seq: u32,
    pub aux: u32,
    pub offset: u64,
    pub len_bytes: u64,
    pub payload_crc: u32,
}

impl Header {
    /// Packet Rocket's echo (docs/clockwork-control.md, "Packet Rocket in the runtime"): a header-only message carrying
    /// the data message's stamp back in `aux` and the receiver's one-way delay reading (ns, signed) in `offset`.
    pub fn echo(stamp: u32, owd_ns: i64) -> Header {
        Header {
            kind: KIND_ECHO,
            flags: 0,
            op_id: 0,
            seq: 0,
            aux: stamp,
            offset: owd_ns as u64,
            len_bytes: 0,
            payload_crc: 0,
        }
    }

    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4] = self.kind;
        b[5] = self.flags;
        b[8..16].copy_from_slice(&self.op_id.to_le_bytes());
        b[16..20].copy_from_slice(&self.seq.to_le_bytes());
        b[20..24].copy_from_slice(&self.aux.to_le_bytes());
        b[24..32].copy_from_slice(&self.offset.to_le_bytes());
        b[32..40].copy_from_slice(&self.len_bytes.to_le_bytes());
        b[40..44].copy_from_slice(&self.payload_crc.to_le_bytes());
        let hc = crc32fast::hash(&b[0..44]);
        b[44..48].copy_from_slice(&hc.to_le_bytes());
        b
    }

    /// Decodes and checks the magic and the header's own checksum (always on,
    /// so a corrupted length is caught before anything is allocated).
    pub fn decode(b: &[u8; HEADER_BYTES]) -> Result<Header, String> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        if u32_at(0) != MAGIC {
            return Err("bad magic (not a fabriclab runtime message)".into());
        }
        if crc32fast::hash(&b[0..44]) != u32_at(44) {
            return Err("header checksum mismatch (corrupted header)".into());
        }
        let h = Header {
            kind: b[4],
            flags: b[5],
            op_id: u64_at(8),
            seq: u32_at(16),
            aux: u32_at(20),
            offset: u64_at(24),
            len_bytes: u64_at(32),
            payload_crc: u32_at(40),
        };
        if !matches!(h.kind, KIND_DATA | KIND_ABORT | KIND_HEARTBEAT | KIND_ECHO) {
            return Err(format!("unknown message kind {}", h.kind));
        }
        Ok(h)
    }
}

/// Writes one control frame: a u32 length, then JSON.
pub fn write_control<T: Serialize>(w: &mut impl Write, v: &T) -> std::io::Result<()> {
    let body = serde_json::to_vec(v).map_err(std::io::Error::other)?;
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    w.write_all(&out)?;
    w.flush()
}

/// Reads one control frame written by [`write_control`].
pub fn read_control<T: DeserializeOwned>(r: &mut impl Read) -> Result<T, String> {
    let mut lb = [0u8; 4];
    r.read_exact(&mut lb)
        .map_err(|e| format!("reading a handshake: {e}"))?;
    let n = u32::from_le_bytes(lb);
    if n > MAX_CONTROL_BYTES {
        return Err(format!(
            "handshake frame of {n} bytes is larger than {MAX_CONTROL_BYTES} (not a fabriclab peer?)"
        ));
    }
    let mut body = vec![0u8; n as usize];
    r.read_exact(&mut body)
        .map_err(|e| format!("reading a handshake: {e}"))?;
    serde_json::from_slice(&body).map_err(|e| format!("handshake is not valid: {e}"))
}

/// Token comparison that does not stop at the first differing byte.
pub fn token_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip_and_corruption() {
        let h = Header {
            kind: KIND_DATA,
            flags: FLAG_CHECKSUM,
            op_id: 7,
            seq: 3,
            aux: 0,
            offset: 4096,
            len_bytes: 12,
            payload_crc: 0xdead_beef,
        };
        let mut b = h.encode();
        assert_eq!(&b[0..4], b"FLRT");
        assert_eq!(Header::decode(&b).unwrap(), h);
        b[33] ^= 1; // the length
        assert!(Header::decode(&b).unwrap_err().contains("header checksum"));
    }

    #[test]
    fn tokens() {
        assert!(token_eq("abc", "abc"));
        assert!(!token_eq("abc", "abd"));
        assert!(!token_eq("abc", "abcd"));
    }
}

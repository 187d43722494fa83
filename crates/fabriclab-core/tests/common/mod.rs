//! Helpers shared by the transport tests (each test file is its own crate:
//! a file uses what it needs).
#![allow(dead_code)]

use fabriclab_core::transport::{Segment, SenderConfig, TcpSender};

/// Full 1460-byte segments (1538 bytes on the wire), an initial window of 10,
/// 1 ms minimum and initial RTO, 1 s maximum, three duplicate ACKs, no handshake.
pub fn sender_cfg() -> SenderConfig {
    SenderConfig {
        mss_bytes: 1460,
        init_cwnd_packets: 10,
        min_rto_ps: 1_000_000_000,
        initial_rto_ps: 1_000_000_000,
        max_rto_ps: 1_000_000_000_000,
        dupack_threshold: 3,
        handshake: false,
        wire_overhead_bytes: 78,
        sack: false,
    }
}

/// Every segment the sender has to send at `now`, with no pacing limit.
pub fn poll(s: &mut TcpSender, now: u64) -> Vec<Segment> {
    let mut v = vec![];
    s.poll(now, u64::MAX, &mut |seg| v.push(seg));
    v
}

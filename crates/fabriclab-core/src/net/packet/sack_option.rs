//! SACK options riding on ACKs (with `transport.sack`). The 32-byte packet
//! header has no room for three blocks, so a connection keeps the options
//! of its ACKs in flight, in the order it sent them, and an ACK carries its
//! option's number in `payload` (0: no option; an ACK has no payload). The
//! wire size of the ACK includes the option's bytes
//! ([`sack_option_bytes`]), so the network carries it as it would.
//!
//! ACKs of one connection follow one route and leave in order, so they
//! arrive in order: an arriving ACK's option is at the front, after those of
//! ACKs lost on the way (dropped here). An ACK overtaken by a later one (only
//! possible across a reroute) finds its option gone and is read without it.

use crate::fabric::frame::wire_bytes;
use crate::transport::sack::{sack_option_bytes, MAX_SACK_BLOCKS};
use std::collections::VecDeque;

type Blocks = [(u64, u64); MAX_SACK_BLOCKS];

#[derive(Debug, Default)]
pub(super) struct AckOptions {
    sent: VecDeque<(u32, u8, Blocks)>,
    next: u32,
}

impl AckOptions {
    /// Records the option of an ACK about to leave with `n` of `blocks`;
    /// returns the number the ACK carries and its wire bytes.
    pub(super) fn push(&mut self, blocks: &Blocks, n: usize) -> (u32, u32) {
        self.next = self.next.wrapping_add(1).max(1);
        self.sent.push_back((self.next, n as u8, *blocks));
        (self.next, wire_bytes(sack_option_bytes(n)))
    }

    /// The blocks of the ACK carrying option `id` (none if it was overtaken).
    pub(super) fn take(&mut self, id: u32, out: &mut Blocks) -> usize {
        while let Some(&(front, n, blocks)) = self.sent.front() {
            // Wrapping order: `front` was sent before `id` when it lies behind it.
            let behind = id.wrapping_sub(front) as i32;
            if behind < 0 {
                return 0;
            }
            self.sent.pop_front();
            if behind == 0 {
                *out = blocks;
                return n as usize;
            }
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ack_finds_its_own_option_after_lost_ones() {
        let mut o = AckOptions::default();
        let b1 = [(10, 20), (0, 0), (0, 0)];
        let b2 = [(30, 40), (10, 20), (0, 0)];
        let (i1, w1) = o.push(&b1, 1);
        let (i2, w2) = o.push(&b2, 2);
        // 40 + 18 bytes of headers + 4 + 8 n of option, 64 at least, + 20.
        assert_eq!((w1, w2), (40 + 18 + 12 + 20, 40 + 18 + 20 + 20));
        let mut out = [(0, 0); MAX_SACK_BLOCKS];
        assert_eq!(o.take(i2, &mut out), 2); // the ACK of i1 was lost
        assert_eq!(out, b2);
        assert_eq!(o.take(i1, &mut out), 0); // late: overtaken
    }
}

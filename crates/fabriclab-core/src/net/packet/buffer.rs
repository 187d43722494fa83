//! A buffer shared by a switch's egress queues, with Choudhury and Hahne's
//! dynamic threshold (IEEE/ACM ToN 1998): a queue may grow while its length
//! stays within `alpha` times the switch's free buffer, `q + size <= alpha
//! (B - Q)` with `Q` the switch's total occupancy. With one congested queue
//! it settles at `q = alpha B / (1 + alpha)`, with k of them at
//! `alpha B / (1 + k alpha)` each, leaving room for a queue that becomes busy.
//! Host NIC queues are not part of it.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SwitchBufferSpec {
    /// Bytes of buffer per switch, shared by its egress queues.
    pub bytes: u64,
    /// The dynamic threshold's factor.
    pub alpha: f64,
}

pub struct SharedBuffers {
    pub spec: SwitchBufferSpec,
    /// Bytes queued at each node's egress ports (switches only).
    used: Vec<u64>,
}

impl SharedBuffers {
    pub fn new(spec: SwitchBufferSpec, nodes: usize) -> SharedBuffers {
        SharedBuffers {
            spec,
            used: vec![0; nodes],
        }
    }

    pub fn free(&self, node: u32) -> u64 {
        self.spec.bytes.saturating_sub(self.used[node as usize])
    }

    /// Whether a packet of `wire` bytes may join a queue holding `queue_bytes` at `node`.
    pub fn admits(&self, node: u32, queue_bytes: u64, wire: u32) -> bool {
        let free = self.free(node);
        wire as u64 <= free && (queue_bytes + wire as u64) as f64 <= self.spec.alpha * free as f64
    }

    pub fn add(&mut self, node: u32, wire: u32) {
        self.used[node as usize] += wire as u64;
    }

    pub fn remove(&mut self, node: u32, wire: u32) {
        self.used[node as usize] -= wire as u64;
    }
}

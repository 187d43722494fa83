//! One aggregation tree of the flow backend: its ports, base RTT and
//! window cap, and the wire bytes of its share of a message.

use crate::fabric::aggregation::TreePorts;
use crate::fabric::topology::Topology;
use crate::time::PS_PER_S;
use fabriclab_agg::wire::{HEADER_BYTES, WIRE_OVERHEAD_BYTES};
use std::collections::HashMap;

/// Bytes on the wire of an aggregation packet carrying `bytes` of vector.
pub(super) fn packet_wire(bytes: u64) -> u64 {
    4 * bytes.div_ceil(4) + HEADER_BYTES as u64 + WIRE_OVERHEAD_BYTES as u64
}

/// Tree `t` of `nt`'s share of a message of `size` bytes cut into packets
/// of `vb` bytes: (packets, vector bytes, wire bytes).
pub fn tree_share(size: u64, vb: u64, t: u64, nt: u64) -> (u64, u64, u64) {
    let n = size.div_ceil(vb);
    if t >= n {
        return (0, 0, 0);
    }
    let count = (n - 1 - t) / nt + 1;
    let last = (size - (t + (count - 1) * nt) * vb).min(vb);
    (
        count,
        (count - 1) * vb + last,
        (count - 1) * packet_wire(vb) + packet_wire(last),
    )
}

/// Where a tree is in its current round.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Waiting for its next round's submissions.
    Idle,
    Draining,
    /// Drained; its results propagate (an `EV_AGG_DONE` is due).
    Delivering,
}

/// One (job, tree) as a fluid object.
pub(super) struct Tree {
    /// Its job (index).
    pub(super) job: u32,
    /// Every port of the tree: each edge in both directions.
    pub(super) ports: Box<[u32]>,
    /// Per worker (the job's order): its uplink and its leaf's port down to it.
    pub(super) worker_ports: Vec<(u32, u32)>,
    /// Propagation delay of its longest worker -> root -> worker path.
    pub(super) delay_ps: u64,
    /// Its window over its base RTT.
    pub(super) cap_bps: f64,
    /// Rounds finished (their results back at the workers).
    pub(super) done: u64,
    pub(super) phase: Phase,
    /// The ports the draining round crosses (fewer than `ports` under
    /// partial synchronisation).
    pub(super) cur_ports: Box<[u32]>,
    /// The uplinks of the workers in the draining round (all of them, but
    /// for those partial synchronisation leaves out).
    pub(super) cur_uplinks: Box<[u32]>,
    /// Wire bits of the draining round still to go, and its rate.
    pub(super) remaining_bits: f64,
    pub(super) rate_bps: f64,
}

impl Tree {
    /// Job `job`'s tree `t`, its rate capped at `window` packets of `vb`
    /// bytes per base RTT.
    pub(super) fn new(
        topo: &Topology,
        t: &TreePorts,
        job: u32,
        workers: &[u32],
        window: u64,
        vb: u64,
    ) -> Tree {
        let at: HashMap<u32, usize> = t
            .switches
            .iter()
            .enumerate()
            .map(|(i, s)| (s.node, i))
            .collect();
        let mut ports = Vec::new();
        // Each worker's leaf (switch index) and its ports up and down.
        let mut leaf: HashMap<u32, (usize, u32, u32)> = HashMap::new();
        for (si, sw) in t.switches.iter().enumerate() {
            for c in &sw.children {
                ports.extend([c.up, c.down]);
                if !at.contains_key(&c.node) {
                    leaf.insert(c.node, (si, c.up, c.down));
                }
            }
        }
        let bits = packet_wire(vb) as f64 * 8.0;
        // A port's delay, and its delay plus one full packet's serialization.
        let cost = |p: u32| {
            let info = &topo.ports[p as usize];
            let d = info.delay_ps as f64;
            (
                info.delay_ps,
                d + bits * PS_PER_S as f64 / info.rate_bps as f64,
            )
        };
        let (mut delay_ps, mut rtt_ps) = (0u64, 0f64);
        let mut worker_ports = Vec::new();
        for &host in workers {
            let (mut si, up, down) = leaf[&host];
            worker_ports.push((up, down));
            let mut path = vec![up, down];
            while let Some((parent, up)) = t.switches[si].parent {
                let me = t.switches[si].node;
                si = at[&parent];
                let down = t.switches[si].children.iter().find(|c| c.node == me);
                path.extend([up, down.expect("checked").down]);
            }
            let (d, r) = path
                .iter()
                .map(|&p| cost(p))
                .fold((0, 0.0), |a, c| (a.0 + c.0, a.1 + c.1));
            delay_ps = delay_ps.max(d);
            rtt_ps = rtt_ps.max(r);
        }
        Tree {
            job,
            ports: ports.into_boxed_slice(),
            worker_ports,
            delay_ps,
            cap_bps: window as f64 * bits / (rtt_ps / PS_PER_S as f64),
            done: 0,
            phase: Phase::Idle,
            cur_ports: Box::new([]),
            cur_uplinks: Box::new([]),
            remaining_bits: 0.0,
            rate_bps: 0.0,
        }
    }
}

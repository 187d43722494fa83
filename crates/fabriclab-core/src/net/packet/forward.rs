//! Switches with a forwarding capacity (a hypervisor's virtual switch, a
//! software router): every packet that enters such a node, over any of its
//! ports and in either direction, waits for the node's one processor and is
//! served in arrival order (equal times in event order), `1 / forwarding_pps`
//! each, before it joins its egress port's queue. At most
//! `forwarding_queue_packets` packets are in the node, the one in service
//! included; a packet arriving at a full node is dropped (drop-tail) and
//! counted as a drop of the link direction that brought it.
//!
//! One pending event per node: the end of its head packet's service.
//! Nodes without a capacity forward as before (store-and-forward only).

use super::header::Packet;
use super::{PacketNet, EV_FORWARD};
use crate::engine::{Column, Ctx, NetEv, PortEvent, Table};
use crate::fabric::topology::Topology;
use crate::fabric::NodeKind;
use crate::time::PS_PER_S;
use serde::Deserialize;
use std::collections::VecDeque;

/// Per-node settings of the packet backend (node index resolved by the
/// scenario layer). Later entries for one node replace earlier ones.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeOverride {
    pub node: u32,
    /// Packets per second the node's processor forwards.
    pub forwarding_pps: u64,
    /// Packets the node holds, the one in service included (drop-tail).
    pub forwarding_queue_packets: u64,
}

/// A node's processor.
struct Cpu {
    node: u32,
    service_ps: u64,
    limit: usize,
    /// Packets in the node with the port whose wire brought each; the head is in service.
    queue: VecDeque<(u32, Packet)>,
    forwarded: u64,
    drops: u64,
    max_queue: usize,
}

/// The nodes with a forwarding capacity.
pub(super) struct Forwarders {
    /// Per node: index into `cpus`, or u32::MAX.
    at: Vec<u32>,
    cpus: Vec<Cpu>,
}

/// Serving time of one packet at `pps`, to the nearest picosecond.
pub fn service_ps(pps: u64) -> u64 {
    (PS_PER_S + pps / 2) / pps
}

impl Forwarders {
    /// None when no node has a capacity (today's path, untouched).
    pub fn new(topo: &Topology, specs: &[NodeOverride]) -> Result<Option<Box<Forwarders>>, String> {
        if specs.is_empty() {
            return Ok(None);
        }
        let n = topo.names.len();
        let mut f = Forwarders {
            at: vec![u32::MAX; n],
            cpus: Vec::new(),
        };
        for (i, s) in specs.iter().enumerate() {
            if s.node as usize >= n {
                return Err(format!(
                    "node_overrides[{i}].node: node index {} out of range (0..{n})",
                    s.node
                ));
            }
            if topo.kinds[s.node as usize] != NodeKind::Switch {
                return Err(format!(
                    "node_overrides[{i}].node: '{}' is a host; a forwarding capacity is a switch's",
                    topo.names[s.node as usize]
                ));
            }
            if s.forwarding_pps == 0 || s.forwarding_pps > PS_PER_S {
                return Err(format!(
                    "node_overrides[{i}].forwarding_pps: {} is not within 1..=10^12 packets per second",
                    s.forwarding_pps
                ));
            }
            if s.forwarding_queue_packets == 0 {
                return Err(format!(
                    "node_overrides[{i}].forwarding_queue_packets: must be at least 1 (the packet in service)"
                ));
            }
            let cpu = Cpu {
                node: s.node,
                service_ps: service_ps(s.forwarding_pps),
                limit: usize::try_from(s.forwarding_queue_packets).unwrap_or(usize::MAX),
                queue: VecDeque::new(),
                forwarded: 0,
                drops: 0,
                max_queue: 0,
            };
            match f.at[s.node as usize] {
                u32::MAX => {
                    f.at[s.node as usize] = f.cpus.len() as u32;
                    f.cpus.push(cpu);
                }
                k => f.cpus[k as usize] = cpu,
            }
        }
        Ok(Some(Box::new(f)))
    }

    /// The processor of `node`, if it has one.
    #[inline]
    pub fn of(&self, node: u32) -> Option<u32> {
        Some(self.at[node as usize]).filter(|&k| k != u32::MAX)
    }

    /// The `node_forwarding` table: per node, packets forwarded (served:
    /// late duplicates discarded after service included) and dropped, the
    /// most it held at once, and what it holds now (the one in service
    /// included), so that entered = forwarded + dropped + held.
    pub fn table(&self, names: &[String]) -> Table {
        Table::new("node_forwarding")
            .col(
                "node",
                Column::Str(
                    self.cpus
                        .iter()
                        .map(|c| names[c.node as usize].clone())
                        .collect(),
                ),
            )
            .col(
                "forwarded_packets",
                Column::U64(self.cpus.iter().map(|c| c.forwarded).collect()),
            )
            .col(
                "dropped_packets",
                Column::U64(self.cpus.iter().map(|c| c.drops).collect()),
            )
            .col(
                "max_queue_packets",
                Column::U64(self.cpus.iter().map(|c| c.max_queue as u64).collect()),
            )
            .col(
                "held_packets",
                Column::U64(self.cpus.iter().map(|c| c.queue.len() as u64).collect()),
            )
    }
}

impl PacketNet {
    /// `pkt` entered a node with processor `k` over `port`'s wire: it waits
    /// for the processor, or is dropped when the node is full.
    pub(super) fn to_cpu(&mut self, ctx: &mut Ctx, k: u32, port: u32, pkt: Packet) {
        let f = self
            .forwarders
            .as_deref_mut()
            .expect("a node with a processor");
        let cpu = &mut f.cpus[k as usize];
        if cpu.queue.len() >= cpu.limit {
            cpu.drops += 1;
            let p = &mut self.ports[port as usize];
            p.stats.drops += 1;
            if ctx.probed() {
                let band = p.qdisc.band_of(pkt.class) as u8;
                ctx.port_event(port, band, PortEvent::Drop, pkt.wire);
            }
            // It had left its sender's NIC: only out of the network.
            self.packets_in_network -= 1;
            self.free_vector(&pkt);
            return;
        }
        cpu.queue.push_back((port, pkt));
        cpu.max_queue = cpu.max_queue.max(cpu.queue.len());
        if cpu.queue.len() == 1 {
            ctx.schedule(
                ctx.now + cpu.service_ps,
                NetEv {
                    kind: EV_FORWARD,
                    id: k,
                },
            );
        }
    }

    /// Processor `k` finished its head packet: it goes on its way, and the
    /// next one (if any) starts.
    pub(super) fn on_cpu_done(&mut self, ctx: &mut Ctx, k: u32) -> bool {
        let f = self
            .forwarders
            .as_deref_mut()
            .expect("a node with a processor");
        let cpu = &mut f.cpus[k as usize];
        let (port, pkt) = cpu.queue.pop_front().expect("a packet in service");
        cpu.forwarded += 1;
        if !cpu.queue.is_empty() {
            ctx.schedule(
                ctx.now + cpu.service_ps,
                NetEv {
                    kind: EV_FORWARD,
                    id: k,
                },
            );
        }
        self.forward_from(ctx, port, pkt);
        true
    }
}

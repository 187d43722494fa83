//! Where switch logic meets the packet path: packets a switch with logic
//! receives are shown to it before forwarding; what it emits is queued at
//! the ports it names; packets of other protocols than TCP and PAUSE go to
//! the logic of the node they reach, or are absorbed there.

use super::super::header::{Packet, PROTO_AGG, PROTO_TCP};
use super::super::{PacketNet, EV_LOGIC};
use super::{
    counters_table, panama::Panama, series_table, tap::Tap, LogicCtx, SwitchLogic, SwitchLogicSpec,
    Verdict,
};
use crate::engine::{Ctx, NetEv, Table};
use crate::fabric::topology::Topology;

/// Logic attached to switches, and when each asked to be polled.
pub(in crate::net::packet) struct Logics {
    pub list: Vec<Box<dyn SwitchLogic>>,
    /// Node of each logic.
    pub node: Vec<u32>,
    /// Per node: index into `list`, or u32::MAX.
    pub at: Vec<u32>,
    pub timer: Vec<Option<u64>>,
    /// Egress ports of each logic's switch.
    pub ports: Vec<Box<[u32]>>,
    /// Packets of other protocols absorbed by a node without logic.
    pub absorbed: u64,
    pub emit: Vec<(u32, Packet)>,
}

impl Logics {
    pub fn new(
        topo: &Topology,
        specs: &[SwitchLogicSpec],
        agg: Option<&crate::fabric::aggregation::AggregationSpec>,
    ) -> Result<Logics, String> {
        let mut l = Logics {
            list: Vec::new(),
            node: Vec::new(),
            at: vec![u32::MAX; topo.names.len()],
            timer: Vec::new(),
            ports: Vec::new(),
            absorbed: 0,
            emit: Vec::new(),
        };
        for (i, s) in specs.iter().enumerate() {
            let node = s.node();
            if node as usize >= topo.names.len() {
                return Err(format!(
                    "switch_logic[{i}].node: node index {node} out of range"
                ));
            }
            if l.at[node as usize] != u32::MAX {
                return Err(format!(
                    "switch_logic[{i}].node: '{}' already has logic",
                    topo.names[node as usize]
                ));
            }
            let logic: Box<dyn SwitchLogic> = match *s {
                SwitchLogicSpec::Tap {
                    class,
                    mirror_to,
                    absorb,
                    ..
                } => {
                    let port = match mirror_to {
                        None => None,
                        Some(to) => Some(
                            topo.out_ports[node as usize]
                                .iter()
                                .copied()
                                .find(|&p| topo.ports[p as usize].to == to)
                                .ok_or_else(|| {
                                    format!("switch_logic[{i}].mirror_to: not a neighbour")
                                })?,
                        ),
                    };
                    Box::new(Tap::new(class, port, absorb))
                }
            };
            l.attach(topo, node, logic);
        }
        if let Some(agg) = agg {
            for (node, trees) in super::panama::configs(topo, agg)? {
                let name = &topo.names[node as usize];
                if l.at[node as usize] != u32::MAX {
                    return Err(format!(
                        "aggregation: switch '{name}' of a tree already has switch_logic"
                    ));
                }
                let logic = Panama::new(agg.memory_bytes, trees, agg.functional)
                    .map_err(|e| format!("aggregation: at '{name}': {e}"))?;
                l.attach(topo, node, Box::new(logic));
            }
        }
        Ok(l)
    }

    fn attach(&mut self, topo: &Topology, node: u32, logic: Box<dyn SwitchLogic>) {
        self.at[node as usize] = self.list.len() as u32;
        self.list.push(logic);
        self.node.push(node);
        self.ports
            .push(topo.out_ports[node as usize].clone().into_boxed_slice());
        self.timer.push(None);
    }

    /// Whether any switch has logic.
    #[inline]
    pub fn any(&self) -> bool {
        !self.list.is_empty()
    }

    pub fn tables(&self, names: &[String]) -> Vec<Table> {
        if self.list.is_empty() {
            return Vec::new();
        }
        let (mut rows, mut series) = (Vec::new(), Vec::new());
        for (lg, &node) in self.list.iter().zip(&self.node) {
            for (k, v) in lg.counters() {
                rows.push((names[node as usize].clone(), k, v));
            }
            for (k, t, v) in lg.series() {
                series.push((names[node as usize].clone(), k, t, v));
            }
        }
        let mut tables = vec![counters_table(rows)];
        if !series.is_empty() {
            tables.push(series_table(series));
        }
        tables
    }
}

impl PacketNet {
    /// A packet arrived at `node` over `ingress`: true when it was taken
    /// (by logic, or absorbed as a non-TCP packet) and must not be forwarded.
    pub(in crate::net::packet) fn at_node(
        &mut self,
        ctx: &mut Ctx,
        node: u32,
        ingress: u32,
        pkt: &Packet,
    ) -> bool {
        let i = self.logics.at[node as usize];
        if i == u32::MAX {
            if pkt.proto == PROTO_AGG && self.agg_at_host(ctx, node, pkt) {
                self.packets_in_network -= 1;
                return true;
            }
            if pkt.proto != PROTO_TCP {
                self.logics.absorbed += 1;
                self.packets_in_network -= 1;
                self.free_vector(pkt);
                return true;
            }
            return false;
        }
        let mut emit = std::mem::take(&mut self.logics.emit);
        let verdict = {
            let mut lctx = LogicCtx {
                now: ctx.now,
                ports: &self.logics.ports[i as usize],
                emit: &mut emit,
                vectors: self.vectors.as_mut(),
            };
            self.logics.list[i as usize].on_packet(&mut lctx, ingress, pkt)
        };
        let taken = verdict == Verdict::Absorb || pkt.proto != PROTO_TCP;
        if taken {
            self.packets_in_network -= 1;
        }
        self.send_emitted(ctx, &mut emit);
        self.logics.emit = emit;
        self.arm_logic(ctx, i);
        taken
    }

    fn send_emitted(&mut self, ctx: &mut Ctx, emit: &mut Vec<(u32, Packet)>) {
        for (port, mut pkt) in emit.drain(..) {
            pkt.ingress = super::super::header::NO_PORT;
            self.packets_in_network += 1;
            self.enqueue(ctx, port, pkt);
        }
    }

    fn arm_logic(&mut self, ctx: &mut Ctx, i: u32) {
        if let Some(t) = self.logics.list[i as usize].poll_at() {
            let t = t.max(ctx.now);
            if self.logics.timer[i as usize].is_none_or(|t0| t < t0) {
                self.logics.timer[i as usize] = Some(t);
                ctx.schedule(
                    t,
                    NetEv {
                        kind: EV_LOGIC,
                        id: i,
                    },
                );
            }
        }
    }

    pub(in crate::net::packet) fn on_logic_timer(&mut self, ctx: &mut Ctx, i: u32) -> bool {
        if self.logics.timer[i as usize] != Some(ctx.now) {
            return false; // re-armed earlier since
        }
        self.logics.timer[i as usize] = None;
        let mut emit = std::mem::take(&mut self.logics.emit);
        {
            let mut lctx = LogicCtx {
                now: ctx.now,
                ports: &self.logics.ports[i as usize],
                emit: &mut emit,
                vectors: self.vectors.as_mut(),
            };
            self.logics.list[i as usize].poll(&mut lctx);
        }
        self.send_emitted(ctx, &mut emit);
        self.logics.emit = emit;
        self.arm_logic(ctx, i);
        true
    }
}

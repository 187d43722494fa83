//! The flow-level (fluid) backend: every message is a fluid flow at its
//! max-min fair rate (strict priority between classes), recomputed whenever
//! a flow starts or drains. A message's wire bytes (the packet backend's
//! headers included) drain at that rate; the path's propagation delay is
//! then added once. It shows no queueing delay, no ECN, no loss, no slow
//! start and no ACK traffic. In-network aggregation trees are fluid
//! objects of their own ([`agg`]).

pub mod agg;
pub mod maxmin;

use crate::engine::{
    Arrival, Backend, BackendSend, Completion, Ctx, LinkChange, LinkStats, NetEv, Table,
};
use crate::event::EventKey;
use crate::fabric::aggregation::AggregationSpec;
use crate::fabric::frame::wire_bytes;
use crate::fabric::topology::Topology;
use crate::time::PS_PER_S;
use maxmin::{max_min_rates, FlowDemand};
use std::collections::HashMap;

/// This backend's events (encoded in the engine's opaque [`NetEv`]).
const EV_DRAIN: u8 = 0;
const EV_DELIVER: u8 = 1;
/// An aggregation tree's round is done (id: the tree).
const EV_AGG_DONE: u8 = 2;
/// An aggregation worker's message may be done already (id: the worker).
const EV_AGG_SETTLE: u8 = 3;

struct FluidFlow {
    msg: u32,
    size_bytes: u64,
    class: u8,
    route: Box<[u32]>,
    remaining_bits: f64,
    rate_bps: f64,
    delay_ps: u64,
}

/// The flow-level backend: fluid flows and aggregation trees at max-min
/// fair rates.
pub struct FlowNet {
    capacity_bps: Vec<f64>,
    /// Each port's rate when up (capacity is 0 while its link is down).
    rate_bps: Vec<f64>,
    delay_ps: Vec<u64>,
    stats: Vec<LinkStats>,
    bits_sent: Vec<f64>,
    active: Vec<FluidFlow>,
    /// Size of each drained flow's message still propagating, by message.
    delivering: HashMap<u32, u64>,
    last_ps: u64,
    pending: Option<EventKey>,
    mss_bytes: u32,
    /// In-network aggregation's workers and trees, when the scenario has any.
    agg: Option<agg::AggFlows>,
    /// Ordinary flows leaving each port (with aggregation: reused per reallocation).
    nic_flows: Vec<u32>,
}

/// Wire bytes of a message cut into MSS-sized segments.
pub fn message_wire_bytes(size_bytes: u64, mss_bytes: u32) -> u64 {
    let mss = mss_bytes as u64;
    let full = size_bytes / mss;
    let rest = size_bytes % mss;
    full * wire_bytes(mss_bytes) as u64
        + if rest > 0 {
            wire_bytes(rest as u32) as u64
        } else {
            0
        }
}

impl FlowNet {
    /// A fluid network over `topo`; messages are cut into `mss_bytes`
    /// segments for their wire bytes. The aggregation section's trees are
    /// checked against the topology.
    pub fn new(
        topo: &Topology,
        mss_bytes: u32,
        aggregation: Option<&AggregationSpec>,
    ) -> Result<FlowNet, String> {
        let agg = aggregation
            .map(|a| agg::AggFlows::new(topo, a))
            .transpose()?;
        Ok(FlowNet {
            capacity_bps: topo.ports.iter().map(|p| p.rate_bps as f64).collect(),
            rate_bps: topo.ports.iter().map(|p| p.rate_bps as f64).collect(),
            delay_ps: topo.ports.iter().map(|p| p.delay_ps).collect(),
            stats: topo
                .ports
                .iter()
                .map(|p| LinkStats {
                    from: p.from,
                    to: p.to,
                    rate_bps: p.rate_bps,
                    ..Default::default()
                })
                .collect(),
            bits_sent: vec![0.0; topo.ports.len()],
            active: Vec::new(),
            delivering: HashMap::new(),
            last_ps: 0,
            pending: None,
            mss_bytes,
            agg,
            nic_flows: Vec::new(),
        })
    }

    /// Drains every flow at its current rate from `last_ps` to `now`.
    fn advance(&mut self, now: u64) {
        let dt_s = (now - self.last_ps) as f64 / PS_PER_S as f64;
        if dt_s > 0.0 {
            for f in &mut self.active {
                let bits = (f.rate_bps * dt_s).min(f.remaining_bits);
                f.remaining_bits -= bits;
                for &p in f.route.iter() {
                    self.bits_sent[p as usize] += bits;
                }
            }
            if let Some(a) = &mut self.agg {
                a.advance(dt_s, &mut self.bits_sent);
            }
        }
        self.last_ps = now;
    }

    fn reallocate(&mut self, ctx: &mut Ctx) {
        if self.agg.is_some() {
            // Ordinary flows leaving each host's NIC, for the aggregation
            // trees' share of their workers' NICs.
            self.nic_flows.clear();
            self.nic_flows.resize(self.capacity_bps.len(), 0);
            for f in &self.active {
                if let Some(&first) = f.route.first() {
                    self.nic_flows[first as usize] += 1;
                }
            }
        }
        let mut demands: Vec<FlowDemand> = self
            .active
            .iter()
            .map(|f| FlowDemand::new(f.class, &f.route))
            .collect();
        if let Some(a) = &self.agg {
            a.demands(&mut demands, &self.nic_flows, &self.capacity_bps);
        }
        let rates = max_min_rates(&demands, &self.capacity_bps);
        drop(demands);
        let n = self.active.len();
        for (f, &r) in self.active.iter_mut().zip(&rates[..n]) {
            f.rate_bps = r;
        }
        if let Some(a) = &mut self.agg {
            a.set_rates(&rates[n..]);
        }
        if let Some(k) = self.pending.take() {
            ctx.cancel(k);
        }
        let next = self
            .active
            .iter()
            .filter(|f| f.rate_bps > 0.0)
            .map(|f| (f.remaining_bits / f.rate_bps * PS_PER_S as f64).ceil() as u64)
            .chain(self.agg.as_ref().and_then(|a| a.next_drain_ps()))
            .min();
        if let Some(dt) = next {
            self.pending = Some(ctx.schedule(
                ctx.now + dt,
                NetEv {
                    kind: EV_DRAIN,
                    id: 0,
                },
            ));
        }
    }

    fn on_drain(&mut self, ctx: &mut Ctx) {
        self.pending = None;
        self.advance(ctx.now);
        // A flow counts as drained when less than one picosecond of its
        // rate is left (the event time was rounded up to whole picoseconds).
        let mut i = 0;
        while i < self.active.len() {
            let f = &self.active[i];
            if f.remaining_bits <= f.rate_bps / PS_PER_S as f64 + 1e-6 {
                let f = self.active.remove(i);
                self.delivering.insert(f.msg, f.size_bytes);
                ctx.schedule(
                    ctx.now + f.delay_ps,
                    NetEv {
                        kind: EV_DELIVER,
                        id: f.msg,
                    },
                );
            } else {
                i += 1;
            }
        }
        if let Some(a) = &mut self.agg {
            a.take_drained(ctx);
        }
        self.reallocate(ctx);
    }
}

impl Backend for FlowNet {
    fn send(&mut self, ctx: &mut Ctx, send: BackendSend) {
        let BackendSend {
            msg,
            size_bytes,
            class,
            fwd,
            notify_packets,
            aggregate,
            ..
        } = send;
        self.advance(ctx.now);
        if let Some(job) = aggregate {
            // The contribution follows its job's trees, in the job's class.
            let host = ctx.topo.ports[fwd[0] as usize].from;
            self.agg_send(ctx, msg, host, job, size_bytes, notify_packets);
            return;
        }
        let delay_ps = fwd.iter().map(|&p| self.delay_ps[p as usize]).sum();
        let bits = message_wire_bytes(size_bytes, self.mss_bytes) as f64 * 8.0;
        self.active.push(FluidFlow {
            msg,
            size_bytes,
            class,
            route: fwd.into_boxed_slice(),
            remaining_bits: bits,
            rate_bps: 0.0,
            delay_ps,
        });
        self.reallocate(ctx);
    }

    fn set_class(&mut self, ctx: &mut Ctx, msg: u32, class: u8) -> bool {
        let Some(k) = self.active.iter().position(|f| f.msg == msg) else {
            return false;
        };
        if self.active[k].class != class {
            self.advance(ctx.now);
            self.active[k].class = class;
            self.reallocate(ctx);
        }
        true
    }

    fn handle(&mut self, ctx: &mut Ctx, ev: NetEv) -> bool {
        match ev.kind {
            EV_DRAIN => self.on_drain(ctx),
            EV_DELIVER => {
                let msg = ev.id;
                // A fluid flow has no packets: its bytes arrive all at once.
                let bytes = self.delivering.remove(&msg).expect("delivering");
                ctx.arrivals.push(Arrival { msg, bytes });
                ctx.completions.push(Completion {
                    msg,
                    retransmits: 0,
                });
            }
            EV_AGG_DONE => {
                self.advance(ctx.now);
                self.on_agg_done(ctx, ev.id);
            }
            EV_AGG_SETTLE => {
                self.advance(ctx.now);
                self.on_agg_settle(ctx, ev.id);
            }
            k => unreachable!("flow backend got event kind {k}"),
        }
        true
    }

    fn link_stats(&self, _now_ps: u64) -> Vec<LinkStats> {
        self.stats
            .iter()
            .zip(&self.bits_sent)
            .map(|(s, &bits)| LinkStats {
                bytes: (bits / 8.0).round() as u64,
                ..s.clone()
            })
            .collect()
    }

    fn in_flight(&self) -> usize {
        self.active.len() + self.delivering.len() + self.agg.as_ref().map_or(0, |a| a.live())
    }

    fn tables(&self) -> Vec<Table> {
        self.agg.iter().map(|a| a.table()).collect()
    }

    /// A link down carries nothing (its flows stall until routing moves
    /// them); up restores its rate; a rate change sets it. Loss has no
    /// meaning for fluid flows (the scenario refuses it with this backend).
    fn link_change(&mut self, ctx: &mut Ctx, link: u32, change: LinkChange) {
        self.advance(ctx.now);
        for port in [2 * link as usize, 2 * link as usize + 1] {
            match change {
                LinkChange::Down => self.capacity_bps[port] = 0.0,
                LinkChange::Up => self.capacity_bps[port] = self.rate_bps[port],
                LinkChange::Rate(r) => {
                    self.rate_bps[port] = r as f64;
                    if self.capacity_bps[port] > 0.0 {
                        self.capacity_bps[port] = r as f64;
                    }
                }
                LinkChange::Loss(_) => {}
            }
        }
        self.reallocate(ctx);
    }

    fn live_messages(&self, out: &mut Vec<u32>) {
        out.extend(self.active.iter().map(|f| f.msg));
    }

    fn reroute(&mut self, ctx: &mut Ctx, msg: u32, fwd: Vec<u32>, _rev: Vec<u32>) -> bool {
        let Some(k) = self.active.iter().position(|f| f.msg == msg) else {
            return false;
        };
        if *self.active[k].route == *fwd {
            return true;
        }
        self.advance(ctx.now);
        self.active[k].delay_ps = fwd.iter().map(|&p| self.delay_ps[p as usize]).sum();
        self.active[k].route = fwd.into_boxed_slice();
        self.reallocate(ctx);
        true
    }
}

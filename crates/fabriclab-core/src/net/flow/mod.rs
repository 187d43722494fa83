//! The flow-level (fluid) backend: every message is a fluid flow at its
//! max-min fair rate (strict priority between classes), recomputed whenever
//! a flow starts or drains. A message's wire bytes (the packet backend's
//! headers included) drain at that rate; the path's propagation delay is
//! then added once. With the short-flow model ([`tcp`], the scenario's
//! default) a flow drains its slow-start rounds' windows and waits out their
//! RTTs, and its RTTs and last packet see the ports' standing-queue
//! estimates and store-and-forward; the pure fluid model shows none of
//! that. Neither shows ECN, loss or ACK traffic. In-network aggregation
//! trees are fluid objects of their own ([`agg`]).

pub mod agg;
pub mod maxmin;
mod queues;
pub mod tcp;

use crate::engine::{
    Arrival, Backend, BackendSend, Completion, Ctx, LinkChange, LinkStats, NetEv, Table,
};
use crate::event::EventKey;
use crate::fabric::aggregation::AggregationSpec;
use crate::fabric::frame::wire_bytes;
use crate::fabric::topology::Topology;
use crate::time::PS_PER_S;
use maxmin::{FlowDemand, MaxMin};
use std::collections::HashMap;
use tcp::{
    full_and_ack_wire, ser_ps, FlowModel, FlowView, QueueEstimate, ShortFlowSpec, SlowStart, NONE,
};

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
    rev: Box<[u32]>,
    remaining_bits: f64,
    rate_bps: f64,
    delay_ps: u64,
    /// Store-and-forward of its last packet after the first hop (tcp model).
    pipe_ps: u64,
    /// Propagation and one packet's serialization, data out and ACK back.
    base_rtt_ps: f64,
    /// Its slow-start round (tcp model); `None`: window-unlimited.
    ss: Option<SlowStart>,
    /// The port where it holds a standing queue, and the tied port after it
    /// (tcp::Holder), or [`NONE`].
    standing: u32,
    tied: u32,
    /// The last tied port it had (kept while it is bottlenecked elsewhere
    /// for a while), and the bits sent across that port plus its own bits
    /// left when it first had it: what others sent across it since is the
    /// growth of that sum.
    moved_port: u32,
    moved_base_bits: f64,
    /// When its window was last cut while it holds a queue at a port
    /// without congestion signals (tcp::regrown_queue_bytes), if it was.
    regrow_from_ps: Option<u64>,
    persistent: bool,
}

impl FluidFlow {
    /// Bits it may drain before its next event of its own: the rest of the
    /// message, or of its round's window.
    fn drainable_bits(&self) -> f64 {
        match &self.ss {
            Some(ss) => self.remaining_bits.min(ss.left_bits),
            None => self.remaining_bits,
        }
    }
    fn cap_bps(&self) -> f64 {
        self.ss.as_ref().map_or(f64::INFINITY, |s| s.cap_bps)
    }
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
    /// Time integral of each port's estimated standing queue (byte-ps).
    queue_area: Vec<f64>,
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
    short: ShortFlowSpec,
    queues: QueueEstimate,
    /// Wire bytes of a full segment, of a pure ACK, and TSQ's limit on the wire.
    full_wire: f64,
    ack_wire: f64,
    tsq_wire: f64,
    /// Per (source, destination, class): when a persistent connection's last
    /// message drained and its window then (`None`: out of slow start).
    conns: HashMap<(u32, u32, u8), (u64, Option<f64>)>,
    /// Indices of the flows being allocated (every active flow), reused.
    sending: Vec<u32>,
    /// The window-unlimited flows changed since the queues were estimated.
    long_changed: bool,
    /// The queues' fill at `last_ps` is not done yet ([`FlowNet::settle_queues`]).
    fill_due: bool,
    /// A flow, a route, a class, a rate cap or a capacity changed since the
    /// last allocation: without aggregation trees, the rates are otherwise
    /// those of the last allocation.
    sending_changed: bool,
    standing: Vec<(u32, u32)>,
    /// The allocator of every flow, and the one of the window-unlimited
    /// flows alone (the queue estimate): each replays its own last call.
    maxmin: MaxMin,
    maxmin_long: MaxMin,
    /// A flow was rerouted since each allocator's last call (else every
    /// flow keeps the ports it had then: [`MaxMin::rates_keyed_ports_kept`]).
    rerouted: bool,
    long_rerouted: bool,
    rates: Vec<f64>,
    /// Message ids of the flows allocated: their keys to the allocator
    /// (increasing: flows are kept in the order they started).
    keys: Vec<u64>,
    /// Buffers kept between reallocations, empty in between (see [`reuse`]):
    /// the allocators' demands, and the queue estimate's window-unlimited
    /// flows, window cuts, rates and views.
    demands: Vec<FlowDemand<'static>>,
    long: Vec<usize>,
    cut: Vec<bool>,
    long_rates: Vec<f64>,
    views: Vec<FlowView<'static>>,
}

/// `buf` emptied, as a vector of another type of the same layout (a
/// borrowing type, for a call's lifetime): the same allocation, reused
/// (std collects a vector's own iterator in place), so that buffers of
/// borrowed routes need not be allocated at every reallocation.
fn reuse<T, U>(mut buf: Vec<T>) -> Vec<U> {
    buf.clear();
    buf.into_iter()
        .map(|_| unreachable!("an empty vector"))
        .collect()
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

/// Wire bytes of a message's largest packet: after the first hop, each hop
/// adds its store-and-forward time (a short last packet waits there for the
/// full one ahead of it), as in the topology's ideal FCT.
fn largest_packet_wire(size_bytes: u64, mss_bytes: u32) -> f64 {
    wire_bytes(size_bytes.min(mss_bytes as u64) as u32) as f64
}

impl FlowNet {
    /// A fluid network over `topo`; messages are cut into `mss_bytes`
    /// segments for their wire bytes; `short` is the short-flow model (one
    /// queue per port of `topo`). The aggregation section's trees are
    /// checked against the topology.
    pub fn new(
        topo: &Topology,
        mss_bytes: u32,
        short: ShortFlowSpec,
        aggregation: Option<&AggregationSpec>,
    ) -> Result<FlowNet, String> {
        if short.ports.len() != topo.ports.len() {
            return Err(format!(
                "flow backend: {} port queues for {} ports",
                short.ports.len(),
                topo.ports.len()
            ));
        }
        let agg = aggregation
            .map(|a| agg::AggFlows::new(topo, a))
            .transpose()?;
        let (full_wire, ack_wire) = full_and_ack_wire(mss_bytes);
        Ok(FlowNet {
            queues: QueueEstimate::new(topo.ports.len()),
            full_wire,
            ack_wire,
            tsq_wire: short.tsq_limit_bytes as f64 * full_wire / mss_bytes as f64,
            short,
            conns: HashMap::new(),
            sending: Vec::new(),
            long_changed: false,
            fill_due: false,
            sending_changed: false,
            standing: Vec::new(),
            maxmin: MaxMin::default(),
            maxmin_long: MaxMin::default(),
            rerouted: false,
            long_rerouted: false,
            rates: Vec::new(),
            keys: Vec::new(),
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
            queue_area: vec![0.0; topo.ports.len()],
            active: Vec::new(),
            delivering: HashMap::new(),
            last_ps: 0,
            pending: None,
            mss_bytes,
            agg,
            nic_flows: Vec::new(),
            demands: Vec::new(),
            long: Vec::new(),
            cut: Vec::new(),
            long_rates: Vec::new(),
            views: Vec::new(),
        })
    }

    /// Drains every flow at its current rate from `last_ps` to `now`.
    fn advance(&mut self, now: u64) {
        let dt_s = (now - self.last_ps) as f64 / PS_PER_S as f64;
        if dt_s > 0.0 {
            self.settle_queues();
            for f in &mut self.active {
                let bits = (f.rate_bps * dt_s).min(f.drainable_bits());
                if bits == 0.0 {
                    // Nothing drained (a flow waiting out its round): each
                    // sum below is left as it is (none is ever -0, so
                    // adding or taking away a zero changes no bit).
                    continue;
                }
                f.remaining_bits -= bits;
                if let Some(ss) = &mut f.ss {
                    ss.left_bits -= bits;
                }
                for &p in f.route.iter() {
                    self.bits_sent[p as usize] += bits;
                }
            }
            if let Some(a) = &mut self.agg {
                a.advance(dt_s, &mut self.bits_sent);
            }
            let dt_ps = (now - self.last_ps) as f64;
            for (p, q) in self.queues.queued_bytes(&self.capacity_bps) {
                self.queue_area[p] += q * dt_ps;
            }
            // Filled when first read: when the estimate is redone first,
            // its own fill replaces this one.
            self.fill_due = self.queues.any();
        }
        self.last_ps = now;
    }

    fn reallocate(&mut self, ctx: &mut Ctx) {
        if self.sending_changed || self.agg.is_some() {
            self.sending_changed = false;
            self.allocate();
        }
        if self.short.model == FlowModel::Tcp && (self.long_changed || self.agg.is_some()) {
            self.estimate_queues();
        }
        if let Some(a) = &mut self.agg {
            a.set_rates(&self.rates[self.sending.len()..]);
        }
        self.schedule_next(ctx);
    }

    /// The max-min rates of the flows not waiting out a round (and of the
    /// aggregation trees: the rates after the flows').
    fn allocate(&mut self) {
        self.sending.clear();
        self.sending.extend(0..self.active.len() as u32);
        if self.agg.is_some() {
            // Ordinary flows leaving each host's NIC, for the aggregation
            // trees' share of their workers' NICs.
            self.nic_flows.clear();
            self.nic_flows.resize(self.capacity_bps.len(), 0);
            for &i in &self.sending {
                if let Some(&first) = self.active[i as usize].route.first() {
                    self.nic_flows[first as usize] += 1;
                }
            }
        }
        let mut demands: Vec<FlowDemand> = reuse(std::mem::take(&mut self.demands));
        demands.extend(self.sending.iter().map(|&i| {
            let f = &self.active[i as usize];
            FlowDemand {
                cap_bps: f.cap_bps(),
                ..FlowDemand::new(f.class, &f.route)
            }
        }));
        if let Some(a) = &self.agg {
            a.demands(&mut demands, &self.nic_flows, &self.capacity_bps);
            self.maxmin
                .rates(&demands, &self.capacity_bps, &mut self.rates);
        } else {
            self.keys.clear();
            self.keys.extend(
                self.sending
                    .iter()
                    .map(|&i| self.active[i as usize].msg as u64),
            );
            let (d, k, c, r) = (&demands, &self.keys, &self.capacity_bps, &mut self.rates);
            if std::mem::take(&mut self.rerouted) {
                self.maxmin.rates_keyed(d, k, c, r);
            } else {
                self.maxmin.rates_keyed_ports_kept(d, k, c, r);
            }
        }
        self.demands = reuse(demands);
        for f in &mut self.active {
            f.rate_bps = 0.0;
        }
        for (k, &i) in self.sending.iter().enumerate() {
            self.active[i as usize].rate_bps = self.rates[k];
        }
    }

    /// Schedules the next event: a flow's window or message drained, a
    /// round's RTT over, or an aggregation tree's drain.
    fn schedule_next(&mut self, ctx: &mut Ctx) {
        if let Some(k) = self.pending.take() {
            ctx.cancel(k);
        }
        let now = ctx.now;
        // The soonest drain in picoseconds, rounded up once: rounding up
        // (and to whole picoseconds) keeps the order, so the smallest
        // rounded is the smallest rounded up.
        let mut drain: Option<f64> = None;
        let mut next = self.agg.as_ref().and_then(|a| a.next_drain_ps());
        for f in &self.active {
            match &f.ss {
                // Its window drains by the round's end at the latest.
                Some(ss) if ss.paced() => {
                    let end = ss.round_end_ps.saturating_sub(now);
                    next = Some(next.map_or(end, |n| n.min(end)));
                }
                _ if f.rate_bps > 0.0 => {
                    let t = f.drainable_bits() / f.rate_bps * PS_PER_S as f64;
                    drain = Some(drain.map_or(t, |d| d.min(t)));
                }
                _ => {}
            }
        }
        if let Some(t) = drain {
            let t = t.ceil() as u64;
            next = Some(next.map_or(t, |n| n.min(t)));
        }
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

    /// Propagation, store-and-forward of the largest packet (`last_wire` bytes)
    /// after the first hop, and the base round trip of a route pair.
    fn path_times(&self, fwd: &[u32], rev: &[u32], last_wire: f64) -> (u64, u64, f64) {
        let delay: u64 = fwd.iter().map(|&p| self.delay_ps[p as usize]).sum();
        if self.short.model != FlowModel::Tcp {
            return (delay, 0, 0.0);
        }
        let pipe: f64 = fwd
            .iter()
            .skip(1)
            .map(|&p| ser_ps(last_wire, self.capacity_bps[p as usize]))
            .sum();
        let data: f64 = fwd
            .iter()
            .map(|&p| ser_ps(self.full_wire, self.capacity_bps[p as usize]))
            .sum();
        let ack: f64 = rev
            .iter()
            .map(|&p| {
                self.delay_ps[p as usize] as f64
                    + ser_ps(self.ack_wire, self.capacity_bps[p as usize])
            })
            .sum();
        (delay, pipe.round() as u64, delay as f64 + data + ack)
    }

    fn conn_key(&self, f: &FluidFlow) -> Option<(u32, u32, u8)> {
        let (&a, &b) = (f.route.first()?, f.route.last()?);
        Some((
            self.stats[a as usize].from,
            self.stats[b as usize].to,
            f.class,
        ))
    }

    fn on_drain(&mut self, ctx: &mut Ctx) {
        self.pending = None;
        self.advance(ctx.now);
        // A flow counts as drained when less than one picosecond of its
        // rate is left (the event time was rounded up to whole picoseconds).
        let now = ctx.now;
        let mut i = 0;
        while i < self.active.len() {
            let f = &self.active[i];
            let eps = f.rate_bps / PS_PER_S as f64 + 1e-6;
            if f.remaining_bits <= eps {
                self.settle_queues();
                let f = &self.active[i];
                let own = self.sent_bytes(f);
                let wait = self
                    .path_wait_ps(&f.route, f.class, (f.standing, f.tied), own)
                    .round() as u64;
                if f.persistent {
                    if let Some(key) = self.conn_key(f) {
                        // The window once every ACK is back: a round's
                        // window plus what the round sent.
                        let w = f.ss.map(|s| 2.0 * s.window_bits - s.left_bits.max(0.0));
                        self.conns.insert(key, (now, w));
                    }
                }
                let f = self.active.remove(i);
                self.long_changed |= f.ss.is_none();
                self.sending_changed = true;
                self.delivering.insert(f.msg, f.size_bytes);
                ctx.schedule(
                    now + f.delay_ps + f.pipe_ps + wait,
                    NetEv {
                        kind: EV_DELIVER,
                        id: f.msg,
                    },
                );
                continue;
            }
            match f.ss {
                Some(ss) if ss.paced() && ss.round_end_ps <= now => {
                    // The round's RTT is over. Its window sent: the next
                    // round, the window doubled (one segment per ACK);
                    // still sending it: ACK-clocked from now on.
                    self.active[i].ss = if ss.left_bits <= eps + ss.window_bits * 1e-9 {
                        self.settle_queues();
                        let rtt = self.rtt_ps(i);
                        let rest = self.active[i].remaining_bits;
                        Some(SlowStart::round(2.0 * ss.window_bits, now, rtt, rest))
                    } else {
                        self.long_changed = true;
                        None
                    };
                    self.sending_changed = true;
                }
                _ => {}
            }
            i += 1;
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
            rev,
            notify_packets,
            aggregate,
            persistent,
            qp: _,
        } = send;
        self.advance(ctx.now);
        if let Some(job) = aggregate {
            // The contribution follows its job's trees, in the job's class.
            let host = ctx.topo.ports[fwd[0] as usize].from;
            self.agg_send(ctx, msg, host, job, size_bytes, notify_packets);
            return;
        }
        let wire = message_wire_bytes(size_bytes, self.mss_bytes);
        let (delay_ps, pipe_ps, base_rtt_ps) =
            self.path_times(&fwd, &rev, largest_packet_wire(size_bytes, self.mss_bytes));
        let mut f = FluidFlow {
            msg,
            size_bytes,
            class,
            route: fwd.into_boxed_slice(),
            rev: rev.into_boxed_slice(),
            remaining_bits: wire as f64 * 8.0,
            rate_bps: 0.0,
            delay_ps,
            pipe_ps,
            base_rtt_ps,
            ss: None,
            standing: NONE,
            tied: NONE,
            moved_port: NONE,
            moved_base_bits: 0.0,
            regrow_from_ps: None,
            persistent,
        };
        if self.short.model == FlowModel::Tcp {
            let mut window = Some(self.short.init_cwnd_packets as f64 * self.full_wire * 8.0);
            if persistent {
                // A connection idle less than an RTO keeps its window (the
                // minimum RTO: the packet backend's RTO is at least that).
                let key = self.conn_key(&f).expect("a route");
                if let Some(&(end, w)) = self.conns.get(&key) {
                    if ctx.now - end <= self.short.min_rto_ps {
                        window = w;
                    }
                }
            }
            if window.is_some() {
                self.settle_queues();
            }
            f.ss = window.map(|w| {
                let rtt = f.base_rtt_ps
                    + self.path_wait_ps(&f.route, class, (NONE, NONE), 0.0)
                    + self.path_wait_ps(&f.rev, class, (NONE, NONE), 0.0);
                SlowStart::round(w, ctx.now, rtt, f.remaining_bits)
            });
        }
        self.long_changed |= f.ss.is_none();
        self.sending_changed = true;
        self.active.push(f);
        self.reallocate(ctx);
    }

    fn set_class(&mut self, ctx: &mut Ctx, msg: u32, class: u8) -> bool {
        let Some(k) = self.active.iter().position(|f| f.msg == msg) else {
            return false;
        };
        if self.active[k].class != class {
            self.advance(ctx.now);
            self.settle_queues();
            self.active[k].class = class;
            self.long_changed = true;
            self.sending_changed = true;
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
                    cnps: 0,
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
            .zip(self.bits_sent.iter().zip(&self.queue_area))
            .map(|(s, (&bits, &area))| LinkStats {
                bytes: (bits / 8.0).round() as u64,
                queue_area: area.round() as u128,
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
        self.settle_queues();
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
        self.long_changed = true;
        self.sending_changed = true;
        self.reallocate(ctx);
    }

    fn live_messages(&self, out: &mut Vec<u32>) {
        out.extend(self.active.iter().map(|f| f.msg));
    }

    fn reroute(&mut self, ctx: &mut Ctx, msg: u32, fwd: Vec<u32>, rev: Vec<u32>) -> bool {
        let Some(k) = self.active.iter().position(|f| f.msg == msg) else {
            return false;
        };
        if *self.active[k].route == *fwd {
            return true;
        }
        self.advance(ctx.now);
        self.settle_queues();
        let last = largest_packet_wire(self.active[k].size_bytes, self.mss_bytes);
        let (delay_ps, pipe_ps, base_rtt_ps) = self.path_times(&fwd, &rev, last);
        let f = &mut self.active[k];
        (f.delay_ps, f.pipe_ps, f.base_rtt_ps) = (delay_ps, pipe_ps, base_rtt_ps);
        f.route = fwd.into_boxed_slice();
        f.rev = rev.into_boxed_slice();
        (self.rerouted, self.long_rerouted) = (true, true);
        self.long_changed = true;
        self.sending_changed = true;
        self.reallocate(ctx);
        true
    }
}

//! The packet-level backend: store-and-forward switches, egress queues,
//! links with propagation delay, and one transport connection per message.
//!
//! Every egress port keeps at most one pending serialization event (its head
//! packet) and every link at most one pending arrival event (the head packet
//! on the wire), as in htsim.

mod agg_host;
pub mod agg_values;
pub mod buffer;
mod forward;
pub mod header;
mod links;
pub mod logic;
pub mod pfc;
mod port;
pub mod qdisc;
mod qp;
mod rocket_edge;
mod sack_option;

pub use buffer::SwitchBufferSpec;
pub use forward::{service_ps, NodeOverride};
pub use logic::SwitchLogicSpec;
pub use pfc::PfcSpec;
pub use qdisc::{Discipline, QueueOverride, QueueSpec};

use crate::engine::{
    Arrival, Backend, BackendSend, BandSample, ClassSample, Completion, Ctx, LinkStats, NetEv,
};
use crate::fabric::frame::wire_bytes;
use crate::fabric::topology::Topology;
use crate::fabric::NodeKind;
use crate::transport::{
    CcKind, CongestionControl, Cubic, Dcqcn, DcqcnParams, Dctcp, NewReno, Segment, SenderConfig,
    TcpReceiver, TcpSender, TransportSpec, WindowState,
};
use header::{Packet, FLAG_ACK, FLAG_CE, FLAG_ECE, FLAG_ECT, FLAG_SYN, PROTO_PAUSE, PROTO_TCP};
use pfc::PfcState;
use port::Port;
use qdisc::Qdisc;

/// This backend's events (encoded in the engine's opaque [`NetEv`]).
pub(crate) const EV_PORT_TX: u8 = 0;
pub(crate) const EV_WIRE_HEAD: u8 = 1;
pub(crate) const EV_CONN_TIMER: u8 = 2;
/// A port's pause of one class ends (id: port * 8 + class).
pub(crate) const EV_PAUSE_END: u8 = 3;
/// A switch refreshes an XOFF it sent (id: ingress port * 8 + class).
pub(crate) const EV_PFC_REFRESH: u8 = 4;
/// A switch's logic asked to be polled (id: its index).
pub(crate) const EV_LOGIC: u8 = 5;
/// An aggregation worker's timer (id: its index).
pub(crate) const EV_AGG_TIMER: u8 = 6;
/// A node's processor finished a packet (id: its index, see [`forward`]).
pub(crate) const EV_FORWARD: u8 = 7;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;

/// Ends a route in [`PacketNet::routes`].
const ROUTE_END: u32 = u32::MAX;

struct Conn {
    /// Where its current forward and reverse routes start in the route
    /// arena; packets sent before a reroute follow the earlier ones, which
    /// stay there (`old_routes`) until the connection finishes.
    fwd: u32,
    rev: u32,
    old_routes: Vec<u32>,
    class: u8,
    sender: TcpSender,
    receiver: TcpReceiver,
    /// Time of the armed timer event (`ConnTimer`), if any.
    timer: Option<u64>,
    delivered: bool,
    /// Payload bytes of this connection waiting in its host's NIC queue.
    nic_bytes: u64,
    /// (source node, destination node, class): the persistent connection it continues.
    pair: (u32, u32, u8),
    persistent: bool,
    notify_packets: bool,
    /// Its DCQCN queue pair when it is one of several messages of one.
    qp: Option<u32>,
    /// Its Packet Rocket state, when the scenario turns it on.
    rocket: Option<Box<rocket_edge::ConnRocket>>,
    /// The SACK options of its ACKs in flight (`transport.sack`).
    acks: sack_option::AckOptions,
}

pub struct PacketNet {
    ports: Vec<Port>,
    conns: Vec<Option<Box<Conn>>>,
    /// Every route of every live connection (egress ports, each route
    /// followed by [`ROUTE_END`]): a packet finds its next hop here from its
    /// own `at` without looking at its connection's state. A finished
    /// connection's routes are never read again (its packets are discarded
    /// at their next arrival), so their places are reused, by length.
    routes: Vec<u32>,
    free_routes: HashMap<usize, Vec<u32>>,
    live_conns: usize,
    packets_in_network: usize,
    sender_cfg: SenderConfig,
    transport: TransportSpec,
    tsq_limit_bytes: u64,
    scratch: Vec<Segment>,
    /// Window state of persistent connections, by (source node, destination node, class).
    windows: HashMap<(u32, u32, u8), WindowState>,
    port_ends: Vec<(u32, u32)>,
    pfc: Option<PfcState>,
    /// Draws of packet loss on lossy links (only links with a loss event draw).
    loss_rng: ChaCha8Rng,
    logics: logic::Logics,
    names: Vec<String>,
    /// Switches' shared buffers with the dynamic threshold, when configured.
    buffers: Option<buffer::SharedBuffers>,
    /// Workers of in-network aggregation jobs, when the scenario has any.
    agg: Option<agg_host::AggHosts>,
    /// The vectors of aggregation packets, in functional runs.
    vectors: Option<agg_values::VectorSlab>,
    /// DCQCN's queue pairs of messages that name their source port.
    qps: qp::Qps,
    /// Packet Rocket, when `transport.packet_rocket_threshold_ps` is set.
    rocket: Option<rocket_edge::EdgeRocket>,
    /// Nodes with a forwarding capacity, when the scenario gives any.
    forwarders: Option<Box<forward::Forwarders>>,
}

/// Queue disciplines of every port: switch ports' default, host NIC ports'
/// (`None`: unlimited and never marking, bounded by TCP Small Queues), and
/// overrides per node or per link direction (the last match wins).
#[derive(Debug, Clone)]
pub struct PortQueues {
    pub switch: QueueSpec,
    pub host: Option<QueueSpec>,
    pub overrides: Vec<QueueOverride>,
}

impl PacketNet {
    pub fn new(
        topo: &Topology,
        queues: &PortQueues,
        transport: &TransportSpec,
        pfc: Option<PfcSpec>,
        seed: u64,
        logic: &[SwitchLogicSpec],
        switch_buffer: Option<SwitchBufferSpec>,
        aggregation: Option<&crate::fabric::aggregation::AggregationSpec>,
    ) -> Result<PacketNet, String> {
        let ports: Vec<Port> = topo
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let host_port = topo.kinds[p.from as usize] == NodeKind::Host;
                let over = queues
                    .overrides
                    .iter()
                    .rev()
                    .find(|o| o.from == p.from && o.to.is_none_or(|t| t == p.to));
                let mut qdisc = match (over, host_port, &queues.host) {
                    (Some(o), _, _) => Qdisc::new(&o.queue),
                    (None, true, Some(h)) => Qdisc::new(h),
                    (None, true, None) => Qdisc::unlimited(&queues.switch),
                    (None, false, _) => Qdisc::new(&queues.switch),
                };
                // Each port its own marking stream, a function of the seed.
                qdisc.seed_marking(qdisc::port_marking_seed(seed, i));
                Port::new(host_port, p.from, p.to, p.rate_bps, p.delay_ps, qdisc)
            })
            .collect();
        let n = ports.len();
        if transport.sack && transport.cc == CcKind::Dcqcn {
            return Err("transport.sack: RoCE queue pairs (cc = \"dcqcn\") recover by go-back-N and send \
                        no SACK; use sack = false with dcqcn"
                .into());
        }
        Ok(PacketNet {
            logics: logic::Logics::new(topo, logic, aggregation)?,
            vectors: aggregation
                .filter(|a| a.functional)
                .map(|_| agg_values::VectorSlab::default()),
            agg: aggregation.map(|a| {
                agg_host::AggHosts::new(
                    a,
                    transport.tsq_limit_bytes,
                    seed,
                    |h| topo.hosts[h as usize],
                    |n| topo.out_ports[n as usize][0],
                )
            }),
            names: topo.names.clone(),
            buffers: switch_buffer.map(|b| buffer::SharedBuffers::new(b, topo.names.len())),
            ports,
            conns: Vec::new(),
            routes: Vec::new(),
            free_routes: HashMap::new(),
            live_conns: 0,
            packets_in_network: 0,
            sender_cfg: SenderConfig {
                mss_bytes: transport.mss_bytes,
                init_cwnd_packets: transport.init_cwnd_packets,
                min_rto_ps: transport.min_rto_ps,
                initial_rto_ps: transport.initial_rto_ps,
                max_rto_ps: transport.max_rto_ps,
                dupack_threshold: transport.dupack_threshold,
                handshake: transport.handshake,
                wire_overhead_bytes: wire_bytes(1460) - 1460,
                sack: transport.sack,
            },
            transport: transport.clone(),
            tsq_limit_bytes: transport.tsq_limit_bytes,
            scratch: Vec::new(),
            windows: HashMap::new(),
            port_ends: topo.ports.iter().map(|p| (p.from, p.to)).collect(),
            pfc: pfc.map(|spec| PfcState::new(spec, n)),
            loss_rng: ChaCha8Rng::seed_from_u64(seed),
            qps: qp::Qps::default(),
            rocket: None,
            forwarders: None,
        })
    }

    /// Gives the nodes of `overrides` their forwarding capacity (before the run).
    pub fn with_node_overrides(
        mut self,
        topo: &Topology,
        overrides: &[NodeOverride],
    ) -> Result<PacketNet, String> {
        self.forwarders = forward::Forwarders::new(topo, overrides)?;
        Ok(self)
    }

    /// Turns Packet Rocket on (before the run) with the transport's
    /// threshold, reading one-way delays on `clocks` (`None`: true time),
    /// each reading less its host's `correction` when one is given.
    pub fn with_packet_rocket(
        mut self,
        topo: &Topology,
        clocks: Option<crate::engine::Clocks>,
        correction: Option<crate::transport::ClockCorrection>,
    ) -> PacketNet {
        if let Some(t) = self.transport.packet_rocket_threshold_ps {
            let ignore = self.transport.packet_rocket_ignore.rule();
            let senders = self.transport.packet_rocket_hosts.as_deref();
            self.rocket = Some(rocket_edge::EdgeRocket::new(
                t,
                ignore,
                clocks,
                correction,
                &topo.hosts,
                senders,
            ));
        }
        self
    }

    /// The congestion control of a new connection whose host NIC sends at `line_bps`.
    fn make_cc(&self, line_bps: u64) -> Box<dyn CongestionControl> {
        match self.transport.cc {
            CcKind::Newreno => Box::new(NewReno),
            CcKind::Dctcp => Box::new(Dctcp::new(
                self.transport.dctcp_g,
                self.transport.dctcp_initial_alpha,
            )),
            CcKind::Cubic => Box::new(Cubic::new(self.transport.cubic_fast_convergence)),
            CcKind::Dcqcn => Box::new(Dcqcn::new(line_bps as f64, self.dcqcn_params())),
        }
    }

    fn dcqcn_params(&self) -> DcqcnParams {
        self.transport
            .dcqcn
            .as_ref()
            .map_or_else(DcqcnParams::default, |d| d.params())
    }

    /// Puts a route in the arena (in a freed place of its length if there
    /// is one); returns where it starts.
    fn add_route(&mut self, route: &[u32]) -> u32 {
        if let Some(at) = self.free_routes.get_mut(&route.len()).and_then(|f| f.pop()) {
            let start = at as usize;
            self.routes[start..start + route.len()].copy_from_slice(route);
            return at;
        }
        let at = self.routes.len() as u32;
        self.routes.extend_from_slice(route);
        self.routes.push(ROUTE_END);
        at
    }

    /// Frees the place of the route that starts at `at`.
    fn free_route(&mut self, at: u32) {
        let len = self.route(at).len();
        self.free_routes.entry(len).or_default().push(at);
    }

    /// The route that starts at `at` in the arena.
    fn route(&self, at: u32) -> &[u32] {
        let rest = &self.routes[at as usize..];
        &rest[..rest.iter().position(|&p| p == ROUTE_END).expect("ended")]
    }

    /// Live connections (messages not yet fully acknowledged).
    pub fn live_connections(&self) -> usize {
        self.live_conns
    }

    /// Returns false for a stale event (its packet was lost when the link went down).
    #[inline]
    fn on_wire_head(&mut self, ctx: &mut Ctx, port: u32) -> bool {
        let p = &mut self.ports[port as usize];
        if p.wire.front().is_none_or(|&(t, _)| t != ctx.now) {
            return false;
        }
        let (_, pkt) = p.wire.pop_front().expect("checked");
        if let Some(&(next, _)) = p.wire.front() {
            ctx.schedule(
                next,
                NetEv {
                    kind: EV_WIRE_HEAD,
                    id: port,
                },
            );
        }
        if pkt.proto == PROTO_PAUSE {
            // Ports come in pairs (2i: a -> b, 2i + 1: b -> a): the frame
            // stops the receiver's egress port back over the same link.
            self.on_pause(ctx, port ^ 1, pkt.class, pkt.seq as u16);
            return true;
        }
        if let Some(f) = self.forwarders.as_deref() {
            if let Some(k) = f.of(self.port_ends[port as usize].1) {
                self.to_cpu(ctx, k, port, pkt);
                return true;
            }
        }
        self.forward_from(ctx, port, pkt);
        true
    }

    /// `pkt` entered the node at the end of `port` (and passed its
    /// processor, if it has one): the node's logic sees it, then it joins
    /// its next egress queue or, at its last hop, its host takes it.
    #[inline(always)]
    fn forward_from(&mut self, ctx: &mut Ctx, port: u32, mut pkt: Packet) {
        if (self.logics.any() || pkt.proto != PROTO_TCP)
            && self.at_node(ctx, self.port_ends[port as usize].1, port, &pkt)
        {
            return;
        }
        if self.conns[pkt.conn as usize].is_none() {
            // The connection already finished: a late duplicate, discarded.
            self.packets_in_network -= 1;
            return;
        }
        let at = pkt.at + 1;
        let next = self.routes[at as usize];
        if next != ROUTE_END {
            pkt.at = at;
            pkt.ingress = port;
            self.enqueue(ctx, next, pkt);
        } else {
            self.packets_in_network -= 1;
            if pkt.is_ack() {
                self.ack_arrived(ctx, pkt);
            } else {
                self.data_arrived(ctx, pkt);
            }
        }
    }

    fn data_arrived(&mut self, ctx: &mut Ctx, pkt: Packet) {
        let id = pkt.conn;
        let sack = self.transport.sack;
        let conn = self.conns[id as usize]
            .as_deref_mut()
            .expect("checked by caller");
        if pkt.flags & FLAG_SYN != 0 {
            // Answer every SYN (a retried one too) with a SYN-ACK.
            let mut syn_ack = Packet::tcp(id, 0, 0, wire_bytes(0), conn.class, FLAG_ACK | FLAG_SYN);
            syn_ack.at = conn.rev;
            let first = self.routes[conn.rev as usize];
            self.packets_in_network += 1;
            self.enqueue(ctx, first, syn_ack);
            return;
        }
        if let Some(r) = conn.rocket.as_deref_mut() {
            let edge = self
                .rocket
                .as_mut()
                .expect("a connection's rocket has the backend's");
            edge.arrived(r, pkt.tag, pkt.seq, ctx.now);
        }
        let before = conn.receiver.delivered_bytes();
        let ack_no = conn.receiver.on_segment(pkt.seq, pkt.payload);
        let now_in_order = conn.receiver.delivered_bytes();
        if now_in_order > before && (before == 0 || conn.notify_packets) {
            ctx.arrivals.push(Arrival {
                msg: id,
                bytes: now_in_order,
            });
        }
        // One ACK per data segment, echoing its CE mark (RFC 8257 §3.2 with
        // per-packet acknowledgments).
        let ece = if conn
            .receiver
            .echo_congestion(ctx.now, pkt.flags & FLAG_CE != 0)
        {
            FLAG_ECE
        } else {
            0
        };
        if conn.receiver.is_complete() && !conn.delivered {
            conn.delivered = true;
            ctx.completions.push(Completion {
                msg: id,
                retransmits: conn.sender.retransmits,
                cnps: conn.receiver.cnps,
            });
        }
        let mut ack = Packet::tcp(id, ack_no, 0, wire_bytes(0), conn.class, FLAG_ACK | ece);
        if sack {
            let mut blocks = [(0, 0); crate::transport::sack::MAX_SACK_BLOCKS];
            let n = conn.receiver.sack_blocks(&mut blocks);
            if n > 0 {
                (ack.payload, ack.wire) = conn.acks.push(&blocks, n);
            }
        }
        ack.at = conn.rev;
        ack.tag = pkt.tag;
        let first = self.routes[conn.rev as usize];
        self.packets_in_network += 1;
        self.enqueue(ctx, first, ack);
    }

    fn ack_arrived(&mut self, ctx: &mut Ctx, pkt: Packet) {
        let conn = self.conns[pkt.conn as usize]
            .as_deref_mut()
            .expect("checked by caller");
        if pkt.flags & FLAG_SYN != 0 {
            conn.sender.on_syn_ack(ctx.now);
        } else {
            let ece = pkt.flags & FLAG_ECE != 0;
            if pkt.payload != 0 {
                // A SACK option rides on it (`sack_option`).
                let mut blocks = [(0, 0); crate::transport::sack::MAX_SACK_BLOCKS];
                let n = conn.acks.take(pkt.payload, &mut blocks);
                conn.sender
                    .on_ack_sack(ctx.now, pkt.seq, ece, &blocks[..n]);
            } else {
                conn.sender.on_ack(ctx.now, pkt.seq, ece);
            }
            if let Some(r) = conn.rocket.as_deref_mut() {
                let edge = self
                    .rocket
                    .as_mut()
                    .expect("a connection's rocket has the backend's");
                edge.acked(r, pkt.tag, ctx.now);
            }
        }
        self.poll_conn(ctx, pkt.conn);
    }

    /// Polls a connection's sender, queues what it emits and re-arms its
    /// single timer event.
    fn poll_conn(&mut self, ctx: &mut Ctx, id: u32) {
        let mut segs = std::mem::take(&mut self.scratch);
        let conn = self.conns[id as usize]
            .as_deref_mut()
            .expect("poll of a finished connection");
        // Packet Rocket's hold: the sender is not polled until it ends.
        if conn
            .rocket
            .as_deref()
            .is_some_and(|r| r.held_until > ctx.now)
            && !conn.sender.is_done()
        {
            self.scratch = segs;
            self.hold_conn(ctx, id);
            return;
        }
        let budget = self.tsq_limit_bytes.saturating_sub(conn.nic_bytes);
        conn.sender.poll(ctx.now, budget, &mut |s| segs.push(s));
        conn.nic_bytes += segs.iter().map(|s| s.len as u64).sum::<u64>();
        let ect = if conn.sender.ecn_capable() {
            FLAG_ECT
        } else {
            0
        };
        let (route, class) = (conn.fwd, conn.class);
        let first = self.routes[route as usize];
        // One timer per connection. An event whose time no longer matches
        // the connection's armed time is stale and ignored when it fires
        // (cheaper than cancelling it in the heap on every ACK).
        if let Some(t) = conn.sender.poll_at() {
            if conn.timer.is_none_or(|t0| t < t0) {
                conn.timer = Some(t);
                ctx.schedule(
                    t,
                    NetEv {
                        kind: EV_CONN_TIMER,
                        id,
                    },
                );
            }
        }
        let finished = conn.sender.is_done();
        // Packet Rocket's tags are consecutive from the first one's (off: unread).
        let mut tag = match conn.rocket.as_deref_mut() {
            Some(r) => r.tag_all(&segs),
            None => 0,
        };
        let qp_done = conn
            .qp
            .filter(|_| conn.sender.all_sent())
            .map(|q| (q, conn.sender.next_send_ps()));
        for s in segs.drain(..) {
            let syn = if s.syn { FLAG_SYN } else { 0 };
            let mut pkt = Packet::tcp(id, s.seq, s.len, wire_bytes(s.len), class, ect | syn);
            pkt.at = route;
            pkt.tag = tag;
            tag = tag.wrapping_add(1);
            self.packets_in_network += 1;
            self.enqueue(ctx, first, pkt);
        }
        self.scratch = segs;
        if finished {
            let conn = self.conns[id as usize].take().expect("finished connection");
            if let (Some(edge), Some(r)) = (self.rocket.as_mut(), conn.rocket.as_deref()) {
                edge.close(id, r);
            }
            for &at in [conn.fwd, conn.rev].iter().chain(&conn.old_routes) {
                self.free_route(at);
            }
            if conn.persistent {
                self.windows
                    .insert(conn.pair, conn.sender.window_state(ctx.now));
            }
            self.live_conns -= 1;
        }
        if let Some((q, next_send_ps)) = qp_done {
            self.qp_sent_all(ctx, q, id, next_send_ps);
        }
    }

    /// A connection held by Packet Rocket: its one timer is the hold's end.
    #[cold]
    #[inline(never)]
    fn hold_conn(&mut self, ctx: &mut Ctx, id: u32) {
        let conn = self.conns[id as usize]
            .as_deref_mut()
            .expect("held and live");
        conn.sender.hold();
        let until = conn.rocket.as_deref().expect("held").held_until;
        if conn.timer.is_none_or(|t0| until < t0) {
            conn.timer = Some(until);
            ctx.schedule(
                until,
                NetEv {
                    kind: EV_CONN_TIMER,
                    id,
                },
            );
        }
    }

    /// Events other than wire arrivals and ends of serialization.
    #[inline(never)]
    fn handle_other(&mut self, ctx: &mut Ctx, ev: NetEv) -> bool {
        match ev.kind {
            EV_CONN_TIMER => self.on_conn_timer(ctx, ev.id),
            EV_PAUSE_END => self.on_pause_end(ctx, ev.id / 8, (ev.id % 8) as u8),
            EV_PFC_REFRESH => self.on_pfc_refresh(ctx, ev.id / 8, (ev.id % 8) as u8),
            EV_LOGIC => self.on_logic_timer(ctx, ev.id),
            EV_AGG_TIMER => self.on_agg_timer(ctx, ev.id),
            EV_FORWARD => self.on_cpu_done(ctx, ev.id),
            k => unreachable!("packet backend got event kind {k}"),
        }
    }

    fn on_conn_timer(&mut self, ctx: &mut Ctx, id: u32) -> bool {
        match self.conns[id as usize].as_deref_mut() {
            Some(conn) if conn.timer == Some(ctx.now) => {
                conn.timer = None;
                self.poll_conn(ctx, id);
                true
            }
            _ => false, // stale: re-armed since, or the connection finished
        }
    }
}

impl Backend for PacketNet {
    fn send(&mut self, ctx: &mut Ctx, send: BackendSend) {
        let BackendSend {
            msg,
            size_bytes,
            class,
            persistent,
            notify_packets,
            fwd,
            rev,
            aggregate,
            qp: app_qp,
        } = send;
        if let Some(job) = aggregate {
            let host = self.port_ends[fwd[0] as usize].0;
            self.agg_send(ctx, msg, host, job, size_bytes, notify_packets);
            return;
        }
        if self.conns.len() <= msg as usize {
            self.conns.resize_with(msg as usize + 1, || None);
        }
        let line_bps = self.ports[fwd[0] as usize].rate_bps();
        let pair = (
            self.port_ends[fwd[0] as usize].0,
            self.port_ends[*fwd.last().expect("route") as usize].1,
            class,
        );
        let dcqcn = self.dcqcn_params();
        let posted = app_qp
            .filter(|_| self.transport.cc == CcKind::Dcqcn)
            .map(|id| {
                self.qps
                    .post((pair.0, pair.1, id, class), msg, line_bps as f64, dcqcn)
            });
        let (mut sender, receiver) = match &posted {
            Some(p) => qp::message_ends(p, size_bytes, &self.sender_cfg, dcqcn.cnp_interval_ps),
            None => {
                let receiver = TcpReceiver::new(size_bytes);
                let sender = TcpSender::new(size_bytes, &self.sender_cfg, self.make_cc(line_bps));
                match self.transport.cc {
                    CcKind::Dcqcn => (sender, receiver.with_cnp_interval(dcqcn.cnp_interval_ps)),
                    _ => (sender, receiver),
                }
            }
        };
        let persistent = persistent || self.transport.persistent_connections;
        if persistent {
            if let Some(w) = self.windows.get(&pair) {
                sender.resume(w, ctx.now);
            }
        }
        let (fwd, rev) = (self.add_route(&fwd), self.add_route(&rev));
        self.conns[msg as usize] = Some(Box::new(Conn {
            fwd,
            rev,
            old_routes: Vec::new(),
            class,
            sender,
            receiver,
            timer: None,
            delivered: false,
            nic_bytes: 0,
            pair,
            persistent,
            notify_packets,
            qp: posted.as_ref().map(|p| p.qp),
            rocket: self.rocket.as_ref().and_then(|e| e.open(pair.0, pair.1)),
            acks: sack_option::AckOptions::default(),
        }));
        self.live_conns += 1;
        // A message queued behind others on its queue pair waits its turn.
        if posted.is_none_or(|p| p.start_from_ps.is_some()) {
            self.poll_conn(ctx, msg);
        }
    }

    fn set_class(&mut self, _ctx: &mut Ctx, msg: u32, class: u8) -> bool {
        // Packets already queued keep their band; the sender's later data
        // and retransmissions and the receiver's ACKs carry the new class.
        // The connection (and the persistent window it returns to) stays,
        // and so does its DCQCN queue pair, if any (see `qp`).
        match self.conns.get_mut(msg as usize) {
            Some(Some(conn)) => {
                conn.class = class;
                true
            }
            _ => false,
        }
    }

    // Inlined into `handle_run`'s loop: the two kinds nearly every event
    // is of by two tests, the others out of line (instead of one jump
    // table over all seven).
    #[inline(always)]
    fn handle(&mut self, ctx: &mut Ctx, ev: NetEv) -> bool {
        match ev.kind {
            EV_WIRE_HEAD => self.on_wire_head(ctx, ev.id),
            EV_PORT_TX => self.on_tx_done(ctx, ev.id),
            _ => self.handle_other(ctx, ev),
        }
    }

    fn sample_bands(&self, out: &mut Vec<BandSample>) {
        for (i, p) in self.ports.iter().enumerate() {
            p.qdisc.sample(i as u32, out);
        }
    }

    fn sample_classes(&self, out: &mut Vec<ClassSample>) {
        for (i, p) in self.ports.iter().enumerate() {
            for (c, &tx_bytes) in p.class_tx.iter().enumerate() {
                out.push(ClassSample {
                    port: i as u32,
                    class: c as u8,
                    tx_bytes,
                });
            }
        }
    }

    fn link_stats(&self, now_ps: u64) -> Vec<LinkStats> {
        self.ports.iter().map(|p| p.stats_at(now_ps)).collect()
    }

    fn in_flight(&self) -> usize {
        self.packets_in_network + self.live_conns + self.agg.as_ref().map_or(0, |a| a.live())
    }

    fn settle(&mut self, upto: crate::event::Position) -> Option<u64> {
        self.settle_ports(upto)
    }

    fn link_change(&mut self, ctx: &mut Ctx, link: u32, change: crate::engine::LinkChange) {
        self.apply_link_change(ctx, link, change);
    }

    fn live_messages(&self, out: &mut Vec<u32>) {
        self.live(out);
    }

    fn tables(&self) -> Vec<crate::engine::Table> {
        let mut t = self.logics.tables(&self.names);
        if let Some(r) = &self.rocket {
            t.push(r.table());
        }
        if let Some(f) = &self.forwarders {
            t.push(f.table(&self.names));
        }
        if let Some(a) = &self.agg {
            t.push(a.table(&self.names));
            if a.functional() {
                t.push(a.values_table(&self.names));
            }
        }
        t
    }

    fn reroute(&mut self, _ctx: &mut Ctx, msg: u32, fwd: Vec<u32>, rev: Vec<u32>) -> bool {
        self.set_routes(msg, fwd, rev)
    }
}

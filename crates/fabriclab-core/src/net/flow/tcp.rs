//! The flow backend's short-flow model (`flow_model = "tcp"`, the default):
//! slow-start rounds and the standing queues of window-unlimited flows, on
//! top of the max-min fluid rates. docs/architecture.md ("The flow
//! backend") derives it; in short:
//!
//! - **Slow start in rounds.** A flow starts with a window of
//!   `init_cwnd_packets` full segments (RFC 6928). Round k drains a window
//!   of `W_k = init x 2^k` segments' wire bits at the flow's max-min rate,
//!   then waits (rate 0, out of the allocation) until `RTT_k` after the
//!   round began; the next round doubles the window (one segment more per
//!   ACK, RFC 5681 §3.1, as the packet backend's TCP). A round whose window
//!   is still draining when its RTT is over is ACK-clocked from then on:
//!   the flow leaves slow start and is an ordinary fluid flow until it ends.
//! - **Paced rounds.** A round that does not end the flow (the rest is more
//!   than its window) is allocated as a flow capped at `W_k / RTT_k`
//!   (max-min with a cap, [`super::maxmin`]) rather than at its full share
//!   and then idle: it still sends `W_k` by the end of its RTT when its share
//!   allows (and is ACK-clocked from then on when not), so its own rounds
//!   take the same time, but the others see its mean rate over the round
//!   instead of a burst and a gap, and a round costs one reallocation
//!   instead of two. The last round (the rest fits the window) drains at
//!   the flow's full share, as before.
//! - **RTT of a round:** over the forward ports, propagation plus one full
//!   segment's serialization plus the port's queueing estimate; over the
//!   reverse ports, propagation plus one ACK's (84 bytes) serialization plus
//!   the queueing estimate; taken when the round begins.
//! - **Standing queues.** A flow out of slow start holds a standing queue
//!   at the first port of its path where it is bottlenecked (the port is
//!   full and no flow there gets more). With N such flows at a port, in one
//!   band, the queue's mean is that of a sawtooth between `Qmax` and
//!   `Qmax - A` ([`sawtooth_mean_bytes`]): DCTCP at an ECN threshold K:
//!   `Qmax = K + N` packets, `A = ½ sqrt(2N(BDP + K))` packets (Alizadeh et
//!   al., SIGCOMM'10, §3.3, eqs. 8-9); a loss-based queue of limit L
//!   (NewReno, or no marking): `Qmax = L`, `A = (BDP + L) / 2` (the flows
//!   halve their windows together); a queue without limit or marking (a
//!   host NIC: TCP Small Queues bound it): each flow keeps `tsq_limit_bytes`
//!   of payload in it. Each holder keeps an equal share, never more than it
//!   still has to send. Other flows crossing the port wait that queue (in
//!   their band and the bands above it); the flows holding it do not (their
//!   drain already counts the port's whole service). Bytes others send
//!   across a later port where a holder is bottlenecked too stay queued
//!   there ([`Holder`]).
//! - **Completion:** the last bit drains, then the last packet is stored and
//!   forwarded at every further hop (its serialization), crosses every
//!   link's propagation and waits each forward port's queue estimate.

use crate::fabric::frame::wire_bytes;
use serde::Deserialize;

/// The flow backend's model of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FlowModel {
    /// Max-min fluid rates only: no slow start, no queueing, no
    /// store-and-forward (the flow backend before the short-flow model; the
    /// core's reading when a resolved scenario names no model).
    #[default]
    Fluid,
    /// Slow-start rounds and standing-queue estimates ([`self`]).
    Tcp,
}

/// What the short-flow model knows of one egress port's queue.
#[derive(Debug, Clone, Copy)]
pub struct PortQueue {
    /// Band of each traffic class (all 0 for a FIFO).
    pub band_of: [u8; 8],
    /// ECN marking threshold in wire bytes, if the port marks.
    pub mark_bytes: Option<f64>,
    /// Drop-tail limit in wire bytes, if any.
    pub limit_bytes: Option<f64>,
}

impl PortQueue {
    /// Whether a flow bottlenecked here gets congestion signals (marks it
    /// reacts to, or losses) that set its window.
    pub fn signals(&self, ecn_capable: bool) -> bool {
        (ecn_capable && self.mark_bytes.is_some()) || self.limit_bytes.is_some()
    }

    /// A queue that neither drops nor marks (a host NIC without `[host_queue]`).
    pub fn unlimited() -> PortQueue {
        PortQueue {
            band_of: [0; 8],
            mark_bytes: None,
            limit_bytes: None,
        }
    }
}

/// The short-flow model's parameters: the transport's and every port's.
#[derive(Debug, Clone)]
pub struct ShortFlowSpec {
    pub model: FlowModel,
    /// Per port (the topology's port order).
    pub ports: Vec<PortQueue>,
    /// DCTCP (reacts to marks); otherwise NewReno (reacts to losses only).
    pub ecn_capable: bool,
    pub init_cwnd_packets: u32,
    pub tsq_limit_bytes: u64,
    /// A persistent connection idle longer than this starts in slow start again.
    pub min_rto_ps: u64,
}

impl ShortFlowSpec {
    /// The old fluid model over `ports` ports (nothing else is read).
    pub fn fluid(ports: usize) -> ShortFlowSpec {
        ShortFlowSpec {
            model: FlowModel::Fluid,
            ports: vec![PortQueue::unlimited(); ports],
            ecn_capable: false,
            init_cwnd_packets: 10,
            tsq_limit_bytes: 131_072,
            min_rto_ps: 0,
        }
    }
}

/// Mean of a queue that rises to `qmax` and falls by `a` at each
/// congestion signal (a sawtooth, linear in time), clipped at empty.
pub fn sawtooth_mean_bytes(qmax: f64, a: f64) -> f64 {
    if a <= qmax {
        qmax - a / 2.0
    } else {
        // Above zero a fraction qmax / a of the time, at qmax / 2 on average.
        qmax * qmax / (2.0 * a)
    }
}

/// The standing queue (wire bytes) that `n` window-unlimited flows
/// bottlenecked at a port keep in it; `bdp_bytes` is the port's rate times
/// the flows' mean base RTT, `pkt_bytes` a full segment's wire bytes.
pub fn standing_queue_bytes(
    q: &PortQueue,
    ecn_capable: bool,
    n: u32,
    bdp_bytes: f64,
    pkt_bytes: f64,
    tsq_wire_bytes: f64,
) -> f64 {
    let n_f = n as f64;
    match (ecn_capable, q.mark_bytes, q.limit_bytes) {
        (true, Some(k), limit) => {
            let qmax = k + n_f * pkt_bytes;
            let a = 0.5 * (2.0 * n_f * (bdp_bytes + k) * pkt_bytes).sqrt();
            let mean = sawtooth_mean_bytes(qmax, a);
            limit.map_or(mean, |l| mean.min(l))
        }
        (_, _, Some(l)) => sawtooth_mean_bytes(l, (bdp_bytes + l) / 2.0),
        (_, _, None) => n_f * tsq_wire_bytes,
    }
}

/// The queue (wire bytes) a window-unlimited flow has rebuilt at a port
/// that neither marks nor drops, `t_ps` after its window was cut (by
/// congestion signals at a port it has left as its bottleneck, or at a
/// tied port): in congestion avoidance the window grows one segment per
/// round trip (RFC 5681 §3.1; DCTCP's growth between marks, Alizadeh et
/// al., SIGCOMM'10, §3.3), and every byte of window above the path's pipe
/// waits in that queue, so with `q` queued the round trip is
/// `base_rtt_ps + q / C` and `dq/dt = pkt / (base + q / C)`; from an empty
/// queue, `base q + q² / (2C) = pkt t`:
/// `q(t) = C (sqrt(base² + 2 pkt t / C) - base)`, C in bytes per ps.
pub fn regrown_queue_bytes(t_ps: f64, base_rtt_ps: f64, rate_bps: f64, pkt_bytes: f64) -> f64 {
    if rate_bps <= 0.0 {
        return 0.0;
    }
    let c = rate_bps / 8e12;
    c * ((base_rtt_ps * base_rtt_ps + 2.0 * pkt_bytes * t_ps / c).sqrt() - base_rtt_ps)
}

/// Picoseconds to serialize `bytes` at `rate_bps` (0 when the port is down).
pub fn ser_ps(bytes: f64, rate_bps: f64) -> f64 {
    if rate_bps > 0.0 {
        bytes * 8.0 / rate_bps * 1e12
    } else {
        0.0
    }
}

/// Wire bytes of one full segment and of a pure ACK.
pub fn full_and_ack_wire(mss_bytes: u32) -> (f64, f64) {
    (wire_bytes(mss_bytes) as f64, wire_bytes(0) as f64)
}

/// A flow's slow-start state: its current round.
#[derive(Debug, Clone, Copy)]
pub struct SlowStart {
    /// This round's window, in wire bits.
    pub window_bits: f64,
    /// Bits of this round's window not yet drained.
    pub left_bits: f64,
    /// When this round's RTT is over.
    pub round_end_ps: u64,
    /// The round's window over its RTT: the flow's rate cap in a round
    /// that does not end the flow (paced rounds, module docs);
    /// `f64::INFINITY` in its last round (the rest fits the window).
    pub cap_bps: f64,
}

impl SlowStart {
    /// A round of `window_bits` starting at `now` with round trip `rtt_ps`,
    /// for a flow with `remaining_bits` still to send.
    pub fn round(window_bits: f64, now: u64, rtt_ps: f64, remaining_bits: f64) -> SlowStart {
        let rtt = rtt_ps.ceil() as u64;
        SlowStart {
            window_bits,
            left_bits: window_bits,
            round_end_ps: now + rtt,
            cap_bps: if remaining_bits > window_bits && rtt > 0 {
                window_bits / (rtt as f64 / 1e12)
            } else {
                f64::INFINITY
            },
        }
    }

    /// Not its last round: it sends at most its window over the round's RTT.
    pub fn paced(&self) -> bool {
        self.cap_bps < f64::INFINITY
    }
}

/// No standing port.
pub const NONE: u32 = u32::MAX;
/// Slots per port in the queue table: one per band (at most 8).
const BANDS: usize = 8;

/// The queueing estimate of every port: which flows hold a standing queue
/// where, and each one's share of it, recomputed when the window-unlimited
/// flows change ([`QueueEstimate::estimate`]); the queues themselves from
/// what those flows still have to send, at every event
/// ([`QueueEstimate::fill`]). Buffers are reused and only touched entries
/// are reset.
#[derive(Default)]
pub struct QueueEstimate {
    load_bps: Vec<f64>,
    max_bps: Vec<f64>,
    /// The ports whose load and largest rate were set (once per flow
    /// crossing them: no test of whether it was seen, a branch on data).
    touched: Vec<u32>,
    /// Per (port, band): window-unlimited flows bottlenecked there, the
    /// sum of their base RTTs, each one's share of the standing queue (wire
    /// bytes), and the queue they hold now.
    count: Vec<u32>,
    rtt_sum_ps: Vec<f64>,
    share_bytes: Vec<f64>,
    held_bytes: Vec<f64>,
    /// Of which bytes other flows moved there (a tied port, [`Holder`]).
    moved_bytes: Vec<f64>,
    counted: Vec<u32>,
    /// Per (port, band): the queueing delay a packet of that band waits
    /// (its band's standing queue and those of the bands above it).
    queue_ps: Vec<f64>,
    queued: Vec<u32>,
    /// Per port: in `queued` (its row not all zero).
    is_queued: Vec<bool>,
}

/// A flow holding a standing queue, as [`QueueEstimate::fill`] sees it.
///
/// It holds its share of the standing queue at `port`, the first port where
/// it is bottlenecked, never more than it has still to send (its last
/// bytes leave the queue as it ends). When it is bottlenecked at a later
/// port as well (`tied`: full, and it gets the most there, as a flow alone
/// on a host NIC and on its destination's link of the same rate), every
/// byte other flows send across that port while it holds it stays queued
/// there: the flow keeps arriving at the port's full rate, so what others
/// add never drains (two servers of one rate in tandem). Those `moved`
/// bytes fill the tied port's share of its queue; once full (its ECN
/// threshold, or its drop-tail limit), the congestion signals there cut
/// the flow's window, and the queue at the first port drains.
pub struct Holder {
    pub port: u32,
    pub tied: u32,
    pub class: u8,
    /// Wire bytes it has still to send.
    pub left_bytes: f64,
    /// Wire bytes others sent across `tied` since it held it.
    pub moved_bytes: f64,
    /// The most it has rebuilt of its queue at `port` since its window was
    /// last cut ([`regrown_queue_bytes`]; infinite: never cut there).
    pub regrown_bytes: f64,
}

/// One ordinary flow as the estimate sees it.
pub struct FlowView<'a> {
    pub class: u8,
    pub route: &'a [u32],
    pub rate_bps: f64,
    pub base_rtt_ps: f64,
    /// Out of slow start.
    pub long: bool,
}

impl QueueEstimate {
    pub fn new(ports: usize) -> QueueEstimate {
        QueueEstimate {
            load_bps: vec![0.0; ports],
            max_bps: vec![0.0; ports],
            count: vec![0; ports * BANDS],
            rtt_sum_ps: vec![0.0; ports * BANDS],
            share_bytes: vec![0.0; ports * BANDS],
            held_bytes: vec![0.0; ports * BANDS],
            moved_bytes: vec![0.0; ports * BANDS],
            queue_ps: vec![0.0; ports * BANDS],
            is_queued: vec![false; ports],
            ..Default::default()
        }
    }

    /// Ports with a standing queue now, and the queue there (wire bytes,
    /// every band).
    pub fn queued_bytes<'a>(
        &'a self,
        capacity_bps: &'a [f64],
    ) -> impl Iterator<Item = (usize, f64)> + 'a {
        self.queued.iter().map(move |&p| {
            let p = p as usize;
            (
                p,
                self.queue_ps[p * BANDS + BANDS - 1] * capacity_bps[p] / 8e12,
            )
        })
    }

    /// The queueing delay a packet of `class` waits at `port`.
    pub fn wait_ps(&self, spec: &ShortFlowSpec, port: u32, class: u8) -> f64 {
        self.queue_ps[slot(spec, port, class)]
    }

    /// The same for a packet of a flow that has sent `own_bytes`: those of
    /// its bytes moved to a tied port ([`Holder`]) are not ahead of it.
    pub fn wait_excluding_ps(
        &self,
        spec: &ShortFlowSpec,
        port: u32,
        class: u8,
        own_bytes: f64,
        capacity_bps: f64,
    ) -> f64 {
        let k = slot(spec, port, class);
        let own = own_bytes.min(self.moved_bytes[k]);
        (self.queue_ps[k] - ser_ps(own, capacity_bps)).max(0.0)
    }

    /// A holder's share of the standing queue at `port` (wire bytes).
    pub fn share_bytes(&self, spec: &ShortFlowSpec, port: u32, class: u8) -> f64 {
        self.share_bytes[slot(spec, port, class)]
    }

    /// Whether any flow holds a standing queue.
    pub fn any(&self) -> bool {
        !self.counted.is_empty()
    }

    /// Finds where each window-unlimited flow holds its standing queue, and
    /// its share there, from their max-min allocation: `loads` are every
    /// fluid object's (ports, rate) (ordinary flows and aggregation trees),
    /// `flows` the ordinary flows allocated. Writes each flow's standing
    /// port and the tied port after it ([`NONE`] if none) to `standing`;
    /// the queues are then [`QueueEstimate::fill`]ed.
    pub fn estimate<'a>(
        &mut self,
        spec: &ShortFlowSpec,
        capacity_bps: &[f64],
        loads: impl Iterator<Item = (&'a [u32], f64)>,
        flows: &[FlowView],
        pkt_bytes: f64,
        tsq_wire_bytes: f64,
        standing: &mut Vec<(u32, u32)>,
    ) {
        for &p in &self.touched {
            let p = p as usize;
            self.load_bps[p] = 0.0;
            self.max_bps[p] = 0.0;
        }
        self.touched.clear();
        for &k in &self.counted {
            self.count[k as usize] = 0;
            self.rtt_sum_ps[k as usize] = 0.0;
        }
        self.counted.clear();
        for (ports, rate) in loads {
            for &p in ports {
                let pu = p as usize;
                self.touched.push(p);
                self.load_bps[pu] += rate;
                self.max_bps[pu] = self.max_bps[pu].max(rate);
            }
        }
        standing.clear();
        for f in flows {
            // The first port where it is bottlenecked, and the last one
            // after it where it is bottlenecked as well (a tie: [`Holder`]).
            let (mut s, mut d) = (NONE, NONE);
            if f.long && f.rate_bps > 0.0 {
                for &p in f.route {
                    let pu = p as usize;
                    // Both tests taken, and the ports chosen by selects:
                    // whether a port holds the flow is a branch on data.
                    let held = (self.load_bps[pu] >= capacity_bps[pu] * (1.0 - 1e-9))
                        & (f.rate_bps >= self.max_bps[pu] * (1.0 - 1e-9));
                    d = if held && s != NONE { p } else { d };
                    s = if held && s == NONE { p } else { s };
                }
            }
            standing.push((s, d));
            for p in [s, d] {
                if p != NONE {
                    let k = slot(spec, p, f.class);
                    if self.count[k] == 0 {
                        self.counted.push(k as u32);
                    }
                    self.count[k] += 1;
                    self.rtt_sum_ps[k] += f.base_rtt_ps;
                }
            }
        }
        for &k in &self.counted {
            let p = k as usize / BANDS;
            let n = self.count[k as usize];
            let bdp = capacity_bps[p] * (self.rtt_sum_ps[k as usize] / n as f64) / 8e12;
            let q = standing_queue_bytes(
                &spec.ports[p],
                spec.ecn_capable,
                n,
                bdp,
                pkt_bytes,
                tsq_wire_bytes,
            );
            self.share_bytes[k as usize] = q / n as f64;
        }
    }

    /// The bytes moved to each tied port alone, as [`QueueEstimate::fill`]
    /// sets them from the same holders (their rebuilt queues not read).
    pub fn fill_moved(&mut self, spec: &ShortFlowSpec, holders: impl Iterator<Item = Holder>) {
        for &k in &self.counted {
            self.moved_bytes[k as usize] = 0.0;
        }
        for h in holders.filter(|h| h.tied != NONE) {
            let left = h.left_bytes.max(0.0);
            let k = slot(spec, h.tied, h.class);
            self.moved_bytes[k] += h.moved_bytes.clamp(0.0, self.share_bytes[k]).min(left);
        }
    }

    /// Sets every port's queue from its holders now ([`Holder`]).
    pub fn fill(
        &mut self,
        spec: &ShortFlowSpec,
        capacity_bps: &[f64],
        holders: impl Iterator<Item = Holder>,
    ) {
        for &p in &self.queued {
            self.is_queued[p as usize] = false;
            let p = p as usize * BANDS;
            self.queue_ps[p..p + BANDS].fill(0.0);
        }
        self.queued.clear();
        for &k in &self.counted {
            self.held_bytes[k as usize] = 0.0;
            self.moved_bytes[k as usize] = 0.0;
        }
        for h in holders {
            let left = h.left_bytes.max(0.0);
            let at = slot(spec, h.port, h.class);
            let first = self.share_bytes[at].min(h.regrown_bytes);
            let at_first = if h.tied == NONE {
                first.min(left)
            } else {
                let k = slot(spec, h.tied, h.class);
                let tied = self.share_bytes[k];
                let moved = h.moved_bytes.clamp(0.0, tied).min(left);
                self.held_bytes[k] += moved;
                self.moved_bytes[k] += moved;
                // Its window is held at the tied port once that queue is
                // full (the first one drains); until then both hold theirs.
                let at_first = if h.moved_bytes < tied { first } else { 0.0 };
                at_first.min(left - moved)
            };
            self.held_bytes[at] += at_first;
        }
        for &k in &self.counted {
            let (p, b) = (k as usize / BANDS, k as usize % BANDS);
            let wait = ser_ps(self.held_bytes[k as usize], capacity_bps[p]);
            if wait <= 0.0 {
                continue;
            }
            let row = p * BANDS;
            if !self.is_queued[p] {
                self.is_queued[p] = true;
                self.queued.push(p as u32);
            }
            for slot in &mut self.queue_ps[row + b..row + BANDS] {
                *slot += wait;
            }
        }
    }
}

/// The queue-table slot of `class` at `port` (its band there).
fn slot(spec: &ShortFlowSpec, port: u32, class: u8) -> usize {
    let b = spec.ports[port as usize].band_of[(class & 7) as usize] as usize;
    port as usize * BANDS + b.min(BANDS - 1)
}

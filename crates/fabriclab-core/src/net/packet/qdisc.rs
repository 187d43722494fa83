//! Egress queue disciplines: drop-tail FIFO, strict priority with N bands
//! (like Linux `prio`/`pfifo_fast`), per-flow fair queueing in one band
//! (`fq`, a host's NIC as Linux's `fq` qdisc serves it), per-band ECN
//! marking on the instantaneous queue length, either a step at a threshold
//! (as DCTCP's switches do, SIGCOMM'10 §3.1) or RED's probability ramp
//! between Kmin and Kmax (as DCQCN's switches do, SIGCOMM'15 §3.1), and a
//! per-band pause mask as the hook for PFC (IEEE 802.1Qbb).

use super::header::{Packet, FLAG_CE, FLAG_ECT};
use crate::engine::BandSample;
use crate::fabric::topology::mix64;
use serde::Deserialize;
use std::collections::{HashMap, VecDeque};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Discipline {
    Fifo,
    Prio,
    /// One band whose packets are served per flow in deficit round robin
    /// ([`FairBand`]); limits and marking apply to the band as a whole.
    Fq,
}

/// The bytes a flow of an `fq` band may send per turn: Linux `fq`'s
/// default quantum, two MTU-sized frames (tc-fq(8): "quantum ... default
/// 2 * interface MTU"), here as wire bytes of full Ethernet frames.
pub const FQ_QUANTUM_BYTES: i64 = 2 * 1538;

/// Packets of one band served per flow in deficit round robin (Shreedhar
/// and Varghese, SIGCOMM'95; Linux `fq`'s credit rule): the flow at the
/// head of the active list sends while its credit is positive, then goes
/// to the back with one quantum more; a flow that empties leaves the list
/// and comes back with one quantum (Linux's `fq` would also serve newly
/// active flows first and remember a returning flow's debt for a while).
/// A flow is a transport connection or an aggregation tree (`proto`, `conn`).
#[derive(Default)]
pub struct FairBand {
    index: HashMap<u64, usize>,
    queues: Vec<VecDeque<Packet>>,
    credit: Vec<i64>,
    active: VecDeque<usize>,
    /// Slots of flows that emptied, for reuse.
    free: Vec<usize>,
    len: usize,
}

impl FairBand {
    fn flow_of(pkt: &Packet) -> u64 {
        (pkt.proto as u64) << 32 | pkt.conn as u64
    }

    fn push_back(&mut self, pkt: Packet) {
        let key = Self::flow_of(&pkt);
        let f = match self.index.get(&key) {
            Some(&f) => f,
            None => {
                let f = self.free.pop().unwrap_or_else(|| {
                    self.queues.push(VecDeque::new());
                    self.credit.push(0);
                    self.queues.len() - 1
                });
                self.index.insert(key, f);
                f
            }
        };
        if self.queues[f].is_empty() {
            self.credit[f] = FQ_QUANTUM_BYTES;
            self.active.push_back(f);
        }
        self.queues[f].push_back(pkt);
        self.len += 1;
    }

    fn pop_front(&mut self) -> Option<Packet> {
        loop {
            let &f = self.active.front()?;
            if self.credit[f] <= 0 {
                self.credit[f] += FQ_QUANTUM_BYTES;
                self.active.rotate_left(1);
                continue;
            }
            let pkt = self.queues[f]
                .pop_front()
                .expect("active flows hold packets");
            self.credit[f] -= pkt.wire as i64;
            if self.queues[f].is_empty() {
                // An emptied flow leaves: its slot is reused by the next new
                // flow (its credit restarts at one quantum anyway).
                self.active.pop_front();
                self.index.remove(&Self::flow_of(&pkt));
                self.free.push(f);
            }
            self.len -= 1;
            return Some(pkt);
        }
    }
}

/// One band's packets: in arrival order, or per flow.
enum BandQueue {
    Fifo(VecDeque<Packet>),
    Fair(FairBand),
}

impl BandQueue {
    #[inline]
    fn len(&self) -> usize {
        match self {
            BandQueue::Fifo(q) => q.len(),
            BandQueue::Fair(q) => q.len,
        }
    }
    #[inline]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    #[inline]
    fn push_back(&mut self, pkt: Packet) {
        match self {
            BandQueue::Fifo(q) => q.push_back(pkt),
            BandQueue::Fair(q) => q.push_back(pkt),
        }
    }
    #[inline]
    fn pop_front(&mut self) -> Option<Packet> {
        match self {
            BandQueue::Fifo(q) => q.pop_front(),
            BandQueue::Fair(q) => q.pop_front(),
        }
    }
}

/// Egress queue discipline of every switch port. Limits and ECN thresholds
/// apply per band (as Linux `prio` gives each band its own child FIFO).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    pub discipline: Discipline,
    pub bands: u8,
    /// `priomap[class]` is the band of traffic class `class` (band 0 is served first).
    pub priomap: [u8; 8],
    pub limit_bytes: Option<u64>,
    pub limit_packets: Option<u64>,
    pub ecn_threshold_bytes: Option<u64>,
    pub ecn_threshold_packets: Option<u64>,
    /// RED's marking ramp on the band's bytes (all three or none; a packet
    /// is marked when a step threshold or the ramp says so): see [`EcnRamp`].
    #[serde(default)]
    pub ecn_kmin_bytes: Option<u64>,
    #[serde(default)]
    pub ecn_kmax_bytes: Option<u64>,
    #[serde(default)]
    pub ecn_pmax: Option<f64>,
}

/// RED-style ECN marking on the instantaneous queue (no averaging, as
/// DCQCN configures its switches, Zhu et al. SIGCOMM'15 §3.1 and figure 4;
/// the ns-3 HPCC repository's `SwitchMmu::ShouldSendCN`): a packet arriving
/// to a band holding `q` bytes is marked with probability 0 for
/// `q <= kmin`, `pmax (q - kmin) / (kmax - kmin)` for `kmin < q <= kmax`,
/// and 1 above `kmax`. The draws come from a seeded SplitMix64 stream per
/// queue (Steele, Lea and Flood, OOPSLA'14), one draw per ECN-capable packet
/// on the ramp only.
#[derive(Debug, Clone, Copy)]
pub struct EcnRamp {
    pub kmin_bytes: u64,
    pub kmax_bytes: u64,
    pub pmax: f64,
    state: u64,
}

impl EcnRamp {
    pub fn new(kmin_bytes: u64, kmax_bytes: u64, pmax: f64, seed: u64) -> EcnRamp {
        EcnRamp {
            kmin_bytes,
            kmax_bytes,
            pmax,
            state: seed,
        }
    }

    /// The marking probability at a queue of `bytes`.
    pub fn probability(&self, bytes: u64) -> f64 {
        if bytes <= self.kmin_bytes {
            0.0
        } else if bytes > self.kmax_bytes {
            1.0
        } else {
            self.pmax * (bytes - self.kmin_bytes) as f64
                / (self.kmax_bytes - self.kmin_bytes) as f64
        }
    }

    /// Whether a packet arriving to a queue of `bytes` is marked.
    #[inline]
    pub fn mark(&mut self, bytes: u64) -> bool {
        if bytes <= self.kmin_bytes {
            return false;
        }
        if bytes > self.kmax_bytes {
            return true;
        }
        self.uniform() < self.probability(bytes)
    }

    /// SplitMix64's next output as a uniform in [0, 1) (53 bits).
    fn uniform(&mut self) -> f64 {
        let z = mix64(self.state);
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The starting state of port `port`'s marking stream in a run seeded `seed`:
/// a pseudo-random point of SplitMix64's sequence per (seed, port). (XOR-ing
/// the seed with multiples of SplitMix's own step, as first written, put
/// ports on one stream a few draws apart.)
pub fn port_marking_seed(seed: u64, port: usize) -> u64 {
    mix64(seed ^ mix64(port as u64 + 1))
}

/// A queue discipline for the egress ports of one node (`to: None`) or of
/// one link direction `from -> to` (node indices).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueOverride {
    pub from: u32,
    #[serde(default)]
    pub to: Option<u32>,
    pub queue: QueueSpec,
}

/// One band's queued bytes and cumulative wire bytes sent, drops and marks.
#[derive(Debug, Clone, Copy, Default)]
struct BandCounters {
    bytes: u64,
    tx: u64,
    drops: u64,
    marks: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    Queued,
    Marked,
    Dropped,
}

pub struct Qdisc {
    bands: Vec<BandQueue>,
    /// Per band: bytes queued and cumulative counters, side by side (one cache line).
    band: Vec<BandCounters>,
    priomap: [u8; 8],
    limit_bytes: u64,
    limit_packets: u64,
    ecn_bytes: u64,
    ecn_packets: u64,
    /// RED's ramp, beside the step thresholds.
    ramp: Option<EcnRamp>,
    /// Bit b set: band b may not be dequeued (paused by PFC).
    paused: u32,
    total_bytes: u64,
}

/// The band of traffic class `class` among `bands` (a priomap entry past
/// the last band goes to the last).
#[inline(always)]
fn band_index(priomap: &[u8; 8], class: u8, bands: usize) -> usize {
    (priomap[(class & 7) as usize] as usize).min(bands - 1)
}

/// Counts a packet dequeued to be sent from a band with counters `c`.
#[inline(always)]
fn sent(c: &mut BandCounters, total_bytes: &mut u64, p: &Packet) {
    c.bytes -= p.wire as u64;
    *total_bytes -= p.wire as u64;
    c.tx += p.wire as u64;
}

impl Qdisc {
    pub fn new(spec: &QueueSpec) -> Qdisc {
        let nb = match spec.discipline {
            Discipline::Fifo | Discipline::Fq => 1,
            Discipline::Prio => spec.bands.max(1) as usize,
        };
        let mut priomap = spec.priomap;
        if spec.discipline != Discipline::Prio {
            priomap = [0; 8];
        }
        let band = |_| match spec.discipline {
            Discipline::Fq => BandQueue::Fair(FairBand::default()),
            _ => BandQueue::Fifo(VecDeque::new()),
        };
        let ramp = match (spec.ecn_kmin_bytes, spec.ecn_kmax_bytes, spec.ecn_pmax) {
            (Some(kmin), Some(kmax), Some(pmax)) => Some(EcnRamp::new(kmin, kmax, pmax, 0)),
            _ => None,
        };
        Qdisc {
            bands: (0..nb).map(band).collect(),
            band: vec![BandCounters::default(); nb],
            priomap,
            limit_bytes: spec.limit_bytes.unwrap_or(u64::MAX),
            limit_packets: spec.limit_packets.unwrap_or(u64::MAX),
            ecn_bytes: spec.ecn_threshold_bytes.unwrap_or(u64::MAX),
            ecn_packets: spec.ecn_threshold_packets.unwrap_or(u64::MAX),
            ramp,
            paused: 0,
            total_bytes: 0,
        }
    }

    /// A queue without limit or marking (hosts' NIC queues), same band layout.
    pub fn unlimited(spec: &QueueSpec) -> Qdisc {
        let mut q = Qdisc::new(spec);
        q.limit_bytes = u64::MAX;
        q.limit_packets = u64::MAX;
        q.ecn_bytes = u64::MAX;
        q.ecn_packets = u64::MAX;
        q.ramp = None;
        q
    }

    /// Seeds the marking ramp's random stream (no effect without a ramp).
    pub fn seed_marking(&mut self, seed: u64) {
        if let Some(r) = self.ramp.as_mut() {
            r.state = seed;
        }
    }

    #[inline]
    pub fn band_of(&self, class: u8) -> usize {
        // One band (fifo, fq): no lookup, so that finding the band's queue
        // waits on no load of the packet's class and the priomap (sixth pass).
        if self.bands.len() == 1 {
            return 0;
        }
        band_index(&self.priomap, class, self.bands.len())
    }

    /// Enqueue with drop-tail per band; ECT packets are marked CE when the
    /// band holds more than the threshold on arrival.
    pub fn enqueue(&mut self, pkt: Packet) -> Enqueued {
        self.enqueue_inner(pkt, false)
    }

    /// [`enqueue`](Self::enqueue) inlined into its caller: for the packet
    /// path's one call per hop (a call saved and restored six registers).
    #[inline(always)]
    pub fn enqueue_inlined(&mut self, pkt: Packet) -> Enqueued {
        self.enqueue_inner(pkt, false)
    }

    /// Enqueue a packet of a lossless class (PFC keeps it within its
    /// headroom): never dropped by the band's limit; marked as usual.
    pub fn enqueue_lossless(&mut self, pkt: Packet) -> Enqueued {
        self.enqueue_inner(pkt, true)
    }

    /// Counts a packet of `class` dropped before reaching this queue.
    pub fn count_drop(&mut self, class: u8) {
        let b = self.band_of(class);
        self.band[b].drops += 1;
    }

    #[inline(always)]
    fn enqueue_inner(&mut self, mut pkt: Packet, lossless: bool) -> Enqueued {
        let (q, c) = match (&mut self.bands[..], &mut self.band[..]) {
            // One band (fifo, fq): its queue and counters without an index.
            ([q], [c]) => (q, c),
            (qs, cs) => {
                let b = band_index(&self.priomap, pkt.class, qs.len());
                (&mut qs[b], &mut cs[b])
            }
        };
        let bytes = c.bytes;
        if !lossless
            && (bytes + pkt.wire as u64 > self.limit_bytes
                || q.len() as u64 + 1 > self.limit_packets)
        {
            c.drops += 1;
            return Enqueued::Dropped;
        }
        let mut res = Enqueued::Queued;
        if pkt.flags & FLAG_ECT != 0
            && (bytes > self.ecn_bytes
                || q.len() as u64 > self.ecn_packets
                || self.ramp.as_mut().is_some_and(|r| r.mark(bytes)))
        {
            pkt.flags |= FLAG_CE;
            c.marks += 1;
            res = Enqueued::Marked;
        }
        c.bytes += pkt.wire as u64;
        self.total_bytes += pkt.wire as u64;
        q.push_back(pkt);
        res
    }

    /// Strict priority: the lowest-numbered non-empty, non-paused band.
    #[inline(always)]
    pub fn dequeue(&mut self) -> Option<Packet> {
        if let ([q], [c]) = (&mut self.bands[..], &mut self.band[..]) {
            // One band (fifo, fq): no loop over the bands.
            if self.paused & 1 != 0 {
                return None;
            }
            let p = q.pop_front()?;
            sent(c, &mut self.total_bytes, &p);
            return Some(p);
        }
        for b in 0..self.bands.len() {
            if self.paused & (1 << b) != 0 {
                continue;
            }
            if let Some(p) = self.bands[b].pop_front() {
                sent(&mut self.band[b], &mut self.total_bytes, &p);
                return Some(p);
            }
        }
        None
    }

    /// Removes the next packet in band order, paused bands included (a link going down).
    pub fn dequeue_any(&mut self) -> Option<Packet> {
        for b in 0..self.bands.len() {
            if let Some(p) = self.bands[b].pop_front() {
                self.band[b].bytes -= p.wire as u64;
                self.total_bytes -= p.wire as u64;
                self.band[b].drops += 1;
                return Some(p);
            }
        }
        None
    }

    /// PFC: pauses exactly the bands that carry a class of `classes` (bit c
    /// set: class c is paused); the others may be dequeued.
    pub fn set_paused_classes(&mut self, classes: u8) {
        self.paused = (0..8u8)
            .filter(|c| classes & (1 << c) != 0)
            .fold(0, |m, c| m | 1 << self.band_of(c));
    }

    /// Whether any packet waits in a band that is not paused.
    pub fn has_sendable(&self) -> bool {
        (0..self.bands.len()).any(|b| self.paused & (1 << b) == 0 && !self.bands[b].is_empty())
    }

    /// Appends one sample per band of this queue (egress port `port`).
    pub fn sample(&self, port: u32, out: &mut Vec<BandSample>) {
        for b in 0..self.bands.len() {
            out.push(BandSample {
                port,
                band: b as u8,
                queue_bytes: self.band[b].bytes,
                tx_bytes: self.band[b].tx,
                drops: self.band[b].drops,
                ecn_marks: self.band[b].marks,
                paused: self.paused & (1 << b) != 0,
            });
        }
    }

    pub fn bytes(&self) -> u64 {
        self.total_bytes
    }

    pub fn band_bytes(&self, band: usize) -> u64 {
        self.band[band].bytes
    }

    pub fn is_empty(&self) -> bool {
        self.total_bytes == 0
    }
}

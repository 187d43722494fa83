//! The aggregation accelerator of one switch (PANAMA section 5).
//!
//! Configured per job and tree by the controller: the input ports that
//! take part (the paper's ports bitmap, here with the number of workers
//! below each port) and the port toward the tree's root (none at the
//! root). An upward packet waits in its input port's queue; the tree's
//! expected VID (initially 0) aggregates once the heads of the queues
//! holding it cover enough workers: all of them, or `sync_fraction` of
//! them for PANAMA-0.88/0.94. The sum goes up toward the root, or at the
//! root back down to every input port; downward results are copied to
//! every input port of the tree. When the expected VID can no longer be
//! covered (a port's head is already past it: its packet was lost, since a
//! tree delivers in order) its partial contributions are dropped and
//! aggregation goes on with the next VID. FIN on an aggregated (or skipped)
//! VID resets the tree's expected VID to 0; a port that had not delivered
//! that last VID still owes the old round's packets, which are dropped as
//! stale up to and including its FIN. A packet more than [`VID_HORIZON`]
//! VIDs ahead of the expected one (no window allows it: `cwnd_cap` is 16
//! bits) is refused as unknown rather than skipping everything before it,
//! and vectors of different lengths for one VID are not summed (the VID is
//! skipped and counted as mismatched).
//!
//! The buffer (`memory_bytes`, 64 MB in the paper's evaluation) is shared
//! equally by the configured jobs (`packet_memory / num_jobs`); a packet
//! that does not fit in its job's share is dropped, unless it carries the
//! expected VID (the one that frees the buffer; so a job holds at most one
//! packet per input port beyond its share). Every result carries
//! the OR of the ECN bits it summed and a `cwnd_cap` lowered to this
//! switch's [`cwnd_cap_packets`], if that is smaller.

use crate::wire::{Header, ECN_CE};
use std::collections::{BTreeMap, VecDeque};

/// A gradient vector the accelerator can sum.
pub trait Vector {
    fn add_from(&mut self, other: &Self);
}

/// Timing only: packets carry sizes, not values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoValues;

impl Vector for NoValues {
    fn add_from(&mut self, _: &Self) {}
}

impl Vector for Vec<f32> {
    fn add_from(&mut self, other: &Self) {
        for (a, b) in self.iter_mut().zip(other) {
            *a += *b;
        }
    }
}

/// One job's tree as it passes this switch.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeConfig {
    pub job: u16,
    pub tree: u8,
    /// Input ports (toward workers) and how many workers each leads to, in
    /// the order their vectors are summed.
    pub children: Vec<(u32, u16)>,
    /// The port toward the root; None at the root.
    pub parent: Option<u32>,
    /// Aggregate once this fraction of the workers below has contributed
    /// (1 = all; PANAMA-0.88 uses 0.88). Within (0, 1].
    pub sync_fraction: f64,
}

/// The window (in packets, per worker and tree) this switch allows a job:
/// its buffer share (`packet_memory / num_jobs`, section 4.2's "available
/// memory"), in packets of `payload_bytes`, divided among the job's input
/// ports and trees here. Each input port queues at most one window of
/// distinct VIDs per tree (a VID leaves a lower switch only once all its
/// workers sent it), so windows within this cap never overflow the share,
/// however skewed the workers are; the share alone would let each of the
/// ports fill it.
pub fn cwnd_cap_packets(share_bytes: u64, payload_bytes: u32, inputs: usize, trees: usize) -> u16 {
    let per = (inputs.max(1) * trees.max(1)) as u64;
    (share_bytes / payload_bytes.max(1) as u64 / per).min(u16::MAX as u64) as u16
}

/// The furthest a packet's VID may be ahead of its tree's expected VID.
pub const VID_HORIZON: u32 = 1 << 16;

/// Counts of what happened, for results and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub received: u64,
    /// VIDs aggregated (one result each).
    pub aggregated: u64,
    /// VIDs given up because a contribution can no longer arrive.
    pub skipped: u64,
    /// Packets of an already aggregated or skipped VID (late or partial sync's stragglers).
    pub stale: u64,
    /// Packets dropped because their job's buffer share was full.
    pub overflow: u64,
    /// Packets of a job or tree not configured here, from a port not in its
    /// tree, or with a VID beyond the horizon.
    pub unknown: u64,
    /// VIDs whose contributions had different vector lengths (not summed).
    pub mismatched: u64,
    pub results_sent: u64,
}

struct Tree<V> {
    cfg: TreeConfig,
    need: u32,
    expected: u32,
    queues: Vec<VecDeque<(Header, V)>>,
    /// Per port: still owes the previous round's packets up to its FIN.
    owes_fin: Vec<bool>,
    /// The largest packet seen on this tree: windows count packets of this
    /// size (a message's short last packet must not widen the cap).
    max_payload: u32,
}

/// What the switch should do with a packet it showed the accelerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Taken (queued, aggregated, copied or dropped).
    Taken,
    /// Not an aggregation packet of a tree configured here.
    NotMine,
}

pub struct Accelerator<V> {
    memory_bytes: u64,
    trees: BTreeMap<(u16, u8), Tree<V>>,
    /// Bytes queued per job.
    used: BTreeMap<u16, u64>,
    pub counters: Counters,
}

impl<V: Vector> Accelerator<V> {
    pub fn new(memory_bytes: u64) -> Self {
        Accelerator {
            memory_bytes,
            trees: BTreeMap::new(),
            used: BTreeMap::new(),
            counters: Counters::default(),
        }
    }

    /// Adds (or replaces) a tree; its job becomes active here.
    pub fn configure(&mut self, cfg: TreeConfig) -> Result<(), String> {
        let what = format!("job {} tree {}", cfg.job, cfg.tree);
        if cfg.children.is_empty() {
            return Err(format!("{what}: no input ports"));
        }
        if !(cfg.sync_fraction > 0.0 && cfg.sync_fraction <= 1.0) {
            return Err(format!(
                "{what}: sync_fraction must be within (0, 1], got {}",
                cfg.sync_fraction
            ));
        }
        let mut ports: Vec<u32> = cfg.children.iter().map(|c| c.0).collect();
        ports.sort_unstable();
        if ports.windows(2).any(|w| w[0] == w[1]) {
            return Err(format!("{what}: an input port is listed twice"));
        }
        if let Some(p) = cfg.parent {
            if ports.binary_search(&p).is_ok() {
                return Err(format!(
                    "{what}: port {p} is both an input and the way to the root"
                ));
            }
        }
        if cfg.children.iter().any(|c| c.1 == 0) {
            return Err(format!(
                "{what}: every input port must lead to at least one worker"
            ));
        }
        let workers: u32 = cfg.children.iter().map(|c| c.1 as u32).sum();
        // The smallest whole number of workers that is at least the fraction (a hair of slack for 0.88 x 25 = 22.000000000000004).
        let need = ((cfg.sync_fraction * workers as f64) - 1e-9)
            .ceil()
            .max(1.0) as u32;
        let queues = cfg.children.iter().map(|_| VecDeque::new()).collect();
        let owes_fin = vec![false; cfg.children.len()];
        let used = self.used.entry(cfg.job).or_insert(0);
        if let Some(old) = self.trees.insert(
            (cfg.job, cfg.tree),
            Tree {
                cfg,
                need,
                expected: 0,
                queues,
                owes_fin,
                max_payload: 0,
            },
        ) {
            *used -= old
                .queues
                .iter()
                .flatten()
                .map(|(h, _)| h.payload_bytes() as u64)
                .sum::<u64>();
        }
        Ok(())
    }

    /// Forgets a job: its trees, queued packets and buffer share.
    pub fn remove_job(&mut self, job: u16) {
        self.trees.retain(|k, _| k.0 != job);
        self.used.remove(&job);
    }

    pub fn active_jobs(&self) -> usize {
        self.used.len()
    }
    /// Each active job's share of the buffer (`packet_memory / num_jobs`).
    pub fn share_bytes(&self) -> u64 {
        self.memory_bytes / self.used.len().max(1) as u64
    }
    pub fn used_bytes(&self) -> u64 {
        self.used.values().sum()
    }
    pub fn job_used_bytes(&self, job: u16) -> u64 {
        self.used.get(&job).copied().unwrap_or(0)
    }
    pub fn expected_vid(&self, job: u16, tree: u8) -> Option<u32> {
        self.trees.get(&(job, tree)).map(|t| t.expected)
    }

    /// A packet arrived over `ingress`; sends go to `out` as (egress port, header, vector).
    pub fn on_packet(
        &mut self,
        ingress: u32,
        h: Header,
        v: V,
        out: &mut Vec<(u32, Header, V)>,
    ) -> Verdict
    where
        V: Clone,
    {
        let trees_here = self.trees.range((h.job, 0)..=(h.job, u8::MAX)).count();
        let Some(t) = self.trees.get_mut(&(h.job, h.tree)) else {
            return Verdict::NotMine;
        };
        self.counters.received += 1;
        if h.result {
            if t.cfg.parent != Some(ingress) {
                self.counters.unknown += 1;
                return Verdict::Taken;
            }
            for &(port, _) in &t.cfg.children {
                out.push((port, h, v.clone()));
                self.counters.results_sent += 1;
            }
            return Verdict::Taken;
        }
        let Some(i) = t.cfg.children.iter().position(|c| c.0 == ingress) else {
            self.counters.unknown += 1;
            return Verdict::Taken;
        };
        if t.owes_fin[i] {
            // The rest of the previous round from a port that missed its last aggregation.
            t.owes_fin[i] = !h.fin;
            self.counters.stale += 1;
            return Verdict::Taken;
        }
        if h.vid < t.expected {
            self.counters.stale += 1;
            return Verdict::Taken;
        }
        if h.vid - t.expected >= VID_HORIZON {
            self.counters.unknown += 1;
            return Verdict::Taken;
        }
        let share = self.memory_bytes / self.used.len().max(1) as u64;
        let used = self.used.get_mut(&h.job).expect("configured job");
        let bytes = h.payload_bytes() as u64;
        // The expected VID is always let in: it is what frees the buffer.
        // Were it refused while other ports' later VIDs fill the share, the
        // tree would wait for it forever.
        if *used + bytes > share && h.vid != t.expected {
            self.counters.overflow += 1;
            return Verdict::Taken;
        }
        *used += bytes;
        t.max_payload = t.max_payload.max(h.payload_bytes());
        t.queues[i].push_back((h, v));
        Self::drain(t, used, share, trees_here, &mut self.counters, out);
        Verdict::Taken
    }

    /// Aggregates (or skips) expected VIDs for as long as the queues allow.
    fn drain(
        t: &mut Tree<V>,
        used: &mut u64,
        share: u64,
        trees_here: usize,
        c: &mut Counters,
        out: &mut Vec<(u32, Header, V)>,
    ) where
        V: Clone,
    {
        loop {
            let e = t.expected;
            for q in t.queues.iter_mut() {
                while q.front().is_some_and(|(h, _)| h.vid < e) {
                    let (h, _) = q.pop_front().expect("non-empty");
                    *used -= h.payload_bytes() as u64;
                    c.stale += 1;
                }
            }
            let (mut have, mut may) = (0u32, 0u32);
            for (q, &(_, w)) in t.queues.iter().zip(&t.cfg.children) {
                match q.front() {
                    Some((h, _)) if h.vid == e => have += h.workers.max(1).min(w) as u32,
                    Some(_) => {}
                    None => may += w as u32,
                }
            }
            let counts_differ = {
                let mut counts = t
                    .queues
                    .iter()
                    .filter_map(|q| q.front())
                    .filter(|(h, _)| h.vid == e)
                    .map(|(h, _)| h.count);
                let first = counts.next();
                counts.any(|c| Some(c) != first)
            };
            if have >= t.need && counts_differ {
                c.mismatched += 1;
            }
            if have >= t.need && !counts_differ {
                let mut sum: Option<(Header, V)> = None;
                let mut took = vec![false; t.queues.len()];
                for (k, q) in t.queues.iter_mut().enumerate() {
                    if q.front().is_some_and(|(h, _)| h.vid == e) {
                        let (h, v) = q.pop_front().expect("non-empty");
                        *used -= h.payload_bytes() as u64;
                        took[k] = true;
                        match &mut sum {
                            None => sum = Some((h, v)),
                            Some((s, sv)) => {
                                sv.add_from(&v);
                                s.workers = s.workers.saturating_add(h.workers);
                                s.fin |= h.fin;
                                s.ecn = if s.ce() || h.ce() {
                                    ECN_CE
                                } else {
                                    s.ecn.max(h.ecn)
                                };
                                s.cwnd_cap = s.cwnd_cap.min(h.cwnd_cap);
                            }
                        }
                    }
                }
                let (mut h, v) = sum.expect("have > 0");
                let cap = cwnd_cap_packets(share, t.max_payload, t.cfg.children.len(), trees_here);
                h.cwnd_cap = h.cwnd_cap.min(cap);
                c.aggregated += 1;
                if h.fin {
                    Self::new_round(t, &took, used, c);
                } else {
                    t.expected = e.saturating_add(1);
                }
                match t.cfg.parent {
                    Some(p) => out.push((p, h, v)),
                    None => {
                        h.result = true;
                        for &(port, _) in &t.cfg.children {
                            out.push((port, h, v.clone()));
                            c.results_sent += 1;
                        }
                        continue;
                    }
                }
                c.results_sent += 1;
            } else if have + may < t.need || counts_differ {
                let mut fin = false;
                let mut took = vec![false; t.queues.len()];
                for (k, q) in t.queues.iter_mut().enumerate() {
                    if q.front().is_some_and(|(h, _)| h.vid == e) {
                        let (h, _) = q.pop_front().expect("non-empty");
                        *used -= h.payload_bytes() as u64;
                        fin |= h.fin;
                        took[k] = true;
                    }
                }
                c.skipped += 1;
                if fin {
                    Self::new_round(t, &took, used, c);
                } else {
                    t.expected = e.saturating_add(1);
                }
            } else {
                return;
            }
        }
    }

    /// The round ended with the VID just aggregated or skipped: back to VID 0.
    /// A port that did not deliver that last VID still has the old round in
    /// flight (a tree delivers in order): what it has queued is old, and what
    /// comes next is old up to its FIN.
    fn new_round(t: &mut Tree<V>, took: &[bool], used: &mut u64, c: &mut Counters) {
        t.expected = 0;
        for (k, q) in t.queues.iter_mut().enumerate() {
            if took[k] {
                continue;
            }
            let mut fin_seen = false;
            while let Some((h, _)) = q.pop_front() {
                *used -= h.payload_bytes() as u64;
                c.stale += 1;
                fin_seen |= h.fin;
            }
            t.owes_fin[k] = !fin_seen;
        }
    }
}

//! In-network aggregation (PANAMA) on the flow backend: each (job, tree)
//! is ONE fluid object. The rules:
//!
//! - A worker's messages of one job are its rounds 0, 1, 2, ..., taken one
//!   after another: it submits round n when the app sent its n-th message
//!   and its previous one completed.
//! - Tree t of T serves the rounds in order. Round n starts once
//!   `need = ceil(sync_fraction x workers)` workers submitted it (all of
//!   them at 1: synchronous aggregation starts at the last submission).
//!   It then drains the wire bytes of tree t's share of the message
//!   (packets k with k mod T == t of `vector_bytes` each, the last one
//!   possibly shorter; each packet costs its payload rounded up to 4 bytes
//!   plus the 16-byte header and 66 bytes of UDP/IP/Ethernet/preamble),
//!   the round's size being the largest any worker submitted before it
//!   started. It drains at one rate that crosses every port of the tree:
//!   each tree edge once in each direction (workers' uplinks, switches'
//!   ports up to their parent, parents' ports down to their children, and
//!   the leaves' ports down to the workers), a single flow with all those
//!   ports for the max-min allocator, in the job's class.
//! - Its rate is capped by a window over the tree's base RTT (the longest
//!   worker->root->worker path: each port's delay plus one full packet's
//!   serialization): `window x packet wire bytes x 8 / RTT`. The window is
//!   the accelerators' `cwnd_cap` for PANAMA: `(memory_bytes / jobs
//!   configured on the accelerator) / (vector_bytes + 16)` packets, the
//!   smallest over the tree's switches (PANAMA's congestion control is
//!   taken as converged to its max-min fair share under that cap). For
//!   SwitchML* (`Fixed`) it is `packets` (at most that `cwnd_cap` when
//!   `cap`), and the tree does not yield: the allocator serves it ahead of
//!   its class (before every flow of its class or lower ones).
//! - Once drained, the round is done on that tree after the propagation
//!   delay of the tree's longest worker->root->worker path. A worker's
//!   message completes when every tree has finished its round (a tree with
//!   no packet of it finishes at once); each tree finishing reports an
//!   `Arrival` of the bytes done so far (the first only, unless the
//!   message asked for every advance).
//! - Partial synchronisation (`sync_fraction < 1`): when the round starts,
//!   the `workers - need` workers whose uplinks are the most loaded (the
//!   most fluid objects, flows or trees, crossing the uplink that the
//!   allocator serves before or with this tree; ties: workers that have not
//!   submitted the round yet first, then later in the job's worker list
//!   first) are left out: the round's fluid does not cross their uplinks
//!   nor the leaves' ports down to them (the tree no longer waits for
//!   them). They still complete with the round, or at once when they
//!   submit a round that every tree has already finished.

use super::maxmin::{level, FlowDemand};
use super::{FlowNet, FluidFlow, EV_AGG_DONE, EV_AGG_SETTLE};
use crate::engine::{Arrival, Completion, Ctx, NetEv, Table};
use crate::fabric::aggregation::{resolve_trees, AggWindowSpec, AggregationSpec};
use crate::fabric::topology::Topology;
use crate::net::agg_workers::{workers_table, WorkerCounts};
use crate::time::PS_PER_S;
use std::collections::{HashMap, HashSet, VecDeque};
pub use tree::tree_share;
use tree::{Phase, Tree};

mod tree;

struct Job {
    job: u16,
    class: u8,
    /// Served ahead of its class (a fixed window: SwitchML*).
    ahead: bool,
    need: u32,
    members: Vec<u32>,
    /// Its trees, in spraying order.
    trees: Vec<u32>,
    /// Per round: workers that submitted it, and the largest size submitted.
    rounds: Vec<(u32, u64)>,
}

struct Current {
    msg: u32,
    size: u64,
    round: u64,
    /// Trees whose round is accounted for at this worker.
    credited: Vec<bool>,
    ncredited: usize,
    delivered_bytes: u64,
    notify_packets: bool,
    reported: bool,
}

struct Member {
    name: String,
    job: u32,
    waiting: VecDeque<(u32, u64, bool)>,
    cur: Option<Current>,
    /// Rounds submitted so far.
    submitted: u64,
    messages: u64,
    packets_sent: u64,
    results: u64,
}

/// Every aggregation job's workers and trees on the flow backend.
pub(super) struct AggFlows {
    vector_bytes: u64,
    jobs: Vec<Job>,
    trees: Vec<Tree>,
    members: Vec<Member>,
    index: HashMap<(u32, u16), u32>,
    /// Trees draining now, in the order they started.
    draining: Vec<u32>,
    live: usize,
}

impl AggFlows {
    /// The jobs' trees, checked against the topology ([`resolve_trees`]).
    pub fn new(topo: &Topology, spec: &AggregationSpec) -> Result<AggFlows, String> {
        let resolved = resolve_trees(topo, spec)?;
        let vb = spec.vector_bytes as u64;
        let caps = spec.setup_cwnd_caps();
        let mut out = AggFlows {
            vector_bytes: vb,
            jobs: Vec::new(),
            trees: Vec::new(),
            members: Vec::new(),
            index: HashMap::new(),
            draining: Vec::new(),
            live: 0,
        };
        for (ji, (j, trees)) in spec.jobs.iter().zip(&resolved).enumerate() {
            let workers = j.workers.len() as u32;
            // As the accelerator counts it (a hair of slack for 0.88 x 25).
            let need = ((j.sync_fraction * workers as f64 - 1e-9).ceil() as u32).clamp(1, workers);
            let mut job = Job {
                job: j.job,
                class: j.class,
                ahead: matches!(j.window, AggWindowSpec::Fixed { .. }),
                need,
                members: Vec::new(),
                trees: Vec::new(),
                rounds: Vec::new(),
            };
            for &host_index in &j.workers {
                let host = topo.hosts[host_index as usize];
                out.index.insert((host, j.job), out.members.len() as u32);
                job.members.push(out.members.len() as u32);
                out.members.push(Member {
                    name: topo.names[host as usize].clone(),
                    job: ji as u32,
                    waiting: VecDeque::new(),
                    cur: None,
                    submitted: 0,
                    messages: 0,
                    packets_sent: 0,
                    results: 0,
                });
            }
            let nodes: Vec<u32> = j.workers.iter().map(|&h| topo.hosts[h as usize]).collect();
            for (ti, t) in trees.iter().enumerate() {
                let cwnd_cap = caps[ji][ti] as u64;
                let window = match j.window {
                    AggWindowSpec::Panama { .. } => cwnd_cap,
                    AggWindowSpec::Fixed { packets, cap: true } => {
                        (packets as u64).min(cwnd_cap).max(1)
                    }
                    AggWindowSpec::Fixed { packets, .. } => packets as u64,
                };
                job.trees.push(out.trees.len() as u32);
                out.trees
                    .push(Tree::new(topo, t, ji as u32, &nodes, window, vb));
            }
            out.jobs.push(job);
        }
        Ok(out)
    }

    /// Messages accepted and not yet complete.
    pub fn live(&self) -> usize {
        self.live
    }

    /// The draining trees as the allocator sees them (in `draining` order).
    ///
    /// On a worker's NIC a job's trees share one queue with the host's
    /// other flows, and the packet backend's workers hand it packets under
    /// one Small-Queues budget per job, as each TCP connection has its own:
    /// backlogged, the job takes about one flow's share of the NIC, not one
    /// per tree. Each of a job's T draining trees is therefore capped at
    /// 1/T of that share, `capacity / (flows + jobs)` on its busiest
    /// worker's uplink (`nic_flows`: ordinary flows leaving each port).
    /// Elsewhere each tree is a flow of its own (a window per tree).
    pub fn demands<'a>(
        &'a self,
        out: &mut Vec<FlowDemand<'a>>,
        nic_flows: &[u32],
        capacity_bps: &[f64],
    ) {
        let mut draining_of_job = vec![0u32; self.jobs.len()];
        let mut jobs_at: HashMap<u32, u32> = HashMap::new();
        let mut seen: HashSet<(u32, u32)> = HashSet::new();
        for &t in &self.draining {
            let tree = &self.trees[t as usize];
            draining_of_job[tree.job as usize] += 1;
            for &up in tree.cur_uplinks.iter() {
                if seen.insert((tree.job, up)) {
                    *jobs_at.entry(up).or_default() += 1;
                }
            }
        }
        for &t in &self.draining {
            let tree = &self.trees[t as usize];
            let job = &self.jobs[tree.job as usize];
            let trees = draining_of_job[tree.job as usize] as f64;
            let nic = tree
                .cur_uplinks
                .iter()
                .map(|&up| {
                    capacity_bps[up as usize]
                        / (nic_flows[up as usize] + jobs_at[&up]) as f64
                        / trees
                })
                .fold(f64::INFINITY, f64::min);
            out.push(FlowDemand {
                class: job.class,
                ports: &tree.cur_ports,
                ahead: job.ahead,
                cap_bps: tree.cap_bps.min(nic),
            });
        }
    }

    /// Sets the draining trees' rates (in `draining` order).
    pub fn set_rates(&mut self, rates: &[f64]) {
        for (&t, &r) in self.draining.iter().zip(rates) {
            self.trees[t as usize].rate_bps = r;
        }
    }

    /// Picoseconds until the first draining tree drains, if any moves.
    pub fn next_drain_ps(&self) -> Option<u64> {
        self.draining
            .iter()
            .map(|&t| &self.trees[t as usize])
            .filter(|t| t.rate_bps > 0.0)
            .map(|t| (t.remaining_bits / t.rate_bps * PS_PER_S as f64).ceil() as u64)
            .min()
    }

    /// Drains every draining tree for `dt_s` seconds at its rate.
    pub fn advance(&mut self, dt_s: f64, bits_sent: &mut [f64]) {
        for &t in &self.draining {
            let t = &mut self.trees[t as usize];
            let bits = (t.rate_bps * dt_s).min(t.remaining_bits);
            t.remaining_bits -= bits;
            for &p in t.cur_ports.iter() {
                bits_sent[p as usize] += bits;
            }
        }
    }

    /// Trees drained now (less than a picosecond of their rate left, as
    /// flows): their results propagate until `EV_AGG_DONE`.
    pub fn take_drained(&mut self, ctx: &mut Ctx) {
        let trees = &mut self.trees;
        self.draining.retain(|&t| {
            let tree = &mut trees[t as usize];
            if tree.remaining_bits <= tree.rate_bps / PS_PER_S as f64 + 1e-6 {
                tree.phase = Phase::Delivering;
                tree.rate_bps = 0.0;
                ctx.schedule(
                    ctx.now + tree.delay_ps,
                    NetEv {
                        kind: EV_AGG_DONE,
                        id: t,
                    },
                );
                false
            } else {
                true
            }
        });
    }

    /// Member `i` takes its next waiting message, if any, as its next
    /// round. Returns whether a tree already finished that round.
    fn next_message(&mut self, i: u32) -> bool {
        let vb = self.vector_bytes;
        let m = &mut self.members[i as usize];
        let Some((msg, size, notify_packets)) = m.waiting.pop_front() else {
            return false;
        };
        let job = &mut self.jobs[m.job as usize];
        let round = m.submitted;
        m.submitted += 1;
        m.messages += 1;
        m.packets_sent += size.div_ceil(vb);
        if job.rounds.len() as u64 <= round {
            job.rounds.resize(round as usize + 1, (0, 0));
        }
        let r = &mut job.rounds[round as usize];
        r.0 += 1;
        r.1 = r.1.max(size);
        m.cur = Some(Current {
            msg,
            size,
            round,
            credited: vec![false; job.trees.len()],
            ncredited: 0,
            delivered_bytes: 0,
            notify_packets,
            reported: false,
        });
        job.trees
            .iter()
            .any(|&t| self.trees[t as usize].done > round)
    }

    /// Credits member `i` with every tree that finished its round; completes
    /// it when all did, then takes its next message (and so on).
    fn settle(&mut self, ctx: &mut Ctx, i: u32) {
        let vb = self.vector_bytes;
        loop {
            let m = &mut self.members[i as usize];
            let job = &self.jobs[m.job as usize];
            let Some(cur) = m.cur.as_mut() else { return };
            let nt = job.trees.len() as u64;
            let mut newly = false;
            for (k, &t) in job.trees.iter().enumerate() {
                if !cur.credited[k] && self.trees[t as usize].done > cur.round {
                    let (packets, bytes, _) = tree_share(cur.size, vb, k as u64, nt);
                    cur.credited[k] = true;
                    cur.ncredited += 1;
                    cur.delivered_bytes += bytes;
                    m.results += packets;
                    newly = true;
                }
            }
            if newly && (cur.notify_packets || !cur.reported) {
                cur.reported = true;
                ctx.arrivals.push(Arrival {
                    msg: cur.msg,
                    bytes: cur.delivered_bytes,
                });
            }
            if cur.ncredited < cur.credited.len() {
                return;
            }
            ctx.completions.push(Completion {
                msg: cur.msg,
                retransmits: 0,
                cnps: 0,
            });
            m.cur = None;
            self.live -= 1;
            self.next_message(i);
        }
    }

    /// Fluid objects on each of `ports` that the allocator serves at level
    /// `at` or before ([`level`]).
    fn port_loads(&self, flows: &[FluidFlow], ports: &[u32], at: u16) -> Vec<u32> {
        let mut count: HashMap<u32, u32> = ports.iter().map(|&p| (p, 0)).collect();
        let mut bump = |route: &[u32]| {
            for p in route {
                if let Some(c) = count.get_mut(p) {
                    *c += 1;
                }
            }
        };
        for f in flows {
            if level(f.class, false) <= at {
                bump(&f.route);
            }
        }
        for &t in &self.draining {
            let tree = &self.trees[t as usize];
            let job = &self.jobs[tree.job as usize];
            if level(job.class, job.ahead) <= at {
                bump(&tree.cur_ports);
            }
        }
        ports.iter().map(|p| count[p]).collect()
    }

    /// The ports tree `t` drains its next round over: all of them, or
    /// without the most loaded workers' under partial synchronisation.
    fn round_ports(&self, flows: &[FluidFlow], t: u32) -> Box<[u32]> {
        let tree = &self.trees[t as usize];
        let job = &self.jobs[tree.job as usize];
        let drop = job.members.len() - job.need as usize;
        if drop == 0 {
            return tree.ports.clone();
        }
        let ups: Vec<u32> = tree.worker_ports.iter().map(|w| w.0).collect();
        let loads = self.port_loads(flows, &ups, level(job.class, job.ahead));
        let late = |w: usize| self.members[job.members[w] as usize].submitted <= tree.done;
        let mut order: Vec<usize> = (0..ups.len()).collect();
        order.sort_by_key(|&w| std::cmp::Reverse((loads[w], late(w), w)));
        let gone: HashSet<u32> = order[..drop]
            .iter()
            .flat_map(|&w| [tree.worker_ports[w].0, tree.worker_ports[w].1])
            .collect();
        tree.ports
            .iter()
            .copied()
            .filter(|p| !gone.contains(p))
            .collect()
    }

    /// Every tree of job `j` that is idle and whose next round has enough
    /// submissions starts it. Returns whether one started draining.
    fn start(&mut self, ctx: &mut Ctx, j: u32, flows: &[FluidFlow]) -> bool {
        let vb = self.vector_bytes;
        let nt = self.jobs[j as usize].trees.len();
        let mut any = false;
        for k in 0..nt {
            let job = &self.jobs[j as usize];
            let t = job.trees[k];
            let tree = &self.trees[t as usize];
            if tree.phase != Phase::Idle {
                continue;
            }
            let Some(&(submitted, size)) = job.rounds.get(tree.done as usize) else {
                continue;
            };
            if submitted < job.need {
                continue;
            }
            let (_, _, wire) = tree_share(size, vb, k as u64, nt as u64);
            if wire == 0 {
                // Nothing of this round on this tree: done at once.
                self.trees[t as usize].phase = Phase::Delivering;
                ctx.schedule(
                    ctx.now,
                    NetEv {
                        kind: EV_AGG_DONE,
                        id: t,
                    },
                );
                continue;
            }
            let ports = self.round_ports(flows, t);
            let tree = &mut self.trees[t as usize];
            tree.cur_uplinks = tree
                .worker_ports
                .iter()
                .map(|w| w.0)
                .filter(|up| ports.contains(up))
                .collect();
            tree.cur_ports = ports;
            tree.phase = Phase::Draining;
            tree.remaining_bits = wire as f64 * 8.0;
            tree.rate_bps = 0.0;
            self.draining.push(t);
            any = true;
        }
        any
    }

    /// The `aggregation_workers` table, with the packet backend's columns
    /// (packets are the messages' bytes in `vector_bytes`, rounded up; the
    /// fluid model marks, loses and skips none and has no window).
    pub fn table(&self) -> Table {
        let rows: Vec<WorkerCounts> = self
            .members
            .iter()
            .map(|m| WorkerCounts {
                host: m.name.clone(),
                job: self.jobs[m.job as usize].job,
                messages: m.messages,
                packets_sent: m.packets_sent,
                results: m.results,
                ..Default::default()
            })
            .collect();
        workers_table(&rows)
    }
}

impl FlowNet {
    /// Worker `host` of aggregation job `job` submits message `msg`.
    pub(super) fn agg_send(
        &mut self,
        ctx: &mut Ctx,
        msg: u32,
        host: u32,
        job: u16,
        size: u64,
        notify_packets: bool,
    ) {
        let a = self
            .agg
            .as_mut()
            .expect("aggregation messages need the aggregation section");
        let i = *a.index.get(&(host, job)).unwrap_or_else(|| {
            panic!("host {host} is not a worker of aggregation job {job} (checked by the app)")
        });
        a.live += 1;
        let m = &mut a.members[i as usize];
        m.waiting.push_back((msg, size, notify_packets));
        if m.cur.is_some() {
            return;
        }
        if a.next_message(i) {
            // Completions are reported from events, not from within a send.
            ctx.schedule(
                ctx.now,
                NetEv {
                    kind: EV_AGG_SETTLE,
                    id: i,
                },
            );
        }
        let j = a.members[i as usize].job;
        self.agg_start(ctx, j);
    }

    /// Starts what job `j` can start; reallocates if a tree started.
    fn agg_start(&mut self, ctx: &mut Ctx, j: u32) {
        let a = self.agg.as_mut().expect("aggregation on");
        if a.start(ctx, j, &self.active) {
            self.reallocate(ctx);
        }
    }

    /// A tree's round is done (results back at the workers).
    pub(super) fn on_agg_done(&mut self, ctx: &mut Ctx, t: u32) {
        let a = self.agg.as_mut().expect("aggregation on");
        let tree = &mut a.trees[t as usize];
        debug_assert!(tree.phase == Phase::Delivering);
        tree.phase = Phase::Idle;
        tree.done += 1;
        let (j, round) = (tree.job, tree.done - 1);
        let members = a.jobs[j as usize].members.clone();
        for i in members {
            if a.members[i as usize]
                .cur
                .as_ref()
                .is_some_and(|c| c.round == round)
            {
                a.settle(ctx, i);
            }
        }
        self.agg_start(ctx, j);
    }

    /// A worker submitted a round some tree had already finished.
    pub(super) fn on_agg_settle(&mut self, ctx: &mut Ctx, i: u32) {
        let a = self.agg.as_mut().expect("aggregation on");
        a.settle(ctx, i);
        let j = a.members[i as usize].job;
        self.agg_start(ctx, j);
    }
}

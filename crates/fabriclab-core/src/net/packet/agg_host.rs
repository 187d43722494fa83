//! The workers' side of in-network aggregation (PANAMA sections 4.1 and
//! 4.2) on the packet backend. An aggregation message of `size` bytes from
//! a worker is cut into packets of the section's `vector_bytes`; packet k
//! goes to tree k mod T (round-robin spraying: every worker sends the same
//! packets to the same trees without coordination) and takes that tree's
//! next VID. Each tree has its own window ([`TreeWindow`]): its results are
//! the implicit ACKs, ECN in them drives PANAMA's DCTCP-like control, and
//! `cwnd_cap` bounds it; SwitchML* sends a fixed window instead. The
//! message completes at the worker once every one of its VIDs has its
//! result, or was given up after `timeout_ps` without progress (the
//! accelerators have skipped it; see [`TreeWindow::on_timeout`]). A
//! worker's messages of one job go one after another, in order.

use super::header::{Packet, PROTO_AGG};
use super::{PacketNet, EV_AGG_TIMER};
use crate::engine::{Arrival, Column, Completion, Ctx, NetEv, Table};
use crate::fabric::aggregation::{AggWindowSpec, AggregationSpec};
use crate::net::agg_workers::{workers_table, WorkerCounts};
use fabriclab_agg::cc::TreeWindow;
use fabriclab_agg::values::worker_vector;
use fabriclab_agg::wire::{Header, ECN_ECT0};
use std::collections::{HashMap, VecDeque};

struct TreeState {
    tid: u8,
    w: TreeWindow,
    /// When the tree last made progress (a result, or a send from idle).
    progress_ps: u64,
    /// The current (or last) message's VIDs on this tree: `start..end`.
    start: u32,
    end: u32,
}

struct Current {
    msg: u32,
    size: u64,
    delivered_bytes: u64,
    notify_packets: bool,
    /// Its first result has been reported.
    reported: bool,
}

struct Member {
    /// Its node, and its host index (the key of its functional values).
    host: u32,
    host_index: u32,
    job: u16,
    class: u8,
    port: u32,
    window: AggWindowSpec,
    timeout_ps: u64,
    trees: Vec<TreeState>,
    waiting: VecDeque<(u32, u64, bool)>,
    cur: Option<Current>,
    timer: Option<u64>,
    /// Bytes of its packets waiting in the host's NIC queue.
    nic_bytes: u64,
    messages: u64,
    packets_sent: u64,
    results: u64,
    marked_results: u64,
    given_up: u64,
    /// VIDs acknowledged by a later VID's result without their own: the
    /// accelerators skipped them (a contribution was lost).
    skipped: u64,
    peak_window: u32,
    /// Functional runs: every result's (message, packet, values).
    values: Vec<(u64, u64, Vec<f32>)>,
}

impl Member {
    fn window(&self, t: &TreeState) -> u32 {
        match self.window {
            AggWindowSpec::Panama { .. } => t.w.window(),
            AggWindowSpec::Fixed { packets, cap: true } => packets.min(t.w.cap as u32).max(1),
            AggWindowSpec::Fixed {
                packets,
                cap: false,
            } => packets,
        }
    }
}

/// Every worker of every aggregation job, by (host node, job).
pub(super) struct AggHosts {
    vector_bytes: u32,
    /// A worker stops handing packets to its NIC above this many queued
    /// bytes (as TCP Small Queues does for connections), and goes on as
    /// they leave: the NIC queue holds what the link can take, not the window.
    nic_limit_bytes: u64,
    /// Functional runs: workers send [`worker_vector`]s drawn from `seed`.
    functional: bool,
    seed: u64,
    members: Vec<Member>,
    index: HashMap<(u32, u16), u32>,
    live: usize,
}

impl AggHosts {
    /// Workers' state; `hosts_of(host index)` is its node, `uplink(node)` its egress port.
    pub fn new(
        spec: &AggregationSpec,
        nic_limit_bytes: u64,
        seed: u64,
        hosts_of: impl Fn(u32) -> u32,
        uplink: impl Fn(u32) -> u32,
    ) -> AggHosts {
        let mut members = Vec::new();
        let mut index = HashMap::new();
        let caps = spec.setup_cwnd_caps();
        for (j, caps) in spec.jobs.iter().zip(&caps) {
            for &host_index in &j.workers {
                let host = hosts_of(host_index);
                index.insert((host, j.job), members.len() as u32);
                let (init, g, alpha) = match j.window {
                    AggWindowSpec::Panama {
                        initial_packets,
                        g,
                        initial_alpha,
                    } => (initial_packets as f64, g, initial_alpha),
                    AggWindowSpec::Fixed { packets, .. } => (packets as f64, 1.0 / 16.0, 0.0),
                };
                members.push(Member {
                    host,
                    host_index,
                    job: j.job,
                    class: j.class,
                    port: uplink(host),
                    window: j.window.clone(),
                    timeout_ps: j.timeout_ps,
                    trees: j
                        .trees
                        .iter()
                        .zip(caps)
                        .map(|(t, &cap)| {
                            let mut w = TreeWindow::new(init, g, alpha);
                            w.cap = cap;
                            TreeState {
                                tid: t.tree,
                                w,
                                progress_ps: 0,
                                start: 0,
                                end: 0,
                            }
                        })
                        .collect(),
                    waiting: VecDeque::new(),
                    cur: None,
                    timer: None,
                    nic_bytes: 0,
                    messages: 0,
                    packets_sent: 0,
                    results: 0,
                    marked_results: 0,
                    given_up: 0,
                    skipped: 0,
                    peak_window: 0,
                    values: Vec::new(),
                });
            }
        }
        AggHosts {
            vector_bytes: spec.vector_bytes,
            nic_limit_bytes,
            functional: spec.functional,
            seed,
            members,
            index,
            live: 0,
        }
    }

    /// Messages accepted and not yet complete.
    pub fn live(&self) -> usize {
        self.live
    }

    /// A worker's packet lost at its own NIC (its link went down): out of the NIC's count.
    pub fn forget_nic(&mut self, host: u32, pkt: &Packet) {
        if let Some(&i) = self.index.get(&(host, (pkt.conn >> 8) as u16)) {
            self.members[i as usize].nic_bytes -= pkt.wire as u64;
        }
    }

    pub fn functional(&self) -> bool {
        self.functional
    }

    /// Functional runs: every value of every result a worker received.
    pub fn values_table(&self, names: &[String]) -> Table {
        let (mut host, mut job, mut message, mut packet, mut index, mut value) = (
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
        );
        for m in &self.members {
            for (msg, k, v) in &m.values {
                for (i, &x) in v.iter().enumerate() {
                    host.push(names[m.host as usize].clone());
                    job.push(m.job as u32);
                    message.push(*msg);
                    packet.push(*k);
                    index.push(i as u32);
                    value.push(x as f64);
                }
            }
        }
        Table::new("aggregation_values")
            .col("host", Column::Str(host))
            .col("job", Column::U32(job))
            .col("message", Column::U64(message))
            .col("packet", Column::U64(packet))
            .col("index", Column::U32(index))
            .col("value", Column::F64(value))
    }

    pub fn table(&self, names: &[String]) -> Table {
        let rows: Vec<WorkerCounts> = self
            .members
            .iter()
            .map(|m| WorkerCounts {
                host: names[m.host as usize].clone(),
                job: m.job,
                messages: m.messages,
                packets_sent: m.packets_sent,
                results: m.results,
                marked_results: m.marked_results,
                given_up: m.given_up,
                skipped: m.skipped,
                peak_window_packets: m.peak_window as u64,
            })
            .collect();
        workers_table(&rows)
    }
}

impl PacketNet {
    /// Worker `host` of aggregation job `job` contributes `size` bytes (message `msg`).
    pub(super) fn agg_send(
        &mut self,
        ctx: &mut Ctx,
        msg: u32,
        host: u32,
        job: u16,
        size: u64,
        notify_packets: bool,
    ) {
        let hosts = self
            .agg
            .as_mut()
            .expect("aggregation messages need the aggregation section");
        let i = *hosts.index.get(&(host, job)).unwrap_or_else(|| {
            panic!("host {host} is not a worker of aggregation job {job} (checked by the app)")
        });
        hosts.live += 1;
        let m = &mut hosts.members[i as usize];
        m.waiting.push_back((msg, size, notify_packets));
        if m.cur.is_none() {
            self.agg_next_message(ctx, i);
        }
    }

    fn agg_next_message(&mut self, ctx: &mut Ctx, i: u32) {
        let hosts = self.agg.as_mut().expect("aggregation on");
        let vb = hosts.vector_bytes as u64;
        let m = &mut hosts.members[i as usize];
        let Some((msg, size, notify_packets)) = m.waiting.pop_front() else {
            return;
        };
        let n = size.div_ceil(vb);
        let nt = m.trees.len() as u64;
        // A message's VIDs on each tree follow the previous message's, the
        // same at every worker. With partial sync the tree may already be
        // past some of them (results that came before this worker got
        // there): those are done and never sent.
        let mut done_bytes = 0;
        for (t, tree) in m.trees.iter_mut().enumerate() {
            let count = (n + nt - 1 - t as u64) / nt;
            tree.start = tree.end;
            tree.end = tree.start + count as u32;
            for vid in tree.start..tree.w.una.min(tree.end) {
                let k = t as u64 + nt * (vid - tree.start) as u64;
                done_bytes += (size - k * vb).min(vb);
            }
        }
        m.messages += 1;
        m.cur = Some(Current {
            msg,
            size,
            delivered_bytes: done_bytes,
            notify_packets,
            reported: false,
        });
        self.agg_progress(ctx, i);
    }

    /// Sends what the trees' windows allow, one packet per tree in turn.
    fn agg_pump(&mut self, ctx: &mut Ctx, i: u32) {
        let hosts = self.agg.as_mut().expect("aggregation on");
        let (vb, nic_limit) = (hosts.vector_bytes as u64, hosts.nic_limit_bytes);
        let m = &mut hosts.members[i as usize];
        let Some(cur) = m.cur.as_ref() else { return };
        let (size, nt) = (cur.size, m.trees.len() as u64);
        let mut out: Vec<Packet> = Vec::new();
        let mut index: Vec<u64> = Vec::new();
        loop {
            let mut sent = false;
            for t in 0..m.trees.len() {
                if m.nic_bytes > 0 && m.nic_bytes >= nic_limit {
                    break;
                }
                let win = m.window(&m.trees[t]);
                let tree = &mut m.trees[t];
                if tree.w.next_vid >= tree.end || tree.w.in_flight() >= win {
                    continue;
                }
                if tree.w.in_flight() == 0 {
                    tree.progress_ps = ctx.now;
                }
                let vid = tree.w.on_send();
                let k = t as u64 + nt * (vid - tree.start) as u64;
                let bytes = (size - k * vb).min(vb);
                let h = Header {
                    job: m.job,
                    tree: tree.tid,
                    vid,
                    ecn: ECN_ECT0,
                    cwnd_cap: u16::MAX,
                    count: bytes.div_ceil(4) as u16,
                    workers: 1,
                    ..Default::default()
                };
                let pkt = Packet::agg(&h, m.class);
                m.nic_bytes += pkt.wire as u64;
                out.push(pkt);
                index.push(k);
                m.peak_window = m.peak_window.max(win);
                sent = true;
            }
            if !sent {
                break;
            }
        }
        m.packets_sent += out.len() as u64;
        let port = m.port;
        if hosts.functional {
            let (seed, job, host, message) = (hosts.seed, m.job, m.host_index, m.messages - 1);
            let slab = self
                .vectors
                .as_mut()
                .expect("functional runs have a vector slab");
            for (p, &k) in out.iter_mut().zip(&index) {
                let count = (p.payload - fabriclab_agg::wire::HEADER_BYTES as u32) / 4;
                p.set_vector_slot(slab.put(worker_vector(seed, job, host, message, k, count)));
            }
        }
        self.packets_in_network += out.len();
        for p in out {
            self.enqueue(ctx, port, p);
        }
        self.agg_arm(ctx, i);
    }

    fn agg_arm(&mut self, ctx: &mut Ctx, i: u32) {
        let m = &mut self.agg.as_mut().expect("aggregation on").members[i as usize];
        let due = m
            .trees
            .iter()
            .filter(|t| t.w.in_flight() > 0)
            .map(|t| t.progress_ps + m.timeout_ps)
            .min();
        if let Some(t) = due {
            if m.timer.is_none_or(|t0| t < t0) {
                m.timer = Some(t);
                ctx.schedule(
                    t.max(ctx.now),
                    NetEv {
                        kind: EV_AGG_TIMER,
                        id: i,
                    },
                );
            }
        }
    }

    /// A worker's packet left its NIC (sent, or lost there): room for more.
    pub(super) fn agg_left_nic(&mut self, ctx: &mut Ctx, host: u32, pkt: &Packet) {
        let Some(hosts) = self.agg.as_mut() else {
            return;
        };
        let Some(&i) = hosts.index.get(&(host, (pkt.conn >> 8) as u16)) else {
            return;
        };
        hosts.members[i as usize].nic_bytes -= pkt.wire as u64;
        self.agg_pump(ctx, i);
    }

    /// An aggregation packet reached host `node`: a result for one of its jobs.
    pub(super) fn agg_at_host(&mut self, ctx: &mut Ctx, node: u32, pkt: &Packet) -> bool {
        debug_assert_eq!(pkt.proto, PROTO_AGG);
        let h = pkt.agg_header();
        let Some(hosts) = self.agg.as_mut() else {
            return false;
        };
        let Some(&i) = hosts.index.get(&(node, h.job)) else {
            return false;
        };
        if !h.result {
            return false;
        }
        let vb = hosts.vector_bytes as u64;
        let m = &mut hosts.members[i as usize];
        let Some(t) = m.trees.iter().position(|t| t.tid == h.tree) else {
            return false;
        };
        let values = self.vectors.as_mut().map(|s| s.take(pkt.vector_slot()));
        let una0 = m.trees[t].w.una;
        if !m.trees[t].w.on_result(h.vid, h.ce(), h.cwnd_cap) {
            return true; // a duplicate, or a late result of a given-up VID
        }
        let tree = &m.trees[t];
        if let (Some(v), true) = (values, (tree.start..tree.end).contains(&h.vid)) {
            let k = t as u64 + m.trees.len() as u64 * (h.vid - tree.start) as u64;
            m.values.push((m.messages - 1, k, v));
        }
        m.results += 1;
        m.marked_results += h.ce() as u64;
        m.skipped += (m.trees[t].w.una - una0 - 1) as u64;
        let nt = m.trees.len() as u64;
        let tree = &mut m.trees[t];
        tree.progress_ps = ctx.now;
        if let Some(cur) = m.cur.as_mut() {
            let (lo, hi) = (una0.max(tree.start), tree.w.una.min(tree.end));
            for vid in lo..hi {
                let k = t as u64 + nt * (vid - tree.start) as u64;
                cur.delivered_bytes += (cur.size - k * vb).min(vb);
            }
            if hi > lo && (cur.notify_packets || !cur.reported) {
                cur.reported = true;
                ctx.arrivals.push(Arrival {
                    msg: cur.msg,
                    bytes: cur.delivered_bytes,
                });
            }
        }
        self.agg_progress(ctx, i);
        true
    }

    /// After results or a timeout: complete the message if every VID is
    /// done, then send more.
    fn agg_progress(&mut self, ctx: &mut Ctx, i: u32) {
        let hosts = self.agg.as_mut().expect("aggregation on");
        let m = &mut hosts.members[i as usize];
        let done = m.cur.is_some() && m.trees.iter().all(|t| t.w.una >= t.end);
        if done {
            let cur = m.cur.take().expect("checked");
            hosts.live -= 1;
            ctx.completions.push(Completion {
                msg: cur.msg,
                retransmits: 0,
                cnps: 0,
            });
            self.agg_next_message(ctx, i);
        } else {
            self.agg_pump(ctx, i);
        }
    }

    pub(super) fn on_agg_timer(&mut self, ctx: &mut Ctx, i: u32) -> bool {
        let m = &mut self.agg.as_mut().expect("aggregation on").members[i as usize];
        if m.timer != Some(ctx.now) {
            return false;
        }
        m.timer = None;
        let timeout = m.timeout_ps;
        for t in m.trees.iter_mut() {
            if t.w.in_flight() > 0 && t.progress_ps + timeout <= ctx.now {
                m.given_up += t.w.on_timeout() as u64;
                t.progress_ps = ctx.now;
            }
        }
        self.agg_progress(ctx, i);
        self.agg_arm(ctx, i);
        true
    }
}

//! Running a collective plan as an application on the message interface.
//!
//! A plan gives every rank an ordered list of steps with explicit
//! dependencies (indices of earlier steps of the same rank). A step starts
//! when all its dependencies have completed:
//!
//! - `send`: after `send_overhead_ps`, the bytes `[offset, offset+bytes)`
//!   leave as one message to `peer` (optionally on an explicit path); the
//!   step completes when the message has arrived.
//! - `recv`: the k-th receive from `peer` matches the k-th send from `peer`
//!   to this rank (non-overtaking, as in MPI). It completes once it has
//!   started and its message has arrived, plus `bytes / reduce_bps` when it
//!   reduces into the local buffer (a copy costs nothing).
//!
//! The collective ends when every step of every rank has completed.
//!
//! A rank pair may carry its sends over several queue pairs (`qps`, see
//! [`super::qps`]): each send is cut into one part per QP, sent on its own
//! QP (`split`) or each part on the QP with the best recent completion time
//! (`balance = "dlb"`); the send has arrived when all its parts have.

use super::qps::{split_bytes, Balance, QpGroup, QpGroupSpec};
use super::{list_schema, section, AppKind, BuildEnv};
use crate::engine::{Api, App, Column, Message, MsgId, Table};
use fabriclab_plan::{Action, Hop, PlanGraph, PlanRun, Step};
use serde::Deserialize;
use std::collections::HashMap;

/// A collective to run: its plan, where its ranks live, and its costs.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CollectiveSpec {
    pub name: String,
    /// Host index of every rank.
    pub rank_hosts: Vec<u32>,
    pub steps: Vec<Vec<Step>>,
    pub start_ps: u64,
    pub class: u8,
    /// Reduction throughput in bits per second (time to reduce `b` bytes: 8b / reduce_bps).
    pub reduce_bps: u64,
    /// Software overhead before each send leaves, in picoseconds.
    pub send_overhead_ps: u64,
    /// Messages continue each rank pair's connection (packet backend).
    #[serde(default)]
    pub persistent_connections: bool,
    /// The plan's collective and algorithm, for the telemetry table.
    #[serde(default)]
    pub op: String,
    #[serde(default)]
    pub algorithm: String,
    /// Rank pairs whose sends go over several queue pairs.
    #[serde(default)]
    pub qps: Vec<QpGroupSpec>,
    /// How a message is spread over its pair's QPs.
    #[serde(default)]
    pub balance: Balance,
    /// `dlb`: messages outstanding per QP before the next best is used.
    #[serde(default = "default_qp_depth")]
    pub qp_depth: u32,
}

fn default_qp_depth() -> u32 {
    1
}

/// A message in flight: its step, and its QP when it has one.
#[derive(Debug, Clone, Copy)]
struct Sent {
    rank: u32,
    step: u32,
    qp: Option<(usize, usize)>,
    /// The QP's path epoch when the message went out.
    epoch: u32,
    bytes: u64,
    at_ps: u64,
}

/// Timing of one step, for results and timelines.
#[derive(Debug, Clone, Copy, Default)]
pub struct StepTime {
    /// None until the step starts (time 0 is a time like any other).
    pub start_ps: Option<u64>,
    pub end_ps: Option<u64>,
    /// A send's message left (after the send overhead); a receive's data
    /// arrived (possibly before the step started).
    pub data_ps: Option<u64>,
}

const TOKEN_START: u64 = 0;
const TOKEN_SEND: u64 = 1;
const TOKEN_RECV_DONE: u64 = 2;
/// `rank` is the QP group, `step` the index of the group's repath.
const TOKEN_REPATH: u64 = 3;

fn token(kind: u64, rank: u32, step: u32) -> u64 {
    kind << 56 | (rank as u64) << 28 | step as u64
}

fn untoken(t: u64) -> (u64, u32, u32) {
    (
        t >> 56,
        ((t >> 28) & 0x0FFF_FFFF) as u32,
        (t & 0x0FFF_FFFF) as u32,
    )
}

pub struct CollectiveApp {
    spec: CollectiveSpec,
    graph: PlanGraph,
    run: Option<PlanRun>,
    times: Vec<Vec<StepTime>>,
    msgs: HashMap<MsgId, Sent>,
    /// QP group of each (rank, peer) that has one.
    group_of: HashMap<(u32, u32), usize>,
    groups: Vec<QpGroup>,
    /// Parts of a split send still in flight, per (rank, step).
    parts_left: HashMap<(u32, u32), u32>,
    remaining: usize,
    end_ps: Option<u64>,
    actions: Vec<Action>,
}

impl CollectiveApp {
    /// Checks the plan's structure (the Python verifier checks its meaning).
    pub fn new(mut spec: CollectiveSpec, num_hosts: u32) -> Result<CollectiveApp, String> {
        let n = spec.steps.len();
        if n != spec.rank_hosts.len() {
            return Err(format!(
                "{}: plan has {} ranks but rank_hosts lists {}",
                spec.name,
                n,
                spec.rank_hosts.len()
            ));
        }
        if let Some(h) = spec.rank_hosts.iter().find(|&&h| h >= num_hosts) {
            return Err(format!(
                "{}: rank host {h} out of range (0..{num_hosts})",
                spec.name
            ));
        }
        if spec.reduce_bps == 0 {
            return Err(format!("{}: reduce_bps must be positive", spec.name));
        }
        // The steps live in the graph only.
        let graph = PlanGraph::new(&spec.name, std::mem::take(&mut spec.steps))?;
        let remaining = graph.steps().iter().map(|s| s.len()).sum();
        if spec.qp_depth == 0 {
            return Err(format!("{}: qp_depth must be at least 1", spec.name));
        }
        let mut group_of = HashMap::new();
        for (k, g) in spec.qps.iter().enumerate() {
            if g.rank as usize >= n || g.peer as usize >= n || g.rank == g.peer {
                return Err(format!(
                    "{}: qps[{k}]: rank {} and peer {} must be two different ranks of 0..{n}",
                    spec.name, g.rank, g.peer
                ));
            }
            if g.src_ports.is_empty() {
                return Err(format!("{}: qps[{k}]: src_ports is empty", spec.name));
            }
            if let Some(r) = g
                .repaths
                .iter()
                .find(|r| r.qp as usize >= g.src_ports.len())
            {
                return Err(format!(
                    "{}: qps[{k}].repaths: qp {} out of range (0..{})",
                    spec.name,
                    r.qp,
                    g.src_ports.len()
                ));
            }
            if group_of.insert((g.rank, g.peer), k).is_some() {
                return Err(format!(
                    "{}: qps[{k}]: rank {} to peer {} listed twice",
                    spec.name, g.rank, g.peer
                ));
            }
        }
        let groups = spec.qps.iter().map(QpGroup::new).collect();
        let times = graph
            .steps()
            .iter()
            .map(|s| vec![StepTime::default(); s.len()])
            .collect();
        Ok(CollectiveApp {
            spec,
            graph,
            run: None,
            times,
            msgs: HashMap::new(),
            group_of,
            groups,
            parts_left: HashMap::new(),
            remaining,
            end_ps: None,
            actions: Vec::new(),
        })
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }
    pub fn start_ps(&self) -> u64 {
        self.spec.start_ps
    }
    pub fn end_ps(&self) -> Option<u64> {
        self.end_ps
    }
    pub fn step_times(&self) -> &[Vec<StepTime>] {
        &self.times
    }
    pub fn steps(&self) -> &[Vec<Step>] {
        self.graph.steps()
    }

    /// Sends step `i` of rank `r` (or `bytes` of it) as one message, on QP
    /// `qp` of its group when given.
    fn send(
        &mut self,
        api: &mut Api,
        r: u32,
        i: u32,
        qp: Option<(usize, usize)>,
        bytes: Option<u64>,
    ) {
        let step = &self.graph.steps()[r as usize][i as usize];
        let bytes = bytes.unwrap_or(step.bytes);
        let m = Message {
            src: self.spec.rank_hosts[r as usize],
            dst: self.spec.rank_hosts[step.peer as usize],
            size_bytes: bytes,
            class: self.spec.class,
            tag: (r as u64) << 32 | i as u64,
            // Pinned paths were resolved to node indices when the simulation was built.
            path: step
                .path
                .as_ref()
                .map(|p| p.iter().filter_map(Hop::node).collect()),
            persistent: self.spec.persistent_connections,
            src_port: qp.map(|(g, q)| self.groups[g].qps[q].src_port),
            // QP q of group g: one identity per QP, whatever its source port.
            qp: qp.map(|(g, q)| (g as u64) << 32 | q as u64),
            ..Default::default()
        };
        match api.send(&m) {
            Ok(id) => {
                let epoch = qp.map_or(0, |(g, q)| self.groups[g].sent(q, bytes));
                let at_ps = api.now();
                self.msgs.insert(
                    id,
                    Sent {
                        rank: r,
                        step: i,
                        qp,
                        epoch,
                        bytes,
                        at_ps,
                    },
                );
            }
            Err(e) => api.fail(format!(
                "collective '{}': rank {r} step {i}: {e}",
                self.spec.name
            )),
        }
    }

    /// Records every QP's route the first time; later, retires the QPs
    /// whose route has changed.
    fn note_routes(&mut self, api: &mut Api) {
        for g in &mut self.groups {
            let (src, dst) = (
                self.spec.rank_hosts[g.rank as usize],
                self.spec.rank_hosts[g.peer as usize],
            );
            for q in &mut g.qps {
                let now = api.ecmp_route(src, dst, q.src_port);
                match &q.route {
                    None => q.route = now,
                    Some(r) => q.retired |= now.as_ref() != Some(r),
                }
            }
        }
    }

    /// `dlb`: sends group `g`'s waiting steps while a QP has room.
    fn dispatch(&mut self, api: &mut Api, g: usize) {
        while !self.groups[g].waiting.is_empty() {
            let Some(q) = self.groups[g].pick(self.spec.qp_depth) else {
                return;
            };
            let (i, bytes) = self.groups[g].waiting.pop_front().expect("not empty");
            let r = self.groups[g].rank;
            self.send(api, r, i, Some((g, q)), Some(bytes));
        }
    }

    /// One row per QP: its pair, source port, and what it carried.
    fn qp_table(&self) -> Table {
        let rows: Vec<(u32, u32, u32, &super::qps::Qp)> = self
            .groups
            .iter()
            .flat_map(|g| {
                (g.qps.iter().enumerate()).map(move |(k, q)| (g.rank, g.peer, k as u32, q))
            })
            .collect();
        Table::new("qps")
            .col(
                "collective",
                Column::Str(vec![self.spec.name.clone(); rows.len()]),
            )
            .col("rank", Column::U32(rows.iter().map(|r| r.0).collect()))
            .col("peer", Column::U32(rows.iter().map(|r| r.1).collect()))
            .col("qp", Column::U32(rows.iter().map(|r| r.2).collect()))
            .col(
                "src_port",
                Column::U32(rows.iter().map(|r| r.3.src_port as u32).collect()),
            )
            .col(
                "messages",
                Column::U64(rows.iter().map(|r| r.3.messages).collect()),
            )
            .col(
                "bytes",
                Column::U64(rows.iter().map(|r| r.3.bytes).collect()),
            )
    }

    /// Carries out what the plan run asked for.
    fn apply(&mut self, api: &mut Api) {
        let now = api.now();
        for a in std::mem::take(&mut self.actions) {
            match a {
                Action::Started { rank, step } => {
                    self.times[rank as usize][step as usize].start_ps = Some(now)
                }
                Action::Send { rank, step } => api.schedule(
                    now + self.spec.send_overhead_ps,
                    token(TOKEN_SEND, rank, step),
                ),
                Action::Reduce { rank, step } => {
                    let bytes = self.graph.steps()[rank as usize][step as usize].bytes;
                    let t = crate::time::ser_time_ps(bytes, self.spec.reduce_bps);
                    api.schedule(now + t, token(TOKEN_RECV_DONE, rank, step));
                }
                Action::Completed { rank, step } => {
                    self.times[rank as usize][step as usize].end_ps = Some(now);
                    self.remaining -= 1;
                    if self.remaining == 0 {
                        self.end_ps = Some(now);
                    }
                }
                Action::RankDone { .. } => {}
            }
        }
    }
}

impl App for CollectiveApp {
    fn start(&mut self, api: &mut Api) {
        api.schedule(self.spec.start_ps, token(TOKEN_START, 0, 0));
        self.note_routes(api);
        for (g, spec) in self.spec.qps.iter().enumerate() {
            for (k, r) in spec.repaths.iter().enumerate() {
                api.schedule(r.at_ps, token(TOKEN_REPATH, g as u32, k as u32));
            }
        }
    }

    fn on_routing_changed(&mut self, api: &mut Api) {
        if self.spec.balance == Balance::Dlb {
            self.note_routes(api);
        }
    }

    fn on_timer(&mut self, api: &mut Api, tok: u64) {
        let (kind, r, i) = untoken(tok);
        match kind {
            TOKEN_START => {
                self.run = Some(PlanRun::start(&self.graph, &mut self.actions));
                self.apply(api);
                if self.remaining == 0 {
                    self.end_ps = Some(api.now());
                }
            }
            TOKEN_SEND => {
                self.times[r as usize][i as usize].data_ps = Some(api.now());
                let peer = self.graph.steps()[r as usize][i as usize].peer;
                match self.group_of.get(&(r, peer)).copied() {
                    None => self.send(api, r, i, None, None),
                    Some(g) => {
                        let bytes = self.graph.steps()[r as usize][i as usize].bytes;
                        let parts = split_bytes(bytes, self.groups[g].qps.len());
                        self.parts_left.insert((r, i), parts.len() as u32);
                        for (q, b) in parts {
                            if self.spec.balance == Balance::Split {
                                self.send(api, r, i, Some((g, q)), Some(b));
                            } else {
                                self.groups[g].waiting.push_back((i, b));
                            }
                        }
                        self.dispatch(api, g);
                    }
                }
            }
            TOKEN_RECV_DONE => {
                self.run
                    .as_mut()
                    .expect("started")
                    .reduced(&self.graph, r, i, &mut self.actions);
                self.apply(api);
            }
            TOKEN_REPATH => {
                let (g, k) = (r as usize, i as usize);
                let rp = self.spec.qps[g].repaths[k];
                let (src, dst) = (
                    self.spec.rank_hosts[self.groups[g].rank as usize],
                    self.spec.rank_hosts[self.groups[g].peer as usize],
                );
                let route = api.ecmp_route(src, dst, rp.src_port);
                self.groups[g].repath(rp.qp as usize, rp.src_port, route);
                if self.spec.balance == Balance::Dlb {
                    self.dispatch(api, g);
                }
            }
            _ => unreachable!("unknown collective timer"),
        }
    }

    fn on_complete(&mut self, api: &mut Api, msg: MsgId) {
        let Some(sent) = self.msgs.remove(&msg) else {
            return;
        };
        let (r, i) = (sent.rank, sent.step);
        if let Some((g, q)) = sent.qp {
            self.groups[g].completed(q, sent.bytes, api.now() - sent.at_ps, sent.epoch);
            self.dispatch(api, g);
            let left = self.parts_left.get_mut(&(r, i)).expect("a send over QPs");
            *left -= 1;
            if *left > 0 {
                return;
            }
            self.parts_left.remove(&(r, i));
        }
        let peer = self.graph.steps()[r as usize][i as usize].peer;
        self.times[peer as usize][self.graph.matching_recv(r, i) as usize].data_ps =
            Some(api.now());
        self.run
            .as_mut()
            .expect("started")
            .delivered(&self.graph, r, i, &mut self.actions);
        self.apply(api);
    }

    fn tag(&self) -> &str {
        &self.spec.name
    }
    fn tables(&self) -> Vec<Table> {
        let name = self.spec.name.clone();
        let (mut rank, mut step, mut op, mut peer, mut bytes, mut start, mut end) = (
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
        );
        let (mut seq, mut offset, mut reduce, mut data) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (r, (times, steps)) in self.times.iter().zip(self.graph.steps()).enumerate() {
            for (i, (t, s)) in times.iter().zip(steps).enumerate() {
                rank.push(r as u32);
                step.push(i as u32);
                op.push(
                    if s.op == fabriclab_plan::Op::Send {
                        "send"
                    } else {
                        "recv"
                    }
                    .to_string(),
                );
                peer.push(s.peer);
                bytes.push(s.bytes);
                start.push(t.start_ps);
                end.push(t.end_ps);
                seq.push(self.graph.seq(r as u32, i as u32));
                offset.push(s.offset);
                reduce.push(s.reduce as u32);
                data.push(t.data_ps);
            }
        }
        let mut out = vec![
            Table::new("collectives")
                .col("collective", Column::Str(vec![name.clone()]))
                .col("op", Column::Str(vec![self.spec.op.clone()]))
                .col("algorithm", Column::Str(vec![self.spec.algorithm.clone()]))
                .col("start_ps", Column::U64(vec![self.spec.start_ps]))
                .col("end_ps", Column::OptU64(vec![self.end_ps])),
            Table::new("steps")
                .col("collective", Column::Str(vec![name; rank.len()]))
                .col(
                    "host",
                    Column::U32(
                        rank.iter()
                            .map(|&r| self.spec.rank_hosts[r as usize])
                            .collect(),
                    ),
                )
                .col("rank", Column::U32(rank))
                .col("step", Column::U32(step))
                .col("op", Column::Str(op))
                .col("peer", Column::U32(peer))
                .col("bytes", Column::U64(bytes))
                .col("start_ps", Column::OptU64(start))
                .col("end_ps", Column::OptU64(end))
                .col("seq", Column::U32(seq))
                .col("offset_bytes", Column::U64(offset))
                .col("reduce", Column::U32(reduce))
                .col("data_ps", Column::OptU64(data)),
        ];
        if !self.groups.is_empty() {
            out.push(self.qp_table());
        }
        out
    }
}

/// `[[collectives]]`: plans run as apps.
pub const KIND: AppKind = AppKind {
    key: "collectives",
    build: build_collectives,
    schema: list_schema::<CollectiveSpec>,
};

fn build_collectives(v: &serde_json::Value, env: &BuildEnv) -> Result<Vec<Box<dyn App>>, String> {
    let specs: Vec<CollectiveSpec> = section("collectives", v)?;
    let nh = env.topo.num_hosts() as u32;
    let mut apps: Vec<Box<dyn App>> = Vec::new();
    for c in specs {
        for (r, steps) in c.steps.iter().enumerate() {
            for (i, st) in steps.iter().enumerate() {
                if let (Some(p), Some(&peer_host)) = (&st.path, c.rank_hosts.get(st.peer as usize))
                {
                    let nodes: Option<Vec<u32>> = p.iter().map(Hop::node).collect();
                    let nodes = nodes.ok_or_else(|| {
                        format!(
                            "{}: rank {r} step {i}: path names a node instead of giving its index",
                            c.name
                        )
                    })?;
                    env.topo
                        .explicit_route(&nodes, c.rank_hosts[r], peer_host)
                        .map_err(|e| format!("{}: rank {r} step {i}: {e}", c.name))?;
                }
            }
        }
        apps.push(Box::new(CollectiveApp::new(c, nh)?));
    }
    Ok(apps)
}

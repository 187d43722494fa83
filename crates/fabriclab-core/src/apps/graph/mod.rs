//! A job as a dependency graph per rank, on the message interface.
//!
//! Every rank runs its program (`spec.rs`): compute nodes on its GPU one
//! at a time, collectives through the plan machinery ([`PlanRun`], one run
//! per collective instance, `coll.rs`), point-to-point sends and receives
//! as messages. A node becomes ready when its dependencies are done; the
//! program repeats for the job's iterations. Results: per rank and
//! iteration its start and end, a timeline row per node, and (when asked)
//! one telemetry row per collective message (`tables.rs`).
//!
//! [`PlanRun`]: fabriclab_plan::PlanRun

use super::{list_schema, section, AppKind, BuildEnv};
use crate::engine::{Api, App, Message, MsgId, Table};
use coll::{CollKey, Inst};
use fabriclab_plan::PlanGraph;
use std::collections::{HashMap, VecDeque};

mod coll;
mod spec;
mod tables;

pub use spec::{
    GraphGroup, GraphJobSpec, GraphNode, GraphNodeKind, GraphPlan, GraphQps, GraphRank,
};

/// One node's interval, for the timeline.
#[derive(Debug, Clone, Copy)]
pub struct NodeRow {
    pub rank: u32,
    pub label: u32,
    pub index: u32,
    pub iteration: u32,
    pub start_ps: u64,
    pub end_ps: u64,
}

struct RankState {
    iter: u32,
    /// Dependencies not yet done, per node of this iteration.
    pending: Vec<u32>,
    /// Nodes of this iteration not yet done.
    left: u32,
    /// When each node became ready (compute: started on the GPU).
    start: Vec<u64>,
    /// Ready compute nodes waiting for the GPU.
    queue: VecDeque<u32>,
    busy: bool,
    /// Collectives joined so far per group slot.
    coll_seq: Vec<u32>,
    iter_start: Vec<u64>,
    iter_end: Vec<Option<u64>>,
}

/// A point-to-point message (k-th on its rank pair) that has arrived
/// before its receive started, or a receive waiting for it.
enum P2p {
    Arrived,
    Waiting(u32),
}

enum Timer {
    ComputeDone {
        rank: u32,
        node: u32,
    },
    IterStart {
        rank: u32,
    },
    P2pSend {
        rank: u32,
        node: u32,
        seq: u32,
    },
    CollSend {
        key: CollKey,
        member: u32,
        step: u32,
    },
    CollReduce {
        key: CollKey,
        member: u32,
        step: u32,
    },
}

enum Msg {
    P2p {
        src: u32,
        dst: u32,
        node: u32,
        seq: u32,
    },
    Coll {
        key: CollKey,
        member: u32,
        step: u32,
    },
}

/// Work to do now, kept in a list rather than by recursion (chains of
/// zero-time nodes can be as long as a program).
enum Work {
    Ready(u32, u32),
    Done(u32, u32),
}

pub struct GraphJob {
    spec: GraphJobSpec,
    /// Per program, per node: the nodes depending on it.
    dependents: Vec<Vec<Vec<u32>>>,
    plans: Vec<PlanGraph>,
    ranks: Vec<RankState>,
    /// (src rank, dst rank) -> sends begun, receives begun.
    p2p_seq: HashMap<(u32, u32), (u32, u32)>,
    p2p: HashMap<(u32, u32, u32), P2p>,
    insts: HashMap<CollKey, Inst>,
    next_op: u32,
    timers: HashMap<u64, Timer>,
    next_timer: u64,
    msgs: HashMap<MsgId, Msg>,
    /// (src rank, dst rank) -> its index in `spec.qps`.
    qp_of: HashMap<(u32, u32), u32>,
    /// A message cut into QP parts: part -> (the send it belongs to, its
    /// connection, its QP); per send, what it carries and its parts not yet
    /// arrived.
    parts: HashMap<MsgId, (u64, u32, u32)>,
    split: HashMap<u64, (Msg, u32)>,
    /// Per (connection, QP): parts (send, bytes) waiting while the QP
    /// carries one; a QP in the map is busy.
    lanes: HashMap<(u32, u32), VecDeque<(u64, u64)>>,
    next_split: u64,
    work: VecDeque<Work>,
    timeline: Vec<NodeRow>,
    ccl: tables::Ccl,
    running: u32,
    end_ps: Option<u64>,
}

impl GraphJob {
    /// Checks the spec against itself and the topology's `nh` hosts.
    pub fn new(spec: GraphJobSpec, nh: u32) -> Result<GraphJob, String> {
        let name = spec.name.clone();
        let err = |m: String| Err(format!("graph job '{name}': {m}"));
        if spec.ranks.is_empty() || spec.iterations == 0 {
            return err("needs ranks and at least one iteration".into());
        }
        let nr = spec.ranks.len() as u32;
        let nl = spec.labels.len() as u32;
        for (g, grp) in spec.groups.iter().enumerate() {
            if grp.label >= nl || grp.ranks.iter().any(|&r| r >= nr) || grp.ranks.is_empty() {
                return err(format!("groups[{g}]: a label or rank out of range"));
            }
        }
        let mut plans = Vec::with_capacity(spec.plans.len());
        for (i, p) in spec.plans.iter().enumerate() {
            if p.size_bytes == 0 || p.steps.iter().flatten().any(|s| s.path.is_some()) {
                return err(format!(
                    "plans[{i}]: needs a positive size and no pinned paths"
                ));
            }
            plans.push(PlanGraph::new(
                &format!("graph job '{name}' plans[{i}]"),
                p.steps.clone(),
            )?);
        }
        let mut dependents = Vec::with_capacity(spec.programs.len());
        for (pi, prog) in spec.programs.iter().enumerate() {
            let mut rev = vec![Vec::new(); prog.len()];
            for (i, n) in prog.iter().enumerate() {
                let at = format!("programs[{pi}][{i}]");
                if n.label >= nl {
                    return err(format!("{at}: label {} out of range", n.label));
                }
                if n.kind == GraphNodeKind::Collective && n.plan as usize >= plans.len() {
                    return err(format!("{at}: plan {} out of range", n.plan));
                }
                if matches!(n.kind, GraphNodeKind::Collective | GraphNodeKind::Send) && n.bytes == 0
                {
                    return err(format!("{at}: bytes must be positive"));
                }
                for &d in &n.deps {
                    if d as usize >= i {
                        return err(format!("{at}: dependency {d} is not an earlier node"));
                    }
                    rev[d as usize].push(i as u32);
                }
            }
            dependents.push(rev);
        }
        let mut qp_of = HashMap::new();
        for (k, q) in spec.qps.iter().enumerate() {
            if q.rank >= nr || q.peer >= nr || q.rank == q.peer || q.src_ports.is_empty() {
                return err(format!(
                    "qps[{k}]: needs two distinct ranks of the job and at least one source port"
                ));
            }
            if qp_of.insert((q.rank, q.peer), k as u32).is_some() {
                return err(format!(
                    "qps[{k}]: rank pair {} -> {} listed twice",
                    q.rank, q.peer
                ));
            }
        }
        let mut ranks = Vec::with_capacity(nr as usize);
        for (r, rk) in spec.ranks.iter().enumerate() {
            let at = format!("ranks[{r}]");
            if rk.host >= nh {
                return err(format!("{at}: host {} out of range (0..{nh})", rk.host));
            }
            if !(rk.slowdown > 0.0) {
                return err(format!("{at}: slowdown must be positive"));
            }
            let Some(prog) = spec.programs.get(rk.program as usize) else {
                return err(format!("{at}: program {} out of range", rk.program));
            };
            for (i, n) in prog.iter().enumerate() {
                let bad = match n.kind {
                    GraphNodeKind::Compute => false,
                    GraphNodeKind::Collective => match rk.groups.get(n.slot as usize) {
                        None => true,
                        Some(&g) => match spec.groups.get(g as usize) {
                            None => true,
                            Some(grp) => {
                                !grp.ranks.contains(&(r as u32))
                                    || plans[n.plan as usize].num_ranks() != grp.ranks.len()
                            }
                        },
                    },
                    GraphNodeKind::Send | GraphNodeKind::Recv => rk
                        .peers
                        .get(n.slot as usize)
                        .is_none_or(|&p| p >= nr || p == r as u32),
                };
                if bad {
                    return err(format!(
                        "{at}: node {i} of program {} names a slot, group or plan that does not fit the rank",
                        rk.program
                    ));
                }
            }
            ranks.push(RankState {
                iter: 0,
                pending: Vec::new(),
                left: 0,
                start: vec![0; prog.len()],
                queue: VecDeque::new(),
                busy: false,
                coll_seq: vec![0; rk.groups.len()],
                iter_start: Vec::new(),
                iter_end: Vec::new(),
            });
        }
        Ok(GraphJob {
            dependents,
            plans,
            ranks,
            p2p_seq: HashMap::new(),
            p2p: HashMap::new(),
            insts: HashMap::new(),
            next_op: 0,
            timers: HashMap::new(),
            next_timer: 0,
            msgs: HashMap::new(),
            qp_of,
            parts: HashMap::new(),
            split: HashMap::new(),
            lanes: HashMap::new(),
            next_split: 0,
            work: VecDeque::new(),
            timeline: Vec::new(),
            ccl: tables::Ccl::default(),
            running: nr,
            end_ps: None,
            spec,
        })
    }

    fn node(&self, rank: u32, node: u32) -> &GraphNode {
        let p = self.spec.ranks[rank as usize].program as usize;
        &self.spec.programs[p][node as usize]
    }

    fn host(&self, rank: u32) -> u32 {
        self.spec.ranks[rank as usize].host
    }

    fn timer(&mut self, api: &mut Api, at_ps: u64, t: Timer) {
        let k = self.next_timer;
        self.next_timer += 1;
        self.timers.insert(k, t);
        api.schedule(at_ps, k);
    }

    /// Rank `rank` begins its next iteration: its nodes without dependencies are ready.
    fn begin_iteration(&mut self, api: &mut Api, rank: u32) {
        let p = self.spec.ranks[rank as usize].program as usize;
        let prog = &self.spec.programs[p];
        let st = &mut self.ranks[rank as usize];
        st.pending = prog.iter().map(|n| n.deps.len() as u32).collect();
        st.left = prog.len() as u32;
        st.iter_start.push(api.now());
        st.iter_end.push(None);
        for (i, n) in prog.iter().enumerate() {
            if n.deps.is_empty() {
                self.work.push_back(Work::Ready(rank, i as u32));
            }
        }
        if prog.is_empty() {
            self.iteration_done(api, rank);
        }
    }

    fn iteration_done(&mut self, api: &mut Api, rank: u32) {
        let now = api.now();
        let st = &mut self.ranks[rank as usize];
        *st.iter_end.last_mut().expect("an iteration") = Some(now);
        st.iter += 1;
        if st.iter < self.spec.iterations {
            self.timer(api, now, Timer::IterStart { rank });
            return;
        }
        self.running -= 1;
        if self.running == 0 {
            self.end_ps = Some(now);
            if self.spec.end_run {
                api.release_run();
            }
        }
    }

    /// Runs the work list dry.
    fn drain(&mut self, api: &mut Api) {
        while let Some(w) = self.work.pop_front() {
            match w {
                Work::Ready(r, n) => self.ready(api, r, n),
                Work::Done(r, n) => self.done(api, r, n),
            }
        }
    }

    fn ready(&mut self, api: &mut Api, rank: u32, node: u32) {
        let now = api.now();
        self.ranks[rank as usize].start[node as usize] = now;
        let n = self.node(rank, node).clone();
        match n.kind {
            GraphNodeKind::Compute => {
                self.ranks[rank as usize].queue.push_back(node);
                self.next_compute(api, rank);
            }
            GraphNodeKind::Collective => self.join(api, rank, node, &n),
            GraphNodeKind::Send => {
                let peer = self.spec.ranks[rank as usize].peers[n.slot as usize];
                let c = self.p2p_seq.entry((rank, peer)).or_default();
                let seq = c.0;
                c.0 += 1;
                let at = now + self.spec.send_overhead_ps;
                self.timer(api, at, Timer::P2pSend { rank, node, seq });
            }
            GraphNodeKind::Recv => {
                let peer = self.spec.ranks[rank as usize].peers[n.slot as usize];
                let c = self.p2p_seq.entry((peer, rank)).or_default();
                let seq = c.1;
                c.1 += 1;
                match self.p2p.remove(&(peer, rank, seq)) {
                    Some(P2p::Arrived) => self.work.push_back(Work::Done(rank, node)),
                    _ => {
                        self.p2p.insert((peer, rank, seq), P2p::Waiting(node));
                    }
                }
            }
        }
    }

    /// Starts the next ready compute node of `rank` if its GPU is free.
    fn next_compute(&mut self, api: &mut Api, rank: u32) {
        let st = &mut self.ranks[rank as usize];
        if st.busy {
            return;
        }
        let Some(node) = st.queue.pop_front() else {
            return;
        };
        st.busy = true;
        let now = api.now();
        st.start[node as usize] = now;
        let f = self.spec.ranks[rank as usize].slowdown;
        let d = (self.node(rank, node).duration_ps as f64 * f).round() as u64;
        self.timer(api, now + d, Timer::ComputeDone { rank, node });
    }

    fn done(&mut self, api: &mut Api, rank: u32, node: u32) {
        let now = api.now();
        let (label, index) = {
            let n = self.node(rank, node);
            (n.label, n.index)
        };
        let st = &mut self.ranks[rank as usize];
        self.timeline.push(NodeRow {
            rank,
            label,
            index,
            iteration: st.iter,
            start_ps: st.start[node as usize],
            end_ps: now,
        });
        let p = self.spec.ranks[rank as usize].program as usize;
        for &d in &self.dependents[p][node as usize] {
            let c = &mut st.pending[d as usize];
            *c -= 1;
            if *c == 0 {
                self.work.push_back(Work::Ready(rank, d));
            }
        }
        st.left -= 1;
        if st.left == 0 {
            self.iteration_done(api, rank);
        }
    }

    fn p2p_arrived(&mut self, src: u32, dst: u32, seq: u32) {
        match self.p2p.remove(&(src, dst, seq)) {
            Some(P2p::Waiting(node)) => self.work.push_back(Work::Done(dst, node)),
            _ => {
                self.p2p.insert((src, dst, seq), P2p::Arrived);
            }
        }
    }

    /// Sends `bytes` from rank `src` to rank `dst`: one message, or one part
    /// per QP of the pair (the first parts one byte larger when the bytes do
    /// not divide; a part of no bytes is not sent). A QP carries one part at
    /// a time, in the order they were posted (a NIC serves a QP's work
    /// requests in order: one flow, not one per message).
    fn send(&mut self, api: &mut Api, src: u32, dst: u32, bytes: u64, msg: Msg) {
        let Some(&conn) = self.qp_of.get(&(src, dst)) else {
            let m = self.message(src, dst, bytes);
            match api.send(&m) {
                Ok(id) => {
                    self.msgs.insert(id, msg);
                }
                Err(e) => api.fail(format!("graph job '{}': {e}", self.spec.name)),
            }
            return;
        };
        let k = self.spec.qps[conn as usize].src_ports.len() as u64;
        let id = self.next_split;
        self.next_split += 1;
        let mut parts = 0;
        for q in 0..k {
            let size = bytes / k + u64::from(q < bytes % k);
            if size == 0 {
                continue;
            }
            parts += 1;
            match self.lanes.get_mut(&(conn, q as u32)) {
                Some(waiting) => waiting.push_back((id, size)),
                None => {
                    self.lanes.insert((conn, q as u32), VecDeque::new());
                    self.post_part(api, conn, q as u32, id, size);
                }
            }
        }
        self.split.insert(id, (msg, parts));
    }

    fn message(&self, src: u32, dst: u32, bytes: u64) -> Message {
        Message {
            src: self.host(src),
            dst: self.host(dst),
            size_bytes: bytes,
            class: self.spec.class,
            tag: 0,
            persistent: self.spec.persistent_connections,
            ..Default::default()
        }
    }

    /// Part of send `id` on QP `qp` of connection `conn`, now.
    fn post_part(&mut self, api: &mut Api, conn: u32, qp: u32, id: u64, size: u64) {
        let c = &self.spec.qps[conn as usize];
        let m = Message {
            src_port: Some(c.src_ports[qp as usize]),
            qp: Some(u64::from(conn) << 16 | u64::from(qp)),
            ..self.message(c.rank, c.peer, size)
        };
        match api.send(&m) {
            Ok(pid) => {
                self.parts.insert(pid, (id, conn, qp));
            }
            Err(e) => api.fail(format!("graph job '{}': {e}", self.spec.name)),
        }
    }

    /// A part has arrived: its QP takes the next waiting part; its send is
    /// delivered when all its parts are.
    fn part_arrived(&mut self, api: &mut Api, id: u64, conn: u32, qp: u32) {
        let lane = self.lanes.get_mut(&(conn, qp)).expect("a busy QP");
        match lane.pop_front() {
            Some((next, size)) => self.post_part(api, conn, qp, next, size),
            None => {
                self.lanes.remove(&(conn, qp));
            }
        }
        let left = &mut self.split.get_mut(&id).expect("a split send").1;
        *left -= 1;
        if *left == 0 {
            let (m, _) = self.split.remove(&id).expect("a split send");
            self.delivered(api, m);
        }
    }

    /// A message (all its parts) has arrived.
    fn delivered(&mut self, api: &mut Api, m: Msg) {
        match m {
            Msg::P2p {
                src,
                dst,
                node,
                seq,
            } => {
                self.work.push_back(Work::Done(src, node));
                self.p2p_arrived(src, dst, seq);
            }
            Msg::Coll { key, member, step } => self.coll_delivered(api, key, member, step),
        }
    }
}

impl App for GraphJob {
    fn start(&mut self, api: &mut Api) {
        if self.spec.end_run {
            api.hold_run();
        }
        for r in 0..self.ranks.len() as u32 {
            self.timer(api, self.spec.start_ps, Timer::IterStart { rank: r });
        }
    }

    fn on_timer(&mut self, api: &mut Api, token: u64) {
        let Some(t) = self.timers.remove(&token) else {
            return;
        };
        match t {
            Timer::IterStart { rank } => self.begin_iteration(api, rank),
            Timer::ComputeDone { rank, node } => {
                self.ranks[rank as usize].busy = false;
                self.work.push_back(Work::Done(rank, node));
                self.next_compute(api, rank);
            }
            Timer::P2pSend { rank, node, seq } => {
                let n = self.node(rank, node);
                let (bytes, peer) = (
                    n.bytes,
                    self.spec.ranks[rank as usize].peers[n.slot as usize],
                );
                let msg = Msg::P2p {
                    src: rank,
                    dst: peer,
                    node,
                    seq,
                };
                self.send(api, rank, peer, bytes, msg);
            }
            Timer::CollSend { key, member, step } => self.coll_send(api, key, member, step),
            Timer::CollReduce { key, member, step } => self.coll_reduced(api, key, member, step),
        }
        self.drain(api);
    }

    fn on_complete(&mut self, api: &mut Api, msg: MsgId) {
        if let Some(m) = self.msgs.remove(&msg) {
            self.delivered(api, m);
        } else if let Some((id, conn, qp)) = self.parts.remove(&msg) {
            self.part_arrived(api, id, conn, qp);
        } else {
            return;
        }
        self.drain(api);
    }

    fn tag(&self) -> &str {
        &self.spec.name
    }

    fn tables(&self) -> Vec<Table> {
        tables::tables(self)
    }
}

/// `[[graph_jobs]]`: dependency-graph jobs (LLM jobs lower to them).
pub const KIND: AppKind = AppKind {
    key: "graph_jobs",
    build: build_graph_jobs,
    schema: list_schema::<GraphJobSpec>,
};

fn build_graph_jobs(v: &serde_json::Value, env: &BuildEnv) -> Result<Vec<Box<dyn App>>, String> {
    let specs: Vec<GraphJobSpec> = section("graph_jobs", v)?;
    let nh = env.topo.num_hosts() as u32;
    specs
        .into_iter()
        .map(|j| Ok(Box::new(GraphJob::new(j, nh)?) as Box<dyn App>))
        .collect()
}

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

use crate::sim::{Api, App, Message, MsgId};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Send,
    Recv,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub op: Op,
    pub peer: u32,
    pub offset: u64,
    pub bytes: u64,
    #[serde(default)]
    pub reduce: bool,
    #[serde(default)]
    pub deps: Vec<u32>,
    /// Explicit node path for a send (node indices), else ECMP.
    #[serde(default)]
    pub path: Option<Vec<u32>>,
}

/// A collective to run: its plan, where its ranks live, and its costs.
#[derive(Debug, Clone, Deserialize)]
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
}

/// Timing of one step, for results and timelines.
#[derive(Debug, Clone, Copy, Default)]
pub struct StepTime {
    pub start_ps: u64,
    pub end_ps: u64,
}

const TOKEN_START: u64 = 0;
const TOKEN_SEND: u64 = 1;
const TOKEN_RECV_DONE: u64 = 2;

fn token(kind: u64, rank: u32, step: u32) -> u64 {
    kind << 56 | (rank as u64) << 28 | step as u64
}

fn untoken(t: u64) -> (u64, u32, u32) {
    (t >> 56, ((t >> 28) & 0x0FFF_FFFF) as u32, (t & 0x0FFF_FFFF) as u32)
}

pub struct CollectiveApp {
    spec: CollectiveSpec,
    /// Unmet dependencies of each step.
    pending: Vec<Vec<u32>>,
    dependents: Vec<Vec<Vec<u32>>>,
    /// For a recv: its channel sequence number k; for a send: likewise.
    seq: Vec<Vec<u32>>,
    /// recv_of[(src, dst, k)] = step index of the matching recv at dst.
    recv_of: HashMap<(u32, u32, u32), u32>,
    started: Vec<Vec<bool>>,
    arrived: Vec<Vec<bool>>,
    times: Vec<Vec<StepTime>>,
    msgs: HashMap<MsgId, (u32, u32)>,
    remaining: usize,
    end_ps: Option<u64>,
}

impl CollectiveApp {
    /// Checks the plan's structure (the Python verifier checks its meaning).
    pub fn new(spec: CollectiveSpec, num_hosts: u32) -> Result<CollectiveApp, String> {
        let n = spec.steps.len();
        if n != spec.rank_hosts.len() {
            return Err(format!("{}: plan has {} ranks but rank_hosts lists {}", spec.name, n, spec.rank_hosts.len()));
        }
        if let Some(h) = spec.rank_hosts.iter().find(|&&h| h >= num_hosts) {
            return Err(format!("{}: rank host {h} out of range (0..{num_hosts})", spec.name));
        }
        if spec.reduce_bps == 0 {
            return Err(format!("{}: reduce_bps must be positive", spec.name));
        }
        let mut pending = Vec::with_capacity(n);
        let mut dependents = Vec::with_capacity(n);
        let mut seq = Vec::with_capacity(n);
        let mut counts: BTreeMap<(u32, u32, Op), u32> = BTreeMap::new();
        let mut recv_of = HashMap::new();
        for (r, steps) in spec.steps.iter().enumerate() {
            let r = r as u32;
            let mut deps_of = Vec::with_capacity(steps.len());
            let mut rev = vec![Vec::new(); steps.len()];
            let mut sq = Vec::with_capacity(steps.len());
            for (i, s) in steps.iter().enumerate() {
                if s.peer as usize >= n || s.peer == r {
                    return Err(format!("{}: rank {r} step {i}: peer {} is not another rank", spec.name, s.peer));
                }
                if s.bytes == 0 {
                    return Err(format!("{}: rank {r} step {i}: bytes must be positive", spec.name));
                }
                for &d in &s.deps {
                    if d as usize >= i {
                        return Err(format!("{}: rank {r} step {i}: dependency {d} is not an earlier step", spec.name));
                    }
                    rev[d as usize].push(i as u32);
                }
                deps_of.push(s.deps.len() as u32);
                let (a, b) = if s.op == Op::Send { (r, s.peer) } else { (s.peer, r) };
                let k = counts.entry((a, b, s.op)).or_insert(0);
                sq.push(*k);
                if s.op == Op::Recv {
                    recv_of.insert((a, b, *k), i as u32);
                }
                *k += 1;
            }
            pending.push(deps_of);
            dependents.push(rev);
            seq.push(sq);
        }
        for (&(a, b, op), &c) in &counts {
            let other = if op == Op::Send { Op::Recv } else { Op::Send };
            let m = counts.get(&(a, b, other)).copied().unwrap_or(0);
            if m != c {
                return Err(format!(
                    "{}: rank {a} sends {} messages to rank {b}, which receives {}",
                    spec.name,
                    if op == Op::Send { c } else { m },
                    if op == Op::Send { m } else { c }
                ));
            }
        }
        let remaining = spec.steps.iter().map(|s| s.len()).sum();
        let started = spec.steps.iter().map(|s| vec![false; s.len()]).collect();
        let arrived = spec.steps.iter().map(|s| vec![false; s.len()]).collect();
        let times = spec.steps.iter().map(|s| vec![StepTime::default(); s.len()]).collect();
        Ok(CollectiveApp { spec, pending, dependents, seq, recv_of, started, arrived, times, msgs: HashMap::new(), remaining, end_ps: None })
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
        &self.spec.steps
    }

    fn start_step(&mut self, api: &mut Api, r: u32, i: u32) {
        self.started[r as usize][i as usize] = true;
        self.times[r as usize][i as usize].start_ps = api.now();
        let step = &self.spec.steps[r as usize][i as usize];
        match step.op {
            Op::Send => api.schedule(api.now() + self.spec.send_overhead_ps, token(TOKEN_SEND, r, i)),
            Op::Recv => {
                if self.arrived[r as usize][i as usize] {
                    self.finish_recv_data(api, r, i);
                }
            }
        }
    }

    /// Both the recv has started and its data has arrived.
    fn finish_recv_data(&mut self, api: &mut Api, r: u32, i: u32) {
        let step = &self.spec.steps[r as usize][i as usize];
        if step.reduce {
            let t = crate::time::ser_time_ps(step.bytes, self.spec.reduce_bps);
            api.schedule(api.now() + t, token(TOKEN_RECV_DONE, r, i));
        } else {
            self.complete(api, r, i);
        }
    }

    fn complete(&mut self, api: &mut Api, r: u32, i: u32) {
        self.times[r as usize][i as usize].end_ps = api.now();
        self.remaining -= 1;
        if self.remaining == 0 {
            self.end_ps = Some(api.now());
        }
        let deps = std::mem::take(&mut self.dependents[r as usize][i as usize]);
        for &d in &deps {
            let p = &mut self.pending[r as usize][d as usize];
            *p -= 1;
            if *p == 0 {
                self.start_step(api, r, d);
            }
        }
        self.dependents[r as usize][i as usize] = deps;
    }
}

impl App for CollectiveApp {
    fn start(&mut self, api: &mut Api) {
        api.schedule(self.spec.start_ps, token(TOKEN_START, 0, 0));
    }

    fn on_timer(&mut self, api: &mut Api, tok: u64) {
        let (kind, r, i) = untoken(tok);
        match kind {
            TOKEN_START => {
                for r in 0..self.spec.steps.len() as u32 {
                    for i in 0..self.spec.steps[r as usize].len() as u32 {
                        if self.pending[r as usize][i as usize] == 0 {
                            self.start_step(api, r, i);
                        }
                    }
                }
                if self.remaining == 0 {
                    self.end_ps = Some(api.now());
                }
            }
            TOKEN_SEND => {
                let step = &self.spec.steps[r as usize][i as usize];
                let m = Message {
                    src: self.spec.rank_hosts[r as usize],
                    dst: self.spec.rank_hosts[step.peer as usize],
                    size_bytes: step.bytes,
                    class: self.spec.class,
                    path: step.path.clone(),
                    persistent: self.spec.persistent_connections,
                };
                match api.send(&m) {
                    Ok(id) => {
                        self.msgs.insert(id, (r, i));
                    }
                    Err(e) => api.fail(format!("collective '{}': rank {r} step {i}: {e}", self.spec.name)),
                }
            }
            TOKEN_RECV_DONE => self.complete(api, r, i),
            _ => unreachable!("unknown collective timer"),
        }
    }

    fn on_complete(&mut self, api: &mut Api, msg: MsgId) {
        let Some((r, i)) = self.msgs.remove(&msg) else { return };
        let peer = self.spec.steps[r as usize][i as usize].peer;
        let k = self.seq[r as usize][i as usize];
        let j = self.recv_of[&(r, peer, k)];
        self.arrived[peer as usize][j as usize] = true;
        if self.started[peer as usize][j as usize] {
            self.finish_recv_data(api, peer, j);
        }
        self.complete(api, r, i);
    }

    fn tag(&self) -> &str {
        &self.spec.name
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

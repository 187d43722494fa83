//! The step graph of a collective plan and one run through it, without
//! side effects: the caller (a collective app, a training job) sends the
//! messages and runs the timers the returned [`Action`]s ask for.
//!
//! A step starts when all its dependencies (earlier steps of the same rank)
//! have completed. A send completes when its message has arrived; the k-th
//! receive from a peer matches the k-th send from it (non-overtaking, as in
//! MPI) and completes once it has started and its data has arrived, after a
//! reduction if it reduces.

use crate::format::{Op, Step};
use std::collections::{BTreeMap, HashMap};

/// The immutable structure of a plan: dependencies and message matching.
#[derive(Debug, Clone)]
pub struct PlanGraph {
    steps: Vec<Vec<Step>>,
    deps_count: Vec<Vec<u32>>,
    dependents: Vec<Vec<Vec<u32>>>,
    /// Per step: its channel sequence number k (sends and receives alike).
    seq: Vec<Vec<u32>>,
    /// (src, dst, k) -> step index of the matching receive at dst.
    recv_of: HashMap<(u32, u32, u32), u32>,
}

/// What the caller must do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Send step `i` of rank `r` (after the caller's send overhead).
    Send {
        rank: u32,
        step: u32,
    },
    /// Reduce the data of receive step `i` of rank `r`, then call
    /// [`PlanRun::reduced`].
    Reduce {
        rank: u32,
        step: u32,
    },
    /// Step `i` of rank `r` started / completed (for timelines).
    Started {
        rank: u32,
        step: u32,
    },
    Completed {
        rank: u32,
        step: u32,
    },
    /// Every step of `rank` has completed.
    RankDone {
        rank: u32,
    },
}

impl PlanGraph {
    /// Checks the plan's structure (the Python verifier checks its meaning).
    pub fn new(name: &str, steps: Vec<Vec<Step>>) -> Result<PlanGraph, String> {
        let n = steps.len();
        let mut deps_count = Vec::with_capacity(n);
        let mut dependents = Vec::with_capacity(n);
        let mut seq = Vec::with_capacity(n);
        let mut counts: BTreeMap<(u32, u32, Op), u32> = BTreeMap::new();
        let mut recv_of = HashMap::new();
        for (r, rank_steps) in steps.iter().enumerate() {
            let r = r as u32;
            let mut deps_of = Vec::with_capacity(rank_steps.len());
            let mut rev = vec![Vec::new(); rank_steps.len()];
            let mut sq = Vec::with_capacity(rank_steps.len());
            for (i, s) in rank_steps.iter().enumerate() {
                if s.peer as usize >= n || s.peer == r {
                    return Err(format!(
                        "{name}: rank {r} step {i}: peer {} is not another rank",
                        s.peer
                    ));
                }
                if s.bytes == 0 {
                    return Err(format!("{name}: rank {r} step {i}: bytes must be positive"));
                }
                for &d in &s.deps {
                    if d as usize >= i {
                        return Err(format!(
                            "{name}: rank {r} step {i}: dependency {d} is not an earlier step"
                        ));
                    }
                    rev[d as usize].push(i as u32);
                }
                deps_of.push(s.deps.len() as u32);
                let (a, b) = if s.op == Op::Send {
                    (r, s.peer)
                } else {
                    (s.peer, r)
                };
                let k = counts.entry((a, b, s.op)).or_insert(0);
                sq.push(*k);
                if s.op == Op::Recv {
                    recv_of.insert((a, b, *k), i as u32);
                }
                *k += 1;
            }
            deps_count.push(deps_of);
            dependents.push(rev);
            seq.push(sq);
        }
        for (&(a, b, op), &c) in &counts {
            let other = if op == Op::Send { Op::Recv } else { Op::Send };
            let m = counts.get(&(a, b, other)).copied().unwrap_or(0);
            if m != c {
                let (sends, recvs) = if op == Op::Send { (c, m) } else { (m, c) };
                return Err(format!(
                    "{name}: rank {a} sends {sends} messages to rank {b}, which receives {recvs}"
                ));
            }
        }
        Ok(PlanGraph {
            steps,
            deps_count,
            dependents,
            seq,
            recv_of,
        })
    }

    pub fn steps(&self) -> &[Vec<Step>] {
        &self.steps
    }
    pub fn num_ranks(&self) -> usize {
        self.steps.len()
    }
    /// Step `i` of rank `r` is the k-th message (send or receive) on its
    /// channel with its peer; the k-th send matches the k-th receive.
    pub fn seq(&self, r: u32, i: u32) -> u32 {
        self.seq[r as usize][i as usize]
    }
    /// The receive step (at the peer) that send step `i` of rank `r` matches.
    pub fn matching_recv(&self, r: u32, i: u32) -> u32 {
        let peer = self.steps[r as usize][i as usize].peer;
        self.recv_of[&(r, peer, self.seq(r, i))]
    }
}

/// One run through a plan's graph.
#[derive(Debug, Clone)]
pub struct PlanRun {
    pending: Vec<Vec<u32>>,
    started: Vec<Vec<bool>>,
    arrived: Vec<Vec<bool>>,
    left: Vec<u32>,
}

impl PlanRun {
    /// Starts a run: the actions of every step without dependencies (and
    /// `RankDone` for ranks without steps).
    pub fn start(g: &PlanGraph, out: &mut Vec<Action>) -> PlanRun {
        let mut run = PlanRun {
            pending: g.deps_count.clone(),
            started: g.steps.iter().map(|s| vec![false; s.len()]).collect(),
            arrived: g.steps.iter().map(|s| vec![false; s.len()]).collect(),
            left: g.steps.iter().map(|s| s.len() as u32).collect(),
        };
        for r in 0..g.steps.len() as u32 {
            if run.left[r as usize] == 0 {
                out.push(Action::RankDone { rank: r });
            }
            for i in 0..g.steps[r as usize].len() as u32 {
                if run.pending[r as usize][i as usize] == 0 {
                    run.start_step(g, r, i, out);
                }
            }
        }
        run
    }

    /// The message of send step `i` of rank `r` has arrived.
    pub fn delivered(&mut self, g: &PlanGraph, r: u32, i: u32, out: &mut Vec<Action>) {
        let peer = g.steps[r as usize][i as usize].peer;
        let j = g.matching_recv(r, i);
        self.arrived[peer as usize][j as usize] = true;
        if self.started[peer as usize][j as usize] {
            self.recv_data(g, peer, j, out);
        }
        self.complete(g, r, i, out);
    }

    /// The reduction asked for by `Action::Reduce` is done.
    pub fn reduced(&mut self, g: &PlanGraph, r: u32, i: u32, out: &mut Vec<Action>) {
        self.complete(g, r, i, out);
    }

    fn start_step(&mut self, g: &PlanGraph, r: u32, i: u32, out: &mut Vec<Action>) {
        self.started[r as usize][i as usize] = true;
        out.push(Action::Started { rank: r, step: i });
        match g.steps[r as usize][i as usize].op {
            Op::Send => out.push(Action::Send { rank: r, step: i }),
            Op::Recv if self.arrived[r as usize][i as usize] => self.recv_data(g, r, i, out),
            Op::Recv => {}
        }
    }

    fn recv_data(&mut self, g: &PlanGraph, r: u32, i: u32, out: &mut Vec<Action>) {
        if g.steps[r as usize][i as usize].reduce {
            out.push(Action::Reduce { rank: r, step: i });
        } else {
            self.complete(g, r, i, out);
        }
    }

    fn complete(&mut self, g: &PlanGraph, r: u32, i: u32, out: &mut Vec<Action>) {
        self.left[r as usize] -= 1;
        // Whether this was the rank's last step, decided before its dependents
        // start: one of them may complete at once (its data already there) and
        // be the last, and the rank is done only once.
        let last = self.left[r as usize] == 0;
        out.push(Action::Completed { rank: r, step: i });
        for &d in &g.dependents[r as usize][i as usize] {
            let p = &mut self.pending[r as usize][d as usize];
            *p -= 1;
            if *p == 0 {
                self.start_step(g, r, d, out);
            }
        }
        if last {
            out.push(Action::RankDone { rank: r });
        }
    }
}

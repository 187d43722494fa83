//! The plan engine: a job's fused allreduces run its collective plan, the
//! plan's byte ranges scaled to each fusion, the actions of its step walk
//! ([`PlanRun`]) turned into messages and timers.

use super::inflight::Run;
use super::{tok, JobPlan, TrainingJob, T_PLAN_REDUCE, T_PLAN_SEND};
use crate::engine::Api;
use crate::time::ser_time_ps;
use fabriclab_plan::{Action, Op, PlanGraph, PlanRun};
use std::collections::HashMap;

/// A job's plan as it runs: its step graph, the figures the slack check
/// needs (computed once), and the pending plan timers.
pub(super) struct PlanEngine {
    pub graph: PlanGraph,
    pub size_bytes: u64,
    /// Bytes the busiest rank sends in the plan; send steps of all ranks.
    pub most_sent_bytes: u64,
    pub messages: u64,
    /// Timer key -> (allreduce, rank, step).
    timers: HashMap<u32, (u32, u32, u32)>,
    next_timer: u32,
}

impl PlanEngine {
    /// Checks job `name`'s plan against its `n` workers and builds its graph.
    pub(super) fn new(p: JobPlan, name: &str, n: usize) -> Result<PlanEngine, String> {
        if p.steps.len() != n {
            return Err(format!(
                "job '{name}': allreduce plan has {} ranks, the job {n} workers",
                p.steps.len()
            ));
        }
        if p.size_bytes == 0 {
            return Err(format!(
                "job '{name}': allreduce plan size_bytes must be positive"
            ));
        }
        if p.steps.iter().flatten().any(|s| s.path.is_some()) {
            return Err(format!(
                "job '{name}': allreduce plan steps cannot carry explicit paths"
            ));
        }
        let most_sent_bytes = p
            .steps
            .iter()
            .map(|r| r.iter().filter(|s| s.op == Op::Send).map(|s| s.bytes).sum())
            .max()
            .unwrap_or(0);
        let messages = p
            .steps
            .iter()
            .flatten()
            .filter(|s| s.op == Op::Send)
            .count() as u64;
        let size_bytes = p.size_bytes;
        let graph = PlanGraph::new(&format!("job '{name}' allreduce plan"), p.steps)?;
        Ok(PlanEngine {
            graph,
            size_bytes,
            most_sent_bytes,
            messages,
            timers: HashMap::new(),
            next_timer: 0,
        })
    }

    /// The plan's largest per-rank total scaled to `size` bytes.
    pub(super) fn bytes_per_worker(&self, size: u64) -> f64 {
        self.most_sent_bytes as f64 * size as f64 / self.size_bytes as f64
    }
}

impl TrainingJob {
    /// Starts an allreduce as a run through the plan.
    pub(super) fn plan_start(&mut self, api: &mut Api, it: u32, f: u32) {
        let mut out = Vec::new();
        let run = PlanRun::start(&self.engine.plan().graph, &mut out);
        let id = self.new_allreduce(api, it, f, Run::Plan(run));
        self.apply_plan(api, id, out);
    }

    /// Bytes of a plan step scaled from the plan's size to fusion `f`'s:
    /// the range [offset, offset + bytes) maps to [offset·S/P, (offset +
    /// bytes)·S/P) (at least one byte).
    fn plan_step_bytes(&self, f: u32, rank: u32, step: u32) -> u64 {
        let p = self.engine.plan();
        let st = &p.graph.steps()[rank as usize][step as usize];
        let (size, plan) = (self.fusion_bytes[f as usize] as u128, p.size_bytes as u128);
        let lo = st.offset as u128 * size / plan;
        let hi = (st.offset + st.bytes) as u128 * size / plan;
        ((hi - lo) as u64).max(1)
    }

    /// Carries out what the plan run of allreduce `id` asked for.
    pub(super) fn apply_plan(&mut self, api: &mut Api, id: u32, actions: Vec<Action>) {
        let now = api.now();
        for a in actions {
            match a {
                Action::Send { rank, step } | Action::Reduce { rank, step } => {
                    let (kind, at) = if let Action::Send { .. } = a {
                        (T_PLAN_SEND, now + self.spec.send_overhead_ps)
                    } else {
                        let f = self.active[&id].fusion;
                        (
                            T_PLAN_REDUCE,
                            now + ser_time_ps(
                                self.plan_step_bytes(f, rank, step),
                                self.spec.reduce_bps,
                            ),
                        )
                    };
                    let p = self.engine.plan_mut();
                    let k = p.next_timer;
                    p.next_timer = p.next_timer.wrapping_add(1) & 0x0FFF_FFFF;
                    p.timers.insert(k, (id, rank, step));
                    api.schedule(at, tok(kind, k, 0));
                }
                Action::RankDone { rank } => self.worker_has_sum(api, id, rank),
                Action::Started { rank, step } | Action::Completed { rank, step }
                    if !self.halted(rank, now) =>
                {
                    let st = &self.engine.plan().graph.steps()[rank as usize][step as usize];
                    let (send, peer) = (st.op == Op::Send, st.peer);
                    let r = self.ccl.row(id, rank, step, send, peer);
                    if let Action::Started { .. } = a {
                        r.post_ps.get_or_insert(now);
                    } else {
                        r.end_ps.get_or_insert(now);
                    }
                }
                Action::Started { .. } | Action::Completed { .. } => {}
            }
        }
    }

    /// A plan timer fired: a send's overhead has passed, or a reduction is done.
    pub(super) fn plan_timer(&mut self, api: &mut Api, kind: u64, k: u32) {
        let (id, rank, step) = self
            .engine
            .plan_mut()
            .timers
            .remove(&k)
            .expect("plan timer");
        if self.halted(rank, api.now()) {
            return; // a halted worker neither sends nor reduces
        }
        if kind == T_PLAN_SEND {
            let f = self.active[&id].fusion;
            let bytes = self.plan_step_bytes(f, rank, step);
            let peer = self.engine.plan().graph.steps()[rank as usize][step as usize].peer;
            self.send_message(api, id, step, rank, peer, bytes);
        } else {
            let mut out = Vec::new();
            let ar = self.active.get_mut(&id).expect("active allreduce");
            let Run::Plan(run) = &mut ar.run else {
                unreachable!("plan timer of a ring allreduce")
            };
            run.reduced(&self.engine.plan().graph, rank, step, &mut out);
            self.apply_plan(api, id, out);
        }
    }
}

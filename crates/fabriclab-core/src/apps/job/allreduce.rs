//! An allreduce of a ready fusion, whichever engine runs it. The job holds
//! one [`Engine`], fixed when it is built: the built-in ring (`ring.rs`),
//! the job's plan (`plan.rs`) or in-network aggregation (each worker hands
//! the whole fusion to the fabric's aggregation trees and holds the sum when
//! its contribution completes). Each engine starts an allreduce, reacts to
//! its messages' arrival and its own timers, and says when a worker holds
//! the sum; this file holds what both share: starting an allreduce, routing
//! an arrived message to its engine, sending a message at the job's (or,
//! slack-aware, the urgent) class, and a worker holding the reduced fusion.
//! The state of an allreduce in flight is `inflight.rs`'s.

use super::inflight::{Allreduce, JobMsg, Run};
use super::plan::PlanEngine;
use super::ring;
use super::{TimelineRow, TrainingJob};
use crate::engine::{Api, Message};

/// The engine that runs every allreduce of a job.
pub(super) enum Engine {
    /// The built-in ring: 2(n-1) rounds of one partition per worker.
    Ring,
    /// The job's collective plan, its byte ranges scaled to each fusion.
    Plan(Box<PlanEngine>),
    /// In-network aggregation job `0` of the scenario's aggregation section.
    Aggregate(u16),
}

impl Engine {
    /// The plan engine (only plan-engine code paths call this).
    pub(super) fn plan(&self) -> &PlanEngine {
        match self {
            Engine::Plan(p) => p,
            _ => unreachable!("plan step in a job without a plan"),
        }
    }
    pub(super) fn plan_mut(&mut self) -> &mut PlanEngine {
        match self {
            Engine::Plan(p) => p,
            _ => unreachable!("plan step in a job without a plan"),
        }
    }

    /// Bytes the busiest of `n` workers sends in an allreduce of `size` bytes.
    pub(super) fn bytes_per_worker(&self, size: u64, n: u64) -> f64 {
        match self {
            Engine::Ring => ring::bytes_per_worker(size, n),
            Engine::Plan(p) => p.bytes_per_worker(size),
            Engine::Aggregate(_) => size as f64,
        }
    }

    /// Messages of one allreduce over `n` workers (all workers).
    pub(super) fn messages_per_allreduce(&self, n: u64) -> u64 {
        match self {
            Engine::Ring => ring::messages_per_allreduce(n),
            Engine::Plan(p) => p.messages,
            Engine::Aggregate(_) => n,
        }
    }

    /// Bytes per worker an all-urgent allreduce of `size` bytes is taken to
    /// have sent when its duration is turned into a time per byte.
    fn rate_sample_bytes(&self, size: u64, n: u32) -> f64 {
        match self {
            Engine::Ring => ring::rate_sample_bytes(size, n),
            Engine::Plan(p) => p.bytes_per_worker(size),
            Engine::Aggregate(_) => size as f64,
        }
    }
}

impl TrainingJob {
    /// Starts the allreduce of fusion `f` of iteration `it` with the job's engine.
    pub(super) fn start_allreduce(&mut self, api: &mut Api, it: u32, f: u32) {
        match self.engine {
            Engine::Ring => self.ring_start(api, it, f),
            Engine::Plan(_) => self.plan_start(api, it, f),
            Engine::Aggregate(_) => {
                let id = self.new_allreduce(api, it, f, Run::Aggregate);
                let bytes = self.fusion_bytes[f as usize];
                for w in 0..self.workers.len() as u32 {
                    self.send_message(api, id, 0, w, w, bytes);
                }
            }
        }
    }

    /// Registers a new allreduce started now; returns its id.
    pub(super) fn new_allreduce(&mut self, api: &Api, it: u32, f: u32, run: Run) -> u32 {
        let id = self.next_ar;
        self.next_ar += 1;
        let joined = self.joined.remove(&(it, f)).unwrap_or_default();
        for (w, t) in joined.into_iter().enumerate() {
            self.post_first_steps(id, w as u32, t.unwrap_or(api.now()));
        }
        self.active.insert(
            id,
            Allreduce {
                fusion: f,
                iteration: it,
                start_ps: api.now(),
                done_workers: 0,
                received: 0,
                low_sends: 0,
                run,
            },
        );
        id
    }

    /// Message `m` has arrived: its engine takes it from here.
    pub(super) fn message_arrived(&mut self, api: &mut Api, m: JobMsg) {
        let now = api.now();
        self.ccl
            .row(m.allreduce, m.sender, m.round, true, m.receiver)
            .end_ps = Some(now);
        if self.halted(m.receiver, now) {
            return; // a halted worker takes nothing in
        }
        let reduce = match &self.engine {
            Engine::Ring => m.round + 1 < self.workers.len() as u32,
            Engine::Plan(p) => {
                let j = p.graph.matching_recv(m.sender, m.round);
                p.graph.steps()[m.receiver as usize][j as usize].reduce
            }
            Engine::Aggregate(_) => false,
        };
        let step = match &self.engine {
            Engine::Plan(p) => p.graph.matching_recv(m.sender, m.round),
            _ => m.round,
        };
        let r = self.ccl.row(m.allreduce, m.receiver, step, false, m.sender);
        r.start_ps = Some(now);
        r.bytes = m.bytes;
        r.reduce = reduce;
        let ar = self.active.get_mut(&m.allreduce).expect("active allreduce");
        ar.received += 1;
        match &mut ar.run {
            Run::Plan(run) => {
                let mut out = Vec::new();
                run.delivered(&self.engine.plan().graph, m.sender, m.round, &mut out);
                self.apply_plan(api, m.allreduce, out);
            }
            Run::Ring { arrived } => {
                arrived[m.round as usize] += 1;
                self.raise_laggards(api, m.allreduce, m.round);
                self.ring_received(api, m.allreduce, m.round, m.sender);
            }
            Run::Aggregate => self.worker_has_sum(api, m.allreduce, m.sender),
        }
    }

    /// Sends one message of allreduce `id` from worker `w` to worker `to`
    /// (`round`: the ring round, or the plan step), at the job's class or,
    /// slack-aware, at the urgent class when the slack has run out.
    pub(super) fn send_message(
        &mut self,
        api: &mut Api,
        id: u32,
        round: u32,
        w: u32,
        to: u32,
        bytes: u64,
    ) {
        let now = api.now();
        if self.halted(w, now) {
            return; // a halted worker sends nothing
        }
        let r = self.ccl.row(id, w, round, true, to);
        r.post_ps.get_or_insert(now);
        r.start_ps = Some(now);
        r.bytes = bytes;
        let f = self.active[&id].fusion;
        let layer_class = self
            .spec
            .layer_class
            .as_ref()
            .map(|lc| lc[self.fusion_min_layer[f as usize] as usize]);
        let mut class = layer_class.unwrap_or(self.spec.class);
        self.sends.messages += 1;
        self.sends.bytes += bytes;
        let mut urgent = false;
        if let Some(sa) = &self.spec.slack_aware {
            let last_of_round = sa.lag_rounds > 0 && self.ring_last_of_round(id, round);
            let slack = if last_of_round {
                -1
            } else {
                self.slack_ps(api.now())
            };
            if slack < 0 {
                class = sa.urgent_class;
                urgent = true;
                self.sends.urgent_messages += 1;
                self.sends.urgent_bytes += bytes;
            } else {
                self.active
                    .get_mut(&id)
                    .expect("active allreduce")
                    .low_sends += 1;
                self.arm_slack_check(api, slack);
            }
        }
        let m = Message {
            src: self.spec.workers[w as usize],
            dst: self.spec.workers[to as usize],
            size_bytes: bytes,
            class,
            // Which allreduce, ring round (or plan step) and sender.
            tag: (id as u64) << 32 | (round as u64 & 0xFFFF) << 16 | (w as u64 & 0xFFFF),
            persistent: self.spec.persistent_connections,
            aggregate: match self.engine {
                Engine::Aggregate(j) => Some(j),
                _ => None,
            },
            ..Default::default()
        };
        match api.send(&m) {
            Ok(msg) => {
                let jm = JobMsg {
                    allreduce: id,
                    round,
                    sender: w,
                    receiver: to,
                    bytes,
                    urgent,
                };
                self.msgs.insert(msg, jm);
            }
            Err(e) => api.fail(format!("job '{}': {e}", self.spec.name)),
        }
    }

    /// Worker `w` holds the reduced fusion of allreduce `id`: its layers'
    /// gradients are there for the next forward pass. Once every worker
    /// does, the allreduce ends (feeding the urgent-rate estimate if it ran
    /// all urgent) and the transmit queue moves on.
    pub(super) fn worker_has_sum(&mut self, api: &mut Api, id: u32, w: u32) {
        let now = api.now();
        let n = self.workers.len() as u32;
        let ar = self.active.get_mut(&id).expect("active allreduce");
        let (f, it, start) = (ar.fusion, ar.iteration, ar.start_ps);
        ar.done_workers += 1;
        let all = ar.done_workers == n;
        self.timeline.push(TimelineRow {
            worker: w,
            kind: 2,
            index: f,
            iteration: it,
            start_ps: start,
            end_ps: now,
        });
        let wk = &mut self.workers[w as usize];
        for &l in &self.fusion_layers[f as usize] {
            wk.params_iter[l as usize] = it + 1;
        }
        wk.pending_fusions[it as usize] -= 1;
        self.check_iter_end(api, w as usize, it);
        if all {
            let ar = self.active.remove(&id).expect("active allreduce");
            if self.spec.slack_aware.is_some() && ar.low_sends == 0 && n > 1 {
                let sent = self
                    .engine
                    .rate_sample_bytes(self.fusion_bytes[f as usize], n);
                let sample = (now - start) as f64 / sent;
                let avg = self
                    .urgent_ps_per_byte
                    .map_or(sample, |a| a + (sample - a) / 8.0);
                self.urgent_ps_per_byte = Some(avg);
            }
            if n == 1 {
                // pump() is iterating; it will continue on its own.
            } else {
                self.pump(api);
            }
        }
        self.try_compute(api, w as usize);
    }
}

//! A data-parallel training job as an application on the message interface.
//!
//! Every worker computes forward layers 0..L-1 then backward L-1..0. When
//! a layer's gradient is ready it joins its fusion buffer (Horovod's tensor
//! fusion: layers taken in backward order, a fusion closed before it would
//! exceed `fusion_bytes`, a layer never split). A fusion is ready once every
//! worker has all its gradients (Horovod's coordinator); ready fusions wait
//! in the job's transmit queue, FIFO or by priority (oldest iteration, then
//! lowest layer index first: the thesis's rule), with at most
//! `max_inflight` allreduces at once. An allreduce is a ring over the
//! workers: 2(n-1) rounds, each worker sending one partition to its right
//! neighbour per round and reducing what it receives in the first n-1 (or
//! the job's allreduce plan, run step by step). Forward of layer i in the
//! next iteration waits for layer i-1 and for layer i's reduced gradient at
//! that worker; with the inter-iteration barrier it also waits for all of
//! the iteration's gradients.
//!
//! The files, by responsibility:
//! - `spec.rs`: the scenario's job section ([`JobSpec`] and its parts);
//! - `build.rs`: [`TrainingJob::new`], checks and derived figures;
//! - `compute.rs`: forward and backward compute, fusion readiness and the
//!   transmit queue;
//! - `inflight.rs`: the state of an allreduce in flight and of its
//!   messages, whichever engine runs it;
//! - `allreduce.rs`: an allreduce whichever engine runs it ([`Engine`]:
//!   the messages it sends, a worker holding the sum);
//! - `ring.rs`: the built-in ring engine (and why it is not a plan);
//! - `plan.rs`: the plan engine;
//! - `slack_aware.rs`: the slack-aware class choice;
//! - `tables.rs`: the result tables.
//!
//! [`Engine`]: allreduce::Engine

use super::{list_schema, section, AppKind, BuildEnv};
use crate::engine::{Api, App, MsgId, Table};
use allreduce::Engine;
use inflight::{Allreduce, JobMsg};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;

mod allreduce;
mod build;
mod compute;
mod inflight;
mod plan;
mod ring;
mod slack_aware;
mod spec;
mod tables;
mod telemetry;

pub use spec::{Checkpoint, JobPlan, JobSpec, LayerSpec, SlackAware, WorkerFault, WorkerFaultKind};

/// One interval of the job's timeline.
#[derive(Debug, Clone, Copy)]
pub struct TimelineRow {
    pub worker: u32,
    /// 0 forward, 1 backward, 2 allreduce (from its start to this worker
    /// holding the sum), 3 checkpoint (the pause saving the state after
    /// `iteration`).
    pub kind: u8,
    /// Layer index (compute) or fusion index (allreduce).
    pub index: u32,
    pub iteration: u32,
    pub start_ps: u64,
    pub end_ps: u64,
}

/// Ring messages sent by a job, all, at the urgent class from the start,
/// and raised to it while in flight (slack-aware).
#[derive(Debug, Clone, Copy, Default)]
pub struct SendCounts {
    pub messages: u64,
    pub bytes: u64,
    pub urgent_messages: u64,
    pub urgent_bytes: u64,
    pub raised_messages: u64,
    pub raised_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Fwd,
    Bwd,
    Done,
}

struct Worker {
    iter: u32,
    phase: Phase,
    layer: u32,
    busy: bool,
    /// Iteration whose reduced gradient of layer i this worker holds (+1; 0 = none).
    params_iter: Vec<u32>,
    /// Fusions of the current iteration still to arrive (barrier).
    pending_fusions: Vec<u32>,
    compute_start: u64,
    iter_end: Vec<Option<u64>>,
    iter_start: Vec<u64>,
    bwd_done: Vec<bool>,
    bwd_end: Vec<u64>,
    /// A wake-up is scheduled for the end of the current checkpoint pause.
    checkpoint_wake: bool,
}

pub struct TrainingJob {
    spec: JobSpec,
    fusion_of: Vec<u32>,
    fusion_layers: Vec<Vec<u32>>,
    fusion_bytes: Vec<u64>,
    fusion_min_layer: Vec<u32>,
    /// Per worker: nominal forward and backward compute of layers 0..i
    /// (prefix sums, scaled by the worker's slowdown).
    fwd_prefix: Vec<Vec<u64>>,
    bwd_prefix: Vec<Vec<u64>>,
    /// Per iteration, per fusion: handed to the transmit queue.
    issued: Vec<Vec<bool>>,
    workers: Vec<Worker>,
    /// (iteration, fusion) -> workers whose gradients are ready.
    ready_count: HashMap<(u32, u32), u32>,
    queue: Vec<(u32, u32, u64)>, // (iteration, fusion, enqueue sequence)
    enqueue_seq: u64,
    /// What runs every allreduce: the built-in ring or the job's plan.
    engine: Engine,
    active: HashMap<u32, Allreduce>, // allreduce id -> state
    next_ar: u32,
    msgs: HashMap<MsgId, JobMsg>,
    /// Generation of the slack check timer (older ones are stale).
    check_gen: u32,
    /// Measured time per byte each worker sends in an allreduce run
    /// entirely at the urgent class (moving average), for slack estimates.
    urgent_ps_per_byte: Option<f64>,
    rng: ChaCha8Rng,
    timeline: Vec<TimelineRow>,
    end_ps: Option<u64>,
    /// Ring messages and bytes sent, and how many of them at the urgent class.
    sends: SendCounts,
    /// Per worker: when it halts (u64::MAX: never), and its compute
    /// slowdowns from a time on (time, factor).
    halt_ps: Vec<u64>,
    slow_from: Vec<Vec<(u64, f64)>>,
    /// (iteration, fusion) not yet started -> when each worker joined it.
    joined: HashMap<(u32, u32), Vec<Option<u64>>>,
    /// The allreduces' telemetry (`telemetry.rs`).
    ccl: crate::apps::ccl::Ccl,
}

// Timer tokens: kind (8 bits), then two 28-bit fields.
const T_COMPUTE: u64 = 0;
const T_SEND: u64 = 1;
const T_RECV_DONE: u64 = 2;
const T_SLACK_CHECK: u64 = 3;
const T_PLAN_SEND: u64 = 4;
const T_PLAN_REDUCE: u64 = 5;

fn tok(kind: u64, a: u32, b: u32) -> u64 {
    kind << 56 | (a as u64) << 28 | b as u64
}
fn untok(t: u64) -> (u64, u32, u32) {
    (
        t >> 56,
        ((t >> 28) & 0x0FFF_FFFF) as u32,
        (t & 0x0FFF_FFFF) as u32,
    )
}

impl TrainingJob {
    pub fn name(&self) -> &str {
        &self.spec.name
    }
    pub fn timeline(&self) -> &[TimelineRow] {
        &self.timeline
    }
    pub fn end_ps(&self) -> Option<u64> {
        self.end_ps
    }
    pub fn num_fusions(&self) -> usize {
        self.fusion_layers.len()
    }
    pub fn fusion_of(&self) -> &[u32] {
        &self.fusion_of
    }
    /// Per fusion: its lowest layer index and its bytes.
    pub fn fusions(&self) -> Vec<(u32, u64)> {
        self.fusion_min_layer
            .iter()
            .copied()
            .zip(self.fusion_bytes.iter().copied())
            .collect()
    }
    /// Per worker, per iteration: (start, end) where the end is when the worker
    /// has finished its backward pass and holds every reduced gradient.
    pub fn iterations(&self) -> Vec<Vec<(u64, Option<u64>)>> {
        self.workers
            .iter()
            .map(|w| {
                w.iter_start
                    .iter()
                    .copied()
                    .zip(w.iter_end.iter().copied())
                    .collect()
            })
            .collect()
    }
    /// Whether worker `w` has halted by `now`.
    fn halted(&self, w: u32, now: u64) -> bool {
        now >= self.halt_ps[w as usize]
    }
    /// Ring messages sent, all and at the urgent class (slack-aware jobs).
    pub fn send_counts(&self) -> SendCounts {
        self.sends
    }
}

impl App for TrainingJob {
    fn start(&mut self, api: &mut Api) {
        if self.spec.end_run {
            api.hold_run();
        }
        let s = self.spec.start_ps;
        for w in 0..self.workers.len() as u32 {
            api.schedule(s, tok(T_COMPUTE, w, 1));
        }
    }

    fn on_timer(&mut self, api: &mut Api, token: u64) {
        let (kind, a, b) = untok(token);
        match kind {
            T_COMPUTE if b == 1 => self.try_compute(api, a as usize),
            T_COMPUTE => self.compute_done(api, a as usize),
            T_SEND => self.ring_send_due(api, a, b >> 16, b & 0xFFFF),
            T_RECV_DONE => self.ring_reduced(api, a, b >> 16, b & 0xFFFF),
            T_SLACK_CHECK if a == self.check_gen & 0x0FFF_FFFF => self.slack_check(api),
            T_SLACK_CHECK => {} // stale: re-armed since
            T_PLAN_SEND | T_PLAN_REDUCE => self.plan_timer(api, kind, a),
            _ => unreachable!("unknown job timer"),
        }
    }

    fn on_complete(&mut self, api: &mut Api, msg: MsgId) {
        let Some(m) = self.msgs.remove(&msg) else {
            return;
        };
        self.message_arrived(api, m);
    }

    fn tag(&self) -> &str {
        &self.spec.name
    }

    fn tables(&self) -> Vec<Table> {
        tables::tables(self)
    }
}

/// `[[jobs]]`: training jobs.
pub const KIND: AppKind = AppKind {
    key: "jobs",
    build: build_jobs,
    schema: list_schema::<JobSpec>,
};

fn build_jobs(v: &serde_json::Value, env: &BuildEnv) -> Result<Vec<Box<dyn App>>, String> {
    let specs: Vec<JobSpec> = section("jobs", v)?;
    let nh = env.topo.num_hosts() as u32;
    for j in &specs {
        let Some(id) = j.aggregation else { continue };
        let agg = env
            .aggregation
            .and_then(|a| a.jobs.iter().find(|aj| aj.job == id));
        let Some(agg) = agg else {
            return Err(format!(
                "job '{}': aggregation job {id} is not in the aggregation section",
                j.name
            ));
        };
        let (mut a, mut b) = (agg.workers.clone(), j.workers.clone());
        a.sort_unstable();
        b.sort_unstable();
        if a != b {
            return Err(format!(
                "job '{}': its workers are not those of aggregation job {id}",
                j.name
            ));
        }
    }
    specs
        .into_iter()
        .map(|j| Ok(Box::new(TrainingJob::new(j, nh)?) as Box<dyn App>))
        .collect()
}

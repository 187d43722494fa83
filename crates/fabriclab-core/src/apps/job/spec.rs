//! What a scenario's `[[jobs]]` entry says: the job, its layers, its
//! allreduce plan and its slack-aware prioritisation, as the core reads them.

use fabriclab_plan::Step;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LayerSpec {
    pub param_bytes: u64,
    pub fwd_ps: u64,
    pub bwd_ps: u64,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub name: String,
    /// Host index of every worker, in ring order.
    pub workers: Vec<u32>,
    pub layers: Vec<LayerSpec>,
    pub iterations: u32,
    pub fusion_bytes: u64,
    pub barrier: bool,
    pub priority_queue: bool,
    pub max_inflight: u32,
    pub class: u8,
    /// Optional class per layer; a fusion takes the class of its lowest layer.
    #[serde(default)]
    pub layer_class: Option<Vec<u8>>,
    pub start_ps: u64,
    /// Compute-time multiplier per worker (1.0 = nominal; 2.0 = a straggler at half speed).
    pub slowdown: Vec<f64>,
    /// Relative standard deviation of every compute step (0 = deterministic).
    pub jitter: f64,
    pub seed: u64,
    pub reduce_bps: u64,
    pub send_overhead_ps: u64,
    /// Slack-aware prioritisation: send at `class` (low) while the fusion's
    /// deadline is comfortably far, at `urgent_class` once it is not.
    #[serde(default)]
    pub slack_aware: Option<SlackAware>,
    /// Ring messages continue each neighbour pair's connection (packet backend).
    #[serde(default = "yes")]
    pub persistent_connections: bool,
    /// Run every fused allreduce with this plan (ranks = workers) instead of
    /// the built-in ring; its byte ranges are scaled to each fusion's size.
    #[serde(default)]
    pub allreduce_plan: Option<JobPlan>,
    /// Allreduce by in-network aggregation: this job id of the scenario's
    /// aggregation section, whose workers must be the job's.
    #[serde(default)]
    pub aggregation: Option<u16>,
    /// The run ends once this job (and every other job with `end_run`) has
    /// finished, whatever background traffic is still going.
    #[serde(default)]
    pub end_run: bool,
    /// Faults of single workers from a time on (scenario `[[faults]]`).
    #[serde(default)]
    pub faults: Vec<WorkerFault>,
    /// Checkpoints every so many iterations, each a pause of the workers.
    #[serde(default)]
    pub checkpoint: Option<Checkpoint>,
}

/// Checkpoints of the training state. Before every iteration `i > 0` with
/// `i % every_iterations == 0`, each worker saves the state reached after
/// iteration `i - 1`: it waits until that iteration has ended at the worker
/// (its backward pass done and every reduced gradient held: a consistent
/// snapshot, whatever `barrier` says), then pauses for `pause_ps` before its
/// next forward pass (a blocking snapshot, as CheckFreq's and Gemini's
/// in-memory copies are before training goes on). No checkpoint follows the
/// last iteration. A worker that halts before its pause is over leaves no
/// checkpoint of that iteration.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    pub every_iterations: u32,
    pub pause_ps: u64,
}

/// A worker's fault from `at_ps` on: it halts (stops computing and
/// communicating: a crash or a hang), or its compute slows by `factor`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerFault {
    pub worker: u32,
    pub at_ps: u64,
    pub kind: WorkerFaultKind,
    /// Compute-time multiplier of a `slow` fault (1.3 = 30 % slower).
    #[serde(default = "one")]
    pub factor: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WorkerFaultKind {
    Halt,
    Slow,
}

fn one() -> f64 {
    1.0
}

/// An allreduce plan for a job: steps over `size_bytes`, one list per worker.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobPlan {
    pub size_bytes: u64,
    pub steps: Vec<Vec<Step>>,
}

fn yes() -> bool {
    true
}

/// Before each ring message, and again when the slack would run out, the
/// job plays its transmit queue forward (see [`crate::apps::slack`]): the
/// allreduces in flight, the queued ones and the fusions of the same
/// iterations still to come out of the backward pass, each taking `factor` ×
/// its remaining bytes' time at the urgent-class rate measured on the job's
/// all-urgent allreduces (`rate_bps`, the workers' link rate, until there is
/// one, and never faster). A fusion's deadline is when the next forward pass
/// can first need its lowest layer, from measured progress: the end of the
/// backward pass (measured once it has happened, else predicted from the
/// worker's current layer and nominal compute) plus the forward compute of
/// the layers below it, at the worker that gets there first. If some fusion
/// would then miss its deadline by more than it must, new messages go out at
/// `urgent_class` and low-class messages in flight are raised to it.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlackAware {
    pub urgent_class: u8,
    pub factor: f64,
    pub rate_bps: u64,
    /// Ring stragglers (0 = off): raise a low-class ring message once a
    /// message of the same allreduce `lag_rounds` or more rounds later has
    /// arrived, or once it is the last of its round still to arrive (a
    /// message sent as its round's last goes out urgent): the ring is
    /// waiting for it. Built-in ring only (a plan has no rounds).
    #[serde(default)]
    pub lag_rounds: u32,
}

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
//! neighbour per round and reducing what it receives in the first n-1.
//! Forward of layer i in the next iteration waits for layer i-1 and for
//! layer i's reduced gradient at that worker; with the inter-iteration
//! barrier it also waits for all of the iteration's gradients.

use fabriclab_plan::{Op, PlanGraph, PlanRun, Step};
use super::{section, AppKind, BuildEnv};
use crate::engine::{Api, App, Message, MsgId, Table};
use crate::time::ser_time_ps;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use std::collections::HashMap;

mod plan;
mod tables;
mod slack_aware;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerSpec {
    pub param_bytes: u64,
    pub fwd_ps: u64,
    pub bwd_ps: u64,
}

#[derive(Debug, Clone, Deserialize)]
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
}

/// A job's plan as it runs: its step graph and the figures the slack check
/// needs, computed once.
struct JobPlanRt {
    graph: PlanGraph,
    size_bytes: u64,
    /// Bytes the busiest rank sends in the plan; send steps of all ranks.
    most_sent_bytes: u64,
    messages: u64,
}

/// An allreduce plan for a job: steps over `size_bytes`, one list per worker.
#[derive(Debug, Clone, Deserialize)]
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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackAware {
    pub urgent_class: u8,
    pub factor: f64,
    pub rate_bps: u64,
    /// Ring stragglers (0 = off): raise a low-class ring message once a
    /// message of the same allreduce `lag_rounds` or more rounds later has
    /// arrived, or once it is the last of its round still to arrive (a
    /// message sent as its round's last goes out urgent): the ring is
    /// waiting for it.
    #[serde(default)]
    pub lag_rounds: u32,
}

/// One interval of the job's timeline.
#[derive(Debug, Clone, Copy)]
pub struct TimelineRow {
    pub worker: u32,
    /// 0 forward, 1 backward, 2 allreduce (from its start to this worker holding the sum).
    pub kind: u8,
    /// Layer index (compute) or fusion index (allreduce).
    pub index: u32,
    pub iteration: u32,
    pub start_ps: u64,
    pub end_ps: u64,
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
}

struct Allreduce {
    fusion: u32,
    iteration: u32,
    start_ps: u64,
    done_workers: u32,
    /// Ring messages arrived so far (all workers, all rounds).
    received: u32,
    /// Ring messages sent at a class other than the urgent one.
    low_sends: u32,
    /// Per round: messages arrived (ring).
    arrived: Vec<u32>,
    /// The run through the job's plan (plan-based allreduces).
    plan_run: Option<PlanRun>,
}

const T_COMPUTE: u64 = 0;
const T_SEND: u64 = 1;
const T_RECV_DONE: u64 = 2;
const T_SLACK_CHECK: u64 = 3;
const T_PLAN_SEND: u64 = 4;
const T_PLAN_REDUCE: u64 = 5;

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
    active: HashMap<u32, Allreduce>, // allreduce id -> state
    next_ar: u32,
    msgs: HashMap<MsgId, RingMsg>,
    /// Generation of the slack check timer (older ones are stale).
    check_gen: u32,
    /// The allreduce plan, if the job has one (its steps live in the graph
    /// only); pending plan timers.
    plan: Option<JobPlanRt>,
    plan_timers: HashMap<u32, (u32, u32, u32)>,
    next_plan_timer: u32,
    /// Measured time per byte each worker sends in an allreduce run
    /// entirely at the urgent class (moving average), for slack estimates.
    urgent_ps_per_byte: Option<f64>,
    rng: ChaCha8Rng,
    timeline: Vec<TimelineRow>,
    end_ps: Option<u64>,
    /// Ring messages and bytes sent, and how many of them at the urgent class.
    sends: SendCounts,
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

/// A ring message in flight.
#[derive(Debug, Clone, Copy)]
struct RingMsg {
    allreduce: u32,
    round: u32,
    sender: u32,
    bytes: u64,
    urgent: bool,
}

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
    pub fn new(mut spec: JobSpec, num_hosts: u32) -> Result<TrainingJob, String> {
        let n = spec.workers.len();
        let name = &spec.name;
        if n == 0 {
            return Err(format!("job '{name}': needs at least one worker"));
        }
        if let Some(h) = spec.workers.iter().find(|&&h| h >= num_hosts) {
            return Err(format!(
                "job '{name}': worker host {h} out of range (0..{num_hosts})"
            ));
        }
        if spec.layers.is_empty() {
            return Err(format!("job '{name}': needs at least one layer"));
        }
        if spec.slowdown.len() != n || spec.slowdown.iter().any(|&s| !(s > 0.0)) {
            return Err(format!(
                "job '{name}': slowdown needs one positive factor per worker"
            ));
        }
        if spec.max_inflight == 0 || spec.reduce_bps == 0 || spec.fusion_bytes == 0 {
            return Err(format!(
                "job '{name}': max_inflight, reduce_bps and fusion_bytes must be positive"
            ));
        }
        if let Some(lc) = &spec.layer_class {
            if lc.len() != spec.layers.len() {
                return Err(format!(
                    "job '{name}': layer_class needs one class per layer"
                ));
            }
        }
        let nl = spec.layers.len();
        let mut fusion_of = vec![0u32; nl];
        let mut fusion_layers: Vec<Vec<u32>> = Vec::new();
        let mut fusion_bytes: Vec<u64> = Vec::new();
        for i in (0..nl).rev() {
            let b = spec.layers[i].param_bytes;
            let fits = fusion_bytes
                .last()
                .is_some_and(|&f| f + b <= spec.fusion_bytes);
            if !fits {
                fusion_layers.push(Vec::new());
                fusion_bytes.push(0);
            }
            let f = fusion_layers.len() - 1;
            fusion_layers[f].push(i as u32);
            fusion_bytes[f] += b;
            fusion_of[i] = f as u32;
        }
        let fusion_min_layer = fusion_layers
            .iter()
            .map(|l| *l.iter().min().unwrap())
            .collect();
        let nf = fusion_layers.len();
        let workers = (0..n)
            .map(|_| Worker {
                iter: 0,
                phase: Phase::Fwd,
                layer: 0,
                busy: false,
                params_iter: vec![0; nl],
                pending_fusions: vec![0; 0],
                compute_start: 0,
                iter_end: vec![None; spec.iterations as usize],
                iter_start: vec![0; spec.iterations as usize],
                bwd_done: vec![false; spec.iterations as usize],
                bwd_end: vec![0; spec.iterations as usize],
            })
            .collect();
        let rng = ChaCha8Rng::seed_from_u64(spec.seed);
        let plan = match spec.allreduce_plan.take() {
            None => None,
            Some(p) => {
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
                Some(JobPlanRt {
                    graph,
                    size_bytes,
                    most_sent_bytes,
                    messages,
                })
            }
        };
        let prefix = |f: &dyn Fn(&LayerSpec) -> u64| {
            let sums: Vec<u64> = std::iter::once(0)
                .chain(spec.layers.iter().scan(0u64, |acc, l| {
                    *acc += f(l);
                    Some(*acc)
                }))
                .collect();
            let scale = |s: f64| {
                sums.iter()
                    .map(|&x| (x as f64 * s).round() as u64)
                    .collect::<Vec<u64>>()
            };
            spec.slowdown.iter().map(|&s| scale(s)).collect::<Vec<_>>()
        };
        let fwd_prefix = prefix(&|l| l.fwd_ps);
        let bwd_prefix = prefix(&|l| l.bwd_ps);
        let issued = vec![vec![false; nf]; spec.iterations as usize];
        let mut job = TrainingJob {
            spec,
            fusion_of,
            fusion_layers,
            fusion_bytes,
            fusion_min_layer,
            fwd_prefix,
            bwd_prefix,
            issued,
            workers,
            ready_count: HashMap::new(),
            queue: Vec::new(),
            enqueue_seq: 0,
            active: HashMap::new(),
            next_ar: 0,
            msgs: HashMap::new(),
            check_gen: 0,
            plan,
            plan_timers: HashMap::new(),
            next_plan_timer: 0,
            urgent_ps_per_byte: None,
            rng,
            timeline: Vec::new(),
            end_ps: None,
            sends: SendCounts::default(),
        };
        for w in &mut job.workers {
            w.pending_fusions = vec![nf as u32; job.spec.iterations as usize];
        }
        Ok(job)
    }

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

    fn compute_time(&mut self, w: usize, nominal: u64) -> u64 {
        let mut f = self.spec.slowdown[w];
        if self.spec.jitter > 0.0 {
            // Box-Muller normal sample, truncated at zero.
            let (u1, u2): (f64, f64) = (self.rng.gen::<f64>().max(1e-12), self.rng.gen());
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            f *= (1.0 + self.spec.jitter * z).max(0.0);
        }
        (nominal as f64 * f).round() as u64
    }

    /// Starts the worker's next compute step if nothing blocks it.
    fn try_compute(&mut self, api: &mut Api, w: usize) {
        let wk = &self.workers[w];
        if wk.busy || wk.phase == Phase::Done {
            return;
        }
        let (it, layer) = (wk.iter, wk.layer);
        if wk.phase == Phase::Fwd && it > 0 {
            if wk.params_iter[layer as usize] < it {
                return; // layer's reduced gradient of the previous iteration not here yet
            }
            if self.spec.barrier && layer == 0 && wk.pending_fusions[it as usize - 1] > 0 {
                return;
            }
        }
        let spec_layer = &self.spec.layers[layer as usize];
        let nominal = if wk.phase == Phase::Fwd {
            spec_layer.fwd_ps
        } else {
            spec_layer.bwd_ps
        };
        let dt = self.compute_time(w, nominal);
        let now = api.now();
        let wk = &mut self.workers[w];
        wk.busy = true;
        wk.compute_start = now;
        if wk.phase == Phase::Fwd && layer == 0 {
            wk.iter_start[it as usize] = now;
        }
        api.schedule(now + dt, tok(T_COMPUTE, w as u32, 0));
    }

    fn compute_done(&mut self, api: &mut Api, w: usize) {
        let nl = self.spec.layers.len() as u32;
        let now = api.now();
        let wk = &mut self.workers[w];
        wk.busy = false;
        let (it, layer, phase) = (wk.iter, wk.layer, wk.phase);
        self.timeline.push(TimelineRow {
            worker: w as u32,
            kind: if phase == Phase::Fwd { 0 } else { 1 },
            index: layer,
            iteration: it,
            start_ps: wk.compute_start,
            end_ps: now,
        });
        match phase {
            Phase::Fwd if layer + 1 < nl => wk.layer += 1,
            Phase::Fwd => wk.phase = Phase::Bwd, // backward starts at the last layer
            Phase::Bwd => {
                let f = self.fusion_of[layer as usize];
                if layer == 0 {
                    wk.bwd_done[it as usize] = true;
                    wk.bwd_end[it as usize] = now;
                    if it + 1 < self.spec.iterations {
                        wk.iter += 1;
                        wk.phase = Phase::Fwd;
                    } else {
                        wk.phase = Phase::Done;
                    }
                } else {
                    wk.layer -= 1;
                }
                // The fusion is ready at this worker when its last (lowest) layer is done.
                if layer == self.fusion_min_layer[f as usize] {
                    self.fusion_ready(api, it, f);
                }
                self.check_iter_end(api, w, it);
            }
            Phase::Done => {}
        }
        self.try_compute(api, w);
    }

    fn check_iter_end(&mut self, api: &mut Api, w: usize, it: u32) {
        let wk = &mut self.workers[w];
        if wk.bwd_done[it as usize]
            && wk.pending_fusions[it as usize] == 0
            && wk.iter_end[it as usize].is_none()
        {
            wk.iter_end[it as usize] = Some(api.now());
            if it + 1 == self.spec.iterations
                && self
                    .workers
                    .iter()
                    .all(|w| w.iter_end[it as usize].is_some())
            {
                self.end_ps = Some(api.now());
            }
        }
    }

    fn fusion_ready(&mut self, api: &mut Api, it: u32, f: u32) {
        let n = self.workers.len() as u32;
        let c = self.ready_count.entry((it, f)).or_insert(0);
        *c += 1;
        if *c == n {
            self.ready_count.remove(&(it, f));
            self.issued[it as usize][f as usize] = true;
            self.queue.push((it, f, self.enqueue_seq));
            self.enqueue_seq += 1;
            self.pump(api);
        }
    }

    /// Starts queued allreduces while fewer than `max_inflight` run.
    fn pump(&mut self, api: &mut Api) {
        while (self.active.len() as u32) < self.spec.max_inflight && !self.queue.is_empty() {
            let pick = if self.spec.priority_queue {
                (0..self.queue.len())
                    .min_by_key(|&k| {
                        let (it, f, seq) = self.queue[k];
                        (it, self.fusion_min_layer[f as usize], seq)
                    })
                    .unwrap()
            } else {
                (0..self.queue.len())
                    .min_by_key(|&k| self.queue[k].2)
                    .unwrap()
            };
            let (it, f, _) = self.queue.remove(pick);
            let id = self.next_ar;
            self.next_ar += 1;
            self.active.insert(
                id,
                Allreduce {
                    fusion: f,
                    iteration: it,
                    start_ps: api.now(),
                    done_workers: 0,
                    received: 0,
                    low_sends: 0,
                    arrived: vec![0; 2 * self.workers.len().saturating_sub(1)],
                    plan_run: None,
                },
            );
            let n = self.workers.len() as u32;
            if let Some(p) = &self.plan {
                let mut out = Vec::new();
                let run = PlanRun::start(&p.graph, &mut out);
                self.active.get_mut(&id).expect("active allreduce").plan_run = Some(run);
                self.apply_plan(api, id, out);
                continue;
            }
            if n == 1 {
                self.worker_has_sum(api, id, 0);
                continue;
            }
            for w in 0..n {
                self.send_round(api, id, 0, w);
            }
        }
    }

    fn partition_bytes(&self, f: u32, part: u32) -> u64 {
        let n = self.workers.len() as u64;
        let s = self.fusion_bytes[f as usize];
        let p = part as u64;
        (p + 1) * s / n - p * s / n
    }

    fn send_round(&mut self, api: &mut Api, id: u32, round: u32, w: u32) {
        let now = api.now();
        api.schedule(
            now + self.spec.send_overhead_ps,
            tok(T_SEND, id, round << 16 | w),
        );
    }

    fn do_send(&mut self, api: &mut Api, id: u32, round: u32, w: u32) {
        let n = self.workers.len() as u32;
        let f = self.active[&id].fusion;
        // Round r: worker w sends partition (w - r) mod n to its right neighbour.
        let part = (w + n * 2 - round % n) % n;
        let bytes = self.partition_bytes(f, part).max(1);
        self.send_message(api, id, round, w, (w + 1) % n, bytes);
    }

    /// Sends one message of allreduce `id` from worker `w` to worker `to`
    /// (`round`: the ring round, or the plan step), at the job's class or,
    /// slack-aware, at the urgent class when the slack has run out.
    fn send_message(&mut self, api: &mut Api, id: u32, round: u32, w: u32, to: u32, bytes: u64) {
        let n = self.workers.len() as u32;
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
            let last_of_round = sa.lag_rounds > 0
                && self.plan.is_none()
                && self.active[&id].arrived[round as usize] + 1 == n;
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
            ..Default::default()
        };
        match api.send(&m) {
            Ok(msg) => {
                self.msgs.insert(
                    msg,
                    RingMsg {
                        allreduce: id,
                        round,
                        sender: w,
                        bytes,
                        urgent,
                    },
                );
            }
            Err(e) => api.fail(format!("job '{}': {e}", self.spec.name)),
        }
    }

    /// Ring messages sent, all and at the urgent class (slack-aware jobs).
    pub fn send_counts(&self) -> SendCounts {
        self.sends
    }

    fn received(&mut self, api: &mut Api, id: u32, round: u32, sender: u32) {
        let n = self.workers.len() as u32;
        let w = (sender + 1) % n;
        if round + 1 < n {
            // Reduce-scatter round: sum the partition in, then forward it.
            let f = self.active[&id].fusion;
            let part = (sender + n * 2 - round % n) % n;
            let t = ser_time_ps(self.partition_bytes(f, part), self.spec.reduce_bps);
            api.schedule(api.now() + t, tok(T_RECV_DONE, id, round << 16 | w));
        } else if round + 1 < 2 * (n - 1) {
            self.send_round(api, id, round + 1, w);
        } else {
            self.worker_has_sum(api, id, w);
        }
    }

    fn worker_has_sum(&mut self, api: &mut Api, id: u32, w: u32) {
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
                let sent = match self.plan {
                    Some(_) => self.bytes_per_worker(f),
                    None => self.fusion_bytes[f as usize] as f64 * 2.0 * (n - 1) as f64 / n as f64,
                };
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

impl App for TrainingJob {
    fn start(&mut self, api: &mut Api) {
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
            T_SEND => self.do_send(api, a, b >> 16, b & 0xFFFF),
            T_RECV_DONE => {
                let (round, w) = (b >> 16, b & 0xFFFF);
                self.send_round(api, a, round + 1, w);
            }
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
        let ar = self.active.get_mut(&m.allreduce).expect("active allreduce");
        ar.received += 1;
        if let Some(run) = ar.plan_run.as_mut() {
            let mut out = Vec::new();
            run.delivered(
                &self.plan.as_ref().expect("plan job").graph,
                m.sender,
                m.round,
                &mut out,
            );
            self.apply_plan(api, m.allreduce, out);
            return;
        }
        ar.arrived[m.round as usize] += 1;
        self.raise_laggards(api, m.allreduce, m.round);
        self.received(api, m.allreduce, m.round, m.sender);
    }

    fn tag(&self) -> &str {
        &self.spec.name
    }

    fn tables(&self) -> Vec<Table> {
        tables::tables(self)
    }
}

/// `[[jobs]]`: training jobs.
pub const KIND: AppKind = AppKind { key: "jobs", build: build_jobs };

fn build_jobs(v: &serde_json::Value, env: &BuildEnv) -> Result<Vec<Box<dyn App>>, String> {
    let specs: Vec<JobSpec> = section("jobs", v)?;
    let nh = env.topo.num_hosts() as u32;
    specs.into_iter().map(|j| Ok(Box::new(TrainingJob::new(j, nh)?) as Box<dyn App>)).collect()
}

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

use crate::sim::{Api, App, Message, MsgId};
use crate::time::ser_time_ps;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use std::collections::HashMap;

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
}

fn yes() -> bool {
    true
}

/// A fusion's deadline is when the next iteration's forward pass will need
/// its lowest layer, predicted from nominal compute times: the iteration's
/// start + all forward and backward compute + the forward compute of the
/// layers below it. Before each ring round, the remaining slack (deadline −
/// now) is compared with `factor` × the time the remaining rounds need at
/// `rate_bps`; below it, the round goes out at `urgent_class`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackAware {
    pub urgent_class: u8,
    pub factor: f64,
    pub rate_bps: u64,
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
}

struct Allreduce {
    fusion: u32,
    iteration: u32,
    start_ps: u64,
    done_workers: u32,
}

const T_COMPUTE: u64 = 0;
const T_SEND: u64 = 1;
const T_RECV_DONE: u64 = 2;

pub struct TrainingJob {
    spec: JobSpec,
    fusion_of: Vec<u32>,
    fusion_layers: Vec<Vec<u32>>,
    fusion_bytes: Vec<u64>,
    fusion_min_layer: Vec<u32>,
    workers: Vec<Worker>,
    /// (iteration, fusion) -> workers whose gradients are ready.
    ready_count: HashMap<(u32, u32), u32>,
    queue: Vec<(u32, u32, u64)>, // (iteration, fusion, enqueue sequence)
    enqueue_seq: u64,
    active: HashMap<u32, Allreduce>, // allreduce id -> state
    next_ar: u32,
    msgs: HashMap<MsgId, (u32, u32, u32)>, // msg -> (allreduce id, round, sender)
    rng: ChaCha8Rng,
    timeline: Vec<TimelineRow>,
    end_ps: Option<u64>,
    urgent_sends: u64,
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
    pub fn new(spec: JobSpec, num_hosts: u32) -> Result<TrainingJob, String> {
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
            })
            .collect();
        let rng = ChaCha8Rng::seed_from_u64(spec.seed);
        let mut job = TrainingJob {
            spec,
            fusion_of,
            fusion_layers,
            fusion_bytes,
            fusion_min_layer,
            workers,
            ready_count: HashMap::new(),
            queue: Vec::new(),
            enqueue_seq: 0,
            active: HashMap::new(),
            next_ar: 0,
            msgs: HashMap::new(),
            rng,
            timeline: Vec::new(),
            end_ps: None,
            urgent_sends: 0,
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
                },
            );
            let n = self.workers.len() as u32;
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
        let ar = &self.active[&id];
        let f = ar.fusion;
        // Round r: worker w sends partition (w - r) mod n to its right neighbour.
        let part = (w + n * 2 - round % n) % n;
        let bytes = self.partition_bytes(f, part).max(1);
        let layer_class = self
            .spec
            .layer_class
            .as_ref()
            .map(|lc| lc[self.fusion_min_layer[f as usize] as usize]);
        let mut class = layer_class.unwrap_or(self.spec.class);
        if let Some(sa) = &self.spec.slack_aware {
            if self.slack_ps(api.now(), id, round, w) < 0.0 {
                class = sa.urgent_class;
                self.urgent_sends += 1;
            }
        }
        let m = Message {
            src: self.spec.workers[w as usize],
            dst: self.spec.workers[((w + 1) % n) as usize],
            size_bytes: bytes,
            class,
            path: None,
            persistent: self.spec.persistent_connections,
        };
        match api.send(&m) {
            Ok(msg) => {
                self.msgs.insert(msg, (id, round, w));
            }
            Err(e) => api.fail(format!("job '{}': {e}", self.spec.name)),
        }
    }

    /// Remaining slack of allreduce `id` at round `round` for worker `w`,
    /// minus `factor` times the nominal time of the rounds still to go.
    fn slack_ps(&self, now: u64, id: u32, round: u32, w: u32) -> f64 {
        let sa = self.spec.slack_aware.as_ref().expect("slack-aware job");
        let ar = &self.active[&id];
        let n = self.workers.len() as u64;
        let it = ar.iteration as usize;
        let wk = &self.workers[w as usize];
        let compute: u64 = self.spec.layers.iter().map(|l| l.fwd_ps + l.bwd_ps).sum();
        let low = self.fusion_min_layer[ar.fusion as usize] as usize;
        let before: u64 = self.spec.layers[..low].iter().map(|l| l.fwd_ps).sum();
        let deadline = wk.iter_start[it] + compute + before;
        let rounds_left = 2 * (n - 1) - round as u64;
        let part = self.fusion_bytes[ar.fusion as usize] / n;
        let need = rounds_left as f64 * ser_time_ps(part, sa.rate_bps) as f64 * sa.factor;
        deadline as f64 - now as f64 - need
    }

    /// Ring rounds sent at the urgent class (slack-aware jobs).
    pub fn urgent_sends(&self) -> u64 {
        self.urgent_sends
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
            self.active.remove(&id);
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
            _ => unreachable!("unknown job timer"),
        }
    }

    fn on_complete(&mut self, api: &mut Api, msg: MsgId) {
        if let Some((id, round, sender)) = self.msgs.remove(&msg) {
            self.received(api, id, round, sender);
        }
    }

    fn tag(&self) -> &str {
        &self.spec.name
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

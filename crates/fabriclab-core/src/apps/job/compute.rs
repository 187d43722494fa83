//! The workers' compute and the transmit queue: forward and backward layer
//! steps (scaled by slowdown, with jitter), a fusion becoming ready once
//! every worker has its gradients, and ready fusions started as allreduces
//! in FIFO or priority order, at most `max_inflight` at once.

use super::{tok, Phase, TimelineRow, TrainingJob, T_COMPUTE};
use crate::engine::Api;
use rand::Rng;

impl TrainingJob {
    fn compute_time(&mut self, w: usize, nominal: u64, now: u64) -> u64 {
        let mut f = self.spec.slowdown[w];
        for &(at, factor) in &self.slow_from[w] {
            if now >= at {
                f *= factor;
            }
        }
        if self.spec.jitter > 0.0 {
            // Box-Muller normal sample, truncated at zero.
            let (u1, u2): (f64, f64) = (self.rng.gen::<f64>().max(1e-12), self.rng.gen());
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            f *= (1.0 + self.spec.jitter * z).max(0.0);
        }
        (nominal as f64 * f).round() as u64
    }

    /// Starts the worker's next compute step if nothing blocks it.
    pub(super) fn try_compute(&mut self, api: &mut Api, w: usize) {
        let wk = &self.workers[w];
        if wk.busy || wk.phase == Phase::Done || self.halted(w as u32, api.now()) {
            return;
        }
        let (it, layer) = (wk.iter, wk.layer);
        let now = api.now();
        let mut checkpoint = None;
        if wk.phase == Phase::Fwd && layer == 0 && self.checkpoint_before(it) {
            // The snapshot of iteration it - 1 needs all of it at this worker.
            let Some(end) = wk.iter_end[it as usize - 1] else {
                return;
            };
            let done = end + self.spec.checkpoint.as_ref().map_or(0, |c| c.pause_ps);
            if now < done {
                if !wk.checkpoint_wake {
                    self.workers[w].checkpoint_wake = true;
                    api.schedule(done, tok(T_COMPUTE, w as u32, 1));
                }
                return;
            }
            checkpoint = Some((end, done));
        }
        let wk = &self.workers[w];
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
        let dt = self.compute_time(w, nominal, now);
        if let Some((start_ps, end_ps)) = checkpoint {
            self.timeline.push(TimelineRow {
                worker: w as u32,
                kind: 3,
                index: 0,
                iteration: it - 1,
                start_ps,
                end_ps,
            });
        }
        let wk = &mut self.workers[w];
        wk.checkpoint_wake = false;
        wk.busy = true;
        wk.compute_start = now;
        if wk.phase == Phase::Fwd && layer == 0 {
            wk.iter_start[it as usize] = now;
        }
        api.schedule(now + dt, tok(T_COMPUTE, w as u32, 0));
    }

    /// Whether a checkpoint is taken before iteration `it` (never before the first).
    fn checkpoint_before(&self, it: u32) -> bool {
        it > 0
            && self
                .spec
                .checkpoint
                .as_ref()
                .is_some_and(|c| it.is_multiple_of(c.every_iterations))
    }

    pub(super) fn compute_done(&mut self, api: &mut Api, w: usize) {
        let nl = self.spec.layers.len() as u32;
        let now = api.now();
        if self.halted(w as u32, now) {
            return; // the step never completes
        }
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
                    self.fusion_ready(api, it, f, w as u32);
                }
                self.check_iter_end(api, w, it);
            }
            Phase::Done => {}
        }
        self.try_compute(api, w);
    }

    /// Records the end of iteration `it` at worker `w` once its backward
    /// pass is done and it holds every reduced gradient (and the job's end
    /// once every worker has finished the last iteration).
    pub(super) fn check_iter_end(&mut self, api: &mut Api, w: usize, it: u32) {
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
                if self.spec.end_run {
                    api.release_run();
                }
            }
        }
    }

    fn fusion_ready(&mut self, api: &mut Api, it: u32, f: u32, w: u32) {
        let n = self.workers.len() as u32;
        self.joined
            .entry((it, f))
            .or_insert_with(|| vec![None; n as usize])[w as usize] = Some(api.now());
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
    pub(super) fn pump(&mut self, api: &mut Api) {
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
            self.start_allreduce(api, it, f);
        }
    }
}

//! Slack-aware prioritisation of a training job's traffic (see
//! [`super::SlackAware`]): the deadline check over the transmit queue, the
//! re-check timer, and raising messages in flight (the ring's stragglers
//! are `ring.rs`'s).

use super::{tok, Phase, TrainingJob, T_SLACK_CHECK};
use crate::apps::slack::{min_slack_ps, Pending};
use crate::engine::{Api, MsgId};
use crate::time::ser_time_ps;

impl TrainingJob {
    /// When worker `w` is predicted to finish the backward compute of
    /// `layer` in iteration `it`: measured if it has, else from where the
    /// worker is now plus nominal compute (scaled by its slowdown).
    pub(super) fn bwd_finish_ps(&self, now: u64, w: usize, it: u32, layer: u32) -> u64 {
        let wk = &self.workers[w];
        let (fwd, bwd) = (&self.fwd_prefix[w], &self.bwd_prefix[w]);
        let nl = self.spec.layers.len();
        let bwd_from = |l: usize| bwd[l + 1] - bwd[layer as usize];
        if it < wk.iter || wk.bwd_done[it as usize] {
            return if layer == 0 && wk.bwd_done[it as usize] {
                wk.bwd_end[it as usize]
            } else {
                now
            };
        }
        // From the start of the current step (or now, if the worker is waiting).
        let t0 = if wk.busy { wk.compute_start } else { now };
        if it > wk.iter {
            return t0 + (fwd[nl] + bwd[nl]) * (it - wk.iter) as u64 + bwd_from(nl - 1);
        }
        match wk.phase {
            Phase::Bwd if wk.layer < layer => now,
            Phase::Bwd => t0 + bwd_from(wk.layer as usize),
            _ => t0 + fwd[nl] - fwd[wk.layer as usize] + bwd_from(nl - 1),
        }
    }

    /// Bytes the busiest worker sends in an allreduce of fusion `f`: a ring
    /// partition in each of its 2(n-1) rounds, or the plan's largest
    /// per-rank total scaled to the fusion.
    pub(super) fn bytes_per_worker(&self, f: u32) -> f64 {
        let n = self.workers.len() as u64;
        self.engine
            .bytes_per_worker(self.fusion_bytes[f as usize], n)
    }

    /// Messages of one allreduce (all workers).
    pub(super) fn messages_per_allreduce(&self) -> u64 {
        self.engine
            .messages_per_allreduce(self.workers.len() as u64)
    }

    /// The job's transmit-queue slack (see [`SlackAware`]); negative: raise the class.
    pub(super) fn slack_ps(&self, now: u64) -> i128 {
        let sa = self.spec.slack_aware.as_ref().expect("slack-aware job");
        // Time per byte sent: measured at the urgent class once an allreduce
        // has run entirely at it, else the link rate's.
        let line = ser_time_ps(1_000_000, sa.rate_bps) as f64 / 1e6;
        let ps_per_byte = self.urgent_ps_per_byte.unwrap_or(line).max(line) * sa.factor;
        let work = |f: u32| (self.bytes_per_worker(f) * ps_per_byte) as u64;
        // Iterations with communication pending, and each worker's (predicted) end of their backward pass.
        let mut iters: Vec<u32> = self
            .active
            .values()
            .map(|a| a.iteration)
            .chain(self.queue.iter().map(|q| q.0))
            .collect();
        iters.sort();
        iters.dedup();
        let bwd_end: Vec<Vec<u64>> = iters
            .iter()
            .map(|&it| {
                (0..self.workers.len())
                    .map(|w| self.bwd_finish_ps(now, w, it, 0))
                    .collect()
            })
            .collect();
        let piece = |it: u32, f: u32, ready_ps: u64, work_ps: u64, seq: u64| {
            let low = self.fusion_min_layer[f as usize];
            let ends = &bwd_end[iters.binary_search(&it).expect("pending iteration")];
            // The worker that needs the gradient first sets the deadline.
            let (deadline_ps, fwd_before_ps) = ends
                .iter()
                .zip(&self.fwd_prefix)
                .map(|(&end, fwd)| (end + fwd[low as usize], fwd[low as usize]))
                .min()
                .expect("one worker");
            let order = if self.spec.priority_queue {
                (it as u64, low as u64, seq)
            } else {
                (seq, 0, 0)
            };
            Pending {
                ready_ps,
                deadline_ps,
                work_ps,
                order,
                layer: low,
                fwd_before_ps,
                iteration: it,
            }
        };
        let mut ids: Vec<&u32> = self.active.keys().collect();
        ids.sort();
        let in_flight: Vec<Pending> = ids
            .iter()
            .map(|id| {
                let ar = &self.active[id];
                let left = 1.0 - ar.received as f64 / self.messages_per_allreduce() as f64;
                piece(
                    ar.iteration,
                    ar.fusion,
                    now,
                    (work(ar.fusion) as f64 * left) as u64,
                    0,
                )
            })
            .collect();
        let mut waiting: Vec<Pending> = self
            .queue
            .iter()
            .map(|&(it, f, seq)| piece(it, f, now, work(f), seq))
            .collect();
        // Fusions of the same iterations still in the backward pass: ready
        // once the slowest worker has computed their lowest layer, served
        // after everything already queued (FIFO) or by priority.
        let base_seq = self.enqueue_seq;
        for &it in &iters {
            for f in 0..self.fusion_layers.len() as u32 {
                if self.issued[it as usize][f as usize] {
                    continue;
                }
                let low = self.fusion_min_layer[f as usize];
                let ready = (0..self.workers.len())
                    .map(|w| self.bwd_finish_ps(now, w, it, low))
                    .max()
                    .expect("one worker");
                waiting.push(piece(it, f, ready, work(f), base_seq + ready));
            }
        }
        min_slack_ps(now, &in_flight, &waiting)
    }

    /// Re-checks the slack when it would run out if no message arrived
    /// before: one pending check per job, older ones go stale.
    pub(super) fn arm_slack_check(&mut self, api: &mut Api, slack_ps: i128) {
        // Slack need not shrink as fast as time passes (predictions move
        // too), so checks at `now + slack` can creep; 100 us bounds them.
        const MIN_RECHECK_PS: i128 = 100_000_000;
        self.check_gen = self.check_gen.wrapping_add(1);
        let at = api.now() as i128 + slack_ps.max(MIN_RECHECK_PS);
        api.schedule(
            at.min(u64::MAX as i128) as u64,
            tok(T_SLACK_CHECK, self.check_gen & 0x0FFF_FFFF, 0),
        );
    }

    /// The slack ran out with low-class messages still in flight: raise
    /// them to the urgent class; otherwise look again when it next could.
    pub(super) fn slack_check(&mut self, api: &mut Api) {
        let urgent_class = self
            .spec
            .slack_aware
            .as_ref()
            .expect("slack-aware job")
            .urgent_class;
        if !self.msgs.values().any(|m| !m.urgent) {
            return;
        }
        let slack = self.slack_ps(api.now());
        if slack >= 0 {
            self.arm_slack_check(api, slack);
            return;
        }
        let low: Vec<MsgId> = self
            .msgs
            .iter()
            .filter(|(_, m)| !m.urgent)
            .map(|(&id, _)| id)
            .collect();
        self.raise(api, low, urgent_class);
    }

    /// Raises messages in flight to `class` (in message order, for
    /// determinism) and counts those still being sent.
    pub(super) fn raise(&mut self, api: &mut Api, mut ids: Vec<MsgId>, class: u8) {
        ids.sort();
        for id in ids {
            let m = self.msgs.get_mut(&id).expect("in flight");
            m.urgent = true;
            if api.set_class(id, class) {
                self.sends.raised_messages += 1;
                self.sends.raised_bytes += m.bytes;
            }
        }
    }
}

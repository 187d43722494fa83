//! The built-in ring engine: 2(n-1) rounds; in round r worker w sends
//! partition (w - r) mod n of the fusion to its right neighbour, after the
//! send overhead. A partition received in the first n-1 rounds is reduced
//! (at `reduce_bps`) and then forwarded, one received later is forwarded
//! as is; a worker holds the sum once its last round's message has arrived.
//!
//! # Why the ring is not one plan among others
//!
//! The same ring can be written as an allreduce plan over n bytes (rank w,
//! per round r: send of partition (w - r) mod n, depending on the receive
//! of round r - 1, and the receive from w - 1, reducing in the first n-1
//! rounds); the plan engine then sends the same messages at the same times
//! within an allreduce (tests/job_ring_plan.rs). Results still differ, for
//! reasons the plan engine cannot express without ceasing to run plans as
//! plans:
//!
//! 1. When a worker holds the sum. The ring says so when its last round's
//!    message has arrived, even if an earlier round's message to it, being
//!    overtaken, is still on its way. A plan rank is done
//!    ([`fabriclab_plan::Action::RankDone`]) once every step has
//!    completed, its own sends included, and a send completes when it is
//!    delivered: the rank waits for its right neighbour's last receive
//!    too. That moves the timeline's allreduce ends, the iteration ends
//!    and, through the forward pass waiting for each layer's gradient, the
//!    messages of later iterations. The step semantics are fabriclab-plan's,
//!    shared with the real runtime and every plan job.
//! 2. Reducing an empty partition (a fusion smaller than n bytes) takes no
//!    time in the ring; a plan step scaled to a fusion is at least one byte.
//! 3. Message tags carry the ring round; under a plan they carry the step
//!    index (2r for the send of round r), and messages.parquet shows them.
//! 4. Slack-aware jobs: raising stragglers by `lag_rounds` and sending a
//!    round's last message urgent key on ring rounds (messages arrived per
//!    round, over all workers); a plan has per-rank steps and no rounds, so
//!    a plan job never does either. The slack estimate takes a ring worker
//!    to send 2(n-1) partitions rounded up, ceil(S/n), where a plan's
//!    busiest rank sends its scaled bytes, 2(n-1)·S/n unrounded: different
//!    deadlines, different class choices.
//!
//! Making the ring a plan would take a plan engine that ends a rank at its
//! last receive, skips empty reductions, tags by round and knows rounds:
//! the ring engine under another name. So the ring stays an engine of its
//! own beside the plan engine ([`super::allreduce::Engine`]).

use super::inflight::{JobMsg, Run};
use super::{tok, TrainingJob, T_RECV_DONE, T_SEND};
use crate::engine::{Api, MsgId};
use crate::time::ser_time_ps;

/// Bytes the busiest worker sends in a ring allreduce of `size` bytes over
/// `n` workers: a partition (rounded up) in each of its 2(n-1) rounds.
pub(super) fn bytes_per_worker(size: u64, n: u64) -> f64 {
    (size.div_ceil(n) * 2 * (n - 1)) as f64
}

/// Messages of one ring allreduce (all workers).
pub(super) fn messages_per_allreduce(n: u64) -> u64 {
    n * 2 * (n - 1)
}

/// Bytes per worker a ring allreduce of `size` bytes is taken to have sent
/// for the urgent-rate estimate: 2(n-1)/n of the fusion, unrounded.
pub(super) fn rate_sample_bytes(size: u64, n: u32) -> f64 {
    size as f64 * 2.0 * (n - 1) as f64 / n as f64
}

impl TrainingJob {
    /// Starts a ring allreduce: every worker sends its round-0 partition
    /// (a lone worker already holds the sum).
    pub(super) fn ring_start(&mut self, api: &mut Api, it: u32, f: u32) {
        let arrived = vec![0; 2 * self.workers.len().saturating_sub(1)];
        let id = self.new_allreduce(api, it, f, Run::Ring { arrived });
        let n = self.workers.len() as u32;
        if n == 1 {
            self.worker_has_sum(api, id, 0);
            return;
        }
        for w in 0..n {
            self.send_round(api, id, 0, w);
        }
    }

    /// Bytes of partition `part` of fusion `f` (possibly 0).
    fn partition_bytes(&self, f: u32, part: u32) -> u64 {
        let n = self.workers.len() as u64;
        let s = self.fusion_bytes[f as usize];
        let p = part as u64;
        (p + 1) * s / n - p * s / n
    }

    /// Worker `w` sends its round-`round` message after the send overhead.
    fn send_round(&mut self, api: &mut Api, id: u32, round: u32, w: u32) {
        let now = api.now();
        if round > 0 {
            let n = self.workers.len() as u32;
            self.ccl.post(id, w, round, true, (w + 1) % n, now);
        }
        api.schedule(
            now + self.spec.send_overhead_ps,
            tok(T_SEND, id, round << 16 | w),
        );
    }

    /// The send overhead of worker `w`'s round-`round` message has passed.
    pub(super) fn ring_send_due(&mut self, api: &mut Api, id: u32, round: u32, w: u32) {
        let n = self.workers.len() as u32;
        let f = self.active[&id].fusion;
        // Round r: worker w sends partition (w - r) mod n to its right neighbour.
        let part = (w + n * 2 - round % n) % n;
        let bytes = self.partition_bytes(f, part).max(1);
        self.send_message(api, id, round, w, (w + 1) % n, bytes);
    }

    /// The round-`round` message of `sender` has arrived at its right
    /// neighbour: reduce and forward it, forward it, or the sum is there.
    pub(super) fn ring_received(&mut self, api: &mut Api, id: u32, round: u32, sender: u32) {
        let n = self.workers.len() as u32;
        let w = (sender + 1) % n;
        if round + 1 < n {
            // Reduce-scatter round: sum the partition in, then forward it.
            let f = self.active[&id].fusion;
            let part = (sender + n * 2 - round % n) % n;
            let t = ser_time_ps(self.partition_bytes(f, part), self.spec.reduce_bps);
            api.schedule(api.now() + t, tok(T_RECV_DONE, id, round << 16 | w));
        } else if round + 1 < 2 * (n - 1) {
            self.recv_done(api.now(), id, round, w);
            self.send_round(api, id, round + 1, w);
        } else {
            self.recv_done(api.now(), id, round, w);
            self.worker_has_sum(api, id, w);
        }
    }

    /// Worker `w`'s receive of round `round` is done (reduced or as is):
    /// its next round's receive is posted.
    fn recv_done(&mut self, now: u64, id: u32, round: u32, w: u32) {
        let n = self.workers.len() as u32;
        let left = (w + n - 1) % n;
        self.ccl.row(id, w, round, false, left).end_ps = Some(now);
        if round + 1 < 2 * (n - 1) {
            self.ccl.post(id, w, round + 1, false, left, now);
        }
    }

    /// Worker `w` has reduced the partition of round `round`: it forwards it.
    pub(super) fn ring_reduced(&mut self, api: &mut Api, id: u32, round: u32, w: u32) {
        if self.halted(w, api.now()) {
            return;
        }
        self.recv_done(api.now(), id, round, w);
        self.send_round(api, id, round + 1, w);
    }

    /// Whether a message of allreduce `id` in round `round` would be its
    /// round's last still to arrive (false for a plan's allreduce).
    pub(super) fn ring_last_of_round(&self, id: u32, round: u32) -> bool {
        let n = self.workers.len() as u32;
        match &self.active[&id].run {
            Run::Ring { arrived } => arrived[round as usize] + 1 == n,
            Run::Plan(_) | Run::Aggregate => false,
        }
    }

    /// A message of allreduce `id` at round `round` arrived: raise the ring's
    /// stragglers (see [`super::SlackAware::lag_rounds`]).
    pub(super) fn raise_laggards(&mut self, api: &mut Api, id: u32, round: u32) {
        let Some(sa) = &self.spec.slack_aware else {
            return;
        };
        let Some(ar) = self.active.get(&id) else {
            return;
        };
        if sa.lag_rounds == 0 {
            return;
        }
        let Run::Ring { arrived } = &ar.run else {
            return;
        };
        let n = self.workers.len() as u32;
        let class = sa.urgent_class;
        let behind = |m: &JobMsg| {
            m.round + sa.lag_rounds <= round
                || (m.round == round && arrived[round as usize] + 1 == n)
        };
        let lag: Vec<MsgId> = self
            .msgs
            .iter()
            .filter(|(_, m)| !m.urgent && m.allreduce == id && behind(m))
            .map(|(&k, _)| k)
            .collect();
        self.raise(api, lag, class);
    }
}

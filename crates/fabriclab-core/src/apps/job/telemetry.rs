//! The job's collective telemetry: one row per message of its allreduces
//! as one rank saw it, its send or its receive, in the shape of the
//! `ccl.parquet` rows (docs/telemetry.md) with times in picoseconds.
//!
//! A rank joins an allreduce when its own gradients of the fusion are
//! ready (where NCCL would enqueue the collective); its first steps are
//! posted then, even though the job's coordinator starts the allreduce only
//! once every worker has joined. Later steps are posted when their
//! dependencies complete: a ring send when the previous round's receive is
//! reduced (or has arrived), a ring receive when the rank's previous receive
//! is done; a plan step when the plan walk starts it. A send starts when its
//! message leaves (after the send overhead) and ends when it has arrived; a
//! receive's arrival is its message's, and it is done when reduced. A
//! halted worker records nothing from its halt on.

use super::allreduce::Engine;
use super::TrainingJob;
use crate::apps::ccl::{message_columns, Ccl, CclRow};
use crate::engine::{Column, Table};
use fabriclab_plan::Op;

impl TrainingJob {
    /// The first send and receive of a rank in one op, with their peers:
    /// the ring's round 0, or the rank's first send and receive steps of the plan.
    fn first_steps(&self, rank: u32) -> [Option<(u32, u32, bool)>; 2] {
        let n = self.workers.len() as u32;
        match &self.engine {
            Engine::Ring if n > 1 => [
                Some((0, (rank + 1) % n, true)),
                Some((0, (rank + n - 1) % n, false)),
            ],
            Engine::Plan(p) => {
                let steps = &p.graph.steps()[rank as usize];
                let first = |op: Op| {
                    steps
                        .iter()
                        .position(|s| s.op == op)
                        .map(|i| (i as u32, steps[i].peer, op == Op::Send))
                };
                [first(Op::Send), first(Op::Recv)]
            }
            _ => [None, None],
        }
    }

    /// Posts rank `w`'s first steps of allreduce `id` at its join time.
    pub(super) fn post_first_steps(&mut self, id: u32, w: u32, joined_ps: u64) {
        for (step, peer, send) in self.first_steps(w).into_iter().flatten() {
            self.ccl.post(id, w, step, send, peer, joined_ps);
        }
    }

    /// The telemetry table, with the fusions some workers joined but whose
    /// allreduce never started (a halted worker never joined) as further
    /// ops, numbered on from the last started one in (iteration, fusion) order.
    pub(super) fn ccl_table(&self) -> Table {
        let mut extra = Ccl::default();
        let mut waiting: Vec<_> = self.joined.iter().collect();
        waiting.sort_by_key(|(k, _)| **k);
        for (k, (_, times)) in waiting.into_iter().enumerate() {
            let op = self.next_ar + k as u32;
            for (w, t) in times.iter().enumerate() {
                let Some(t) = *t else { continue };
                for (step, peer, send) in self.first_steps(w as u32).into_iter().flatten() {
                    extra.post(op, w as u32, step, send, peer, t);
                }
            }
        }
        let r: Vec<&CclRow> = self.ccl.rows.iter().chain(&extra.rows).collect();
        let name = self.spec.name.clone();
        let algorithm = match &self.engine {
            Engine::Ring => "ring",
            Engine::Plan(_) => "plan",
            Engine::Aggregate(_) => "aggregation",
        };
        let t = Table::new("job_ccl")
            .col("job", Column::Str(vec![name; r.len()]))
            .col(
                "algorithm",
                Column::Str(vec![algorithm.to_string(); r.len()]),
            )
            .col("op", Column::U32(r.iter().map(|x| x.op).collect()));
        message_columns(t, &r, |_, k| k, |k| self.spec.workers[k as usize])
    }
}

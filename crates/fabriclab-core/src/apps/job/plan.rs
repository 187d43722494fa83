//! Training jobs whose fused allreduces run a collective plan: the plan's
//! byte ranges scaled to each fusion, its actions turned into messages and
//! timers.

use super::{tok, TrainingJob, T_PLAN_REDUCE, T_PLAN_SEND};
use fabriclab_plan::Action;
use crate::engine::Api;
use crate::time::ser_time_ps;

impl TrainingJob {
    /// Bytes of a plan step scaled from the plan's size to fusion `f`'s:
    /// the range [offset, offset + bytes) maps to [offset·S/P, (offset +
    /// bytes)·S/P) (at least one byte).
    pub(super) fn plan_step_bytes(&self, f: u32, rank: u32, step: u32) -> u64 {
        let p = self.plan.as_ref().expect("plan job");
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
                    let k = self.next_plan_timer;
                    self.next_plan_timer = self.next_plan_timer.wrapping_add(1) & 0x0FFF_FFFF;
                    self.plan_timers.insert(k, (id, rank, step));
                    api.schedule(at, tok(kind, k, 0));
                }
                Action::RankDone { rank } => self.worker_has_sum(api, id, rank),
                Action::Started { .. } | Action::Completed { .. } => {}
            }
        }
    }

    pub(super) fn plan_timer(&mut self, api: &mut Api, kind: u64, k: u32) {
        let (id, rank, step) = self.plan_timers.remove(&k).expect("plan timer");
        if kind == T_PLAN_SEND {
            let f = self.active[&id].fusion;
            let bytes = self.plan_step_bytes(f, rank, step);
            let peer = self.plan.as_ref().expect("plan job").graph.steps()[rank as usize]
                [step as usize]
                .peer;
            self.send_message(api, id, step, rank, peer, bytes);
        } else {
            let mut out = Vec::new();
            let ar = self.active.get_mut(&id).expect("active allreduce");
            let g = &self.plan.as_ref().expect("plan job").graph;
            ar.plan_run
                .as_mut()
                .expect("plan run")
                .reduced(g, rank, step, &mut out);
            self.apply_plan(api, id, out);
        }
    }
}

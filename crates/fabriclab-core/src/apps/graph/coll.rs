//! Collective instances of a graph job: the k-th collective every member
//! of a group joins is one instance, one run through its plan.
//!
//! The run starts when the first member joins. A member's actions (its
//! sends, reductions, its end) wait until that member has joined: a rank
//! sends nothing of a collective it has not reached, while what its peers
//! send it may arrive early (NCCL's buffers are there). The node of a
//! member is done when its part of the plan is.

use super::{GraphJob, GraphNode, Msg, Timer, Work};
use crate::engine::Api;
use crate::time::ser_time_ps;
use fabriclab_plan::{Action, Op, PlanRun};

/// (group id, the collective's number on the group).
pub(super) type CollKey = (u32, u32);

pub(super) struct Inst {
    plan: u32,
    bytes: u64,
    op: u32,
    run: PlanRun,
    /// Per member: its node once it has joined.
    joined: Vec<Option<u32>>,
    /// Per member: actions waiting for it to join.
    waiting: Vec<Vec<Action>>,
    left: u32,
}

impl GraphJob {
    /// Rank `rank` reached collective node `node`.
    pub(super) fn join(&mut self, api: &mut Api, rank: u32, node: u32, n: &GraphNode) {
        let slot = n.slot as usize;
        let group = self.spec.ranks[rank as usize].groups[slot];
        let seq = &mut self.ranks[rank as usize].coll_seq[slot];
        let key = (group, *seq);
        *seq += 1;
        let members = &self.spec.groups[group as usize].ranks;
        let member = members.iter().position(|&r| r == rank).expect("a member") as u32;
        if members.len() == 1 {
            self.work.push_back(Work::Done(rank, node));
            return;
        }
        if !self.insts.contains_key(&key) {
            let mut out = Vec::new();
            let run = PlanRun::start(&self.plans[n.plan as usize], &mut out);
            let size = members.len();
            let mut inst = Inst {
                plan: n.plan,
                bytes: n.bytes,
                op: self.next_op,
                run,
                joined: vec![None; size],
                waiting: vec![Vec::new(); size],
                left: size as u32,
            };
            self.ccl.plan_of.insert(self.next_op, n.plan);
            self.next_op += 1;
            for a in out {
                inst.waiting[action_rank(a) as usize].push(a);
            }
            self.insts.insert(key, inst);
        }
        let inst = self.insts.get_mut(&key).expect("instance");
        if inst.plan != n.plan || inst.bytes != n.bytes {
            let name = &self.spec.name;
            api.fail(format!(
                "graph job '{name}': rank {rank} joins collective {} of group {group} with plan {} of {} bytes, \
                 another member with plan {} of {} bytes",
                key.1, n.plan, n.bytes, inst.plan, inst.bytes
            ));
            return;
        }
        inst.joined[member as usize] = Some(node);
        let actions = std::mem::take(&mut inst.waiting[member as usize]);
        if self.spec.telemetry {
            let (op, now) = (inst.op, api.now());
            let steps = &self.plans[inst.plan as usize].steps()[member as usize];
            for kind in [Op::Send, Op::Recv] {
                if let Some(i) = steps.iter().position(|s| s.op == kind) {
                    let r =
                        self.ccl
                            .row(op, group, member, i as u32, kind == Op::Send, steps[i].peer);
                    r.post_ps.get_or_insert(now);
                }
            }
        }
        self.apply(api, key, actions);
    }

    /// Carries out actions of instance `key` (those of members not yet
    /// joined are kept for them).
    fn apply(&mut self, api: &mut Api, key: CollKey, actions: Vec<Action>) {
        let now = api.now();
        for a in actions {
            let Some(inst) = self.insts.get_mut(&key) else {
                continue;
            };
            let m = action_rank(a);
            let Some(node) = inst.joined[m as usize] else {
                inst.waiting[m as usize].push(a);
                continue;
            };
            let (op, plan) = (inst.op, inst.plan);
            match a {
                Action::Send { step, .. } => {
                    let at = now + self.spec.send_overhead_ps;
                    self.timer(
                        api,
                        at,
                        Timer::CollSend {
                            key,
                            member: m,
                            step,
                        },
                    );
                }
                Action::Reduce { step, .. } => {
                    let at = now + ser_time_ps(self.step_bytes(key, m, step), self.spec.reduce_bps);
                    self.timer(
                        api,
                        at,
                        Timer::CollReduce {
                            key,
                            member: m,
                            step,
                        },
                    );
                }
                Action::RankDone { .. } => {
                    inst.left -= 1;
                    if inst.left == 0 {
                        self.insts.remove(&key);
                    }
                    let rank = self.spec.groups[key.0 as usize].ranks[m as usize];
                    self.work.push_back(Work::Done(rank, node));
                }
                Action::Started { step, .. } | Action::Completed { step, .. }
                    if self.spec.telemetry =>
                {
                    let st = &self.plans[plan as usize].steps()[m as usize][step as usize];
                    let (send, peer, reduce) = (st.op == Op::Send, st.peer, st.reduce);
                    let bytes = self.step_bytes(key, m, step);
                    let r = self.ccl.row(op, key.0, m, step, send, peer);
                    r.bytes = bytes;
                    r.reduce = reduce;
                    if let Action::Started { .. } = a {
                        r.post_ps.get_or_insert(now);
                    } else {
                        r.end_ps.get_or_insert(now);
                    }
                }
                Action::Started { .. } | Action::Completed { .. } => {}
            }
        }
    }

    /// Bytes of step `step` of member `m`: the plan's range
    /// [offset, offset + bytes) scaled from its size to the instance's.
    fn step_bytes(&self, key: CollKey, m: u32, step: u32) -> u64 {
        let inst = &self.insts[&key];
        let p = &self.spec.plans[inst.plan as usize];
        let st = &p.steps[m as usize][step as usize];
        let (size, plan) = (inst.bytes as u128, p.size_bytes as u128);
        let lo = st.offset as u128 * size / plan;
        let hi = (st.offset + st.bytes) as u128 * size / plan;
        ((hi - lo) as u64).max(1)
    }

    pub(super) fn coll_send(&mut self, api: &mut Api, key: CollKey, member: u32, step: u32) {
        let bytes = self.step_bytes(key, member, step);
        let plan = self.insts[&key].plan as usize;
        let peer = self.plans[plan].steps()[member as usize][step as usize].peer;
        let ranks = &self.spec.groups[key.0 as usize].ranks;
        let (src, dst) = (ranks[member as usize], ranks[peer as usize]);
        if self.spec.telemetry {
            let op = self.insts[&key].op;
            self.ccl.row(op, key.0, member, step, true, peer).start_ps = Some(api.now());
        }
        self.send(api, src, dst, bytes, Msg::Coll { key, member, step });
    }

    pub(super) fn coll_delivered(&mut self, api: &mut Api, key: CollKey, member: u32, step: u32) {
        let inst = self.insts.get_mut(&key).expect("instance");
        let g = &self.plans[inst.plan as usize];
        if self.spec.telemetry {
            let peer = g.steps()[member as usize][step as usize].peer;
            let recv = g.matching_recv(member, step);
            self.ccl
                .row(inst.op, key.0, peer, recv, false, member)
                .start_ps = Some(api.now());
        }
        let mut out = Vec::new();
        inst.run.delivered(g, member, step, &mut out);
        self.apply(api, key, out);
    }

    pub(super) fn coll_reduced(&mut self, api: &mut Api, key: CollKey, member: u32, step: u32) {
        let inst = self.insts.get_mut(&key).expect("instance");
        let mut out = Vec::new();
        inst.run
            .reduced(&self.plans[inst.plan as usize], member, step, &mut out);
        self.apply(api, key, out);
    }
}

fn action_rank(a: Action) -> u32 {
    match a {
        Action::Send { rank, .. }
        | Action::Reduce { rank, .. }
        | Action::Started { rank, .. }
        | Action::Completed { rank, .. }
        | Action::RankDone { rank } => rank,
    }
}

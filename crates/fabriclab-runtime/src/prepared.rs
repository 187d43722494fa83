//! A plan prepared for one rank (read once, indexed for message matching)
//! and the telemetry record of one message.

use crate::clock::Stamp;
use crate::RtError;
use fabriclab_plan::{Op, Plan, PlanGraph, Step};

/// A plan read, checked and indexed for one rank; reuse it across ops.
pub struct Prepared {
    pub plan: Plan,
    pub(crate) graph: PlanGraph,
    /// [peer][k]: the peer's step index of its k-th send to this rank.
    pub(crate) send_index: Vec<Vec<u32>>,
    /// [peer][k]: this rank's receive step for the k-th message from peer.
    pub(crate) recv_step: Vec<Vec<u32>>,
    /// Per step of this rank: its sequence number on its rank pair.
    pub(crate) my_seq: Vec<u32>,
    /// Connections per rank pair the plan asks for (`meta.streams`); None:
    /// every connection the communicator has.
    pub streams: Option<u32>,
    /// Per step of this rank: a receive whose range no other step of the
    /// rank can touch while it runs (every step that overlaps it is an
    /// ancestor or a descendant in the dependency graph), so its message
    /// may be read (or summed) straight into the buffer once it starts
    /// (conn::land).
    pub(crate) land: Vec<bool>,
}

/// Plans with more steps on a rank than this land nothing (the check is
/// quadratic in the steps).
const LAND_MAX_STEPS: usize = 8192;

/// [`Prepared::land`] for one rank's steps.
fn landable(steps: &[Step]) -> Vec<bool> {
    let n = steps.len();
    if n > LAND_MAX_STEPS {
        return vec![false; n];
    }
    // anc[i]: the bitset of step i's ancestors (deps point to earlier steps)
    let words = n.div_ceil(64);
    let mut anc = vec![0u64; n * words];
    for (i, st) in steps.iter().enumerate() {
        let (done, rest) = anc.split_at_mut(i * words);
        let me = &mut rest[..words];
        for &d in &st.deps {
            let d = d as usize;
            me[d / 64] |= 1 << (d % 64);
            for (m, a) in me.iter_mut().zip(&done[d * words..(d + 1) * words]) {
                *m |= a;
            }
        }
    }
    let is_anc = |a: usize, b: usize| anc[b * words + a / 64] >> (a % 64) & 1 == 1;
    let overlap =
        |a: &Step, b: &Step| a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
    (0..n)
        .map(|j| {
            steps[j].op == Op::Recv
                && (0..n).all(|i| {
                    i == j || !overlap(&steps[i], &steps[j]) || is_anc(i, j) || is_anc(j, i)
                })
        })
        .collect()
}

impl Prepared {
    pub fn new(text: &str, rank: u32) -> Result<Prepared, RtError> {
        let plan = Plan::from_json(text).map_err(RtError::input)?;
        if rank >= plan.nranks {
            return Err(RtError::input(format!(
                "plan: has {} ranks, this is rank {rank}",
                plan.nranks
            )));
        }
        let streams = match plan.meta.get("streams") {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(k @ 1..=64) => Some(k as u32),
                _ => {
                    return Err(RtError::input(format!(
                        "plan: meta.streams must be an integer within 1..64 (connections per rank pair), got {v}"
                    )))
                }
            },
        };
        let graph = PlanGraph::new("plan", plan.ranks.clone()).map_err(RtError::input)?;
        let n = plan.nranks as usize;
        let mut send_index = vec![Vec::new(); n];
        let mut recv_step = vec![Vec::new(); n];
        for (p, steps) in plan.ranks.iter().enumerate() {
            for (i, s) in steps.iter().enumerate() {
                if s.op == Op::Send && s.peer == rank {
                    send_index[p].push(i as u32);
                }
            }
        }
        let mut counts = vec![[0u32; 2]; n];
        let mut my_seq = Vec::new();
        for (i, s) in plan.ranks[rank as usize].iter().enumerate() {
            let c = &mut counts[s.peer as usize][(s.op == Op::Recv) as usize];
            my_seq.push(*c);
            *c += 1;
            if s.op == Op::Recv {
                recv_step[s.peer as usize].push(i as u32);
            }
        }
        let land = landable(&plan.ranks[rank as usize]);
        Ok(Prepared {
            land,
            plan,
            graph,
            send_index,
            recv_step,
            my_seq,
            streams,
        })
    }
}

/// One message of one op, as telemetry.
#[derive(Debug, Clone)]
pub struct Record {
    pub op_id: u64,
    pub rank: u32,
    pub peer: u32,
    pub step: u32,
    pub is_send: bool,
    pub seq: u32,
    pub offset_bytes: u64,
    pub bytes: u64,
    pub stream: u32,
    pub reduce: bool,
    /// The step started (its dependencies done).
    pub post: Stamp,
    /// Send: the writer began writing. Receive: the whole message had arrived.
    pub start: Stamp,
    /// Send: the last byte was handed to the kernel. Receive: reduced or copied in.
    pub end: Stamp,
    /// Send: start - post (queued behind earlier sends). Receive: arrival - post, or 0.
    pub wait_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(op: Op, offset: u64, bytes: u64, reduce: bool, deps: &[u32]) -> Step {
        Step {
            op,
            peer: 1,
            offset,
            bytes,
            reduce,
            deps: deps.to_vec(),
            path: None,
        }
    }

    #[test]
    fn a_receive_lands_only_when_every_overlapping_step_is_ordered_with_it() {
        use Op::{Recv, Send};
        let steps = [
            step(Send, 0, 8, false, &[]),      // 0
            step(Recv, 0, 8, false, &[0]),     // 1: after 0, before 2: lands
            step(Send, 4, 8, false, &[1]),     // 2
            step(Recv, 16, 8, false, &[]),     // 3: overlaps 4, unordered: no
            step(Recv, 20, 8, true, &[]),      // 4: overlaps 3, unordered: no
            step(Recv, 100, 8, false, &[]),    // 5: overlaps nothing: lands
            step(Recv, 8, 4, false, &[0]),     // 6: overlaps 2 (4..12), unordered: no
            step(Recv, 30, 2, false, &[3, 4]), // 7: overlaps nothing: lands
            step(Recv, 100, 8, true, &[5]),    // 8: after 5 (same range): lands
        ];
        assert_eq!(
            landable(&steps),
            [false, true, false, false, false, true, false, true, true]
        );
        // transitively ordered: 0 -> 1 -> 2, and 2 overlaps 0's range
        let chain = [
            step(Recv, 0, 8, false, &[]),
            step(Send, 100, 8, false, &[0]),
            step(Send, 0, 8, false, &[1]),
        ];
        assert_eq!(landable(&chain), [true, false, false]);
    }
}

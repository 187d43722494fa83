//! A plan prepared for one rank (read once, indexed for message matching)
//! and the telemetry record of one message.

use crate::clock::Stamp;
use crate::RtError;
use fabriclab_plan::{Op, Plan, PlanGraph};

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
        Ok(Prepared {
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

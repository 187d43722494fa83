//! A collective's logical connections made of several queue pairs (QPs),
//! as an RDMA library opens them (NCCL's `NCCL_IB_QPS_PER_CONNECTION`).
//!
//! Each QP is an ECMP connection of its own: its source port (RoCE's UDP
//! source port) is what the switches' hash reads, so a path manager picks
//! paths by picking source ports (C4, Dong et al., section 3.2). A send of
//! a rank pair with QPs is cut into one equal part per QP (a message each;
//! the send has arrived when every part has), carried in one of two ways:
//!
//! - `split`: part k on QP k (NCCL's static spreading).
//! - `dlb`: each part on the QP with the best recent completion time whose
//!   queue has room, else the next best (C4P's dynamic load balancing); a
//!   part finding every queue full waits for the first free slot. A QP's
//!   recent completion time is an exponentially weighted average (weight
//!   1/4 for the newest) of its messages' completion times per KiB; a QP
//!   not yet measured counts as fastest. A QP whose route routing moved
//!   (a link of it failed) is retired: no message goes on it from then on,
//!   unless every QP of the pair is retired.
//!
//! A path manager may move a QP onto a new source port at a given time
//! (`repaths`): the C4P master re-allocating the QPs whose path crossed a
//! failed link. From then on the QP's messages take the new port's route;
//! the QP is in service again and unmeasured (it counts as fastest until
//! its first message on the new path completes).

use serde::Deserialize;
use std::collections::VecDeque;

/// The QPs of the connection from `rank` to `peer`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QpGroupSpec {
    pub rank: u32,
    pub peer: u32,
    /// One source port per QP.
    pub src_ports: Vec<u16>,
    /// Source-port changes during the run, in any order.
    #[serde(default)]
    pub repaths: Vec<RepathSpec>,
}

/// QP `qp` of the group takes source port `src_port` from `at_ps` on.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RepathSpec {
    pub at_ps: u64,
    pub qp: u32,
    pub src_port: u16,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Balance {
    #[default]
    Split,
    Dlb,
}

#[derive(Debug, Clone)]
pub struct Qp {
    pub src_port: u16,
    pub outstanding: u32,
    /// Recent completion time per KiB, picoseconds; None until measured.
    pub recent_ps_per_kib: Option<u64>,
    pub messages: u64,
    pub bytes: u64,
    /// Its route when the collective started (egress ports).
    pub route: Option<Vec<u32>>,
    pub retired: bool,
    /// How many times the QP was moved to a new path: a message sent before
    /// the latest move says nothing about the new path's completion time.
    pub path_epoch: u32,
}

#[derive(Debug, Clone)]
pub struct QpGroup {
    pub rank: u32,
    pub peer: u32,
    pub qps: Vec<Qp>,
    /// Parts (step of `rank`, bytes) waiting for a free QP slot, in order.
    pub waiting: VecDeque<(u32, u64)>,
}

impl QpGroup {
    pub fn new(spec: &QpGroupSpec) -> QpGroup {
        QpGroup {
            rank: spec.rank,
            peer: spec.peer,
            qps: spec
                .src_ports
                .iter()
                .map(|&p| Qp {
                    src_port: p,
                    outstanding: 0,
                    recent_ps_per_kib: None,
                    messages: 0,
                    bytes: 0,
                    route: None,
                    retired: false,
                    path_epoch: 0,
                })
                .collect(),
            waiting: VecDeque::new(),
        }
    }

    /// The QP a whole message goes on: the best recent completion time
    /// among those with fewer than `depth` messages outstanding (fewest
    /// outstanding, then lowest index, among equals); None when all are full.
    pub fn pick(&self, depth: u32) -> Option<usize> {
        let all_retired = self.qps.iter().all(|q| q.retired);
        self.qps
            .iter()
            .enumerate()
            .filter(|(_, q)| q.outstanding < depth && (all_retired || !q.retired))
            .min_by_key(|(i, q)| (q.recent_ps_per_kib.unwrap_or(0), q.outstanding, *i))
            .map(|(i, _)| i)
    }

    /// QP `q` moves to `src_port`, whose route is now `route`: back in
    /// service, its completion times forgotten (messages already out keep
    /// the path they were sent on).
    pub fn repath(&mut self, q: usize, src_port: u16, route: Option<Vec<u32>>) {
        let qp = &mut self.qps[q];
        qp.src_port = src_port;
        qp.route = route;
        qp.retired = false;
        qp.recent_ps_per_kib = None;
        qp.path_epoch += 1;
    }

    /// A message of `bytes` went out on QP `q`; returns the QP's path epoch,
    /// to be given back to [`QpGroup::completed`].
    pub fn sent(&mut self, q: usize, bytes: u64) -> u32 {
        let qp = &mut self.qps[q];
        qp.outstanding += 1;
        qp.messages += 1;
        qp.bytes += bytes;
        qp.path_epoch
    }

    /// A message of `bytes` sent on QP `q` in path epoch `epoch` completed
    /// after `elapsed_ps`. It frees its slot; it is a sample of the QP's
    /// completion time only if the QP has not moved since it was sent.
    pub fn completed(&mut self, q: usize, bytes: u64, elapsed_ps: u64, epoch: u32) {
        let qp = &mut self.qps[q];
        qp.outstanding -= 1;
        if epoch != qp.path_epoch {
            return;
        }
        let sample = (elapsed_ps as u128 * 1024 / bytes.max(1) as u128) as u64;
        qp.recent_ps_per_kib = Some(match qp.recent_ps_per_kib {
            None => sample,
            Some(r) => (3 * r as u128 + sample as u128).div_ceil(4) as u64,
        });
    }
}

/// `bytes` cut into `k` parts as equal as can be (the first `bytes % k` one
/// byte larger), empty parts left out.
pub fn split_bytes(bytes: u64, k: usize) -> Vec<(usize, u64)> {
    let k64 = k as u64;
    (0..k)
        .map(|i| (i, bytes / k64 + u64::from((i as u64) < bytes % k64)))
        .filter(|&(_, b)| b > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(n: usize) -> QpGroup {
        QpGroup::new(&QpGroupSpec {
            rank: 0,
            peer: 1,
            src_ports: (0..n as u16).map(|i| 5000 + i).collect(),
            repaths: Vec::new(),
        })
    }

    #[test]
    fn split_conserves_bytes() {
        assert_eq!(split_bytes(10, 4), vec![(0, 3), (1, 3), (2, 2), (3, 2)]);
        assert_eq!(split_bytes(2, 4), vec![(0, 1), (1, 1)]);
    }

    #[test]
    fn picks_fastest_then_next_when_full() {
        let mut g = group(3);
        // Measured: QP 1 at 100 ps/KiB, QP 0 at 300, QP 2 at 200.
        for (q, t) in [(0, 300), (1, 100), (2, 200)] {
            let e = g.sent(q, 1024);
            g.completed(q, 1024, t, e);
        }
        assert_eq!(g.pick(1), Some(1));
        g.sent(1, 1024);
        assert_eq!(g.pick(1), Some(2)); // QP 1 full: next best
        g.sent(2, 1024);
        assert_eq!(g.pick(1), Some(0));
        g.sent(0, 1024);
        assert_eq!(g.pick(1), None);
    }

    #[test]
    fn retired_qps_are_skipped_unless_all_are() {
        let mut g = group(2);
        g.qps[0].retired = true;
        assert_eq!(g.pick(1), Some(1));
        g.sent(1, 1024);
        assert_eq!(g.pick(1), None); // QP 0 has room but is retired
        g.qps[1].retired = true;
        assert_eq!(g.pick(1), Some(0));
    }

    #[test]
    fn a_repathed_qp_is_back_in_service_and_counts_as_fastest() {
        let mut g = group(2);
        for (q, t) in [(0, 300), (1, 100)] {
            let e = g.sent(q, 1024);
            g.completed(q, 1024, t, e);
        }
        g.qps[1].retired = true;
        assert_eq!(g.pick(4), Some(0)); // the only QP in service
        g.repath(1, 6001, Some(vec![7, 8]));
        assert_eq!(g.qps[1].src_port, 6001);
        assert_eq!(g.pick(4), Some(1)); // unmeasured: 0 ps per KiB beats 300
        let e = g.sent(1, 2048);
        g.completed(1, 2048, 1000, e); // first sample on the new path: 500 ps per KiB
        assert_eq!(g.qps[1].recent_ps_per_kib, Some(500));
        assert_eq!(g.pick(4), Some(0)); // 300 < 500
    }

    #[test]
    fn a_message_sent_before_a_repath_frees_its_slot_but_is_no_sample() {
        let mut g = group(2);
        let old = g.sent(1, 1024); // out on the old path
        g.repath(1, 6001, None);
        let new = g.sent(1, 1024); // out on the new path
        g.completed(1, 1024, 90_000, old); // late: it crossed the failure
        assert_eq!(g.qps[1].outstanding, 1);
        assert_eq!(g.qps[1].recent_ps_per_kib, None); // still unmeasured
        g.completed(1, 1024, 400, new);
        assert_eq!(g.qps[1].outstanding, 0);
        assert_eq!(g.qps[1].recent_ps_per_kib, Some(400));
    }

    #[test]
    fn average_weights_newest_by_a_quarter() {
        let mut g = group(1);
        let e = g.sent(0, 2048);
        g.completed(0, 2048, 800, e); // 400 ps per KiB
        let e = g.sent(0, 1024);
        g.completed(0, 1024, 800, e); // 800 ps per KiB: (3 * 400 + 800) / 4 = 500
        assert_eq!(g.qps[0].recent_ps_per_kib, Some(500));
    }
}

//! Slack of a job's remaining communication, for slack-aware prioritisation.
//!
//! A job's allreduces share one transmit queue served one after another
//! (non-preemptive). Given the work still to send, each piece's ready time,
//! deadline (when the next forward pass will need it) and time on the wire,
//! [`min_slack_ps`] plays that queue forward and returns how far ahead of its
//! deadline the tightest piece would finish. Negative slack means that at the
//! assumed rate some gradient arrives after it is needed: time to raise the
//! job's traffic class.
//!
//! Two corrections keep the answer about what sending the work in flight
//! faster can fix: a waiting piece is not held to finishing before
//! `ready + work` (the lowest layer's gradients are ready only when the
//! backward pass ends and are needed at once, so they are always "late" by
//! their own transfer time, whatever the class of the work before them; a
//! piece in flight is held to its deadline, it is the one on the critical
//! path), and a layer cannot be needed before the layers below it have
//! arrived and been computed (`fwd_before` carries the forward compute
//! between pieces).

/// One piece of pending communication.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pending {
    pub ready_ps: u64,
    pub deadline_ps: u64,
    pub work_ps: u64,
    /// Service order among ready pieces (smaller first).
    pub order: (u64, u64, u64),
    /// Position in the next forward pass (the piece's lowest layer) and the
    /// forward compute of all layers below it.
    pub layer: u32,
    pub fwd_before_ps: u64,
    /// Iteration the gradient belongs to: deadlines only chain within one.
    pub iteration: u32,
}

/// Minimum over pieces of (effective deadline − finish) when `in_flight`
/// pieces finish first, in the given order, and `waiting` pieces follow
/// in `order` among those ready. Empty input gives `i128::MAX`.
pub fn min_slack_ps(now_ps: u64, in_flight: &[Pending], waiting: &[Pending]) -> i128 {
    let mut finish: Vec<(Pending, u64)> = Vec::with_capacity(in_flight.len() + waiting.len());
    let mut t = now_ps;
    for p in in_flight {
        t = t.max(p.ready_ps).saturating_add(p.work_ps);
        finish.push((*p, t));
    }
    let mut left: Vec<Pending> = waiting.to_vec();
    while !left.is_empty() {
        let next_ready = left.iter().map(|p| p.ready_ps).min().expect("non-empty");
        t = t.max(next_ready);
        let k = (0..left.len())
            .filter(|&k| left[k].ready_ps <= t)
            .min_by_key(|&k| left[k].order)
            .expect("one piece is ready");
        let p = left.swap_remove(k);
        t = t.saturating_add(p.work_ps);
        finish.push((p, t));
    }
    // Effective deadlines: never before the piece's own earliest finish, and
    // never before the forward pass can reach its layer given the pieces
    // below it in the same iteration.
    let eff: Vec<u64> = finish
        .iter()
        .enumerate()
        .map(|(i, (p, _))| {
            if i < in_flight.len() {
                p.deadline_ps
            } else {
                p.deadline_ps
                    .max(p.ready_ps.max(now_ps).saturating_add(p.work_ps))
            }
        })
        .collect();
    let mut best = i128::MAX;
    for (i, (p, done)) in finish.iter().enumerate() {
        let mut d = eff[i];
        for (j, (q, _)) in finish.iter().enumerate() {
            if q.iteration == p.iteration && q.layer < p.layer {
                d = d.max(eff[j].saturating_add(p.fwd_before_ps.saturating_sub(q.fwd_before_ps)));
            }
        }
        best = best.min(d as i128 - *done as i128);
    }
    best
}

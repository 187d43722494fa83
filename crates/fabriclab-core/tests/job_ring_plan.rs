//! The built-in ring allreduce of a training job against the same ring
//! written as an allreduce plan (the evidence for the note at the top of
//! src/apps/job/ring.rs): the plan sends the same messages at the same
//! times within an allreduce, but a plan rank is done only once all its
//! steps have completed, the delivery of its own sends included, while a
//! ring worker holds the sum as soon as its last round's message has
//! arrived; so the next iteration can start later and results differ. A
//! zero-byte ring partition also reduces in no time, a plan step in at
//! least one byte's time.

use fabriclab_core::build_from_json;
use fabriclab_core::engine::{Column, MsgRecord, Table};
use serde_json::{json, Value};
use std::collections::HashMap;

/// A star of `hosts` hosts, host 2's link at 4 Gbit/s and the others at 10:
/// ring hops into and out of host 2 take longer, so the workers do not all
/// finish an allreduce at once.
fn scenario(hosts: usize, job: Value) -> String {
    let mut nodes: Vec<Value> = (0..hosts)
        .map(|i| json!({"name": format!("h{i}"), "kind": "host"}))
        .collect();
    nodes.push(json!({"name": "s0", "kind": "switch"}));
    let links: Vec<Value> = (0..hosts)
        .map(|i| {
            let rate = if i == 2 {
                4_000_000_000u64
            } else {
                10_000_000_000
            };
            json!({"a": i, "b": hosts, "rate_bps": rate, "delay_ps": 1_000_000})
        })
        .collect();
    json!({
        "seed": 1, "backend": "packet",
        "topology": {"nodes": nodes, "links": links},
        "queue": {"discipline": "fifo", "bands": 3, "priomap": [0,1,2,2,2,2,2,2], "limit_bytes": null,
                  "limit_packets": null, "ecn_threshold_bytes": null, "ecn_threshold_packets": null},
        "transport": {"cc": "newreno", "mss_bytes": 1460, "init_cwnd_packets": 10, "min_rto_ps": 1_000_000_000u64,
                      "initial_rto_ps": 1_000_000_000u64, "max_rto_ps": 1_000_000_000_000u64, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 131072},
        "routing": {"ecmp_hash_seed": 0},
        "jobs": [job],
    })
    .to_string()
}

/// The built-in ring as a plan over `n` bytes (one byte per partition, so
/// that scaling to a fusion gives the ring's partition sizes): rank w's
/// steps are, per round r, send (index 2r, after the receive of round
/// r-1) of partition (w - r) mod n to w + 1 and the receive (index 2r + 1)
/// of partition (w - 1 - r) mod n from w - 1, reducing in the first n-1 rounds.
fn ring_plan(n: u32) -> Value {
    let ranks: Vec<Value> = (0..n)
        .map(|w| {
            let mut steps = Vec::new();
            for r in 0..2 * (n - 1) {
                let deps: Vec<u32> = if r == 0 { vec![] } else { vec![2 * r - 1] };
                let part = (w + 2 * n - r % n) % n;
                steps.push(json!({"op": "send", "peer": (w + 1) % n, "offset": part, "bytes": 1, "deps": deps}));
                let part = (w + 2 * n - 1 - r % n) % n;
                steps.push(json!({"op": "recv", "peer": (w + n - 1) % n, "offset": part, "bytes": 1, "reduce": r + 1 < n}));
            }
            Value::Array(steps)
        })
        .collect();
    json!({"size_bytes": n, "steps": ranks})
}

/// A 4-worker job with two fusions (one allreduce at a time), no jitter;
/// worker 1 computes `slow` times slower.
fn job(iterations: u32, layer_bytes: u64, slow: f64, plan: bool) -> Value {
    let layer = json!({"param_bytes": layer_bytes, "fwd_ps": 200_000_000, "bwd_ps": 400_000_000});
    let mut j = json!({
        "name": "j", "workers": [0, 1, 2, 3], "layers": [layer, layer, layer, layer], "iterations": iterations,
        "fusion_bytes": 2 * layer_bytes, "barrier": false, "priority_queue": true, "max_inflight": 1, "class": 0,
        "start_ps": 0, "slowdown": [1.0, slow, 1.0, 1.0], "jitter": 0.0, "seed": 3,
        "reduce_bps": 40_000_000_000u64, "send_overhead_ps": 1_000_000,
    });
    if plan {
        j["allreduce_plan"] = ring_plan(4);
    }
    j
}

struct Run {
    messages: Vec<MsgRecord>,
    /// (fusion, iteration, worker) -> when the worker held the sum.
    has_sum: HashMap<(u32, u32, u32), u64>,
}

fn run(job: Value) -> Run {
    let mut sim = build_from_json(&scenario(4, job)).unwrap();
    assert!(!sim.run_until(u64::MAX).unwrap());
    let tables = sim.app_tables();
    let tl: &Table = tables.iter().find(|t| t.name == "timeline").unwrap();
    let col = |name: &str| &tl.columns.iter().find(|(n, _)| n == name).unwrap().1;
    let (
        Column::Str(kind),
        Column::U32(worker),
        Column::U32(index),
        Column::U32(iteration),
        Column::U64(end),
    ) = (
        col("kind"),
        col("worker"),
        col("index"),
        col("iteration"),
        col("end_ps"),
    )
    else {
        panic!("timeline columns")
    };
    let has_sum = (0..tl.rows())
        .filter(|&i| kind[i] == "allreduce")
        .map(|i| ((index[i], iteration[i], worker[i]), end[i]))
        .collect();
    Run {
        messages: sim.messages().to_vec(),
        has_sum,
    }
}

/// What a message record says of the message's movement.
fn movement(m: &MsgRecord) -> (u32, u32, u64, u8, u64, Option<u64>) {
    (m.src, m.dst, m.size_bytes, m.class, m.start_ps, m.end_ps)
}

/// (allreduce, round or step, sender) of a job message's tag.
fn tag(m: &MsgRecord) -> (u64, u64, u64) {
    (m.tag >> 32, (m.tag >> 16) & 0xFFFF, m.tag & 0xFFFF)
}

#[test]
fn one_iteration_ring_plan_sends_the_ring_messages_but_ranks_finish_later() {
    let (ring, plan) = (
        run(job(1, 1_000_000, 1.0, false)),
        run(job(1, 1_000_000, 1.0, true)),
    );
    assert_eq!(ring.messages.len(), 2 * 4 * 2 * 3); // 2 fusions x n x 2(n-1) rounds
    let a: Vec<_> = ring.messages.iter().map(movement).collect();
    let b: Vec<_> = plan.messages.iter().map(movement).collect();
    assert_eq!(a, b);
    // The tag carries the ring round; the plan's carries the step, 2·round.
    for (r, p) in ring.messages.iter().zip(&plan.messages) {
        let ((ar, round, w), (ap, step, wp)) = (tag(r), tag(p));
        assert_eq!((ar, 2 * round, w), (ap, step, wp));
    }
    // A ring worker holds the sum when its last round's message has arrived
    // (even if a message of an earlier round, overtaken, is still on its
    // way); a plan rank is done once every step has completed: all its
    // receives and the delivery of all its own sends.
    assert_eq!(ring.has_sum.len(), 8);
    let host = |w: u32| w; // workers 0..3 on hosts 0..3
    let (mut later, mut overtaken) = (0, 0);
    for (&(f, it, w), &t) in &ring.has_sum {
        let of_ar: Vec<&MsgRecord> = ring
            .messages
            .iter()
            .filter(|m| tag(m).0 == f as u64)
            .collect();
        let last_round = of_ar
            .iter()
            .find(|m| m.dst == host(w) && tag(m).1 == 5)
            .unwrap();
        assert_eq!(Some(t), last_round.end_ps, "ring: fusion {f} worker {w}");
        let last_step = of_ar
            .iter()
            .filter(|m| m.src == host(w) || m.dst == host(w))
            .map(|m| m.end_ps)
            .max()
            .unwrap();
        assert_eq!(
            Some(plan.has_sum[&(f, it, w)]),
            last_step,
            "plan: fusion {f} worker {w}"
        );
        later += (plan.has_sum[&(f, it, w)] > t) as u32;
        let last_in = of_ar
            .iter()
            .filter(|m| m.dst == host(w))
            .map(|m| m.end_ps)
            .max()
            .unwrap();
        overtaken += (last_in > Some(t)) as u32;
    }
    assert!(
        later > 0,
        "the slow host should make some ring worker finish before the plan's rank"
    );
    assert!(
        overtaken > 0,
        "some last-round message should overtake an earlier one through the slow host"
    );
}

#[test]
fn next_iteration_starts_later_under_the_ring_plan() {
    // Worker 1 computes 3x slower: it is the last to have fusion 0 of the
    // second iteration ready, later under the plan, which made it wait for
    // its right neighbour in the first iteration.
    let (ring, plan) = (
        run(job(2, 1_000_000, 3.0, false)),
        run(job(2, 1_000_000, 3.0, true)),
    );
    assert_eq!(ring.messages.len(), plan.messages.len());
    let first_diff = ring
        .messages
        .iter()
        .zip(&plan.messages)
        .position(|(r, p)| movement(r) != movement(p));
    let i = first_diff.expect("the ring plan should change the second iteration");
    // The first message that moves belongs to the second iteration's first
    // allreduce (id 2), and it starts later.
    assert_eq!(
        tag(&ring.messages[i]).0,
        2,
        "message {i}: {:?}",
        ring.messages[i]
    );
    assert!(plan.messages[i].start_ps > ring.messages[i].start_ps);
}

#[test]
fn zero_byte_ring_partitions_reduce_in_no_time_plan_steps_in_a_bytes_time() {
    // Fusions of 2 bytes over 4 workers: partitions of 0 and 1 bytes, every
    // message at least 1 byte in both engines.
    let (ring, plan) = (run(job(1, 1, 1.0, false)), run(job(1, 1, 1.0, true)));
    assert!(ring.messages.iter().all(|m| m.size_bytes == 1));
    let a: Vec<_> = ring.messages.iter().map(movement).collect();
    let b: Vec<_> = plan.messages.iter().map(movement).collect();
    assert_ne!(a, b);
    // The plan's forward of a reduced empty partition starts one byte's
    // reduce time (200 ps at 40 Gbit/s) later.
    assert!(a.iter().zip(&b).all(|(x, y)| y.4 >= x.4));
    assert!(a.iter().zip(&b).any(|(x, y)| y.4 == x.4 + 200));
}

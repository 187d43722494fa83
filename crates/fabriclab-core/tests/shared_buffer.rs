//! A switch buffer shared by its egress queues with Choudhury and Hahne's
//! dynamic threshold, and PFC's XOFF as a fraction of the free buffer:
//! steady states computed by hand.
use fabriclab_core::build_from_json;
use fabriclab_core::results::link_columns;
use serde_json::{json, Value};

const G10: u64 = 10_000_000_000;

fn run(
    nodes: &[(&str, bool)],
    links: &[(usize, usize, u64)],
    flows: Value,
    buffer: Value,
    pfc: Value,
) -> (Vec<String>, Vec<String>, Vec<u64>, Vec<u64>) {
    let nodes: Vec<Value> = nodes
        .iter()
        .map(|(n, sw)| json!({"name": n, "kind": if *sw { "switch" } else { "host" }}))
        .collect();
    let links: Vec<Value> = links
        .iter()
        .map(|&(a, b, r)| json!({"a": a, "b": b, "rate_bps": r, "delay_ps": 1_000_000}))
        .collect();
    let spec = json!({
        "seed": 1, "backend": "packet", "topology": {"nodes": nodes, "links": links},
        "queue": {"discipline": "fifo", "bands": 1, "priomap": [0,0,0,0,0,0,0,0], "limit_bytes": null,
                  "limit_packets": null, "ecn_threshold_bytes": null, "ecn_threshold_packets": null},
        "switch_buffer": buffer, "pfc": pfc,
        "transport": {"cc": "newreno", "mss_bytes": 1460, "init_cwnd_packets": 1000, "min_rto_ps": 1_000_000_000u64,
                      "initial_rto_ps": 1_000_000_000u64, "max_rto_ps": 1_000_000_000_000u64, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 131072},
        "routing": {"ecmp_hash_seed": 0}, "flows": flows,
    });
    let mut sim = build_from_json(&spec.to_string()).unwrap();
    assert!(!sim.run_until(u64::MAX).unwrap());
    let l = link_columns(&sim);
    (l.from, l.to, l.max_queue_bytes, l.drops)
}

/// Four senders into h4 through one switch: one congested queue.
fn incast(alpha: f64, buffer_bytes: u64) -> (u64, u64) {
    let nodes = [
        ("h0", false),
        ("h1", false),
        ("h2", false),
        ("h3", false),
        ("h4", false),
        ("s0", true),
    ];
    let links: Vec<(usize, usize, u64)> = (0..5).map(|i| (i, 5, G10)).collect();
    let flows: Vec<Value> = (0..4)
        .map(|i| json!({"src": i, "dst": 4, "size_bytes": 2_000_000, "start_ps": 0, "class": 0}))
        .collect();
    let (from, to, maxq, drops) = run(
        &nodes,
        &links,
        json!(flows),
        json!({"bytes": buffer_bytes, "alpha": alpha}),
        Value::Null,
    );
    let i = (0..from.len())
        .find(|&i| from[i] == "s0" && to[i] == "h4")
        .unwrap();
    (maxq[i], drops[i])
}

#[test]
fn one_congested_queue_settles_at_alpha_b_over_one_plus_alpha() {
    // A frame of w = 1538 bytes joins a queue of q when q + w <= alpha (B - q)
    // (the queue is the switch's only occupancy), so after it the queue holds
    // at most alpha (B + w) / (1 + alpha) -- alpha B / (1 + alpha) up to a
    // frame -- and an incast that keeps offering frames reaches within one
    // frame of it.
    for (alpha, b) in [(1.0, 300_000u64), (3.0, 200_000)] {
        let (maxq, drops) = incast(alpha, b);
        let bound = (alpha * (b + 1538) as f64 / (1.0 + alpha)) as u64;
        assert!(drops > 0, "the incast must hit the threshold");
        assert!(
            maxq <= bound && maxq + 1538 >= bound,
            "alpha {alpha}: max queue {maxq} vs {bound}"
        );
    }
}

#[test]
fn dynamic_xoff_pauses_at_a_third_of_the_buffer() {
    // h0 -10G- s0 -10G- s1 -5G- h1 with a 90 KB buffer per switch, XOFF at
    // half the free buffer (the static xoff far above). At s1 only the queue
    // toward h1 holds data: held = 0.5 (B - held) gives XOFF at B / 3 = 30 KB;
    // after it, about 2.1 KB more arrive before the pause takes effect (the
    // overshoot of tests/pfc.rs: net +5 Gbit/s for 3.36 us). No drop.
    let nodes = [("h0", false), ("s0", true), ("s1", true), ("h1", false)];
    let links = [(0, 1, G10), (1, 2, G10), (2, 3, G10 / 2)];
    let flows = json!([{"src": 0, "dst": 1, "size_bytes": 3_000_000, "start_ps": 0, "class": 0}]);
    let pfc = json!({"classes": [0], "xoff_bytes": 10_000_000, "xon_bytes": 10_000, "headroom_bytes": 20_000,
                     "pause_quanta": 65535, "xoff_fraction": 0.5});
    let (from, to, maxq, drops) = run(
        &nodes,
        &links,
        flows,
        json!({"bytes": 90_000, "alpha": 1.0}),
        pfc,
    );
    assert_eq!(drops.iter().sum::<u64>(), 0);
    let i = (0..from.len())
        .find(|&i| from[i] == "s1" && to[i] == "h1")
        .unwrap();
    let xoff = 90_000 / 3;
    assert!(
        maxq[i] >= xoff && maxq[i] <= xoff + 2102 + 1538,
        "max queue {} vs XOFF {xoff} + overshoot",
        maxq[i]
    );
}

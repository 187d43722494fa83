//! The switch-logic hook, proved by the tap: a switch that counts one class,
//! mirrors it to a port, or absorbs it. Expected counts by hand.
use fabriclab_core::build_from_json;
use fabriclab_core::engine::{Column, Simulation};
use fabriclab_core::fabric::frame::wire_bytes;
use fabriclab_core::results::link_columns;
use serde_json::{json, Value};

fn star(flows: Value, logic: Value) -> String {
    let mut nodes: Vec<Value> = (0..4)
        .map(|i| json!({"name": format!("h{i}"), "kind": "host"}))
        .collect();
    nodes.push(json!({"name": "s0", "kind": "switch"}));
    let links: Vec<Value> = (0..4)
        .map(|i| json!({"a": i, "b": 4, "rate_bps": 10_000_000_000u64, "delay_ps": 1_000_000}))
        .collect();
    json!({
        "seed": 1, "backend": "packet",
        "topology": {"nodes": nodes, "links": links},
        "queue": {"discipline": "prio", "bands": 2, "priomap": [0,1,1,1,1,1,1,1], "limit_bytes": null,
                  "limit_packets": null, "ecn_threshold_bytes": null, "ecn_threshold_packets": null},
        "transport": {"cc": "newreno", "mss_bytes": 1460, "init_cwnd_packets": 10, "min_rto_ps": 1_000_000_000u64,
                      "initial_rto_ps": 1_000_000_000u64, "max_rto_ps": 1_000_000_000_000u64, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 131072},
        "routing": {"ecmp_hash_seed": 0},
        "switch_logic": logic,
        "flows": flows,
    })
    .to_string()
}

fn flows() -> Value {
    json!([
        {"src": 0, "dst": 1, "size_bytes": 1_000_000, "start_ps": 0, "class": 1},
        {"src": 2, "dst": 1, "size_bytes": 1_000_000, "start_ps": 0, "class": 0},
    ])
}

fn counter(sim: &Simulation, name: &str) -> u64 {
    let t = sim
        .app_tables()
        .into_iter()
        .find(|t| t.name == "switch_logic")
        .expect("switch_logic table");
    let (Column::Str(names), Column::U64(values)) = (&t.columns[1].1, &t.columns[2].1) else {
        panic!()
    };
    values[names.iter().position(|n| n == name).unwrap()]
}

fn wire_of(size: u64) -> u64 {
    let (full, rest) = (size / 1460, size % 1460);
    full * wire_bytes(1460) as u64
        + if rest > 0 {
            wire_bytes(rest as u32) as u64
        } else {
            0
        }
}

fn link(sim: &Simulation, from: &str, to: &str) -> (u64, u64) {
    let l = link_columns(sim);
    let i = (0..l.link_id.len())
        .find(|&i| l.from[i] == from && l.to[i] == to)
        .unwrap();
    (l.bytes[i], l.packets[i])
}

#[test]
fn a_tap_counts_and_mirrors_its_class_and_changes_nothing_else() {
    let mut plain = build_from_json(&star(flows(), json!([]))).unwrap();
    plain.run_until(u64::MAX).unwrap();
    let tap = json!([{"kind": "tap", "node": 4, "class": 1, "mirror_to": 3, "absorb": false}]);
    let mut sim = build_from_json(&star(flows(), tap)).unwrap();
    assert!(!sim.run_until(u64::MAX).unwrap());
    assert_eq!(sim.in_flight(), 0, "mirrored copies are absorbed by h3");
    // No loss (unlimited queues): 685 data segments (1 MB / 1460, rounded
    // up) of the class-1 flow and one ACK each, all through s0.
    let segs = 1_000_000u64.div_ceil(1460);
    assert_eq!(counter(&sim, "packets"), 2 * segs);
    assert_eq!(counter(&sim, "mirrored"), 2 * segs);
    // The mirror port carried exactly those frames.
    assert_eq!(
        link(&sim, "s0", "h3"),
        (wire_of(1_000_000) + segs * wire_bytes(0) as u64, 2 * segs)
    );
    // Nothing else changed: the same completion times.
    let ends = |s: &Simulation| s.messages().iter().map(|m| m.end_ps).collect::<Vec<_>>();
    assert_eq!(ends(&sim), ends(&plain));
}

#[test]
fn an_absorbing_tap_takes_its_class_off_the_network() {
    let tap = json!([{"kind": "tap", "node": 4, "class": 1, "mirror_to": null, "absorb": true}]);
    let mut sim = build_from_json(&star(flows(), tap)).unwrap();
    sim.run_until(5_000_000_000).unwrap(); // 5 ms: the class-1 flow can never finish
    let m = sim.messages();
    assert!(m[0].end_ps.is_none() && m[1].end_ps.is_some());
    // h1's link carried the class-0 flow's data and nothing of class 1.
    assert_eq!(link(&sim, "s0", "h1").0, wire_of(1_000_000));
    assert!(counter(&sim, "packets") >= 10); // at least the initial window, then retransmissions
    assert_eq!(counter(&sim, "mirrored"), 0);
}

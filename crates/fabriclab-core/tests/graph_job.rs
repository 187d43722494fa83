//! A dependency-graph job (`graph_jobs`) on the fluid flow backend, its
//! critical path derived by hand.
//!
//! Two ranks on a star. Rank 0 computes 1 us, then sends B bytes to rank 1
//! (done at t_s, when they have arrived). Rank 1 receives them, computes
//! 2 us, then both exchange B bytes through a two-rank plan (each sends B
//! to the other and receives). A rank's sends in the plan wait for it to
//! join; rank 0 joins at t_s, rank 1 at t_s + 2 us. Rank 0's message
//! arrives at t_s + T (T = t_s - 1 us, the same size on idle links), before
//! rank 1 joins; rank 1's message arrives at t_s + 2 us + T. Both ranks end
//! then: at 2 t_s + 1 us.

use fabriclab_core::build_from_json;
use fabriclab_core::engine::{Column, Table};
use serde_json::{json, Value};

const B: u64 = 100_000;

fn node(kind: &str, deps: Vec<u32>, duration_ps: u64, slot: u32, bytes: u64, label: u32) -> Value {
    json!({"kind": kind, "deps": deps, "duration_ps": duration_ps, "slot": slot, "plan": 0, "bytes": bytes,
           "label": label, "index": 0})
}

fn scenario() -> String {
    let nodes: Vec<Value> = vec![
        json!({"name": "h0", "kind": "host"}),
        json!({"name": "h1", "kind": "host"}),
        json!({"name": "s0", "kind": "switch"}),
    ];
    let links: Vec<Value> = (0..2)
        .map(|i| json!({"a": i, "b": 2, "rate_bps": 8_000_000_000u64, "delay_ps": 1_000_000}))
        .collect();
    let exchange = |peer: u32| {
        vec![
            json!({"op": "send", "peer": peer, "offset": 0, "bytes": 1, "deps": []}),
            json!({"op": "recv", "peer": peer, "offset": 0, "bytes": 1, "deps": []}),
        ]
    };
    let job = json!({
        "name": "g", "start_ps": 0, "iterations": 1, "class": 0, "reduce_bps": 8_000_000_000u64,
        "send_overhead_ps": 0, "persistent_connections": false, "end_run": false, "telemetry": true,
        "labels": ["compute", "send", "recv", "exchange", "pair"],
        "groups": [{"label": 4, "ranks": [0, 1]}],
        "plans": [{"op": "exchange", "algorithm": "by hand", "size_bytes": 1, "steps": [exchange(1), exchange(0)]}],
        "programs": [
            [node("compute", vec![], 1_000_000, 0, 0, 0), node("send", vec![0], 0, 0, B, 1),
             node("collective", vec![1], 0, 0, B, 3)],
            [node("recv", vec![], 0, 0, 0, 2), node("compute", vec![0], 2_000_000, 0, 0, 0),
             node("collective", vec![1], 0, 0, B, 3)],
        ],
        "ranks": [
            {"host": 0, "program": 0, "groups": [0], "peers": [1], "slowdown": 1.0},
            {"host": 1, "program": 1, "groups": [0], "peers": [0], "slowdown": 1.0},
        ],
    });
    json!({
        "seed": 1, "backend": "flow", "flow_model": "fluid",
        "topology": {"nodes": nodes, "links": links},
        "queue": {"discipline": "fifo", "bands": 3, "priomap": [0,1,2,2,2,2,2,2], "limit_bytes": null,
                  "limit_packets": null, "ecn_threshold_bytes": null, "ecn_threshold_packets": null},
        "transport": {"cc": "newreno", "mss_bytes": 1460, "init_cwnd_packets": 10, "min_rto_ps": 1_000_000_000u64,
                      "initial_rto_ps": 1_000_000_000u64, "max_rto_ps": 1_000_000_000_000u64, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 131072},
        "routing": {"ecmp_hash_seed": 0},
        "graph_jobs": [job],
    })
    .to_string()
}

fn column<'a>(t: &'a Table, name: &str) -> &'a Column {
    &t.columns.iter().find(|(n, _)| n == name).unwrap().1
}

#[test]
fn two_ranks_end_on_the_hand_derived_critical_path() {
    let mut sim = build_from_json(&scenario()).unwrap();
    assert!(!sim.run_until(u64::MAX).unwrap());
    let tables = sim.app_tables();
    let tl = tables.iter().find(|t| t.name == "graph_timeline").unwrap();
    let (Column::Str(kind), Column::U32(worker), Column::U64(end)) = (
        column(tl, "kind"),
        column(tl, "worker"),
        column(tl, "end_ps"),
    ) else {
        panic!("timeline columns")
    };
    let at = |w: u32, k: &str| {
        (0..kind.len())
            .find(|&i| worker[i] == w && kind[i] == k)
            .map(|i| end[i])
            .unwrap()
    };
    let t_s = at(0, "send");
    assert!(t_s > 1_000_000);
    assert_eq!(at(1, "recv"), t_s, "the receive completes with the send");
    assert_eq!(at(1, "compute"), t_s + 2_000_000);
    let it = tables
        .iter()
        .find(|t| t.name == "graph_iterations")
        .unwrap();
    let Column::OptU64(ends) = column(it, "end_ps") else {
        panic!("iteration columns")
    };
    assert_eq!(ends, &vec![Some(2 * t_s + 1_000_000); 2]);
    // The exchange's messages in the telemetry: one send and one receive per rank, B bytes each.
    let ccl = tables.iter().find(|t| t.name == "graph_ccl").unwrap();
    let Column::U64(bytes) = column(ccl, "bytes") else {
        panic!("ccl columns")
    };
    assert_eq!(bytes, &vec![B; 4]);
}

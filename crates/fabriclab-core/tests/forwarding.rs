//! A switch's forwarding capacity (`node_overrides`): every packet entering
//! the node waits for its one processor, FIFO, 1/R each, in a node holding
//! at most `forwarding_queue_packets`. Expected times and counts by hand.
use fabriclab_core::build_from_json;
use fabriclab_core::engine::{Column, Simulation};
use fabriclab_core::fabric::frame::wire_bytes;
use fabriclab_core::time::ser_time_ps;
use serde_json::{json, Value};

const RATE: u64 = 10_000_000_000;
const DELAY: u64 = 1_000_000; // 1 us
/// The s0 -> h2 link's delay: long, so that no ACK reaches s0 while the
/// data is still there (the ACKs share its processor too); the RTO (100 ms)
/// is far above the RTT.
const FAR: u64 = 1_000_000_000; // 1 ms

/// h0, h1, h2 on switch s0 (node 3); h2's link is `FAR` long.
fn star(flows: Value, nodes_over: Option<Value>, cwnd: u32) -> String {
    let mut nodes: Vec<Value> = (0..3)
        .map(|i| json!({"name": format!("h{i}"), "kind": "host"}))
        .collect();
    nodes.push(json!({"name": "s0", "kind": "switch"}));
    nodes.push(json!({"name": "s1", "kind": "switch"}));
    let mut links: Vec<Value> = (0..3)
        .map(|i| json!({"a": i, "b": 3, "rate_bps": RATE, "delay_ps": if i == 2 { FAR } else { DELAY }}))
        .collect();
    // s1 hangs off s0 and carries nothing.
    links.push(json!({"a": 4, "b": 3, "rate_bps": RATE, "delay_ps": DELAY}));
    let mut s = json!({
        "seed": 7, "backend": "packet",
        "topology": {"nodes": nodes, "links": links},
        "queue": {"discipline": "fifo", "bands": 1, "priomap": [0,0,0,0,0,0,0,0], "limit_bytes": null,
                  "limit_packets": 100, "ecn_threshold_bytes": null, "ecn_threshold_packets": null},
        "transport": {"cc": "newreno", "mss_bytes": 1460, "init_cwnd_packets": cwnd, "min_rto_ps": 100_000_000_000u64,
                      "initial_rto_ps": 100_000_000_000u64, "max_rto_ps": 1_000_000_000_000u64, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 131072},
        "routing": {"ecmp_hash_seed": 0},
        "flows": flows,
    });
    if let Some(o) = nodes_over {
        s["node_overrides"] = o;
    }
    s.to_string()
}

fn cpu(node: u32, pps: u64, queue: u64) -> Value {
    json!([{"node": node, "forwarding_pps": pps, "forwarding_queue_packets": queue}])
}

/// The `node_forwarding` row of `node`: (forwarded, dropped, max queue).
fn counters(sim: &Simulation, node: &str) -> (u64, u64, u64) {
    let c = row(sim, node);
    (c[0], c[1], c[2])
}

/// The `node_forwarding` row of `node`: (forwarded, dropped, max queue, held).
fn row(sim: &Simulation, node: &str) -> [u64; 4] {
    let t = sim
        .app_tables()
        .into_iter()
        .find(|t| t.name == "node_forwarding")
        .expect("node_forwarding table");
    let col = |k: usize| match &t.columns[k].1 {
        Column::U64(v) => v.clone(),
        _ => panic!(),
    };
    let Column::Str(names) = &t.columns[0].1 else {
        panic!()
    };
    let i = names.iter().position(|n| n == node).expect("its row");
    [col(1)[i], col(2)[i], col(3)[i], col(4)[i]]
}

/// Three full segments from each of h0 and h1 to h2, both starting at 0,
/// through s0 at 100,000 pps (10 us a packet, eight times a frame's
/// serialization): s0 takes them in arrival order, the two ports' equal
/// arrivals in event order (h0's first: its message started first), and
/// the k-th leaves at a + k x 10 us, where a = ser + delay is the first
/// arrivals' time. Each then crosses s0 -> h2 alone (10 us apart, a frame
/// takes 1.23 us), so h0's message ends with the 5th, h1's with the 6th.
#[test]
fn packets_of_two_ports_leave_one_per_service_time_in_arrival_order() {
    let size = 3 * 1460;
    let flows = json!([
        {"src": 0, "dst": 2, "size_bytes": size, "start_ps": 0, "class": 0},
        {"src": 1, "dst": 2, "size_bytes": size, "start_ps": 0, "class": 0},
    ]);
    let mut sim = build_from_json(&star(flows, Some(cpu(3, 100_000, 100)), 10)).unwrap();
    sim.run_until(u64::MAX).unwrap();
    let ser = ser_time_ps(wire_bytes(1460) as u64, RATE);
    assert_eq!(ser, 1_230_400);
    let (a, s) = (ser + DELAY, 10_000_000);
    let ends: Vec<u64> = sim.messages().iter().map(|m| m.end_ps.unwrap()).collect();
    assert_eq!(ends, vec![a + 5 * s + ser + FAR, a + 6 * s + ser + FAR]);
    // Every data packet and every ACK (one per segment) went through it once.
    assert_eq!(counters(&sim, "s0"), (12, 0, 6));
}

/// A burst of 40 segments from h0 arrives at s0 one per serialization time
/// (1.2304 us) over 39 x 1.2304 = 47.99 us; s0 serves one per 10 us and
/// holds 5. The first 5 arrive within 4 x 1.2304 = 4.9 us < 10 us and fill
/// it; each of the 4 services completed during the burst (at 10, 20, 30,
/// 40 us) frees a place that the next arrival takes (they come 8 to a
/// service time). So 5 + 4 are taken and 40 - 5 - 4 = 31 dropped. Seen at
/// a + 48 us, before any ACK (1 ms away) is back.
#[test]
fn a_burst_larger_than_the_queue_drops_all_but_the_limit_and_what_was_served() {
    let flows = json!([{"src": 0, "dst": 2, "size_bytes": 40 * 1460, "start_ps": 0, "class": 0}]);
    let mut sim = build_from_json(&star(flows, Some(cpu(3, 100_000, 5)), 40)).unwrap();
    let ser = ser_time_ps(wire_bytes(1460) as u64, RATE);
    let a = ser + DELAY;
    sim.run_until(a + 48_000_000).unwrap();
    // All 40 have entered: 4 served, 31 dropped, the 5 that fill it still held.
    assert_eq!(row(&sim, "s0"), [4, 31, 5, 5]);
    // Counted as drops of the link direction that brought them (h0 -> s0).
    let l = fabriclab_core::results::link_columns(&sim);
    let i = (0..l.link_id.len())
        .find(|&i| l.from[i] == "h0" && l.to[i] == "s0")
        .unwrap();
    assert_eq!(l.drops[i], 31);
}

/// A capacity on a switch no packet crosses (s1) changes nothing: the same
/// completion times and link counters as without `node_overrides`, and as
/// with an empty list.
#[test]
fn a_capacity_on_a_node_nothing_crosses_changes_no_result() {
    let flows = json!([
        {"src": 0, "dst": 2, "size_bytes": 2_000_000, "start_ps": 0, "class": 0},
        {"src": 1, "dst": 2, "size_bytes": 1_000_000, "start_ps": 5_000_000, "class": 0},
    ]);
    let run = |o: Option<Value>| {
        let mut sim = build_from_json(&star(flows.clone(), o, 10)).unwrap();
        sim.run_until(u64::MAX).unwrap();
        let ends: Vec<Option<u64>> = sim.messages().iter().map(|m| m.end_ps).collect();
        let l = fabriclab_core::results::link_columns(&sim);
        (ends, l.bytes, l.packets, l.drops)
    };
    let plain = run(None);
    assert_eq!(run(Some(json!([]))), plain);
    assert_eq!(run(Some(cpu(4, 1_000, 1))), plain);
}

#[test]
fn bad_capacities_are_refused_naming_the_field() {
    let flows = json!([{"src": 0, "dst": 2, "size_bytes": 1460, "start_ps": 0, "class": 0}]);
    let err = |o: Value| match build_from_json(&star(flows.clone(), Some(o), 10)) {
        Err(e) => e,
        Ok(_) => panic!("accepted"),
    };
    assert!(err(cpu(3, 0, 10)).starts_with("node_overrides[0].forwarding_pps:"));
    assert!(err(cpu(3, 1000, 0)).starts_with("node_overrides[0].forwarding_queue_packets:"));
    assert!(err(cpu(0, 1000, 10)).starts_with("node_overrides[0].node:"));
    assert!(err(cpu(9, 1000, 10)).starts_with("node_overrides[0].node:"));
}

/// Conservation over a whole run: every packet sent on a wire into s0
/// was served or dropped there, and none is held at the end (mid-run,
/// with packets held, the burst test above counts 4 + 31 + 5 = 40 by
/// hand). Two 200 kB flows into h2 and one back to h0 (data and ACKs both
/// ways) through s0 at 200,000 pps holding 20, so the backlog overflows.
#[test]
fn every_packet_into_the_node_is_forwarded_or_dropped_by_the_end() {
    let flows = json!([
        {"src": 0, "dst": 2, "size_bytes": 200_000, "start_ps": 0, "class": 0},
        {"src": 1, "dst": 2, "size_bytes": 200_000, "start_ps": 0, "class": 0},
        {"src": 2, "dst": 0, "size_bytes": 200_000, "start_ps": 0, "class": 0},
    ]);
    let mut sim = build_from_json(&star(flows, Some(cpu(3, 200_000, 20)), 10)).unwrap();
    sim.run_until(u64::MAX).unwrap();
    assert!(sim.messages().iter().all(|m| m.end_ps.is_some()));
    let [forwarded, dropped, max_queue, held] = row(&sim, "s0");
    // A drop happens only at a full node, so it held its limit at some point.
    assert_eq!((held, max_queue), (0, 20));
    assert!(dropped > 0);
    let l = fabriclab_core::results::link_columns(&sim);
    let into_s0: u64 = (0..l.link_id.len())
        .filter(|&i| l.to[i] == "s0")
        .map(|i| l.packets[i])
        .sum();
    assert_eq!(into_s0, forwarded + dropped);
}

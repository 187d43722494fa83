//! Timed link events: failures, recovery, degraded rates and lossy links,
//! in both backends, against hand reasoning and conservation.
use fabriclab_core::build_from_json;
use fabriclab_core::engine::Simulation;
use fabriclab_core::fabric::frame::wire_bytes;
use fabriclab_core::results::link_columns;
use serde_json::{json, Value};

const G10: u64 = 10_000_000_000;
const US: u64 = 1_000_000;
const MS: u64 = 1_000_000_000;

/// h0 - l0 - {sp0, sp1} - l1 - h1. Links: 0 h0-l0, 1 h1-l1, 2 l0-sp0,
/// 3 l0-sp1, 4 l1-sp0, 5 l1-sp1.
fn leaf_spine(backend: &str, size: u64, events: Value, path: Option<Vec<u32>>) -> Value {
    let nodes = json!([
        {"name": "h0", "kind": "host"}, {"name": "h1", "kind": "host"},
        {"name": "l0", "kind": "switch"}, {"name": "l1", "kind": "switch"},
        {"name": "sp0", "kind": "switch"}, {"name": "sp1", "kind": "switch"},
    ]);
    let links: Vec<Value> = [(0, 2), (1, 3), (2, 4), (2, 5), (3, 4), (3, 5)]
        .iter()
        .map(|&(a, b)| json!({"a": a, "b": b, "rate_bps": G10, "delay_ps": US}))
        .collect();
    json!({
        "seed": 7, "backend": backend,
        "topology": {"nodes": nodes, "links": links},
        "queue": {"discipline": "fifo", "bands": 1, "priomap": [0,0,0,0,0,0,0,0], "limit_bytes": null,
                  "limit_packets": 1000, "ecn_threshold_bytes": null, "ecn_threshold_packets": null},
        "transport": {"cc": "newreno", "mss_bytes": 1460, "init_cwnd_packets": 10, "min_rto_ps": MS,
                      "initial_rto_ps": MS, "max_rto_ps": 1000 * MS, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 131072},
        "routing": {"ecmp_hash_seed": 0, "convergence_ps": 100 * US},
        "link_events": events,
        "flows": [{"src": 0, "dst": 1, "size_bytes": size, "start_ps": 0, "class": 0, "path": path}],
    })
}

fn run(spec: &Value) -> Simulation {
    let mut sim = build_from_json(&spec.to_string()).unwrap();
    assert!(!sim.run_until(u64::MAX).unwrap());
    sim
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

fn ser_ps(bytes: u64, rate_bps: u64) -> u64 {
    (bytes as u128 * 8 * 1_000_000_000_000 / rate_bps as u128) as u64
}

/// The spine link (index 2 or 3) leaving l0 that a route uses.
fn uplink_of(sim: &Simulation, route: &[u32]) -> u32 {
    let topo = sim.topology();
    route
        .iter()
        .map(|&p| p / 2)
        .find(|&l| l == 2 || l == 3)
        .unwrap_or_else(|| panic!("no uplink in {route:?} {:?}", topo.names))
}

#[test]
fn a_failed_link_mid_flow_is_routed_around_after_convergence() {
    let size = 8_000_000;
    // Find the uplink the flow hashes onto, then fail it at 1 ms.
    let probe = run(&leaf_spine("packet", size, json!([]), None));
    let before = probe.messages()[0].route.to_vec();
    let up = uplink_of(&probe, &before);
    let sim = run(&leaf_spine(
        "packet",
        size,
        json!([{"at_ps": MS, "link": up, "action": "down"}]),
        None,
    ));
    let m = &sim.messages()[0];
    assert_eq!(m.reroutes, 1);
    let other = uplink_of(&sim, &m.route);
    assert_ne!(other, up);
    // Alone, 8 MB at 10 Gbit/s takes about 6.7 ms: it was mid-flow at 1 ms.
    assert!(probe.messages()[0].end_ps.unwrap() > 3 * MS);
    let end = m.end_ps.expect("finishes via the other spine");
    assert!(end > MS + 100 * US);
    // What was on the failed uplink (queue, serialization, wire) was lost.
    let l = link_columns(&sim);
    assert!(l.drops[2 * up as usize] > 0);
    assert!(m.retransmits > 0);
    // Conservation: the receiver's link carried every data byte once, plus
    // only duplicates of retransmitted segments.
    let to_h1 = (0..l.link_id.len())
        .find(|&i| l.from[i] == "l1" && l.to[i] == "h1")
        .unwrap();
    let data = l.bytes[to_h1]; // l1 -> h1 carries data only (ACKs go h1 -> l1)
    assert!(data >= wire_of(size));
    assert!(data - wire_of(size) <= m.retransmits * wire_bytes(1460) as u64);
}

#[test]
fn down_then_up_restores_the_original_route() {
    let size = 20_000_000; // about 17 ms alone
    let probe = run(&leaf_spine("packet", size, json!([]), None));
    let before = probe.messages()[0].route.to_vec();
    let up = uplink_of(&probe, &before);
    let events = json!([
        {"at_ps": MS, "link": up, "action": "down"},
        {"at_ps": 4 * MS, "link": up, "action": "up"},
    ]);
    for backend in ["packet", "flow"] {
        let sim = run(&leaf_spine(backend, size, events.clone(), None));
        let m = &sim.messages()[0];
        assert_eq!(m.reroutes, 2, "{backend}");
        assert_eq!(m.route.to_vec(), before, "{backend}");
        assert!(m.end_ps.unwrap() > 4 * MS + 100 * US, "{backend}");
    }
}

/// Three route changes with packets in flight on each older route: down at
/// 1 ms (the flow moves to the other spine), up at 4 ms (it moves back
/// while its packets are on the other spine, which finish on the route
/// they took), down again at 7 ms. Every packet follows the route it was
/// sent on and only the failed uplink loses any: the flow completes, the
/// receiver's link carries each data byte once plus only retransmitted
/// duplicates, and nothing is dropped anywhere else.
#[test]
fn packets_finish_on_the_route_they_took_across_three_reroutes() {
    let size = 20_000_000; // about 17 ms alone
    let probe = run(&leaf_spine("packet", size, json!([]), None));
    let up = uplink_of(&probe, &probe.messages()[0].route);
    let events = json!([
        {"at_ps": MS, "link": up, "action": "down"},
        {"at_ps": 4 * MS, "link": up, "action": "up"},
        {"at_ps": 7 * MS, "link": up, "action": "down"},
    ]);
    for backend in ["packet", "flow"] {
        let sim = run(&leaf_spine(backend, size, events.clone(), None));
        let m = &sim.messages()[0];
        assert_eq!(m.reroutes, 3, "{backend}");
        assert_ne!(uplink_of(&sim, &m.route), up, "{backend}");
        assert!(m.end_ps.expect("finishes") > 7 * MS + 100 * US, "{backend}");
        if backend == "packet" {
            let l = link_columns(&sim);
            let to_h1 = (0..l.link_id.len())
                .find(|&i| l.from[i] == "l1" && l.to[i] == "h1")
                .unwrap();
            let data = l.bytes[to_h1];
            assert!(data >= wire_of(size));
            assert!(data - wire_of(size) <= m.retransmits * wire_bytes(1460) as u64);
            for (i, &d) in l.drops.iter().enumerate() {
                if i / 2 != up as usize {
                    assert_eq!(d, 0, "drops on port {i}, not the failed uplink");
                }
            }
            // A switch that loses nothing sends on what it received, byte
            // for byte: the other spine and the receiver's leaf (a packet
            // sent on by another route's next port would leave from a
            // switch it never reached).
            let other = if up == 2 { "sp1" } else { "sp0" };
            for node in [other, "l1"] {
                let sum = |of: &Vec<String>| -> u64 {
                    (0..l.link_id.len())
                        .filter(|&i| of[i] == node)
                        .map(|i| l.bytes[i])
                        .sum()
                };
                assert_eq!(sum(&l.to), sum(&l.from), "{node}: bytes in and out");
            }
        }
    }
}

#[test]
fn a_degraded_link_halves_a_lone_flows_goodput() {
    let size = 4_000_000;
    for backend in ["packet", "flow"] {
        let fct = |events: Value| {
            let sim = run(&leaf_spine(backend, size, events, None));
            sim.messages()[0].end_ps.unwrap()
        };
        let full = fct(json!([]));
        // The sender's NIC link (0: h0-l0) degraded to 5 Gbit/s from the start:
        // its queue (bounded by TCP Small Queues) never drops, so the flow
        // runs at the degraded rate.
        let half = fct(json!([{"at_ps": 0, "link": 0, "action": "rate", "rate_bps": G10 / 2}]));
        let (t_full, t_half) = (ser_ps(wire_of(size), G10), ser_ps(wire_of(size), G10 / 2));
        // Slow start and the path's latency add the same few tens of us to both.
        assert!(
            full.abs_diff(t_full) < t_full / 20,
            "{backend}: {full} vs {t_full}"
        );
        assert!(
            half.abs_diff(t_half) < t_half / 20,
            "{backend}: {half} vs {t_half}"
        );
    }
}

#[test]
fn flow_backend_reroutes_a_flow_off_a_failed_link_exactly() {
    // One fluid flow: 10 Gbit/s until the failure at 1 ms, stalled for the
    // 100 us of convergence, then 10 Gbit/s on the other spine.
    let size = 4_000_000;
    let probe = run(&leaf_spine("flow", size, json!([]), None));
    let up = uplink_of(&probe, &probe.messages()[0].route);
    let sim = run(&leaf_spine(
        "flow",
        size,
        json!([{"at_ps": MS, "link": up, "action": "down"}]),
        None,
    ));
    let end = sim.messages()[0].end_ps.unwrap();
    let expect = probe.messages()[0].end_ps.unwrap() + 100 * US;
    assert!(end.abs_diff(expect) <= 2, "{end} vs {expect}");
}

#[test]
fn a_pinned_path_over_a_failed_link_is_reported() {
    // h0 l0 sp0 l1 h1 as node indices; sp0's uplink from l0 is link 2.
    let spec = leaf_spine(
        "packet",
        20_000_000,
        json!([{"at_ps": MS, "link": 2, "action": "down"}]),
        Some(vec![0, 2, 4, 3, 1]),
    );
    let mut sim = build_from_json(&spec.to_string()).unwrap();
    sim.run_until(10 * MS).unwrap();
    let m = &sim.messages()[0];
    assert!(m.route_lost && m.end_ps.is_none() && m.reroutes == 0);
}

#[test]
fn a_lossy_link_loses_its_share_of_packets() {
    let size = 20_000_000;
    let p = 0.01;
    let sim = run(&leaf_spine(
        "packet",
        size,
        json!([{"at_ps": 0, "link": 0, "action": "loss", "loss": p}]),
        None,
    ));
    assert!(sim.messages()[0].end_ps.is_some());
    let l = link_columns(&sim);
    // h0 -> l0 (port 0) sent n frames, each lost with probability p:
    // binomial, mean n p, standard deviation sqrt(n p (1 - p)).
    let (n, drops) = (l.packets[0] as f64, l.drops[0] as f64);
    let sd = (n * p * (1.0 - p)).sqrt();
    assert!((drops - n * p).abs() < 4.0 * sd, "drops {drops} of {n}");
    // The reverse direction (ACKs, port 1) is lossy too.
    assert!(l.drops[1] > 0);
}

//! Whole-simulation checks through the core's public API.
use fabriclab_core::build_from_json;
use fabriclab_core::fabric::frame::wire_bytes;
use fabriclab_core::results::{flow_columns, link_columns};
use serde_json::{json, Value};

fn star_spec(hosts: usize, backend: &str, flows: Value) -> Value {
    let mut nodes: Vec<Value> = (0..hosts)
        .map(|i| json!({"name": format!("h{i}"), "kind": "host"}))
        .collect();
    nodes.push(json!({"name": "s0", "kind": "switch"}));
    let links: Vec<Value> = (0..hosts)
        .map(|i| json!({"a": i, "b": hosts, "rate_bps": 10_000_000_000u64, "delay_ps": 1_000_000}))
        .collect();
    json!({
        "seed": 1, "backend": backend,
        "topology": {"nodes": nodes, "links": links},
        "queue": {"discipline": "fifo", "bands": 3, "priomap": [0,1,2,2,2,2,2,2], "limit_bytes": null,
                  "limit_packets": null, "ecn_threshold_bytes": null, "ecn_threshold_packets": null},
        "transport": {"cc": "newreno", "mss_bytes": 1460, "init_cwnd_packets": 10, "min_rto_ps": 1_000_000_000u64,
                      "initial_rto_ps": 1_000_000_000u64, "max_rto_ps": 1_000_000_000_000u64, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 131072},
        "routing": {"ecmp_hash_seed": 0},
        "flows": flows,
    })
}

fn packets_of(size: u64) -> (u64, u64) {
    let full = size / 1460;
    let rest = size % 1460;
    let n = full + (rest > 0) as u64;
    let wire = full * wire_bytes(1460) as u64
        + if rest > 0 {
            wire_bytes(rest as u32) as u64
        } else {
            0
        };
    (n, wire)
}

#[test]
fn lossless_run_conserves_bytes_on_every_link() {
    // h0 -> h2 and h1 -> h2 (no buffer limit: no loss), h3 -> h0.
    let flows = json!([
        {"src": 0, "dst": 2, "size_bytes": 1_000_000, "start_ps": 0, "class": 0},
        {"src": 1, "dst": 2, "size_bytes": 333_333, "start_ps": 5_000_000, "class": 0},
        {"src": 3, "dst": 0, "size_bytes": 77, "start_ps": 0, "class": 0},
    ]);
    let mut sim = build_from_json(&star_spec(4, "packet", flows).to_string()).unwrap();
    assert!(!sim.run_until(u64::MAX).unwrap());
    assert_eq!(sim.in_flight(), 0);
    let f = flow_columns(&sim);
    assert!(f.end_ps.iter().all(|e| e.is_some()));
    assert!(f.retransmits.iter().all(|&r| r == 0));
    // Expected bytes per directed link: data on the forward path, one 84-byte
    // ACK per data packet on the reverse path.
    let l = link_columns(&sim);
    let mut expect = std::collections::HashMap::<(String, String), u64>::new();
    for (src, dst, size) in [(0u32, 2u32, 1_000_000u64), (1, 2, 333_333), (3, 0, 77)] {
        let (n, wire) = packets_of(size);
        let (hs, hd) = (format!("h{src}"), format!("h{dst}"));
        *expect.entry((hs.clone(), "s0".into())).or_default() += wire;
        *expect.entry(("s0".into(), hd.clone())).or_default() += wire;
        *expect.entry((hd, "s0".into())).or_default() += n * wire_bytes(0) as u64;
        *expect.entry(("s0".into(), hs)).or_default() += n * wire_bytes(0) as u64;
    }
    for i in 0..l.link_id.len() {
        let key = (l.from[i].clone(), l.to[i].clone());
        assert_eq!(
            l.bytes[i],
            expect.get(&key).copied().unwrap_or(0),
            "link {key:?}"
        );
        assert_eq!(l.drops[i], 0);
    }
}

#[test]
fn two_simulations_live_side_by_side_and_agree() {
    let flows = json!([{"src": 0, "dst": 1, "size_bytes": 200_000, "start_ps": 0, "class": 0}]);
    let spec = star_spec(2, "packet", flows).to_string();
    let mut a = build_from_json(&spec).unwrap();
    let mut b = build_from_json(&spec).unwrap();
    a.run_until(1_000_000).unwrap();
    b.run_until(u64::MAX).unwrap();
    a.run_until(u64::MAX).unwrap();
    assert_eq!(flow_columns(&a).end_ps, flow_columns(&b).end_ps);
    assert_eq!(a.events(), b.events());
}

#[test]
fn flow_backend_single_flow_is_wire_bytes_at_line_rate_plus_delay() {
    let size = 1_000_000u64;
    let flows = json!([{"src": 0, "dst": 1, "size_bytes": size, "start_ps": 0, "class": 0}]);
    let mut sim = build_from_json(&star_spec(2, "flow", flows).to_string()).unwrap();
    sim.run_until(u64::MAX).unwrap();
    let (_, wire) = packets_of(size);
    // wire * 8 bits at 1e10 bit/s = wire * 800 ps; plus two 1 us hops.
    let expect = wire * 800 + 2_000_000;
    let end = flow_columns(&sim).end_ps[0].unwrap();
    assert!((end as i64 - expect as i64).abs() <= 1, "{end} vs {expect}");
}

#[test]
fn unreachable_host_is_an_error_naming_the_hosts() {
    let mut spec = star_spec(3, "packet", json!([]));
    spec["topology"]["links"].as_array_mut().unwrap().pop();
    let err = build_from_json(&spec.to_string()).err().unwrap();
    assert!(err.contains("cannot reach") && err.contains("h2"), "{err}");
}

#[test]
fn ecmp_spreads_flows_over_equal_cost_paths() {
    // Two leaves, four spines: each leaf-to-leaf flow picks one spine by hash.
    let mut nodes: Vec<Value> = (0..2)
        .map(|i| json!({"name": format!("h{i}"), "kind": "host"}))
        .collect();
    for n in ["l0", "l1", "s0", "s1", "s2", "s3"] {
        nodes.push(json!({"name": n, "kind": "switch"}));
    }
    let mut links = vec![
        json!({"a": 0, "b": 2, "rate_bps": 1u64 << 40, "delay_ps": 0}),
        json!({"a": 1, "b": 3, "rate_bps": 1u64 << 40, "delay_ps": 0}),
    ];
    for s in 4..8 {
        links.push(json!({"a": 2, "b": s, "rate_bps": 10_000_000_000u64, "delay_ps": 0}));
        links.push(json!({"a": 3, "b": s, "rate_bps": 10_000_000_000u64, "delay_ps": 0}));
    }
    let flows: Vec<Value> = (0..400).map(|i| json!({"src": 0, "dst": 1, "size_bytes": 1000, "start_ps": i * 1_000_000, "class": 0})).collect();
    let mut spec = star_spec(2, "flow", json!(flows));
    spec["topology"] = json!({"nodes": nodes, "links": links});
    let mut sim = build_from_json(&spec.to_string()).unwrap();
    sim.run_until(u64::MAX).unwrap();
    let l = link_columns(&sim);
    let per_spine: Vec<u64> = (0..l.link_id.len())
        .filter(|&i| l.from[i] == "l0" && l.to[i].starts_with('s'))
        .map(|i| l.bytes[i])
        .collect();
    assert_eq!(per_spine.len(), 4);
    let total: u64 = per_spine.iter().sum();
    // 400 flows over 4 spines: each spine within +-30% of a quarter (binomial sd is ~9%).
    for b in per_spine {
        assert!(
            (b as f64 / (total as f64 / 4.0) - 1.0).abs() < 0.3,
            "uneven ECMP: {b} of {total}"
        );
    }
}

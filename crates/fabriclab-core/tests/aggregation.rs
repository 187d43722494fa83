//! In-network aggregation on the packet backend (PANAMA): a training job
//! whose allreduce is aggregated by accelerators on a two-level leaf-spine,
//! one tree per spine. Expected packet counts and times by hand.
use fabriclab_core::build_from_json;
use fabriclab_core::engine::{Column, Simulation, Table};
use fabriclab_core::results::link_columns;
use serde_json::{json, Value};

const RATE: u64 = 10_000_000_000;
const DELAY_PS: u64 = 1_000_000;
/// 1024 gradient bytes, the 16-byte header, 66 bytes of UDP/IP/Ethernet/preamble.
const WIRE: u64 = 1024 + 16 + 66;

/// h0 h1 under l0, h2 h3 under l1, both leaves linked to every spine.
/// Nodes: h0..h3 = 0..3, l0 = 4, l1 = 5, spines from 6.
/// With `slow`, h3's link runs at a tenth of the rate (a straggler's port).
fn topology(spines: usize, slow: bool) -> Value {
    let mut nodes: Vec<Value> = (0..4)
        .map(|i| json!({"name": format!("h{i}"), "kind": "host"}))
        .collect();
    nodes.push(json!({"name": "l0", "kind": "switch"}));
    nodes.push(json!({"name": "l1", "kind": "switch"}));
    for s in 0..spines {
        nodes.push(json!({"name": format!("s{s}"), "kind": "switch"}));
    }
    let rate = |h: usize| if slow && h == 3 { RATE / 10 } else { RATE };
    let mut links: Vec<Value> = (0..4)
        .map(|h| json!({"a": h, "b": 4 + h / 2, "rate_bps": rate(h), "delay_ps": DELAY_PS}))
        .collect();
    for l in 4..6 {
        for s in 0..spines {
            links.push(json!({"a": l, "b": 6 + s, "rate_bps": RATE, "delay_ps": DELAY_PS}));
        }
    }
    json!({"nodes": nodes, "links": links})
}

/// The tree rooted at spine `s`: leaves sum their two workers, the spine both leaves.
fn tree(tid: u32, s: u32) -> Value {
    json!({"tree": tid, "switches": [
        {"node": 4, "children": [[0, 1], [1, 1]], "parent": s},
        {"node": 5, "children": [[2, 1], [3, 1]], "parent": s},
        {"node": s, "children": [[4, 2], [5, 2]], "parent": null},
    ]})
}

fn scenario(spines: usize, window: Value, memory_bytes: u64, bytes: u64, slow: bool) -> String {
    scenario_with(spines, window, memory_bytes, bytes, slow, false)
}

fn scenario_with(
    spines: usize,
    window: Value,
    memory_bytes: u64,
    bytes: u64,
    slow: bool,
    functional: bool,
) -> String {
    let trees: Vec<Value> = (0..spines as u32).map(|s| tree(s, 6 + s)).collect();
    let v = json!({
        "seed": 1, "backend": "packet",
        "topology": topology(spines, slow),
        "queue": {"discipline": "fifo", "bands": 1, "priomap": [0,0,0,0,0,0,0,0], "limit_bytes": null,
                  "limit_packets": null, "ecn_threshold_bytes": null, "ecn_threshold_packets": null},
        "transport": {"cc": "dctcp", "mss_bytes": 1460, "init_cwnd_packets": 10, "min_rto_ps": 1_000_000_000u64,
                      "initial_rto_ps": 1_000_000_000u64, "max_rto_ps": 1_000_000_000_000u64, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 131072},
        "routing": {"ecmp_hash_seed": 0},
        "aggregation": {"memory_bytes": memory_bytes, "vector_bytes": 1024, "functional": functional, "jobs": [{
            "job": 7, "workers": [0, 1, 2, 3], "class": 3, "sync_fraction": 1.0, "window": window,
            "timeout_ps": 1_000_000_000u64, "trees": trees}]},
        "jobs": [{
            "name": "j", "workers": [0, 1, 2, 3], "layers": [{"param_bytes": bytes, "fwd_ps": 0, "bwd_ps": 0}],
            "iterations": 1, "fusion_bytes": bytes, "barrier": false, "priority_queue": true, "max_inflight": 1,
            "class": 3, "start_ps": 0, "slowdown": [1.0, 1.0, 1.0, 1.0], "jitter": 0.0, "seed": 3,
            "reduce_bps": 40_000_000_000u64, "send_overhead_ps": 0, "aggregation": 7}],
    });
    v.to_string()
}

fn panama(initial: u32) -> Value {
    json!({"kind": "panama", "initial_packets": initial, "g": 0.0625, "initial_alpha": 0.0})
}

fn run(json: &str) -> Simulation {
    let mut sim = build_from_json(json).unwrap();
    assert!(!sim.run_until(10_000_000_000_000).unwrap(), "finished");
    sim
}

fn table(sim: &Simulation, name: &str) -> Table {
    sim.app_tables()
        .into_iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("table {name}"))
}

fn u64s(t: &Table, col: &str) -> Vec<u64> {
    match &t.columns.iter().find(|c| c.0 == col).unwrap().1 {
        Column::U64(v) => v.clone(),
        _ => panic!("{col}"),
    }
}

/// `counter` of every switch's logic.
fn counters(sim: &Simulation, name: &str) -> Vec<u64> {
    let t = table(sim, "switch_logic");
    let Column::Str(names) = &t.columns[1].1 else {
        panic!()
    };
    let values = u64s(&t, "value");
    names
        .iter()
        .zip(values)
        .filter(|(n, _)| *n == name)
        .map(|(_, v)| v)
        .collect()
}

/// Sum of `counter` over every switch's logic.
fn counter(sim: &Simulation, name: &str) -> u64 {
    counters(sim, name).iter().sum()
}

fn link_packets(sim: &Simulation, from: &str, to: &str) -> u64 {
    let l = link_columns(sim);
    let i = (0..l.link_id.len())
        .find(|&i| l.from[i] == from && l.to[i] == to)
        .unwrap();
    assert_eq!(
        l.bytes[i],
        l.packets[i] * WIRE,
        "{from}->{to}: only full aggregation packets"
    );
    l.packets[i]
}

#[test]
fn one_tree_carries_one_packet_per_vid_per_edge_each_way_and_finishes_on_time() {
    // 10 KiB: 10 packets of 1024 bytes, window 16 > 10: nothing waits for a result.
    let sim = run(&scenario(1, panama(16), 64 << 20, 10 * 1024, false));
    for (a, b) in [
        ("h0", "l0"),
        ("h1", "l0"),
        ("h2", "l1"),
        ("h3", "l1"),
        ("l0", "s0"),
        ("l1", "s0"),
    ] {
        assert_eq!(link_packets(&sim, a, b), 10, "{a}->{b} up");
        assert_eq!(link_packets(&sim, b, a), 10, "{b}->{a} down");
    }
    // Three accelerators aggregated 10 VIDs each.
    assert_eq!(counter(&sim, "agg_aggregated"), 30);
    assert_eq!(
        counter(&sim, "agg_skipped") + counter(&sim, "agg_overflow") + counter(&sim, "agg_unknown"),
        0
    );
    // Hand timing, T = one packet's serialization, d = one link's delay:
    // the 10th packet leaves a worker at 10T and reaches its leaf at
    // 10T + d, where the sibling's equal packet is, so it goes up at once:
    // the spine at 11T + 2d, the leaf at 12T + 3d, the worker at 13T + 4d.
    let t = WIRE * 8 * 1_000_000_000_000 / RATE;
    for m in sim.messages() {
        assert_eq!(
            (m.src, m.dst),
            (m.src, m.src),
            "contributions have no destination"
        );
        assert_eq!(m.end_ps.unwrap() - m.start_ps, 13 * t + 4 * DELAY_PS);
    }
    let w = table(&sim, "aggregation_workers");
    assert_eq!(u64s(&w, "packets_sent"), vec![10; 4]);
    assert_eq!(u64s(&w, "results"), vec![10; 4]);
    assert_eq!(sim.in_flight(), 0);
}

#[test]
fn spraying_over_two_trees_splits_packets_round_robin() {
    // 11 packets: tree 0 (spine s0) takes packets 0, 2, .., 10 (6), tree 1 (s1) 1, 3, .., 9 (5).
    let sim = run(&scenario(2, panama(16), 64 << 20, 11 * 1024, false));
    for l in ["l0", "l1"] {
        assert_eq!(link_packets(&sim, l, "s0"), 6);
        assert_eq!(link_packets(&sim, l, "s1"), 5);
        assert_eq!(link_packets(&sim, "s0", l), 6);
        assert_eq!(link_packets(&sim, "s1", l), 5);
    }
    assert_eq!(link_packets(&sim, "l0", "h0"), 11);
}

#[test]
fn a_window_of_one_waits_a_round_trip_per_packet() {
    // Each packet alone: serialization and delay at each of the 4 hops up
    // and down, 4T + 4d, three times in a row.
    let sim = run(&scenario(
        1,
        json!({"kind": "fixed", "packets": 1, "cap": true}),
        64 << 20,
        3 * 1024,
        false,
    ));
    let t = WIRE * 8 * 1_000_000_000_000 / RATE;
    for m in sim.messages() {
        assert_eq!(m.end_ps.unwrap() - m.start_ps, 3 * (4 * t + 4 * DELAY_PS));
    }
}

/// h3's port at a tenth of the rate: l1 holds h2's packets until h3's
/// arrive. A share of 8 packets cannot hold an uncapped window of 64.
#[test]
fn an_uncapped_window_overflows_a_straggler_accelerator_and_the_cap_prevents_it() {
    let memory = 8 * (1024 + 16);
    let lossy = run(&scenario(
        1,
        json!({"kind": "fixed", "packets": 64, "cap": false}),
        memory,
        200 * 1024,
        true,
    ));
    assert!(counter(&lossy, "agg_overflow") > 0);
    assert!(
        counter(&lossy, "agg_skipped") > 0,
        "an overflowed contribution skips its VID"
    );
    let w = table(&lossy, "aggregation_workers");
    let (results, lost) = (
        u64s(&w, "results"),
        [u64s(&w, "given_up"), u64s(&w, "skipped")],
    );
    for i in 0..4 {
        assert!(results[i] < 200, "worker {i} lost results");
        assert_eq!(
            results[i] + lost[0][i] + lost[1][i],
            200,
            "worker {i}: every VID has a result or is known lost"
        );
    }
    // PANAMA's window from one packet, bounded by cwnd_cap: nothing overflows.
    let capped = run(&scenario(1, panama(1), memory, 200 * 1024, true));

    assert_eq!(counter(&capped, "agg_overflow"), 0);
    let peaks = counters(&capped, "agg_peak_bytes");
    assert!(peaks.iter().all(|&p| p <= memory), "{peaks:?}");
    assert!(
        peaks.iter().any(|&p| p >= memory / 2),
        "the straggler's leaf did fill: {peaks:?}"
    );
    let w = table(&capped, "aggregation_workers");
    assert_eq!(u64s(&w, "results"), vec![200; 4]);
    assert_eq!(u64s(&w, "given_up"), vec![0; 4]);
    assert_eq!(u64s(&w, "skipped"), vec![0; 4]);
}

/// Functional mode: packets carry float32 vectors, and every worker gets,
/// for every packet, the sum its tree computes: each leaf adds its two
/// workers in port order, the spine adds the leaves' sums.
#[test]
fn functional_results_are_the_trees_sums_of_the_workers_vectors() {
    use fabriclab_agg::values::worker_vector;
    // 5 packets over 2 trees, the last one short (1000 bytes: 250 floats).
    let bytes = 4 * 1024 + 1000;
    let sim = run(&scenario_with(2, panama(16), 64 << 20, bytes, false, true));
    let t = table(&sim, "aggregation_values");
    let col = |n: &str| t.columns.iter().find(|c| c.0 == n).unwrap().1.clone();
    let (Column::Str(host), Column::U64(packet), Column::U32(index), Column::F64(value)) =
        (col("host"), col("packet"), col("index"), col("value"))
    else {
        panic!()
    };
    assert_eq!(
        value.len(),
        4 * (4 * 256 + 250),
        "every worker, every value"
    );
    for i in 0..value.len() {
        let (k, j) = (packet[i], index[i] as usize);
        let count = if k == 4 { 250 } else { 256 };
        let v: Vec<Vec<f32>> = (0..4)
            .map(|w| worker_vector(1, 7, w, 0, k, count))
            .collect();
        let expected = (v[0][j] + v[1][j]) + (v[2][j] + v[3][j]);
        assert_eq!(
            value[i], expected as f64,
            "{} packet {k} index {j}",
            host[i]
        );
    }
    assert_eq!(counter(&sim, "agg_mismatched"), 0);
}

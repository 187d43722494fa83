//! The flow backend's aggregation model at the scale of PANAMA's figure 8:
//! a k = 16 fat-tree (1024 hosts, 10 Gbit/s), 20 aggregation jobs of 16 to
//! 96 workers with 4 trees each (rooted at cores), web-search background
//! traffic. Ignored by default (run it in release mode):
//!
//! ```text
//! cargo test --release -p fabriclab-core --test aggregation_flow_scale -- --ignored --nocapture
//! ```
use fabriclab_core::build_from_json;
use serde_json::{json, Value};
use std::time::Instant;

const K: u32 = 16;
const HALF: u32 = K / 2;
const HOSTS: u32 = K * HALF * HALF;
const RATE: u64 = 10_000_000_000;
const DELAY: u64 = 1_000_000;

fn edge(p: u32, e: u32) -> u32 {
    HOSTS + p * HALF + e
}
fn agg(p: u32, a: u32) -> u32 {
    HOSTS + K * HALF + p * HALF + a
}
fn core(c: u32) -> u32 {
    HOSTS + 2 * K * HALF + c
}
/// A host's pod and edge switch.
fn place(h: u32) -> (u32, u32) {
    (h / (HALF * HALF), h % (HALF * HALF) / HALF)
}

fn topology() -> Value {
    let mut nodes: Vec<Value> = (0..HOSTS)
        .map(|i| json!({"name": format!("h{i}"), "kind": "host"}))
        .collect();
    for kind in ["edge", "agg"] {
        for p in 0..K {
            for e in 0..HALF {
                nodes.push(json!({"name": format!("{kind}{p}_{e}"), "kind": "switch"}));
            }
        }
    }
    for c in 0..HALF * HALF {
        nodes.push(json!({"name": format!("core{c}"), "kind": "switch"}));
    }
    let link = |a: u32, b: u32| json!({"a": a, "b": b, "rate_bps": RATE, "delay_ps": DELAY});
    let mut links: Vec<Value> = (0..HOSTS)
        .map(|h| {
            let (p, e) = place(h);
            link(h, edge(p, e))
        })
        .collect();
    for p in 0..K {
        for e in 0..HALF {
            for a in 0..HALF {
                links.push(link(edge(p, e), agg(p, a)));
            }
        }
        for a in 0..HALF {
            for c in 0..HALF {
                links.push(link(agg(p, a), core(a * HALF + c)));
            }
        }
    }
    json!({"nodes": nodes, "links": links})
}

/// The tree of `workers` rooted at core `c`: through aggregation switch
/// `c / HALF` of every pod with workers, and their edges.
fn tree(tid: u32, c: u32, workers: &[u32]) -> Value {
    let a = c / HALF;
    let mut switches = Vec::new();
    let mut pods = Vec::new();
    for p in 0..K {
        let mut edges = Vec::new();
        for e in 0..HALF {
            let here: Vec<Value> = workers
                .iter()
                .filter(|&&h| place(h) == (p, e))
                .map(|&h| json!([h, 1]))
                .collect();
            if !here.is_empty() {
                edges.push(json!([edge(p, e), here.len()]));
                switches.push(json!({"node": edge(p, e), "children": here, "parent": agg(p, a)}));
            }
        }
        if !edges.is_empty() {
            let n: u64 = edges.iter().map(|e| e[1].as_u64().unwrap()).sum();
            pods.push(json!([agg(p, a), n]));
            switches.push(json!({"node": agg(p, a), "children": edges, "parent": core(c)}));
        }
    }
    switches.push(json!({"node": core(c), "children": pods, "parent": null}));
    json!({"tree": tid, "switches": switches})
}

fn websearch() -> Vec<(f64, f64)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/fabriclab/data/websearch.csv"
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("size"))
        .map(|l| {
            let (x, p) = l.split_once(',').unwrap();
            (x.trim().parse().unwrap(), p.trim().parse().unwrap())
        })
        .collect()
}

fn scenario(jobs: usize, trees: u32, load: f64, duration_ps: u64, window: Value) -> String {
    let sizes = [16u32, 24, 32, 48, 64, 96];
    let (mut next, mut agg_jobs, mut train) = (0u32, Vec::new(), Vec::new());
    for j in 0..jobs {
        let n = sizes[j % sizes.len()];
        let workers: Vec<u32> = (next..next + n).collect();
        next += n;
        let ts: Vec<Value> = (0..trees)
            .map(|t| tree(t, (j as u32 * 7 + t * 17) % (HALF * HALF), &workers))
            .collect();
        agg_jobs.push(json!({
            "job": j, "workers": workers, "class": 1, "sync_fraction": 1.0, "window": window,
            "timeout_ps": 1_000_000_000u64, "trees": ts}));
        let layers: Vec<Value> = (0..4)
            .map(|_| json!({"param_bytes": 4 << 20, "fwd_ps": 500_000_000u64, "bwd_ps": 1_000_000_000u64}))
            .collect();
        train.push(json!({
            "name": format!("j{j}"), "workers": workers, "layers": layers,
            "iterations": 3, "fusion_bytes": 4 << 20, "barrier": false, "priority_queue": true, "max_inflight": 1,
            "class": 1, "start_ps": 0, "slowdown": vec![1.0; n as usize], "jitter": 0.0, "seed": j,
            "reduce_bps": 40_000_000_000u64, "send_overhead_ps": 0, "aggregation": j}));
    }
    assert!(next <= HOSTS);
    json!({
        "seed": 1, "backend": "flow",
        "topology": topology(),
        "queue": {"discipline": "fifo", "bands": 1, "priomap": [0,0,0,0,0,0,0,0], "limit_bytes": null,
                  "limit_packets": null, "ecn_threshold_bytes": null, "ecn_threshold_packets": null},
        "transport": {"cc": "dctcp", "mss_bytes": 1460, "init_cwnd_packets": 10, "min_rto_ps": 1_000_000_000u64,
                      "initial_rto_ps": 1_000_000_000u64, "max_rto_ps": 1_000_000_000_000u64, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 131072},
        "routing": {"ecmp_hash_seed": 0},
        "aggregation": {"memory_bytes": 64u64 << 20, "vector_bytes": 1456, "jobs": agg_jobs},
        "jobs": train,
        "traffic": [{"load": load, "cdf": websearch(), "start_ps": 0, "duration_ps": duration_ps,
                     "hosts": (0..HOSTS).collect::<Vec<u32>>(), "class": 1, "tag": "websearch"}],
    })
    .to_string()
}

#[test]
#[ignore = "minutes in debug builds: run with --release -- --ignored"]
fn twenty_jobs_on_a_k16_fat_tree_with_web_search_traffic() {
    let window =
        json!({"kind": "panama", "initial_packets": 16, "g": 0.0625, "initial_alpha": 1.0});
    // Overrides: JOBS, TREES, LOAD, DURATION_MS.
    let var = |k: &str, d: f64| std::env::var(k).map_or(d, |v| v.parse().unwrap());
    let (jobs, trees) = (var("JOBS", 20.0) as usize, var("TREES", 4.0) as u32);
    let (load, ms) = (var("LOAD", 0.3), var("DURATION_MS", 10.0));
    let t0 = Instant::now();
    let json = scenario(jobs, trees, load, (ms * 1e9) as u64, window);
    let mut sim = build_from_json(&json).unwrap();
    let built = t0.elapsed();
    let t1 = Instant::now();
    assert!(!sim.run_until(u64::MAX / 2).unwrap());
    let ran = t1.elapsed();
    let msgs = sim.messages();
    let contribs = msgs.iter().filter(|m| m.src == m.dst).count();
    let flows = msgs.len() - contribs;
    eprintln!(
        "built in {built:?}, ran in {ran:?}: {} events, {contribs} contributions, {flows} flows, simulated {} us",
        sim.events(),
        sim.last_active_ps() / 1_000_000
    );
    // A digest of every message's end, to compare runs.
    let digest = msgs.iter().fold(0u64, |h, m| {
        (h ^ m.end_ps.unwrap()).wrapping_mul(0x0100_0000_01b3)
    });
    eprintln!("digest of the messages' ends: {digest:016x}");
    assert!(msgs.iter().all(|m| m.end_ps.is_some()));
    assert_eq!(sim.in_flight(), 0);
}

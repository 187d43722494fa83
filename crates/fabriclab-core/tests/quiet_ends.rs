//! Ends of serialization without an event (issue 13): a frame with nothing
//! behind it goes onto the wire when it starts and its end is only a
//! reserved place. Whatever the engine skips, the ports' counters read
//! between `run_until` slices must be those of every frame whose
//! serialization has ended: the reference is a probe that sees every
//! dequeue (a frame's start) and adds its serialization time.
use fabriclab_core::build_from_json;
use fabriclab_core::engine::{MsgRecord, PortEvent, Probe};
use fabriclab_core::time::ser_time_ps;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

const RATE_BPS: u64 = 10_000_000_000;

/// (port, end of serialization, wire bytes) of every frame dequeued.
struct Starts(Arc<Mutex<Vec<(u32, u64, u32)>>>);

impl Probe for Starts {
    fn message_started(&mut self, _now: u64, _msg: u32, _rec: &MsgRecord) {}
    fn port_event(&mut self, now: u64, port: u32, _band: u8, kind: PortEvent, bytes: u32) {
        if kind == PortEvent::Dequeue {
            let end = now + ser_time_ps(bytes as u64, RATE_BPS);
            self.0.lock().unwrap().push((port, end, bytes));
        }
    }
}

#[test]
fn port_counters_between_slices_count_every_frame_that_ended() {
    // Two senders into h2 and one back to h0 over one switch, 10 us links
    // (eight full frames on a wire): ACK trains and bursts' last frames.
    let mut nodes: Vec<Value> = (0..3)
        .map(|i| json!({"name": format!("h{i}"), "kind": "host"}))
        .collect();
    nodes.push(json!({"name": "s0", "kind": "switch"}));
    let links: Vec<Value> = (0..3)
        .map(|i| json!({"a": i, "b": 3, "rate_bps": RATE_BPS, "delay_ps": 10_000_000}))
        .collect();
    let flows = vec![
        json!({"src": 0, "dst": 2, "size_bytes": 300_000, "start_ps": 0, "class": 0}),
        json!({"src": 1, "dst": 2, "size_bytes": 200_000, "start_ps": 5_000_001, "class": 0}),
        json!({"src": 2, "dst": 0, "size_bytes": 150_000, "start_ps": 17_000_003, "class": 0}),
    ];
    let spec = json!({
        "seed": 1, "backend": "packet", "topology": {"nodes": nodes, "links": links},
        "queue": {"discipline": "fifo", "bands": 1, "priomap": [0,0,0,0,0,0,0,0], "limit_bytes": null,
                  "limit_packets": 100, "ecn_threshold_bytes": null, "ecn_threshold_packets": 20},
        "transport": {"cc": "dctcp", "mss_bytes": 1460, "init_cwnd_packets": 10, "min_rto_ps": 1_000_000_000u64,
                      "initial_rto_ps": 1_000_000_000u64, "max_rto_ps": 1_000_000_000_000u64, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 131072},
        "routing": {"ecmp_hash_seed": 0}, "flows": flows,
    });
    let starts = Arc::new(Mutex::new(Vec::new()));
    let mut sim = build_from_json(&spec.to_string()).unwrap();
    sim.add_probe(Box::new(Starts(starts.clone())));
    let ports = 6;
    let mut t = 0u64;
    let mut slices = 0;
    loop {
        // Slice ends that fall inside serializations (3.33 us, not a multiple of a frame's time).
        t += 3_333_337;
        let more = sim.run_until(t).unwrap();
        slices += 1;
        let s = starts.lock().unwrap();
        let stats = sim.link_stats();
        for p in 0..ports {
            let ended = s.iter().filter(|&&(q, end, _)| q == p && end <= t);
            let (bytes, packets) =
                ended.fold((0u64, 0u64), |(b, n), &(_, _, w)| (b + w as u64, n + 1));
            assert_eq!(
                (stats[p as usize].bytes, stats[p as usize].packets),
                (bytes, packets),
                "port {p} after run_until({t})"
            );
        }
        // Every ended serialization counts as activity.
        let last_end = s
            .iter()
            .map(|&(_, e, _)| e)
            .filter(|&e| e <= t)
            .max()
            .unwrap_or(0);
        assert!(sim.last_active_ps() >= last_end, "after run_until({t})");
        if !more {
            break;
        }
    }
    assert!(slices > 100, "{slices} slices");
    let frames = starts.lock().unwrap().len() as u64;
    // Each frame has one arrival event and at most one end event (plus
    // timers): fewer than two per frame means ends went without one.
    assert!(
        sim.events() < 2 * frames,
        "{} events for {frames} frames",
        sim.events()
    );
}

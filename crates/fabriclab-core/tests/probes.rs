//! Probes: an observer sees every message start and completion and every
//! queue event; the counts obey conservation.
use fabriclab_core::build_from_json;
use fabriclab_core::engine::{MsgRecord, PortEvent, Probe};
use fabriclab_core::results::link_columns;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

#[derive(Default, Debug)]
struct Counts {
    started: u64,
    completed: u64,
    enqueue: u64,
    dequeue: u64,
    drop: u64,
    mark: u64,
}

struct Counter(Arc<Mutex<Counts>>);

impl Probe for Counter {
    fn message_started(&mut self, _now: u64, _msg: u32, _rec: &MsgRecord) {
        self.0.lock().unwrap().started += 1;
    }
    fn message_completed(&mut self, _now: u64, _msg: u32, rec: &MsgRecord) {
        assert!(rec.end_ps.is_some());
        self.0.lock().unwrap().completed += 1;
    }
    fn port_event(&mut self, _now: u64, _port: u32, _band: u8, kind: PortEvent, _bytes: u32) {
        let mut c = self.0.lock().unwrap();
        match kind {
            PortEvent::Enqueue => c.enqueue += 1,
            PortEvent::Dequeue => c.dequeue += 1,
            PortEvent::Drop => c.drop += 1,
            PortEvent::Mark => c.mark += 1,
            PortEvent::Pause | PortEvent::Resume => {}
        }
    }
}

#[test]
fn a_probe_sees_every_message_and_every_queue_event() {
    // Four senders into one receiver with 30-packet queues marking at 10:
    // drops, marks and retransmissions.
    let mut nodes: Vec<Value> = (0..5)
        .map(|i| json!({"name": format!("h{i}"), "kind": "host"}))
        .collect();
    nodes.push(json!({"name": "s0", "kind": "switch"}));
    let links: Vec<Value> = (0..5)
        .map(|i| json!({"a": i, "b": 5, "rate_bps": 10_000_000_000u64, "delay_ps": 1_000_000}))
        .collect();
    let flows: Vec<Value> = (0..4)
        .map(|i| json!({"src": i, "dst": 4, "size_bytes": 500_000, "start_ps": 0, "class": 0}))
        .collect();
    let spec = json!({
        "seed": 1, "backend": "packet", "topology": {"nodes": nodes, "links": links},
        "queue": {"discipline": "fifo", "bands": 1, "priomap": [0,0,0,0,0,0,0,0], "limit_bytes": null,
                  "limit_packets": 30, "ecn_threshold_bytes": null, "ecn_threshold_packets": 10},
        "transport": {"cc": "dctcp", "mss_bytes": 1460, "init_cwnd_packets": 20, "min_rto_ps": 1_000_000_000u64,
                      "initial_rto_ps": 1_000_000_000u64, "max_rto_ps": 1_000_000_000_000u64, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 131072},
        "routing": {"ecmp_hash_seed": 0}, "flows": flows,
    });
    let counts = Arc::new(Mutex::new(Counts::default()));
    let mut sim = build_from_json(&spec.to_string()).unwrap();
    sim.add_probe(Box::new(Counter(counts.clone())));
    assert!(!sim.run_until(u64::MAX).unwrap());
    let c = counts.lock().unwrap();
    let l = link_columns(&sim);
    assert_eq!(c.started, 4);
    assert_eq!(c.completed, 4);
    // Every packet queued left its queue (the network is empty at the end).
    assert_eq!(c.enqueue, c.dequeue);
    // Every frame transmitted was dequeued once; drops and marks match the ports' counters.
    assert_eq!(c.dequeue, l.packets.iter().sum::<u64>());
    assert_eq!(c.drop, l.drops.iter().sum::<u64>());
    assert_eq!(c.mark, l.ecn_marks.iter().sum::<u64>());
    assert!(c.drop > 0 && c.mark > 0, "{c:?}");
}

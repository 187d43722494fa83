//! DCQCN per queue pair in the packet backend: the messages an app sends
//! on one QP (`Message::qp`) between the same hosts in one class share one
//! rate (Zhu et al., SIGCOMM'15: one reaction point per flow, a RoCE flow
//! being a QP), one CNP pacer at the receiver (at most one CNP per 50 us
//! per QP) and go in order, whatever their source ports; another QP keeps
//! its own state, even on the same source port.
//!
//! The fabric: h0 -10G- s -5G- h1, and s -10G- h2; 1 us links; switch ports
//! mark a packet that finds another queued (threshold 0 packets). A QP from
//! h0 to h1 at line rate fills s's 5 Gbit/s port; its first CNP (alpha = 1)
//! halves its rate to 5G, where the queue neither grows nor drains, so the
//! next CNP, 50 us later, halves it again, to 2.5G, before the first alpha
//! tick (55 us) could lower alpha; below 5G the queue drains and packets
//! find it empty: no more marks. The rate then stays at 2.5G until the
//! increase timer, 1500 us after that cut.

use fabriclab_core::build_from_json;
use fabriclab_core::engine::{Api, App, Message, MsgId, Simulation};
use serde_json::json;
use std::sync::{Arc, Mutex};

const US: u64 = 1_000_000;
const MSS: u64 = 1460;
/// One full segment's wire time (1538 bytes) at 10, 5 and 2.5 Gbit/s.
const GAP_10G: u64 = 1_230_400;
const GAP_5G: u64 = 2_460_800;
const GAP_2G5: u64 = 4_921_600;

/// (send time, source, destination, size, source port, QP or None).
type Send = (u64, u32, u32, u64, u16, Option<u64>);
/// Every in-order advance at a destination: (message, bytes so far, time).
type Arrivals = Arc<Mutex<Vec<(MsgId, u64, u64)>>>;

struct Sender {
    sends: Vec<Send>,
    arrivals: Arrivals,
}

impl App for Sender {
    fn start(&mut self, api: &mut Api) {
        for (i, s) in self.sends.iter().enumerate() {
            api.schedule(s.0, i as u64);
        }
    }
    fn on_timer(&mut self, api: &mut Api, token: u64) {
        let (_, src, dst, size_bytes, src_port, qp) = self.sends[token as usize];
        api.send(&Message {
            src,
            dst,
            size_bytes,
            src_port: Some(src_port),
            qp,
            notify_packets: true,
            ..Default::default()
        })
        .unwrap();
    }
    fn on_receive(&mut self, api: &mut Api, msg: MsgId, bytes: u64) {
        self.arrivals.lock().unwrap().push((msg, bytes, api.now()));
    }
    fn tag(&self) -> &str {
        "qp"
    }
}

fn run(sends: Vec<Send>) -> (Simulation, Vec<(MsgId, u64, u64)>) {
    let nodes = json!([
        {"name": "h0", "kind": "host"}, {"name": "h1", "kind": "host"},
        {"name": "h2", "kind": "host"}, {"name": "s", "kind": "switch"},
    ]);
    let links = json!([
        {"a": 0, "b": 3, "rate_bps": 10_000_000_000u64, "delay_ps": US},
        {"a": 1, "b": 3, "rate_bps": 5_000_000_000u64, "delay_ps": US},
        {"a": 2, "b": 3, "rate_bps": 10_000_000_000u64, "delay_ps": US},
    ]);
    let spec = json!({
        "seed": 1, "backend": "packet",
        "topology": {"nodes": nodes, "links": links},
        "queue": {"discipline": "fifo", "bands": 1, "priomap": [0,0,0,0,0,0,0,0], "limit_bytes": null,
                  "limit_packets": null, "ecn_threshold_bytes": null, "ecn_threshold_packets": 0},
        "transport": {"cc": "dcqcn", "mss_bytes": MSS, "init_cwnd_packets": 10, "min_rto_ps": 1000 * US,
                      "initial_rto_ps": 1000 * US, "max_rto_ps": 1_000_000 * US, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 1u64 << 30},
        "routing": {"ecmp_hash_seed": 0},
        "flows": [],
    });
    let mut sim = build_from_json(&spec.to_string()).unwrap();
    let arrivals: Arrivals = Arc::default();
    sim.add_app(Box::new(Sender {
        sends,
        arrivals: arrivals.clone(),
    }));
    assert!(!sim.run_until(u64::MAX).unwrap());
    assert_eq!(sim.in_flight(), 0);
    let a = arrivals.lock().unwrap().clone();
    (sim, a)
}

/// Arrival times of message `msg`'s packets, in order.
fn times(arrivals: &[(MsgId, u64, u64)], msg: MsgId) -> Vec<u64> {
    arrivals
        .iter()
        .filter(|a| a.0 == msg)
        .map(|a| a.2)
        .collect()
}

fn gaps(t: &[u64]) -> Vec<u64> {
    t.windows(2).map(|w| w[1] - w[0]).collect()
}

#[test]
fn the_next_message_on_a_qp_starts_at_the_rate_the_last_one_ended_at() {
    // Two messages posted together on QP 7: the second waits for the
    // first's last byte, then goes on from its pacing. Their stream is the
    // one a single message of both sizes sends: its first CNP (in message
    // 0's third packet or so) halves the rate to 5G, where the queue stays
    // as it is, so message 1's first packets still find it and are marked;
    // the QP's notification point holds their CNP until 50 us after the
    // first, when it comes in message 1 (message 0's 10 packets have all
    // arrived within about 20 us). A pacer per message would have sent a
    // CNP at message 1's first marked packet: three in all, not two.
    let (m1, m2) = (10 * MSS, 50 * MSS);
    let (sim, arr) = run(vec![
        (0, 0, 1, m1, 5000, Some(7)),
        (0, 0, 1, m2, 5000, Some(7)),
    ]);
    let (t1, t2) = (times(&arr, 0), times(&arr, 1));
    assert_eq!((t1.len(), t2.len()), (10, 50));
    let (one_sim, one) = run(vec![(0, 0, 1, m1 + m2, 5000, Some(7))]);
    assert_eq!([t1.clone(), t2.clone()].concat(), times(&one, 0));
    // The end of the stream at 2.5G, below the 5G bottleneck, so arrivals
    // are spaced as sent.
    assert_eq!(gaps(&t2)[40..], [GAP_2G5; 9]);
    let m = sim.messages();
    assert_eq!((m[0].cnps, m[1].cnps), (1, 1));
    assert_eq!(one_sim.messages()[0].cnps, 2);
    assert_eq!(m[1].first_byte_ps, Some(t2[0]));
    assert_eq!(m[1].end_ps, Some(t2[49]));
}

#[test]
fn cnps_are_paced_per_qp_not_per_message() {
    // Sixteen 2-packet messages posted at once on one QP: the QP's stream
    // is the one a single 32-packet message sends (same bytes, same
    // times), and its CNPs come at most one per 50 us over the whole
    // stretch, whatever the number of messages.
    let (sim, arr) = run((0..16).map(|_| (0, 0, 1, 2 * MSS, 5000, Some(7))).collect());
    let first = arr.iter().map(|a| a.2).min().unwrap();
    let last = arr.iter().map(|a| a.2).max().unwrap();
    let cnps: u64 = sim.messages().iter().map(|m| m.cnps).sum();
    let bound = (last - first) / (50 * US) + 1;
    assert!(cnps <= bound, "{cnps} CNPs over {} ps", last - first);
    assert!(bound < 16, "a pacer per message could give one CNP to each");
    let (one_sim, one) = run(vec![(0, 0, 1, 32 * MSS, 5000, Some(7))]);
    let split: Vec<u64> = arr.iter().map(|a| a.2).collect();
    assert_eq!(split, times(&one, 0));
    assert_eq!(cnps, one_sim.messages()[0].cnps);
}

#[test]
fn two_qps_of_one_nic_keep_separate_states() {
    // QP 7 (h0 -> h1) is cut to 2.5G as above. Later QP 8 (h0 -> h2,
    // never marked) sends at line rate, and after it QP 7's next message
    // still goes at 2.5G: the idle time (under the 1500 us increase timer)
    // did not restore it, nor did the other QP's rate.
    let (m1, m2, m3) = (60 * MSS, 20 * MSS, 20 * MSS);
    let (_, arr) = run(vec![
        (0, 0, 1, m1, 5000, Some(7)),
        (1000 * US, 0, 2, m2, 5001, Some(8)),
        (1100 * US, 0, 1, m3, 5000, Some(7)),
    ]);
    assert_eq!(gaps(&times(&arr, 1)), [GAP_10G; 19]);
    assert_eq!(gaps(&times(&arr, 2)), [GAP_2G5; 19]);
    // Without a QP a message is a QP of its own: the same third message
    // starts at line rate into the 5G port, its arrivals spaced by the
    // bottleneck.
    let (_, arr) = run(vec![
        (0, 0, 1, m1, 5000, Some(7)),
        (1100 * US, 0, 1, m3, 5000, None),
    ]);
    assert_eq!(gaps(&times(&arr, 1))[..3], [GAP_5G; 3]);
}

#[test]
fn two_qps_on_one_source_port_keep_separate_states() {
    // QPs 7 and 8 of one connection (h0 -> h1) share source port 5000, as
    // an allocator may give them. QP 7 is cut to 2.5G; QP 8, opened at
    // 1100 us (its queue at s long drained), starts at line rate into the
    // 5G port: its first arrivals are spaced by the bottleneck, not at
    // QP 7's 2.5G. QP 7's next message, at 1300 us (after QP 8's 20
    // packets have left s, and before QP 7's increase timer, about 1550
    // us), still goes at 2.5G: QP 8's fresh state did not reach it.
    let (m1, m2, m3) = (60 * MSS, 20 * MSS, 20 * MSS);
    let (_, arr) = run(vec![
        (0, 0, 1, m1, 5000, Some(7)),
        (1100 * US, 0, 1, m2, 5000, Some(8)),
        (1300 * US, 0, 1, m3, 5000, Some(7)),
    ]);
    assert_eq!(gaps(&times(&arr, 1))[..3], [GAP_5G; 3]);
    assert_eq!(gaps(&times(&arr, 2)), [GAP_2G5; 19]);
}

#[test]
fn a_repath_keeps_the_qp_its_rate_and_its_order() {
    // QP 7 moves from source port 5000 to 6000 while its first message is
    // still out: the message posted on the new port is the same QP's next
    // work request, so it waits for the first's last byte and goes on at
    // the QP's rate, 2.5G (a new QP would start at once at line rate).
    let (m1, m2) = (60 * MSS, 20 * MSS);
    let (_, arr) = run(vec![
        (0, 0, 1, m1, 5000, Some(7)),
        (0, 0, 1, m2, 6000, Some(7)),
    ]);
    let (t1, t2) = (times(&arr, 0), times(&arr, 1));
    assert_eq!((t1.len(), t2.len()), (60, 20));
    assert_eq!(gaps(&t1)[50..], [GAP_2G5; 9]);
    assert_eq!(t2[0] - t1[59], GAP_2G5);
    assert_eq!(gaps(&t2), [GAP_2G5; 19]);
}

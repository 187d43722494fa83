//! PFC (IEEE 802.1Qbb) in the packet backend, against hand computations.
use fabriclab_core::build_from_json;
use fabriclab_core::fabric::frame::wire_bytes;
use fabriclab_core::results::{flow_columns, link_columns, LinkColumns};
use serde_json::{json, Value};

const G10: u64 = 10_000_000_000;
const US: u64 = 1_000_000;

/// A scenario from nodes (name, is_switch), links (a, b, rate), explicit flows.
fn spec(
    nodes: &[(&str, bool)],
    links: &[(usize, usize, u64)],
    flows: Value,
    limit_bytes: Option<u64>,
    pfc: Value,
) -> String {
    let nodes: Vec<Value> = nodes
        .iter()
        .map(|(n, sw)| json!({"name": n, "kind": if *sw { "switch" } else { "host" }}))
        .collect();
    let links: Vec<Value> = links
        .iter()
        .map(|&(a, b, r)| json!({"a": a, "b": b, "rate_bps": r, "delay_ps": US}))
        .collect();
    json!({
        "seed": 1, "backend": "packet",
        "topology": {"nodes": nodes, "links": links},
        "queue": {"discipline": "fifo", "bands": 1, "priomap": [0,0,0,0,0,0,0,0], "limit_bytes": limit_bytes,
                  "limit_packets": null, "ecn_threshold_bytes": null, "ecn_threshold_packets": null},
        "pfc": pfc,
        "transport": {"cc": "newreno", "mss_bytes": 1460, "init_cwnd_packets": 10, "min_rto_ps": 1_000_000_000u64,
                      "initial_rto_ps": 1_000_000_000u64, "max_rto_ps": 1_000_000_000_000u64, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 131072},
        "routing": {"ecmp_hash_seed": 0},
        "flows": flows,
    })
    .to_string()
}

fn pfc(xoff: u64, xon: u64, headroom: u64) -> Value {
    json!({"classes": [0], "xoff_bytes": xoff, "xon_bytes": xon, "headroom_bytes": headroom, "pause_quanta": 65535})
}

fn run(json: &str) -> (fabriclab_core::results::FlowColumns, LinkColumns) {
    let mut sim = build_from_json(json).unwrap();
    assert!(!sim.run_until(u64::MAX).unwrap());
    assert_eq!(sim.in_flight(), 0);
    (flow_columns(&sim), link_columns(&sim))
}

fn link(l: &LinkColumns, from: &str, to: &str) -> usize {
    (0..l.link_id.len())
        .find(|&i| l.from[i] == from && l.to[i] == to)
        .unwrap()
}

/// Time to send `bytes` at `rate_bps`, in picoseconds.
fn ser_ps(bytes: u64, rate_bps: u64) -> u64 {
    (bytes as u128 * 8 * 1_000_000_000_000 / rate_bps as u128) as u64
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

/// 8 senders into one receiver through one switch, 1 MB each.
fn incast(pfc: Value) -> String {
    let mut nodes: Vec<(String, bool)> = (0..9).map(|i| (format!("h{i}"), false)).collect();
    nodes.push(("s0".into(), true));
    let names: Vec<(&str, bool)> = nodes.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    let links: Vec<(usize, usize, u64)> = (0..9).map(|i| (i, 9, G10)).collect();
    let flows: Vec<Value> = (0..8)
        .map(|i| json!({"src": i, "dst": 8, "size_bytes": 1_000_000, "start_ps": 0, "class": 0}))
        .collect();
    // 100 KB per egress band: the 8 initial windows (8 x 10 x 1538 B) do not fit.
    spec(&names, &links, json!(flows), Some(100_000), pfc)
}

#[test]
fn incast_drops_without_pfc_and_loses_nothing_with_it() {
    let (f, l) = run(&incast(Value::Null));
    assert!(
        l.drops.iter().sum::<u64>() > 0,
        "the 100 KB buffer must overflow without PFC"
    );
    assert!(f.retransmits.iter().sum::<u64>() > 0);
    // Headroom for one link: what is on the wire both ways (2 x 1 us x 10
    // Gbit/s = 2500 B) and a full frame in serialization at each end (2 x
    // 1538 B). Eight ingress ports x (xoff + headroom) = 96 KB: within the
    // same 100 KB.
    let (f, l) = run(&incast(pfc(6000, 3000, 6000)));
    assert_eq!(l.drops.iter().sum::<u64>(), 0);
    assert_eq!(f.retransmits.iter().sum::<u64>(), 0);
    assert!(f.end_ps.iter().all(|e| e.is_some()));
    // Lossless: the receiver's port carried every data byte exactly once.
    let to_h8 = link(&l, "s0", "h8");
    let acks: u64 = l.bytes[link(&l, "s0", "h0")]; // h0's ACKs plus pause frames toward h0
    assert!(acks > 0);
    assert_eq!(l.bytes[to_h8], 8 * wire_of(1_000_000));
    // Every sender was paused and every pause was sent by the switch.
    let pauses: u64 = (0..8)
        .map(|i| l.pause_frames_sent[link(&l, "s0", &format!("h{i}"))])
        .sum();
    assert!(pauses >= 8);
    assert!((0..8).all(|i| l.paused_ps[link(&l, &format!("h{i}"), "s0")] > 0));
}

#[test]
fn a_paused_upstream_port_slows_a_victim_flow() {
    // h0..h2 -> h4 (incast) and h3 -> h5 (victim); h0..h3 on s0, h4 and h5
    // on s1; the s0-s1 link is 40 Gbit/s, so without PFC the victim gets its
    // own 10 Gbit/s; with PFC, s1 pauses s0's port toward it for the incast
    // and the victim's packets wait behind the pause.
    let nodes = [
        ("h0", false),
        ("h1", false),
        ("h2", false),
        ("h3", false),
        ("h4", false),
        ("h5", false),
        ("s0", true),
        ("s1", true),
    ];
    let links = [
        (0, 6, G10),
        (1, 6, G10),
        (2, 6, G10),
        (3, 6, G10),
        (4, 7, G10),
        (5, 7, G10),
        (6, 7, 4 * G10),
    ];
    let mut flows: Vec<Value> = (0..3)
        .map(|i| json!({"src": i, "dst": 4, "size_bytes": 2_000_000, "start_ps": 0, "class": 0}))
        .collect();
    flows.push(json!({"src": 3, "dst": 5, "size_bytes": 2_000_000, "start_ps": 0, "class": 0}));
    let victim_fct = |pfc_spec: Value| {
        let (f, _) = run(&spec(
            &nodes,
            &links,
            json!(flows),
            Some(1_000_000),
            pfc_spec,
        ));
        f.end_ps[3].unwrap() - f.start_ps[3]
    };
    let alone = victim_fct(Value::Null);
    let with_pfc = victim_fct(pfc(20_000, 10_000, 20_000));
    // Without PFC: 2 MB at 10 Gbit/s is about 1.7 ms.
    let line_ps = ser_ps(wire_of(2_000_000), G10);
    assert!(
        alone < line_ps * 13 / 10,
        "victim alone {alone} ps vs line rate {line_ps} ps"
    );
    assert!(
        with_pfc > alone * 3 / 2,
        "PFC should slow the victim: {with_pfc} vs {alone}"
    );
}

#[test]
fn pause_time_and_frames_on_a_two_switch_line() {
    // h0 -10G- s0 -10G- s1 -5G- h1, 1 us per link, one 3 MB flow with a
    // window that never limits it. s1's port to h1 drains at 5 Gbit/s while
    // data arrives at 10: the ingress counter of link s0->s1 cycles between
    // XON and XOFF, and s0's port to s1 is paused for part of every cycle.
    let nodes = [("h0", false), ("s0", true), ("s1", true), ("h1", false)];
    let links = [(0, 1, G10), (1, 2, G10), (2, 3, G10 / 2)];
    let size = 3_000_000u64;
    let flows = json!([{"src": 0, "dst": 1, "size_bytes": size, "start_ps": 0, "class": 0}]);
    let mut s: Value = serde_json::from_str(&spec(
        &nodes,
        &links,
        flows,
        None,
        pfc(80_000, 20_000, 20_000),
    ))
    .unwrap();
    s["transport"]["init_cwnd_packets"] = json!(100_000);
    let (f, l) = run(&s.to_string());
    assert_eq!(l.drops.iter().sum::<u64>(), 0);
    let w = wire_of(size);
    let fct = f.end_ps[0].unwrap();
    // The 5 Gbit/s port is never idle once started: the run lasts W / 5G.
    let t_5g = ser_ps(w, G10 / 2);
    assert!(fct.abs_diff(t_5g) < t_5g / 50, "fct {fct} vs {t_5g}");
    // s0's port to s1 is sending (W at 10 Gbit/s), paused, or, once it has
    // sent everything, idle while s1 drains what it holds (at most XOFF plus
    // the overshoot below, at 5 Gbit/s): T - W/10G - tail <= paused <= T - W/10G.
    // Net +5 Gbit/s for 3364 ns after XOFF (derived below): 2102 bytes.
    let overshoot = (67 + 67 + 1000 + 1230 + 1000) * (G10 / 2) / 8 / 1_000_000_000;
    let s0_s1 = link(&l, "s0", "s1");
    let most = fct - ser_ps(w, G10);
    let least = most - ser_ps(80_000 + overshoot, G10 / 2);
    let paused = l.paused_ps[s0_s1];
    assert!(
        paused >= least - least / 100 && paused <= most + most / 100,
        "paused {paused} not in [{least}, {most}]"
    );
    // Frames: per cycle one XOFF and one XON. After XOFF, data still comes
    // for about 3.4 us (PAUSE waits <= one ACK, 67 ns; is serialized, 67 ns;
    // propagates 1 us; s0 finishes its frame in serialization, 1.23 us; the
    // frames on the wire take 1 us) at a net +5 Gbit/s: about 2.1 KB above
    // XOFF. Draining at 5 Gbit/s to XON takes (60 KB + 2.1 KB) / 5G and, by
    // the same delays after XON, refilling from 2.1 KB below XON back to
    // XOFF takes as long: cycle = 2 x 62.1 KB x 8 / 5 Gbit/s = 199 us.
    let cycle_ps = 2 * ser_ps(60_000 + overshoot, G10 / 2);
    let expect_frames = 2 * fct / cycle_ps;
    let frames = l.pause_frames_sent[link(&l, "s1", "s0")];
    assert!(
        frames.abs_diff(expect_frames) <= expect_frames / 10 + 1,
        "frames {frames} vs {expect_frames}"
    );
}

//! The flow backend's short-flow model (net/flow/tcp.rs), against closed
//! forms: a lone flow's slow-start rounds, and the standing queue a short
//! flow waits behind long flows (TCP Small Queues at a host NIC; DCTCP's
//! sawtooth at an ECN threshold).
use fabriclab_core::build_from_json;
use fabriclab_core::results::flow_columns;
use serde_json::{json, Value};

const RATE: f64 = 1e10;
const D: u64 = 10_000_000; // 10 us per link
const K_PACKETS: u64 = 65;

/// Picoseconds to serialize `bytes` at 10 Gbit/s.
fn ser(bytes: f64) -> f64 {
    bytes * 8.0 / RATE * 1e12
}

fn spec(hosts: usize, model: &str, cc: &str, flows: Value) -> Value {
    let mut nodes: Vec<Value> = (0..hosts)
        .map(|i| json!({"name": format!("h{i}"), "kind": "host"}))
        .collect();
    nodes.push(json!({"name": "s0", "kind": "switch"}));
    let links: Vec<Value> = (0..hosts)
        .map(|i| json!({"a": i, "b": hosts, "rate_bps": 10_000_000_000u64, "delay_ps": D}))
        .collect();
    json!({
        "seed": 1, "backend": "flow", "flow_model": model,
        "topology": {"nodes": nodes, "links": links},
        "queue": {"discipline": "fifo", "bands": 3, "priomap": [0,1,2,2,2,2,2,2], "limit_bytes": null,
                  "limit_packets": 1000, "ecn_threshold_bytes": null, "ecn_threshold_packets": K_PACKETS},
        "transport": {"cc": cc, "mss_bytes": 1460, "init_cwnd_packets": 10, "min_rto_ps": 1_000_000_000u64,
                      "initial_rto_ps": 1_000_000_000u64, "max_rto_ps": 1_000_000_000_000u64, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 131072},
        "routing": {"ecmp_hash_seed": 0},
        "flows": flows,
    })
}

fn fcts(spec: &Value) -> Vec<f64> {
    let mut sim = build_from_json(&spec.to_string()).unwrap();
    sim.run_until(u64::MAX).unwrap();
    let f = flow_columns(&sim);
    (0..f.end_ps.len())
        .map(|i| (f.end_ps[i].unwrap() - f.start_ps[i]) as f64)
        .collect()
}

fn lone(packets: u64, model: &str) -> f64 {
    let flows =
        json!([{"src": 0, "dst": 1, "size_bytes": packets * 1460, "start_ps": 0, "class": 0}]);
    fcts(&spec(2, model, "newreno", flows))[0]
}

/// Full segment 1538 wire bytes, ACK 84; a star path has two hops.
fn s() -> f64 {
    ser(1538.0)
}
fn rtt() -> f64 {
    // Data: NIC and switch serialization; ACK: the same back; four propagations.
    2.0 * s() + 2.0 * ser(84.0) + 4.0 * D as f64
}

#[test]
fn lone_flows_of_1_10_100_packets_take_their_slow_start_rounds_exactly() {
    let tol = 4.0; // picosecond rounding of each event time
                   // 1 and 10 packets fit the initial window (10): one round, line rate,
                   // the last packet stored and forwarded once more at the switch.
    let one = s() + s() + 2.0 * D as f64;
    assert!(
        (lone(1, "tcp") - one).abs() <= tol,
        "{} vs {one}",
        lone(1, "tcp")
    );
    let ten = 10.0 * s() + s() + 2.0 * D as f64;
    assert!(
        (lone(10, "tcp") - ten).abs() <= tol,
        "{} vs {ten}",
        lone(10, "tcp")
    );
    // 100 packets: round 0 sends 10 (12.3 us < RTT 42.6 us) and waits;
    // round 1 sends 20 (24.6 us < RTT) and waits; round 2's window of 40
    // takes 49.2 us > RTT: ACK-clocked from then on, the last 70 back to back.
    assert!(40.0 * s() > rtt() && 20.0 * s() < rtt());
    let hundred = 2.0 * rtt() + 70.0 * s() + s() + 2.0 * D as f64;
    assert!(
        (lone(100, "tcp") - hundred).abs() <= tol,
        "{} vs {hundred}",
        lone(100, "tcp")
    );
    // The pure fluid model: wire bytes at line rate plus propagation.
    let fluid = 100.0 * s() + 2.0 * D as f64;
    assert!((lone(100, "fluid") - fluid).abs() <= 2.0);
}

#[test]
fn a_short_flow_behind_a_long_flow_at_its_nic_waits_the_tsq_queue() {
    // h0 -> h2 10 MB, alone on its path: its NIC (unlimited, unmarked) is
    // its first bottleneck, where TCP Small Queues keep 131072 payload
    // bytes queued. At 2 ms (out of slow start) a 1-packet flow h0 -> h3
    // shares the NIC (half the rate) and waits that queue.
    let flows = json!([
        {"src": 0, "dst": 2, "size_bytes": 10_000_000u64, "start_ps": 0, "class": 0},
        {"src": 0, "dst": 3, "size_bytes": 1460, "start_ps": 2_000_000_000u64, "class": 0},
    ]);
    let got = fcts(&spec(4, "tcp", "dctcp", flows))[1];
    let tsq_wire = 131072.0 * 1538.0 / 1460.0;
    let expect = 2.0 * s() + s() + 2.0 * D as f64 + ser(tsq_wire);
    assert!((got - expect).abs() <= 4.0, "{got} vs {expect}");
}

#[test]
fn a_short_flow_into_a_dctcp_bottleneck_waits_the_sawtooth_mean() {
    // Two 10 MB flows h0, h1 -> h2 hold a standing queue at the switch's
    // port to h2 (ECN threshold K = 65 packets). DCTCP's sawtooth (Alizadeh
    // et al. 2010, eqs. 8-9) with N = 2: Qmax = K + N packets, amplitude
    // A = 1/2 sqrt(2 N (BDP + K)) packets; the mean is Qmax - A / 2.
    let flows = json!([
        {"src": 0, "dst": 2, "size_bytes": 10_000_000u64, "start_ps": 0, "class": 0},
        {"src": 1, "dst": 2, "size_bytes": 10_000_000u64, "start_ps": 0, "class": 0},
        {"src": 3, "dst": 2, "size_bytes": 1460, "start_ps": 2_000_000_000u64, "class": 0},
    ]);
    let got = fcts(&spec(4, "tcp", "dctcp", flows))[2];
    let pkt = 1538.0;
    let (n, k) = (2.0, K_PACKETS as f64 * pkt);
    let bdp = RATE * rtt() / 8e12;
    let qmax = k + n * pkt;
    let a = 0.5 * (2.0 * n * (bdp + k) * pkt).sqrt();
    let queue = qmax - a / 2.0;
    // Its packet drains at a third of the port (three flows), then the
    // switch hop, two propagations and the queue.
    let expect = 3.0 * s() + s() + 2.0 * D as f64 + ser(queue);
    assert!((got - expect).abs() <= 4.0, "{got} vs {expect}");
    // With NewReno the same port is loss-based: limit L = 1000 packets,
    // the flows halve together: a sawtooth from L down by (BDP + L) / 2.
    let flows_nr = spec(
        4,
        "tcp",
        "newreno",
        json!([
            {"src": 0, "dst": 2, "size_bytes": 10_000_000u64, "start_ps": 0, "class": 0},
            {"src": 1, "dst": 2, "size_bytes": 10_000_000u64, "start_ps": 0, "class": 0},
            {"src": 3, "dst": 2, "size_bytes": 1460, "start_ps": 2_000_000_000u64, "class": 0},
        ]),
    );
    let l = 1000.0 * pkt;
    let expect_nr = 3.0 * s() + s() + 2.0 * D as f64 + ser(l - (bdp + l) / 4.0);
    let got_nr = fcts(&flows_nr)[2];
    assert!((got_nr - expect_nr).abs() <= 4.0, "{got_nr} vs {expect_nr}");
}

#[test]
fn bytes_others_send_into_a_long_flows_tied_port_stay_queued_there() {
    // h0 -> h2 10 MB alone: bottlenecked at its NIC (TSQ queue) and, at the
    // same rate, at the switch's port to h2 (tied). A 20-packet flow
    // h1 -> h2 at 2 ms adds its 20 full segments to that port while the
    // long flow keeps it busy at line rate: they never drain (two servers
    // of one rate in tandem), below the port's DCTCP queue (K + 1 packets
    // at most), so a 1-packet flow h3 -> h2 at 4 ms waits exactly them.
    let flows = json!([
        {"src": 0, "dst": 2, "size_bytes": 10_000_000u64, "start_ps": 0, "class": 0},
        {"src": 1, "dst": 2, "size_bytes": 20 * 1460, "start_ps": 2_000_000_000u64, "class": 0},
        {"src": 3, "dst": 2, "size_bytes": 1460, "start_ps": 4_000_000_000u64, "class": 0},
    ]);
    let got = fcts(&spec(4, "tcp", "dctcp", flows))[2];
    // Its packet drains at half the port (two flows), then the switch hop,
    // two propagations and the 20 segments queued ahead of it.
    let expect = 2.0 * s() + s() + 2.0 * D as f64 + ser(20.0 * 1538.0);
    assert!((got - expect).abs() <= 4.0, "{got} vs {expect}");
}

/// The standing queue a port reports (its mean over the run, wire bytes).
fn mean_queue(spec: &Value, from: &str, to: &str) -> f64 {
    let mut sim = build_from_json(&spec.to_string()).unwrap();
    sim.run_until(u64::MAX).unwrap();
    let l = fabriclab_core::results::link_columns(&sim);
    (0..l.from.len())
        .find(|&i| l.from[i] == from && l.to[i] == to)
        .map(|i| l.mean_queue_bytes[i])
        .unwrap()
}

#[test]
fn the_time_averaged_queue_of_n_long_dctcp_flows_is_the_sawtooth_mean() {
    // N equal flows h0..h(N-1) -> hN, 100 MB each, started together: they
    // share the switch's port to hN (ECN at K = 65 packets) at C / N each
    // and end together, out of slow start but for their first round trips
    // (well under 0.5 % of the run). The port's mean queue is DCTCP's
    // sawtooth mean (Alizadeh et al. 2010, eqs. 8-9): Qmax = K + N packets,
    // A = 1/2 sqrt(2 N (BDP + K)) packets, mean Qmax - A / 2.
    for n in [2usize, 4] {
        let flows: Vec<Value> = (0..n)
            .map(|i| json!({"src": i, "dst": n, "size_bytes": 100_000_000u64, "start_ps": 0, "class": 0}))
            .collect();
        let got = mean_queue(
            &spec(n + 1, "tcp", "dctcp", json!(flows)),
            "s0",
            &format!("h{n}"),
        );
        let (pkt, nf) = (1538.0, n as f64);
        let k = K_PACKETS as f64 * pkt;
        let bdp = RATE * rtt() / 8e12;
        let a = 0.5 * (2.0 * nf * (bdp + k) * pkt).sqrt();
        let expect = k + nf * pkt - a / 2.0;
        assert!(
            (got / expect - 1.0).abs() < 0.005,
            "N = {n}: {got} vs {expect}"
        );
    }
}

#[test]
fn a_nic_queue_regrows_one_segment_per_round_trip_after_a_window_cut() {
    // h0 -> h2 (100 MB) and h1 -> h2 (12 MB) share the switch's DCTCP port
    // to h2 at 5 Gbit/s each: the first flow's window is set by marks there.
    // When the second drains, the first is alone at line rate, bottlenecked
    // at its NIC (no marks, no limit): in congestion avoidance its window,
    // and so its NIC queue, grows one segment per round trip, the round
    // trip growing with that queue: base q + q^2 / (2C) = pkt t
    // (tcp::regrown_queue_bytes), far below the TSQ queue 1 ms later.
    // A 1-packet flow h0 -> h3 at 21 ms shares the NIC and waits that queue.
    let t_c = 21_000_000_000u64;
    let flows = json!([
        {"src": 0, "dst": 2, "size_bytes": 100_000_000u64, "start_ps": 0, "class": 0},
        {"src": 1, "dst": 2, "size_bytes": 12_000_000u64, "start_ps": 0, "class": 0},
        {"src": 0, "dst": 3, "size_bytes": 1460, "start_ps": t_c, "class": 0},
    ]);
    let f = fcts(&spec(4, "tcp", "dctcp", flows));
    // The second flow's last bit left its NIC when its last packet, stored
    // and forwarded once more, had two propagations left (it waits no queue
    // but its own).
    let t_b = f[1] - 2.0 * D as f64 - s();
    // The probe drains at half the NIC; the queue is read then.
    let t = t_c as f64 + 2.0 * s() - t_b;
    assert!(t > 0.5e9 && t < 2e9, "the second flow ended at {t_b} ps");
    let (base, c, pkt) = (rtt(), RATE / 8e12, 1538.0);
    let q = c * ((base * base + 2.0 * pkt * t / c).sqrt() - base);
    assert!(q < 131072.0 * 1538.0 / 1460.0 / 2.0);
    let expect = 2.0 * s() + s() + 2.0 * D as f64 + ser(q);
    assert!((f[2] - expect).abs() <= 4.0, "{} vs {expect}", f[2]);
}

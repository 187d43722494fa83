use fabriclab_core::fabric::frame::wire_bytes;
use fabriclab_core::net::packet::header::{Packet, FLAG_CE, FLAG_ECT};
use fabriclab_core::net::packet::qdisc::{port_marking_seed, Enqueued, Qdisc};
use fabriclab_core::net::packet::{Discipline, QueueSpec};

fn spec(discipline: Discipline, limit_packets: Option<u64>, ecn_packets: Option<u64>) -> QueueSpec {
    QueueSpec {
        discipline,
        bands: 3,
        priomap: [0, 1, 2, 2, 2, 2, 2, 2],
        limit_bytes: None,
        limit_packets,
        ecn_threshold_bytes: None,
        ecn_threshold_packets: ecn_packets,
        ecn_kmin_bytes: None,
        ecn_kmax_bytes: None,
        ecn_pmax: None,
    }
}

fn pkt(seq: u64, class: u8, flags: u8) -> Packet {
    Packet::tcp(0, seq, 1460, wire_bytes(1460), class, flags)
}

#[test]
fn wire_size_of_full_segment_and_ack() {
    // 1460 + 20 IP + 20 TCP = 1500 MTU; + 14 + 4 Ethernet = 1518; + 8 + 12 = 1538.
    assert_eq!(wire_bytes(1460), 1538);
    // 40-byte ACK in a 58-byte frame padded to 64, + 20 = 84.
    assert_eq!(wire_bytes(0), 84);
}

#[test]
fn fifo_drops_tail_at_limit() {
    let mut q = Qdisc::new(&spec(Discipline::Fifo, Some(3), None));
    let r: Vec<_> = (0..5)
        .map(|i| q.enqueue(pkt(i, (i % 3) as u8, 0)))
        .collect();
    assert_eq!(
        r,
        vec![
            Enqueued::Queued,
            Enqueued::Queued,
            Enqueued::Queued,
            Enqueued::Dropped,
            Enqueued::Dropped
        ]
    );
    let order: Vec<u64> = std::iter::from_fn(|| q.dequeue()).map(|p| p.seq).collect();
    assert_eq!(order, vec![0, 1, 2]); // classes ignored by FIFO
}

#[test]
fn prio_serves_lowest_band_first_and_fifo_within_band() {
    let mut q = Qdisc::new(&spec(Discipline::Prio, None, None));
    for (seq, class) in [(0, 2), (1, 1), (2, 0), (3, 2), (4, 0), (5, 1)] {
        q.enqueue(pkt(seq, class, 0));
    }
    let order: Vec<u64> = std::iter::from_fn(|| q.dequeue()).map(|p| p.seq).collect();
    assert_eq!(order, vec![2, 4, 1, 5, 0, 3]);
}

#[test]
fn ecn_marks_only_above_threshold_and_only_ect() {
    let k = 4;
    let mut q = Qdisc::new(&spec(Discipline::Fifo, None, Some(k)));
    let mut marked = vec![];
    for i in 0..8 {
        let r = q.enqueue(pkt(i, 0, FLAG_ECT));
        marked.push(r == Enqueued::Marked);
    }
    // Packet i finds i packets queued; marked when i > K.
    assert_eq!(marked, (0..8).map(|i| i > k).collect::<Vec<_>>());
    // Non-ECT packets are never marked.
    assert_eq!(q.enqueue(pkt(99, 0, 0)), Enqueued::Queued);
    let ce: Vec<bool> = std::iter::from_fn(|| q.dequeue())
        .map(|p| p.flags & FLAG_CE != 0)
        .collect();
    assert_eq!(ce.iter().filter(|&&c| c).count(), 3);
}

const FULL: u64 = 1538; // wire bytes of a full segment (pkt)

/// A FIFO with RED's ramp between `kmin` and `kmax` full segments and no step.
fn ramp_queue(kmin: u64, kmax: u64, pmax: f64, seed: u64) -> Qdisc {
    let mut s = spec(Discipline::Fifo, None, None);
    s.ecn_kmin_bytes = Some(kmin * FULL);
    s.ecn_kmax_bytes = Some(kmax * FULL);
    s.ecn_pmax = Some(pmax);
    let mut q = Qdisc::new(&s);
    q.seed_marking(seed);
    q
}

/// Marks among `probes` ECN-capable packets each arriving to a queue of
/// exactly `n` full segments: `n` unmarkable packets fill it, then every
/// probe is enqueued and one packet dequeued, so the length stays `n`.
fn marks_at(q: &mut Qdisc, n: u64, probes: u64) -> u64 {
    for i in 0..n {
        assert_eq!(q.enqueue(pkt(i, 0, 0)), Enqueued::Queued);
    }
    let mut marks = 0;
    for i in 0..probes {
        if q.enqueue(pkt(n + i, 0, FLAG_ECT)) == Enqueued::Marked {
            marks += 1;
        }
        q.dequeue().expect("n + 1 queued");
    }
    marks
}

#[test]
fn red_ramp_never_marks_at_or_below_kmin_and_always_above_kmax() {
    // Kmin 10, Kmax 30 segments, Pmax 0.2.
    assert_eq!(marks_at(&mut ramp_queue(10, 30, 0.2, 1), 0, 1000), 0);
    assert_eq!(marks_at(&mut ramp_queue(10, 30, 0.2, 1), 10, 1000), 0);
    assert_eq!(marks_at(&mut ramp_queue(10, 30, 0.2, 1), 31, 1000), 1000);
}

#[test]
fn red_ramp_marks_with_the_linear_probability_between_kmin_and_kmax() {
    let probes = 20_000u64;
    // (queue in segments, hand probability pmax (n - kmin) / (kmax - kmin)).
    for (n, p) in [
        (15u64, 0.2 * 5.0 / 20.0),
        (25, 0.2 * 15.0 / 20.0),
        (30, 0.2),
    ] {
        let marks = marks_at(&mut ramp_queue(10, 30, 0.2, 7), n, probes) as f64;
        let mean = probes as f64 * p;
        // Binomial: within 5 standard deviations (two-sided miss < 1e-6).
        let bound = 5.0 * (probes as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (marks - mean).abs() <= bound,
            "n = {n}: {marks} marks, expected {mean} +- {bound}"
        );
    }
    // Pmax 1 at the midpoint: one half.
    let marks = marks_at(&mut ramp_queue(10, 30, 1.0, 3), 20, probes) as f64;
    assert!((marks - 10_000.0).abs() <= 5.0 * (probes as f64 * 0.25).sqrt());
}

#[test]
fn red_ramp_is_deterministic_per_seed() {
    let draw = |seed| {
        let mut q = ramp_queue(10, 30, 0.5, seed);
        for i in 0..20 {
            q.enqueue(pkt(i, 0, 0));
        }
        (0..500)
            .map(|i| {
                let m = q.enqueue(pkt(100 + i, 0, FLAG_ECT)) == Enqueued::Marked;
                q.dequeue();
                m
            })
            .collect::<Vec<bool>>()
    };
    assert_eq!(draw(5), draw(5));
    assert_ne!(draw(5), draw(6));
}

#[test]
fn paused_band_is_skipped_until_resumed() {
    let mut q = Qdisc::new(&spec(Discipline::Prio, None, None));
    q.enqueue(pkt(0, 0, 0));
    q.enqueue(pkt(1, 1, 0));
    q.set_paused_classes(1 << 0);
    assert_eq!(q.dequeue().map(|p| p.seq), Some(1));
    assert!(q.dequeue().is_none());
    q.set_paused_classes(0);
    assert_eq!(q.dequeue().map(|p| p.seq), Some(0));
}

fn conn_pkt(conn: u32, seq: u64, payload: u32) -> Packet {
    Packet::tcp(conn, seq, payload, wire_bytes(payload), 0, 0)
}

#[test]
fn fq_serves_flows_two_full_frames_per_turn() {
    // Flow 7 queues ten full frames before flow 9 queues two. With a quantum
    // of 2 x 1538 bytes each flow sends two frames per turn: 7 7 9 9, then
    // flow 7 alone. FIFO would send all of flow 7 first.
    let mut q = Qdisc::new(&spec(Discipline::Fq, None, None));
    for i in 0..10 {
        q.enqueue(conn_pkt(7, i, 1460));
    }
    for i in 0..2 {
        q.enqueue(conn_pkt(9, 100 + i, 1460));
    }
    let order: Vec<(u32, u64)> = std::iter::from_fn(|| q.dequeue())
        .map(|p| (p.conn, p.seq))
        .collect();
    let mut expect = vec![(7, 0), (7, 1), (9, 100), (9, 101)];
    expect.extend((2..10).map(|i| (7, i)));
    assert_eq!(order, expect);
}

#[test]
fn fq_shares_bytes_not_packets() {
    // Flow 1 sends full frames (1538 wire bytes), flow 2 ACK-sized frames
    // (84 wire bytes). Per turn a flow spends its positive credit: flow 1
    // two frames (3076), flow 2 37 frames (36 x 84 = 3024 < 3076, the 37th
    // takes it below zero); so the first 39 dequeues hold 2 full frames.
    let mut q = Qdisc::new(&spec(Discipline::Fq, None, None));
    for i in 0..20 {
        q.enqueue(conn_pkt(1, i, 1460));
    }
    for i in 0..100 {
        q.enqueue(conn_pkt(2, 1000 + i, 0));
    }
    let first: Vec<u32> = (0..39).map(|_| q.dequeue().unwrap().conn).collect();
    assert_eq!(first.iter().filter(|&&c| c == 1).count(), 2);
    assert_eq!(&first[..2], &[1, 1]);
    // Credit carries over: flow 2 overdrew by 84 - (3076 - 36 x 84) = 32
    // bytes, so on its next turn it sends 3076 - 32 = 3044 bytes: 37 frames again (36 x 84 = 3024 < 3044).
    let next: Vec<u32> = (0..39).map(|_| q.dequeue().unwrap().conn).collect();
    assert_eq!(next.iter().filter(|&&c| c == 1).count(), 2);
}

#[test]
fn fq_limits_and_marks_the_band_as_a_whole() {
    let mut q = Qdisc::new(&spec(Discipline::Fq, Some(3), Some(1)));
    let r: Vec<_> = (0..4)
        .map(|i| {
            q.enqueue(Packet::tcp(
                i as u32,
                i,
                1460,
                wire_bytes(1460),
                0,
                FLAG_ECT,
            ))
        })
        .collect();
    // Two packets already queued (more than the threshold of one) mark the third; the fourth is over the limit.
    assert_eq!(
        r,
        vec![
            Enqueued::Queued,
            Enqueued::Queued,
            Enqueued::Marked,
            Enqueued::Dropped
        ]
    );
    assert_eq!(q.bytes(), 3 * 1538);
}

/// The inverse of SplitMix64's odd step modulo 2^64 (Newton's iteration).
fn inverse_mod_2_64(a: u64) -> u64 {
    let mut x = a; // correct to 3 bits for odd a
    for _ in 0..5 {
        x = x.wrapping_mul(2u64.wrapping_sub(a.wrapping_mul(x)));
    }
    x
}

#[test]
fn ports_draw_from_streams_far_apart() {
    // Port p's stream is state_p + k * GAMMA for k = 0, 1, ...: two ports share
    // draws (shifted by d) exactly when state_a - state_b = d * GAMMA mod 2^64.
    // For seeds 0..8 and 256 ports, no pair may be within 10^9 draws of another.
    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
    let inv = inverse_mod_2_64(GAMMA);
    assert_eq!(GAMMA.wrapping_mul(inv), 1);
    for seed in 0..8u64 {
        let states: Vec<u64> = (0..256).map(|p| port_marking_seed(seed, p)).collect();
        for a in 0..states.len() {
            for b in 0..a {
                let d = states[a].wrapping_sub(states[b]).wrapping_mul(inv);
                let distance = d.min(d.wrapping_neg());
                assert!(
                    distance > 1_000_000_000,
                    "seed {seed}: ports {a} and {b} are {distance} draws apart"
                );
            }
        }
    }
}

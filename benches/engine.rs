//! Criterion benchmarks of the hot paths: the event queue, a queue/link
//! pipeline, and the max-min allocator. Run with `cargo bench -p fabriclab-core`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use fabriclab_core::event::EventQueue;
use fabriclab_core::net::flow::maxmin::{max_min_rates, FlowDemand};
use fabriclab_core::net::packet::header::Packet;
use fabriclab_core::net::packet::qdisc::Qdisc;
use fabriclab_core::net::packet::{Discipline, QueueSpec};

fn event_queue(c: &mut Criterion) {
    c.bench_function("event_queue/hold_10k_pop_push", |b| {
        let mut q: EventQueue<u32> = EventQueue::new();
        let mut x: u64 = 1;
        for i in 0..10_000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            q.schedule(x >> 40, i);
        }
        b.iter(|| {
            let (t, e) = q.pop().unwrap();
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            q.schedule(t + (x >> 44), black_box(e));
        })
    });
    // The packet backend's star scenario holds about 30 events; most are
    // scheduled an ACK's (67.2 ns) or a full frame's (1.2304 us)
    // serialization time ahead at 10 Gbit/s (benches/star8_dctcp.toml).
    c.bench_function("event_queue/hold_32_serialization_gaps", |b| {
        let gaps = [67_200u64, 1_230_400, 1_230_400, 10_000_000];
        let mut q: EventQueue<u32> = EventQueue::new();
        for i in 0..32u32 {
            q.schedule(gaps[i as usize % 4] + i as u64, i);
        }
        let mut i = 0usize;
        b.iter(|| {
            let (t, e) = q.pop().unwrap();
            i = i.wrapping_add(1);
            q.schedule(t + gaps[i % 4], black_box(e));
        })
    });
}

fn qdisc_path(c: &mut Criterion) {
    let spec = QueueSpec {
        discipline: Discipline::Prio,
        bands: 3,
        priomap: [0, 1, 2, 2, 2, 2, 2, 2],
        limit_bytes: None,
        limit_packets: Some(1000),
        ecn_threshold_bytes: Some(65 * 1538),
        ecn_threshold_packets: None,
        ecn_kmin_bytes: None,
        ecn_kmax_bytes: None,
        ecn_pmax: None,
    };
    c.bench_function("qdisc/prio_enqueue_dequeue", |b| {
        let mut q = Qdisc::new(&spec);
        for i in 0..100u64 {
            q.enqueue(Packet::tcp(0, i, 1460, 1538, (i % 3) as u8, 2));
        }
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            q.enqueue(Packet::tcp(0, i, 1460, 1538, (i % 3) as u8, 2));
            black_box(q.dequeue())
        })
    });
}

fn maxmin(c: &mut Criterion) {
    // 256 flows over a 64-port fabric, 4 ports each, two classes.
    let routes: Vec<Vec<u32>> = (0..256u32)
        .map(|i| (0..4).map(|h| (i * 7 + h * 13) % 64).collect())
        .collect();
    let caps = vec![10e9; 64];
    c.bench_function("maxmin/256_flows_64_ports", |b| {
        b.iter(|| {
            let d: Vec<FlowDemand> = routes
                .iter()
                .enumerate()
                .map(|(i, r)| FlowDemand::new((i % 2) as u8, r))
                .collect();
            black_box(max_min_rates(&d, &caps))
        })
    });
}

criterion_group!(benches, event_queue, qdisc_path, maxmin);
criterion_main!(benches);

use fabriclab_core::fabric::frame::wire_bytes;
use fabriclab_core::net::packet::header::{Packet, FLAG_CE, FLAG_ECT};
use fabriclab_core::net::packet::qdisc::{Enqueued, Qdisc};
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

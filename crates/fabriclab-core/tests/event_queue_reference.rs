//! The event queue against a reference: std's BinaryHeap keyed on
//! (time, sequence number), with a set of cancelled sequence numbers
//! skipped when they reach the top. Random operation sequences (seeded,
//! so reproducible) mix ties, times far apart, cancels, peeks, pops bounded
//! by a time (`pop_until`) and events scheduled before the last popped
//! time; every pop and peek must agree.

use fabriclab_core::event::{EventKey, EventQueue};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

#[derive(Default)]
struct Reference {
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    cancelled: HashSet<u64>,
    next_seq: u64,
}

impl Reference {
    fn schedule(&mut self, t: u64, ev: u32) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse((t, seq, ev)));
        seq
    }
    fn skip(&mut self) {
        while let Some(Reverse((_, seq, _))) = self.heap.peek() {
            if !self.cancelled.remove(seq) {
                break;
            }
            self.heap.pop();
        }
    }
    fn peek_time(&mut self) -> Option<u64> {
        self.skip();
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }
    fn pop(&mut self) -> Option<(u64, u32)> {
        self.skip();
        self.heap.pop().map(|Reverse((t, _, e))| (t, e))
    }
}

/// One random run of `ops` operations; `spread` bounds the gap of a new
/// event after the last popped time (small: many ties).
fn run(seed: u64, ops: usize, spread: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut q: EventQueue<u32> = EventQueue::new();
    let mut r = Reference::default();
    // Events scheduled and not cancelled: sequence number, key, payload.
    let mut pending: Vec<(u64, EventKey, u32)> = Vec::new();
    let mut popped: HashSet<u32> = HashSet::new();
    let mut now = 0u64;
    for step in 0..ops {
        match rng.gen_range(0..100) {
            0..=44 => {
                let t = match rng.gen_range(0..10) {
                    0 => now,                                   // a tie with the current time
                    1 => now + (1u64 << rng.gen_range(20..60)), // far ahead
                    2 if now > 0 => rng.gen_range(0..now),      // before the last pop
                    _ => now + rng.gen_range(0..=spread),
                };
                let ev = step as u32;
                let key = q.schedule(t, ev);
                let seq = r.schedule(t, ev);
                pending.push((seq, key, ev));
            }
            45..=54 if !pending.is_empty() => {
                let i = rng.gen_range(0..pending.len());
                let (seq, key, ev) = pending.swap_remove(i);
                // Only events still pending may be cancelled (the queue's contract).
                if !popped.contains(&ev) {
                    q.cancel(key);
                    r.cancelled.insert(seq);
                }
            }
            55..=64 => assert_eq!(
                q.peek_time(),
                r.peek_time(),
                "seed {seed} step {step}: peek"
            ),
            65..=79 => {
                // A pop bounded by a time: at the bound, below the next
                // event, beyond everything, or anywhere ahead.
                let limit = match rng.gen_range(0..4) {
                    0 => u64::MAX,
                    1 => now,
                    _ => now + rng.gen_range(0..=2 * spread),
                };
                let want = if r.peek_time().is_some_and(|t| t <= limit) {
                    r.pop()
                } else {
                    None
                };
                let got = q.pop_until(limit);
                assert_eq!(got, want, "seed {seed} step {step}: pop_until({limit})");
                if let Some((t, ev)) = got {
                    now = t;
                    popped.insert(ev);
                }
            }
            _ => {
                let got = q.pop();
                assert_eq!(got, r.pop(), "seed {seed} step {step}: pop");
                if let Some((t, ev)) = got {
                    now = t;
                    popped.insert(ev);
                }
            }
        }
    }
    // Drain: the same events in the same order to the end.
    loop {
        let got = q.pop();
        assert_eq!(got, r.pop(), "seed {seed}: drain");
        if got.is_none() {
            break;
        }
    }
    assert!(q.is_empty());
}

#[test]
fn random_runs_with_many_ties_agree_with_the_reference() {
    for seed in 0..200 {
        run(seed, 2_000, 4);
    }
}

#[test]
fn random_runs_with_spread_times_agree_with_the_reference() {
    for seed in 1_000..1_100 {
        run(seed, 5_000, 1 << 24);
    }
}

#[test]
fn equal_times_scheduled_across_refills_leave_in_order() {
    // Events at one time scheduled before and after the queue served
    // earlier times (and so before and after their bucket was spread):
    // still first in, first out.
    let mut q = EventQueue::new();
    q.schedule(1_000, 0u32);
    q.schedule(5, 1);
    q.schedule(1_000, 2);
    assert_eq!(q.pop(), Some((5, 1)));
    q.schedule(1_000, 3);
    q.schedule(6, 4);
    assert_eq!(q.pop(), Some((6, 4)));
    q.schedule(1_000, 5);
    let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
    assert_eq!(rest, vec![(1_000, 0), (1_000, 2), (1_000, 3), (1_000, 5)]);
}

#[test]
fn an_event_before_the_peeked_time_comes_first() {
    // A caller peeks (the queue moves on to time 100), then schedules at 50.
    let mut q = EventQueue::new();
    q.schedule(100, 'b');
    assert_eq!(q.peek_time(), Some(100));
    q.schedule(50, 'a');
    q.schedule(50, 'c');
    assert_eq!(q.pop(), Some((50, 'a')));
    assert_eq!(q.pop(), Some((50, 'c')));
    assert_eq!(q.pop(), Some((100, 'b')));
    assert_eq!(q.pop(), None);
}

#[test]
fn len_counts_pending_events() {
    let mut q = EventQueue::new();
    let a = q.schedule(3, ());
    q.schedule(1 << 40, ());
    q.schedule(3, ());
    assert_eq!(q.len(), 3);
    q.cancel(a);
    assert_eq!(q.pop(), Some((3, ())));
    assert_eq!(q.len(), 1);
}

#[test]
fn more_events_than_the_near_array_holds_leave_in_time_then_fifo_order() {
    // 150 events each earlier than all before (each lands at the front),
    // 150 each later than all before (past the walk limit and the array's
    // capacity: they go to the heap, and the full array hands entries over),
    // then 50 ties at a time in between, scheduled between pops.
    let mut q = EventQueue::new();
    for i in 0..150u64 {
        q.schedule(1_000 - i, i);
    }
    for i in 0..150u64 {
        q.schedule(2_000 + i, 150 + i);
    }
    let mut got = Vec::new();
    for i in 0..50u64 {
        q.schedule(1_500, 300 + i);
        got.push(q.pop().expect("pending"));
    }
    got.extend(std::iter::from_fn(|| q.pop()));
    // By time, then by scheduling order: 851..=1000 (scheduled last to
    // first), the ties at 1 500 in their order, then 2 000..2 149.
    let mut want: Vec<(u64, u64)> = (0..150).rev().map(|i| (1_000 - i, i)).collect();
    want.extend((0..50).map(|i| (1_500, 300 + i)));
    want.extend((0..150).map(|i| (2_000 + i, 150 + i)));
    assert_eq!(got, want);
}

#[test]
fn random_runs_at_the_wheel_scales_agree_with_the_reference() {
    // Gaps of up to one bucket (2^16 ps), a quarter of the wheel's reach,
    // the whole reach (2^22 ps = 64 buckets) and twice it: events land on
    // the wheel, beyond it and in full buckets, and the cursor wraps around.
    for (i, spread) in [1u64 << 16, 1 << 20, 1 << 22, 1 << 23]
        .into_iter()
        .enumerate()
    {
        for seed in 0..50 {
            run(2_000 + 100 * i as u64 + seed, 3_000, spread);
        }
    }
}

#[test]
fn a_full_bucket_overflows_in_order() {
    // Seven events within one 65.5 ns bucket (four fit), scheduled out of
    // order and with ties: they leave by time, ties first in, first out.
    let mut q = EventQueue::new();
    for (t, ev) in [
        (40, 'a'),
        (10, 'b'),
        (40, 'c'),
        (30, 'd'),
        (10, 'e'),
        (20, 'f'),
        (5, 'g'),
    ] {
        q.schedule(t, ev);
    }
    let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
    let want = [
        (5, 'g'),
        (10, 'b'),
        (10, 'e'),
        (20, 'f'),
        (30, 'd'),
        (40, 'a'),
        (40, 'c'),
    ];
    assert_eq!(got, want);
}

#[test]
fn events_at_the_edge_of_the_wheel_and_before_its_cursor_leave_in_order() {
    const B: u64 = 1 << 16; // one bucket
    let mut q = EventQueue::new();
    q.schedule(10 * B + 5, 0u32);
    assert_eq!(q.pop(), Some((10 * B + 5, 0)));
    // The cursor is at bucket 10: bucket 73 is the last in reach, 74 the
    // first beyond it; bucket 9 and an earlier time in bucket 10 are behind
    // the last pop.
    q.schedule(74 * B, 1);
    q.schedule(73 * B + B - 1, 2);
    q.schedule(74 * B, 3);
    q.schedule(9 * B + 7, 4);
    q.schedule(10 * B + 1, 5);
    q.schedule(73 * B + B - 1, 6);
    q.schedule(3, 7);
    let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
    let want = [
        (3, 7),
        (9 * B + 7, 4),
        (10 * B + 1, 5),
        (73 * B + B - 1, 2),
        (73 * B + B - 1, 6),
        (74 * B, 1),
        (74 * B, 3),
    ];
    assert_eq!(got, want);
}

//! Reserved places in the event queue (issue 13): an event scheduled later
//! in the place it reserved leaves exactly where it would have had it been
//! scheduled at reservation, and `passed` says whether the queue has gone
//! beyond a place. The reference is std's BinaryHeap on (time, sequence)
//! where every realised event is pushed at its reservation and a place never
//! used only takes a sequence number.

use fabriclab_core::event::{EventKey, EventQueue, Position};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[test]
fn a_reserved_event_leaves_between_its_neighbours_at_equal_times() {
    let mut q = EventQueue::new();
    q.schedule(100, 'a');
    let k = q.reserve();
    q.schedule(100, 'c');
    q.schedule(50, 'x');
    assert_eq!(q.pop(), Some((50, 'x')));
    assert!(!q.passed(Position::of(100, k)));
    q.schedule_reserved(100, k, 'b');
    assert_eq!(q.pop(), Some((100, 'a')));
    assert!(!q.passed(Position::of(100, k)));
    assert_eq!(q.pop(), Some((100, 'b')));
    assert!(q.passed(Position::of(100, k)));
    assert_eq!(q.pop(), Some((100, 'c')));
    assert_eq!(q.pop(), None);
}

#[test]
fn nothing_is_passed_before_the_first_pop() {
    let mut q = EventQueue::new();
    let k = q.reserve();
    assert!(!q.passed(Position::of(0, k)));
    q.schedule_reserved(0, k, ());
    assert_eq!(q.pop(), Some((0, ())));
    assert!(q.passed(Position::of(0, k)));
}

#[test]
fn an_unused_place_is_passed_once_a_later_event_left() {
    let mut q = EventQueue::new();
    q.schedule(10, 1u8);
    let k = q.reserve(); // never scheduled
    q.schedule(10, 2);
    q.schedule(11, 3);
    assert_eq!(q.pop(), Some((10, 1)));
    assert!(!q.passed(Position::of(10, k)));
    assert!(q.passed(Position::of(9, k)), "an earlier time is passed");
    assert_eq!(q.pop(), Some((10, 2)));
    assert!(q.passed(Position::of(10, k)));
    assert!(!q.passed(Position::of(11, k)));
    // "After time 10" lies beyond every event at 10, at or before those at 11.
    assert!(Position::of(10, k) < Position::after(10));
    assert!(Position::after(10) <= Position::of(11, EventKey::default()));
}

/// Random runs: events scheduled at once, or reserved and scheduled later
/// (at the latest when the queue reaches their time), or reserved and never
/// scheduled. Every pop agrees with the reference.
fn run(seed: u64, ops: usize, spread: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut q: EventQueue<u32> = EventQueue::new();
    let mut r: BinaryHeap<Reverse<(u64, u64, u32)>> = BinaryHeap::new();
    let mut seq = 0u64;
    // Reserved places still to be scheduled (time, key, payload), and unused ones.
    let mut waiting: Vec<(u64, EventKey, u32)> = Vec::new();
    let mut unused: Vec<(u64, u64, EventKey)> = Vec::new();
    let mut now = 0u64;
    for step in 0..ops {
        let t = now + rng.gen_range(0..=spread);
        let ev = step as u32;
        match rng.gen_range(0..100) {
            0..=29 => {
                q.schedule(t, ev);
                r.push(Reverse((t, seq, ev)));
                seq += 1;
            }
            30..=44 => {
                let k = q.reserve();
                r.push(Reverse((t, seq, ev)));
                seq += 1;
                waiting.push((t, k, ev));
            }
            45..=54 => {
                unused.push((t, seq, q.reserve()));
                seq += 1;
            }
            55..=64 if !waiting.is_empty() => {
                let (t, k, ev) = waiting.swap_remove(rng.gen_range(0..waiting.len()));
                q.schedule_reserved(t, k, ev);
            }
            _ => {
                // Places the next pop could reach are scheduled first.
                let head = q.peek_time().unwrap_or(u64::MAX);
                let mut i = 0;
                while i < waiting.len() {
                    let (t, k, ev) = waiting[i];
                    assert!(!q.passed(Position::of(t, k)), "seed {seed} step {step}");
                    if t <= head {
                        q.schedule_reserved(t, k, ev);
                        waiting.swap_remove(i);
                    } else {
                        i += 1;
                    }
                }
                let got = q.pop();
                let want = r.pop().map(|Reverse((t, s, e))| (t, s, e));
                assert_eq!(got, want.map(|(t, _, e)| (t, e)), "seed {seed} step {step}");
                if let Some((t, s, _)) = want {
                    now = t;
                    for &(ut, us, uk) in &unused {
                        let before = (ut, us) < (t, s);
                        assert_eq!(
                            q.passed(Position::of(ut, uk)),
                            before,
                            "seed {seed} step {step}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn random_reservations_agree_with_the_reference() {
    for seed in 0..150 {
        run(seed, 3_000, 3);
    }
    for seed in 500..550 {
        run(seed, 3_000, 1 << 20);
    }
}

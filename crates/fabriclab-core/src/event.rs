//! The event queue: a binary min-heap keyed by `(time_ps, sequence)`,
//! packed in one u128 so that each comparison of the sift loops is one
//! integer comparison (issue 13; a radix heap was slower on the packet
//! backend's small queues, see docs/performance.md).
//!
//! Events at equal times leave in the order they were scheduled (first in,
//! first out), which makes every run reproducible. Scheduling returns an
//! [`EventKey`] that can cancel the event later; cancelled entries are
//! skipped lazily when they reach the top of the heap (as in nexosim).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};

/// Identifies one scheduled event so that it can be cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventKey(u64);

struct Entry<E> {
    /// `time_ps << 64 | sequence`: one integer comparison orders by time,
    /// then by scheduling order.
    key: u128,
    event: E,
}

impl<E> Entry<E> {
    #[inline]
    fn time_ps(&self) -> u64 {
        (self.key >> 64) as u64
    }
    #[inline]
    fn seq(&self) -> u64 {
        self.key as u64
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
    // What the heap's sift loops call: one u128 comparison each.
    #[inline]
    fn lt(&self, other: &Self) -> bool {
        other.key < self.key
    }
    #[inline]
    fn le(&self, other: &Self) -> bool {
        other.key <= self.key
    }
}
impl<E> Ord for Entry<E> {
    // Reversed so that std's max-heap pops the earliest (time, seq) first.
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

/// A priority queue of timed events with FIFO tie-break and cancel keys.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
    cancelled: HashSet<u64>,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(1024),
            next_seq: 0,
            cancelled: HashSet::new(),
        }
    }

    /// Schedules `event` at `time_ps`; returns a key that can cancel it.
    pub fn schedule(&mut self, time_ps: u64, event: E) -> EventKey {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Entry {
            key: (time_ps as u128) << 64 | seq as u128,
            event,
        });
        EventKey(seq)
    }

    /// Cancels a pending event. The caller must only cancel events that are
    /// still pending (components track their one pending event); a key of an
    /// event that already fired would leave a tombstone that is never reused.
    pub fn cancel(&mut self, key: EventKey) {
        if key.0 < self.next_seq {
            self.cancelled.insert(key.0);
        }
    }

    fn skip_cancelled(&mut self) {
        if self.cancelled.is_empty() {
            return;
        }
        while let Some(top) = self.heap.peek() {
            if self.cancelled.remove(&top.seq()) {
                self.heap.pop();
            } else {
                break;
            }
        }
    }

    /// Time of the earliest pending event.
    pub fn peek_time(&mut self) -> Option<u64> {
        self.skip_cancelled();
        self.heap.peek().map(|e| e.time_ps())
    }

    /// Removes and returns the earliest pending event.
    pub fn pop(&mut self) -> Option<(u64, E)> {
        self.skip_cancelled();
        self.heap.pop().map(|e| (e.time_ps(), e.event))
    }

    /// Number of pending events, cancelled ones not yet skipped included.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&mut self) -> bool {
        self.peek_time().is_none()
    }
}

//! The event queue: a binary min-heap keyed by `(time_ps, sequence)`.
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
    time_ps: u64,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.time_ps == other.time_ps && self.seq == other.seq
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed so that std's max-heap pops the earliest (time, seq) first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time_ps
            .cmp(&self.time_ps)
            .then_with(|| other.seq.cmp(&self.seq))
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
            time_ps,
            seq,
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
            if self.cancelled.remove(&top.seq) {
                self.heap.pop();
            } else {
                break;
            }
        }
    }

    /// Time of the earliest pending event.
    pub fn peek_time(&mut self) -> Option<u64> {
        self.skip_cancelled();
        self.heap.peek().map(|e| e.time_ps)
    }

    /// Removes and returns the earliest pending event.
    pub fn pop(&mut self) -> Option<(u64, E)> {
        self.skip_cancelled();
        self.heap.pop().map(|e| (e.time_ps, e.event))
    }

    /// Number of pending events, cancelled ones not yet skipped included.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&mut self) -> bool {
        self.peek_time().is_none()
    }
}

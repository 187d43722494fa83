//! The event queue: a binary min-heap keyed by `(time_ps, sequence)`,
//! packed in one u128 so that each comparison of the sift loops is one
//! integer comparison (issue 13; a radix heap was slower on the packet
//! backend's small queues, see docs/performance.md).
//!
//! Events at equal times leave in the order they were scheduled (first in,
//! first out), which makes every run reproducible. Scheduling returns an
//! [`EventKey`] that can cancel the event later; cancelled entries are
//! skipped lazily when they reach the top of the heap (as in nexosim).
//!
//! A component may also [`reserve`](EventQueue::reserve) a place in that
//! order without scheduling anything: an event it expects not to need
//! (issue 13: a port's end of serialization with nothing queued behind).
//! If it turns out to be needed, [`schedule_reserved`](EventQueue::schedule_reserved)
//! puts it in the heap with the key it would have had, so the order of
//! equal-time events is the same as if it had been scheduled all along;
//! [`passed`](EventQueue::passed) tells whether the queue has already gone
//! beyond that place.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};

/// Identifies one scheduled event so that it can be cancelled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
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

/// A place in the order in which events leave the queue: `time_ps << 64 |
/// sequence`. Every popped event has one; a place between two events is
/// "after every event at or before a time" ([`Position::after`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position(u128);

impl Position {
    /// The place of an event scheduled at `time_ps` with `key`.
    pub fn of(time_ps: u64, key: EventKey) -> Position {
        Position((time_ps as u128) << 64 | key.0 as u128)
    }
    /// Just after every event at `time_ps` or earlier.
    pub fn after(time_ps: u64) -> Position {
        Position(((time_ps as u128) + 1) << 64)
    }
}

/// A priority queue of timed events with FIFO tie-break and cancel keys.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
    cancelled: HashSet<u64>,
    /// The place of the last popped event (none before the first).
    current: Option<u128>,
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
            current: None,
        }
    }

    /// Takes the next sequence number without scheduling anything: the key
    /// an event scheduled now would get.
    #[inline]
    pub fn reserve(&mut self) -> EventKey {
        let seq = self.next_seq;
        self.next_seq += 1;
        EventKey(seq)
    }

    /// Schedules `event` at `time_ps` with a key from [`reserve`](Self::reserve),
    /// in the place it reserved; that place must not be passed yet.
    pub fn schedule_reserved(&mut self, time_ps: u64, key: EventKey, event: E) {
        let k = (time_ps as u128) << 64 | key.0 as u128;
        debug_assert!(
            self.current.map_or(true, |c| k > c),
            "scheduling in a place already passed"
        );
        self.heap.push(Entry { key: k, event });
    }

    /// Whether the queue has popped an event at or after `at`: an event in
    /// that place would have happened by now.
    #[inline]
    pub fn passed(&self, at: Position) -> bool {
        self.current.is_some_and(|c| at.0 <= c)
    }

    /// The place of the last popped event (before every place if none was).
    pub fn position(&self) -> Position {
        Position(self.current.unwrap_or(0))
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
        let e = self.heap.pop()?;
        self.current = Some(e.key);
        Some((e.time_ps(), e.event))
    }

    /// Number of pending events, cancelled ones not yet skipped included.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&mut self) -> bool {
        self.peek_time().is_none()
    }
}

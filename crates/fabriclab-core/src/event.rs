//! The event queue, keyed by `(time_ps, sequence)` compared as one u128 so
//! that ordering two events is one integer comparison (issue 13).
//!
//! The earliest events are kept in a short sorted array (`near`, latest
//! first): a pop takes its last entry, without the binary heap's five-level
//! sift-down, and a new event is placed by walking back from the earliest,
//! moving each entry it passes up by one place. On the packet backend's
//! queue (about 30 pending events) a new event passes 0-4 of them (an ACK's
//! or a frame's serialization ahead, 28 % of them) or 10-25 (a wire
//! arrival). Events that would pass more than `NEAR_SCAN`, or that are later
//! than everything in a full array, go to a binary heap (`heap`); a full
//! array hands its latest entry to the heap. A pop takes the smaller of the
//! two fronts, so the order is exactly that of one heap (docs/performance.md,
//! "Third pass"; a radix heap was slower on these small queues).
//!
//! Events at equal times leave in the order they were scheduled (first in,
//! first out), which makes every run reproducible. Scheduling returns an
//! [`EventKey`] that can cancel the event later; cancelled entries are
//! skipped lazily when they reach the front of the queue (as in nexosim).
//!
//! A component may also [`reserve`](EventQueue::reserve) a place in that
//! order without scheduling anything: an event it expects not to need
//! (issue 13: a port's end of serialization with nothing queued behind).
//! If it turns out to be needed, [`schedule_reserved`](EventQueue::schedule_reserved)
//! puts it in the queue with the key it would have had, so the order of
//! equal-time events is the same as if it had been scheduled all along;
//! [`passed`](EventQueue::passed) tells whether the queue has already gone
//! beyond that place.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};

/// Identifies one scheduled event so that it can be cancelled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EventKey(u64);

/// One pending event: 24 bytes for an 8-byte payload (the engine's packed
/// events), where a u128 key made it 32 (u128 is 16-byte aligned). The two
/// halves of the key are compared as one u128, which the compiler does
/// with one compare and one subtract-with-borrow.
#[derive(Clone, Copy)]
struct Entry<E> {
    time_ps: u64,
    seq: u64,
    event: E,
}

impl<E> Entry<E> {
    /// `time_ps << 64 | sequence`: one integer comparison orders by time,
    /// then by scheduling order.
    #[inline(always)]
    fn key(&self) -> u128 {
        (self.time_ps as u128) << 64 | self.seq as u128
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
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
        other.key() < self.key()
    }
    #[inline]
    fn le(&self, other: &Self) -> bool {
        other.key() <= self.key()
    }
}
impl<E> Ord for Entry<E> {
    // Reversed so that std's max-heap pops the earliest (time, seq) first.
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
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

/// Most events kept in the sorted array; the rest go to the heap.
const NEAR_CAP: usize = 64;
/// How many earlier events a new one may walk past into the array.
const NEAR_SCAN: usize = 32;

/// A priority queue of timed events with FIFO tie-break and cancel keys.
pub struct EventQueue<E> {
    /// Pending events sorted by key, latest first (the earliest is last).
    near: Vec<Entry<E>>,
    /// Every other pending event.
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
    cancelled: HashSet<u64>,
    /// The place of the last popped event (none before the first).
    current: Option<u128>,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            near: Vec::with_capacity(NEAR_CAP),
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
        debug_assert!(
            self.current
                .is_none_or(|c| ((time_ps as u128) << 64 | key.0 as u128) > c),
            "scheduling in a place already passed"
        );
        self.push(time_ps, key.0, event);
    }

    /// Puts an entry in the array if it lands within `NEAR_SCAN` places of
    /// its end, else in the heap. The entry's parts come in registers: an
    /// entry built on the caller's stack and read back whole stalled on
    /// store forwarding (a third of this function's time in a profile).
    #[inline]
    fn push(&mut self, time_ps: u64, seq: u64, event: E) {
        let e = Entry {
            time_ps,
            seq,
            event,
        };
        let key = e.key();
        let n = self.near.len();
        if n > NEAR_SCAN && self.near[n - 1 - NEAR_SCAN].key() < key {
            // More than NEAR_SCAN earlier events: far in the order.
            self.heap.push(e);
            return;
        }
        if n == NEAR_CAP {
            if self.near[0].key() < key {
                // Later than everything in a full array.
                self.heap.push(e);
                return;
            }
            // Full: its latest entry moves to the heap.
            let latest = self.near.remove(0);
            self.heap.push(latest);
        }
        // Walk back from the earliest, moving each earlier entry up by one
        // place, and write the new entry in the place left (by hand:
        // Vec::insert's memmove call took 8 % of a profile at these sizes).
        self.near.push(e);
        let near = self.near.as_mut_slice();
        let mut i = near.len() - 1;
        while i > 0 {
            let prev = near[i - 1];
            if prev.key() >= key {
                break;
            }
            near[i] = prev;
            i -= 1;
        }
        near[i] = e;
    }

    /// The key of the earliest pending entry, cancelled ones included.
    #[inline]
    fn front_key(&self) -> Option<u128> {
        match (self.near.last(), self.heap.peek()) {
            (Some(a), Some(b)) => Some(a.key().min(b.key())),
            (Some(a), None) => Some(a.key()),
            (None, b) => b.map(|b| b.key()),
        }
    }

    /// Removes the earliest pending entry, cancelled ones included.
    #[inline]
    fn pop_front(&mut self) -> Option<Entry<E>> {
        match (self.near.last(), self.heap.peek()) {
            (Some(a), Some(b)) if b.key() < a.key() => self.heap.pop(),
            (Some(_), _) => self.near.pop(),
            (None, _) => self.heap.pop(),
        }
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
        self.push(time_ps, seq, event);
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
        while let Some(key) = self.front_key() {
            if self.cancelled.remove(&(key as u64)) {
                self.pop_front();
            } else {
                break;
            }
        }
    }

    /// Time of the earliest pending event.
    pub fn peek_time(&mut self) -> Option<u64> {
        self.skip_cancelled();
        self.front_key().map(|k| (k >> 64) as u64)
    }

    /// Removes and returns the earliest pending event.
    pub fn pop(&mut self) -> Option<(u64, E)> {
        self.skip_cancelled();
        let e = self.pop_front()?;
        self.current = Some(e.key());
        Some((e.time_ps, e.event))
    }

    /// Removes and returns the earliest pending event if it is at or before
    /// `until_ps` (one look at the front instead of a peek and a pop). The
    /// array's entry is read field by field: an `Option<Entry>` merged from
    /// the array's and the heap's pops went through the stack (a store
    /// forwarding stall on every event).
    #[inline]
    pub fn pop_until(&mut self, until_ps: u64) -> Option<(u64, E)> {
        self.skip_cancelled();
        let near_front = match (self.near.last(), self.heap.peek()) {
            (Some(a), Some(b)) => a.key() < b.key(),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        let (time_ps, seq, event) = if near_front {
            let a = self.near.last().expect("checked");
            (a.time_ps, a.seq, a.event)
        } else {
            let b = self.heap.peek().expect("checked");
            (b.time_ps, b.seq, b.event)
        };
        if time_ps > until_ps {
            return None;
        }
        if near_front {
            self.near.pop();
        } else {
            self.heap.pop();
        }
        self.current = Some((time_ps as u128) << 64 | seq as u128);
        Some((time_ps, event))
    }

    /// Number of pending events, cancelled ones not yet skipped included.
    pub fn len(&self) -> usize {
        self.near.len() + self.heap.len()
    }

    pub fn is_empty(&mut self) -> bool {
        self.peek_time().is_none()
    }
}

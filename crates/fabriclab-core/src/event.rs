//! The event queue, keyed by `(time_ps, sequence)` compared as one u128 so
//! that ordering two events is one integer comparison (issue 13).
//!
//! Near events sit on a timing wheel (as in a calendar queue, or nexosim's
//! and the Linux kernel's timer wheels): 64 buckets of 65.5 ns each, so the
//! wheel reaches 4.19 us past the cursor's bucket (the latest bucket of any
//! entry popped so far, cancelled ones included); a u64
//! marks the non-empty buckets. A bucket is one cache line of four 16-byte
//! slots in no order; a slot's key packs the time's low 16 bits above the
//! sequence number, the bucket giving the rest of the time. A new event
//! takes the bucket's first free slot (it finds 0.48 entries there on
//! average on the packet backend's queue, where it passed 12.7 in the
//! sorted array that came before: docs/performance.md, "Fifth pass"). A pop
//! takes the first non-empty bucket from the cursor (a rotate and a
//! trailing-zero count) and its entry of the smallest key, found without a
//! branch on the keys; the bucket's last entry moves into its slot (sorting
//! on insertion, as the fifth pass did, cost three times the instructions:
//! "Sixth pass"). Events beyond the wheel's reach,
//! before the cursor's bucket, or in a full bucket go to a binary heap; a
//! pop takes the earlier of the two fronts, so events leave in exactly the
//! order of one heap on `(time_ps, sequence)`.
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

/// A wheel bucket spans `2^WHEEL_SHIFT` ps (65.5 ns).
const WHEEL_SHIFT: u32 = 16;
/// Buckets on the wheel: it covers 64 x 65.5 ns = 4.19 us from the
/// cursor's bucket (one u64 marks the non-empty ones).
const BUCKETS: usize = 64;
/// Entries a bucket holds; more go to the heap. Four 16-byte slots fill
/// one cache line when the event is 8 bytes, as the engine's `PackedEv` is
/// (a larger event makes the bucket span more lines). `wheel_entry`'s
/// comparisons are written for four.
const SLOTS: usize = 4;
/// A slot's key holds the time's low `WHEEL_SHIFT` bits above a sequence
/// number below 2^48 - 1 (the bucket gives the rest of the time); an event
/// with a larger sequence number goes to the heap.
const SEQ_BITS: u32 = 64 - WHEEL_SHIFT;
/// The key of a free slot: larger than any entry's, whose sequence number
/// is below `2^SEQ_BITS - 1`.
const FREE: u64 = u64::MAX;

/// One wheel bucket: its entries in its first `lens[b]` slots, in no order.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Bucket<E> {
    /// `(time_ps % 2^WHEEL_SHIFT) << SEQ_BITS | seq` and the event; a
    /// free slot's key is [`FREE`].
    slots: [(u64, E); SLOTS],
}

/// A priority queue of timed events with FIFO tie-break and cancel keys.
pub struct EventQueue<E> {
    /// Near events by bucket `(time_ps >> WHEEL_SHIFT) % BUCKETS`, in the
    /// first `lens[b]` slots of bucket `b`, in no order.
    wheel: [Bucket<E>; BUCKETS],
    lens: [u8; BUCKETS],
    /// Bit `b` set when bucket `b` holds an entry.
    bits: u64,
    /// Absolute bucket number (`time_ps >> WHEEL_SHIFT`): the latest bucket
    /// of any entry popped so far, cancelled ones included; it never moves
    /// back when a past event comes off the heap. Every entry on the wheel has its bucket number in
    /// `cursor..cursor + BUCKETS`, so scanning the buckets from `cursor`
    /// meets them in time order.
    cursor: u64,
    /// Every other pending event: far ahead, before the cursor's bucket, or
    /// in a full bucket.
    heap: BinaryHeap<Entry<E>>,
    /// The time of the heap's earliest entry (`u64::MAX` if none): a wheel
    /// entry earlier than it comes first without a look into the heap.
    heap_front_ps: u64,
    next_seq: u64,
    cancelled: HashSet<u64>,
    /// The place of the last popped event (none before the first).
    current: Option<u128>,
}

impl<E: Copy + Default> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

// `is_empty` takes `&mut self`: it skips the cancelled entries at the front.
#[allow(clippy::len_without_is_empty)]
impl<E: Copy + Default> EventQueue<E> {
    pub fn new() -> Self {
        let empty = Bucket {
            slots: [(FREE, E::default()); SLOTS],
        };
        EventQueue {
            wheel: [empty; BUCKETS],
            lens: [0; BUCKETS],
            bits: 0,
            cursor: 0,
            heap: BinaryHeap::with_capacity(1024),
            heap_front_ps: u64::MAX,
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

    /// Puts an entry in the first free slot of its wheel bucket, or in the
    /// heap if its bucket is out of the wheel's reach or full. The entry's parts
    /// come in registers: an entry built on the caller's stack and read back
    /// whole stalled on store forwarding (fourth pass). Inlined into its
    /// callers: as a call, saving and restoring registers was a fifth of
    /// its instructions (sixth pass).
    #[inline(always)]
    fn push(&mut self, time_ps: u64, seq: u64, event: E) {
        let e = Entry {
            time_ps,
            seq,
            event,
        };
        let bucket = time_ps >> WHEEL_SHIFT;
        if bucket.wrapping_sub(self.cursor) < BUCKETS as u64 && seq < (1 << SEQ_BITS) - 1 {
            let b = bucket as usize % BUCKETS;
            let n = self.lens[b] as usize;
            if n < SLOTS {
                self.wheel[b].slots[n] = (time_ps << SEQ_BITS | seq, event);
                self.lens[b] = n as u8 + 1;
                self.bits |= 1 << b;
                return;
            }
        }
        self.heap.push(e);
        self.heap_front_ps = self.heap_front_ps.min(time_ps);
    }

    /// Removes the heap's earliest entry and moves the cursor up to its
    /// bucket (never back: an entry from the heap may be earlier than the
    /// cursor's bucket).
    #[inline]
    fn heap_pop(&mut self) -> Option<Entry<E>> {
        let e = self.heap.pop();
        self.heap_front_ps = self.heap.peek().map_or(u64::MAX, |h| h.time_ps);
        if let Some(e) = &e {
            self.cursor = self.cursor.max(e.time_ps >> WHEEL_SHIFT);
        }
        e
    }

    /// The number (`time_ps >> WHEEL_SHIFT`) of the first non-empty bucket
    /// from the cursor on: it holds the wheel's earliest entry.
    #[inline(always)]
    fn wheel_front(&self) -> Option<u64> {
        if self.bits == 0 {
            return None;
        }
        let ahead = self.bits.rotate_right(self.cursor as u32 % BUCKETS as u32);
        Some(self.cursor + ahead.trailing_zeros() as u64)
    }

    /// The earliest entry of bucket number `bucket` (not empty), its time
    /// rebuilt from that number, and its slot: the smallest key of the
    /// bucket's entries, chosen without a branch on the keys (free slots
    /// hold [`FREE`], larger than every key, so the bucket's length is not
    /// looked at; keys are unique).
    #[inline(always)]
    fn wheel_entry(&self, bucket: u64) -> (Entry<E>, usize) {
        let b = bucket as usize % BUCKETS;
        let slots = &self.wheel[b].slots;
        // As a tree (two pairs, then their winners): two comparisons deep
        // instead of three in a row.
        let pick = |(i, a): (usize, u64), (j, b): (usize, u64)| {
            let less = b < a;
            (if less { j } else { i }, if less { b } else { a })
        };
        let low = pick((0, slots[0].0), (1, slots[1].0));
        let high = pick((2, slots[2].0), (3, slots[3].0));
        let (at, key) = pick(low, high);
        let entry = Entry {
            time_ps: bucket << WHEEL_SHIFT | key >> SEQ_BITS,
            seq: key & ((1 << SEQ_BITS) - 1),
            event: slots[at].1,
        };
        (entry, at)
    }

    /// Whether a wheel entry comes before the heap's earliest.
    #[inline(always)]
    fn before_heap(&self, w: &Entry<E>) -> bool {
        w.time_ps < self.heap_front_ps || self.heap.peek().is_none_or(|h| w.key() < h.key())
    }

    /// Whether the earliest pending entry is on the wheel (in the bucket
    /// numbered so) rather than in the heap; `None` when the queue is empty.
    #[inline(always)]
    fn front(&self) -> Option<Option<u64>> {
        match self.wheel_front() {
            Some(bucket) if self.before_heap(&self.wheel_entry(bucket).0) => Some(Some(bucket)),
            Some(_) => Some(None),
            None if self.heap.is_empty() => None,
            None => Some(None),
        }
    }

    /// Removes the earliest entry of bucket number `bucket`, in slot `at`
    /// (the bucket's last entry takes its slot, which is then free), and
    /// moves the cursor there (every wheel entry is at or after it).
    #[inline(always)]
    fn wheel_remove(&mut self, bucket: u64, at: usize) {
        let b = bucket as usize % BUCKETS;
        let last = self.lens[b] as usize - 1;
        self.wheel[b].slots[at] = self.wheel[b].slots[last];
        self.wheel[b].slots[last].0 = FREE;
        self.lens[b] -= 1;
        // Without a branch: whether a bucket empties is hard to predict.
        self.bits &= !(((self.lens[b] == 0) as u64) << b);
        self.cursor = bucket;
    }

    /// The key of the earliest pending entry, cancelled ones included.
    #[inline]
    fn front_key(&self) -> Option<u128> {
        match self.front()? {
            Some(b) => Some(self.wheel_entry(b).0.key()),
            None => self.heap.peek().map(|h| h.key()),
        }
    }

    /// Removes the earliest pending entry, cancelled ones included, and
    /// moves the cursor to its bucket (never back, as in `heap_pop`).
    #[inline]
    fn pop_front(&mut self) -> Option<Entry<E>> {
        match self.front()? {
            Some(bucket) => {
                let (e, at) = self.wheel_entry(bucket);
                self.wheel_remove(bucket, at);
                Some(e)
            }
            None => self.heap_pop(),
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

    #[inline(always)]
    fn skip_cancelled(&mut self) {
        if !self.cancelled.is_empty() {
            self.skip_cancelled_entries();
        }
    }

    #[cold]
    #[inline(never)]
    fn skip_cancelled_entries(&mut self) {
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
    /// entry is read field by field where it lies: an `Option<Entry>` went
    /// through the stack (a store forwarding stall on every event).
    #[inline]
    pub fn pop_until(&mut self, until_ps: u64) -> Option<(u64, E)> {
        self.pop_until_if(until_ps, |_| true)
    }

    /// Like [`pop_until`](Self::pop_until), but leaves the earliest event
    /// in the queue unless `accept` takes it.
    #[inline(always)]
    pub fn pop_until_if(&mut self, until_ps: u64, accept: impl Fn(E) -> bool) -> Option<(u64, E)> {
        self.skip_cancelled();
        if let Some(bucket) = self.wheel_front() {
            let (w, at) = self.wheel_entry(bucket);
            if self.before_heap(&w) {
                if w.time_ps > until_ps || !accept(w.event) {
                    return None;
                }
                self.wheel_remove(bucket, at);
                self.current = Some(w.key());
                return Some((w.time_ps, w.event));
            }
        }
        let h = self.heap.peek()?;
        let (time_ps, seq, event) = (h.time_ps, h.seq, h.event);
        if time_ps > until_ps || !accept(event) {
            return None;
        }
        self.heap_pop();
        self.current = Some((time_ps as u128) << 64 | seq as u128);
        Some((time_ps, event))
    }

    /// Number of pending events, cancelled ones not yet skipped included.
    pub fn len(&self) -> usize {
        self.lens.iter().map(|&n| n as usize).sum::<usize>() + self.heap.len()
    }

    pub fn is_empty(&mut self) -> bool {
        self.peek_time().is_none()
    }
}

//! Packet Rocket at the runtime's edge: On-Ramp's rule (the shared
//! `fabriclab-rocket` crate, the one implementation the simulator uses
//! too) applied per connection, per chunk. docs/clockwork-control.md, "Packet
//! Rocket in the runtime", says what it costs against the paper's per
//! packet gate.
//!
//! - The sender stamps each data message (`aux`, FLAG_STAMPED) with the
//!   low 32 bits of its Packet Rocket clock in ns (crate::clock::RocketClock:
//!   CLOCK_REALTIME with the rank's emulated error and correction), read
//!   just before the header is handed to the kernel (after the payload's
//!   CRC).
//! - The receiver's reader, once the header is read, echoes its own Packet
//!   Rocket clock minus the stamp, read modulo 2^32 as a signed number, on
//!   the same connection (KIND_ECHO, through its writer thread).
//! - The sender's reader feeds the echo to the rule; the writer holds the
//!   connection's next message until the pause ends.
//!
//! Clocks: CLOCK_REALTIME is the clock a sync daemon corrects (NTP,
//! linuxptp), the "corrected clocks" of issue 27. Time namespaces
//! (`cluster up --timens`) offset CLOCK_MONOTONIC and CLOCK_BOOTTIME only,
//! so the box's hosts share one CLOCK_REALTIME. The threshold counts from
//! the path's base OWD (the minimum echoed), so a constant offset between
//! two hosts' clocks cancels; it does as long as offset + OWD stays inside
//! ±2.147 s (the 32-bit stamp's range), far beyond a synced clock's error.
//! A drift between the clocks does not cancel: a receiver clock running
//! fast raises every OWD it reads, which is why the clocks must be synced.
//!
//! CLOCK_REALTIME is read only for the stamp and the echo (the OWD). The
//! rule decides in the sender's CLOCK_REALTIME, but a pause is waited out
//! on CLOCK_MONOTONIC (`Instant`): its length, the rule's end minus the
//! echo's arrival, is added to the monotonic reading taken with it, so a
//! step of CLOCK_REALTIME (NTP, PTP) during a pause neither stretches nor
//! cuts it.

use crate::clock::RocketClock;
use fabriclab_rocket::Rocket;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The stamp of a message sent at `now_ns` (the sender's CLOCK_REALTIME).
pub fn stamp(now_ns: u64) -> u32 {
    now_ns as u32
}

/// The one-way delay the receiver reads at `arrival_ns` (its
/// CLOCK_REALTIME) for a message stamped `stamp`: the difference modulo
/// 2^32, as a signed number of ns.
pub fn owd_ns(arrival_ns: u64, stamp: u32) -> i64 {
    (arrival_ns as u32).wrapping_sub(stamp) as i32 as i64
}

/// Counters of one connection's (or, summed, one rank's) Packet Rocket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EdgeStats {
    /// Echoes received.
    pub echoes: u64,
    /// Pauses the rule started, and their total length (ns).
    pub pauses: u64,
    pub paused_ns: u64,
    /// Time messages actually waited for a pause to end (ns): less than
    /// `paused_ns` when the connection had nothing to send during a pause.
    pub held_ns: u64,
}

impl EdgeStats {
    pub fn add(&mut self, o: &EdgeStats) {
        self.echoes += o.echoes;
        self.pauses += o.pauses;
        self.paused_ns += o.paused_ns;
        self.held_ns += o.held_ns;
    }
}

/// One connection's sending edge.
pub struct Edge {
    /// The rule, and the monotonic end of its current (or last) pause.
    state: Mutex<(Rocket, Option<Instant>)>,
    /// The rule's times are picoseconds since this reading of `clock`.
    epoch_ns: u64,
    /// The clock stamps and echoes are read on (crate::clock::RocketClock).
    clock: RocketClock,
    echoes: AtomicU64,
    held_ns: AtomicU64,
}

impl Edge {
    /// The edge of threshold `threshold_ns`, reading `clock`.
    pub fn new(threshold_ns: u64, clock: RocketClock) -> Edge {
        Edge::at(threshold_ns, clock.now_ns(), clock)
    }

    /// As `new`, with the rule's epoch at the reading `now_ns` (tests).
    pub fn at(threshold_ns: u64, now_ns: u64, clock: RocketClock) -> Edge {
        Edge {
            state: Mutex::new((Rocket::new(threshold_ns.saturating_mul(1000)), None)),
            epoch_ns: now_ns,
            clock,
            echoes: AtomicU64::new(0),
            held_ns: AtomicU64::new(0),
        }
    }

    /// This rank's reading of Packet Rocket's clock now.
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    fn ps(&self, t_ns: u64) -> i64 {
        (t_ns as i64 - self.epoch_ns as i64) * 1000
    }

    /// An echo arriving at `now_ns` (CLOCK_REALTIME) and `now` (read with
    /// it, CLOCK_MONOTONIC) for the message stamped `stamp`, whose one-way
    /// delay read `owd_ns`. Returns the length of the pause it starts (from
    /// `now`, rounded up to a ns), if any: the connection is held until
    /// `now` + that length. The stamp's full time is recovered from its age
    /// modulo 2^32 (an echo is less than 4.29 s old).
    pub fn on_echo(&self, now_ns: u64, now: Instant, stamp: u32, owd_ns: i64) -> Option<Duration> {
        let age = (now_ns as u32).wrapping_sub(stamp) as u64;
        let sent = now_ns.saturating_sub(age);
        let (now_ps, sent) = (self.ps(now_ns), self.ps(sent));
        let mut st = self.state.lock().unwrap();
        let end = st.0.on_echo(now_ps, sent, owd_ns * 1000);
        // counted once the rule has it: a reader of `echoes` sees its pause
        self.echoes.fetch_add(1, Ordering::Release);
        let len = Duration::from_nanos(((end? - now_ps) as u64).div_ceil(1000));
        st.1 = Some(now + len);
        Some(len)
    }

    /// When the current pause ends (CLOCK_MONOTONIC), if a message may not
    /// go at `now`.
    pub fn hold_until(&self, now: Instant) -> Option<Instant> {
        self.state.lock().unwrap().1.filter(|&end| now < end)
    }

    pub fn add_held(&self, ns: u64) {
        self.held_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub fn stats(&self) -> EdgeStats {
        let st = self.state.lock().unwrap();
        let r = &st.0;
        EdgeStats {
            echoes: self.echoes.load(Ordering::Acquire),
            pauses: r.pauses,
            paused_ns: r.paused_ps / 1000,
            held_ns: self.held_ns.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Header, FLAG_STAMPED, KIND_DATA};

    const US: u64 = 1_000;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// One message through the runtime's path: the sender's header with its
    /// stamp, the receiver's reading and its echo header, each encoded and
    /// decoded as on the wire, then the sender's rule, which reads the
    /// echo's arrival as `echo_at_ns` on CLOCK_REALTIME and `echo_at` on
    /// CLOCK_MONOTONIC.
    fn play(
        e: &Edge,
        sent_ns: u64,
        ahead_ns: i64,
        owd_ns_true: u64,
        echo_at_ns: u64,
        echo_at: Instant,
    ) -> Option<Duration> {
        let data = Header {
            kind: KIND_DATA,
            flags: FLAG_STAMPED,
            op_id: 0,
            seq: 0,
            aux: stamp(sent_ns),
            offset: 0,
            len_bytes: 0,
            payload_crc: 0,
        };
        let got = Header::decode(&data.encode()).unwrap();
        let arrival = (sent_ns + owd_ns_true).saturating_add_signed(ahead_ns);
        let echo = Header::echo(got.aux, owd_ns(arrival, got.aux));
        let back = Header::decode(&echo.encode()).unwrap();
        e.on_echo(echo_at_ns, echo_at, back.aux, back.offset as i64)
    }

    #[test]
    fn hand_played_echoes_give_the_hand_computed_pauses() {
        // The sender's clock starts 3 us before a 2^32 ns wrap of the stamp,
        // and the receiver's clock is 7 us ahead of it: neither shows.
        // T = 10 us; by hand: echo 1 sets the base (50 us), echo 2 lowers it
        // to 48, echo 3 reads 80 - 48 = 32 > 10: a pause of 22 us from its
        // arrival (t0 + 200 us) to t0 + 222 us; echo 4 is of a message sent
        // at 130 us, before 222 us: ignored; echo 5, sent at 222 us, 63 - 48 = 15: 5 us.
        // CLOCK_MONOTONIC reads m0 at t0 and runs with CLOCK_REALTIME.
        let t0 = (5u64 << 32) - 3 * US;
        let m0 = Instant::now();
        let at = |n: u64| (t0 + n * US, m0 + us(n));
        let e = Edge::at(10 * US, t0, RocketClock::realtime(0));
        let ahead = 7_000;
        let p = |sent: u64, owd: u64, echo: u64| {
            let (real, mono) = at(echo);
            play(&e, t0 + sent * US, ahead, owd * US, real, mono)
        };
        assert_eq!(p(0, 50, 100), None);
        assert_eq!(p(62, 48, 110), None);
        assert_eq!(p(120, 80, 200), Some(us(22)));
        assert_eq!(e.hold_until(m0 + us(221)), Some(m0 + us(222)));
        assert_eq!(e.hold_until(m0 + us(222)), None);
        assert_eq!(p(130, 95, 205), None);
        assert_eq!(p(222, 63, 300), Some(us(5)));
        assert_eq!(e.hold_until(m0 + us(300)), Some(m0 + us(305)));
        assert_eq!(p(310, 58, 400), None);
        let s = e.stats();
        assert_eq!((s.echoes, s.pauses, s.paused_ns), (6, 2, 27 * US));
    }

    #[test]
    fn a_step_of_the_realtime_clock_neither_stretches_nor_cuts_a_pause() {
        // The sender's CLOCK_REALTIME steps by -1 s and by +1 s (a sync
        // daemon's correction) after the edge was made and before the echoes:
        // the stamps and echoes are read on the stepped clock, the pause is
        // the same 22 us as by hand above (80 - 48 - 10), and it ends 22 us
        // after the echo's arrival on CLOCK_MONOTONIC. The hold takes only a
        // monotonic reading, so a step during the pause cannot move its end
        // (timed on CLOCK_REALTIME, a -1 s step made it 1 s + 22 us).
        let t0 = 1_700_000_000_000_000_000u64;
        for step in [-1_000_000_000i64, 1_000_000_000] {
            let e = Edge::at(10 * US, t0, RocketClock::realtime(0));
            let t = t0.saturating_add_signed(step);
            let m0 = Instant::now();
            assert_eq!(play(&e, t, 0, 50 * US, t + 100 * US, m0 + us(100)), None);
            assert_eq!(
                play(&e, t + 62 * US, 0, 48 * US, t + 110 * US, m0 + us(110)),
                None
            );
            assert_eq!(
                play(&e, t + 120 * US, 0, 80 * US, t + 200 * US, m0 + us(200)),
                Some(us(22))
            );
            assert_eq!(e.hold_until(m0 + us(200)), Some(m0 + us(222)));
            assert_eq!(
                e.hold_until(m0 + us(222) - Duration::from_nanos(1)),
                Some(m0 + us(222))
            );
            assert_eq!(e.hold_until(m0 + us(222)), None);
            assert_eq!(e.stats().paused_ns, 22 * US);
        }
    }

    #[test]
    fn a_receiver_clock_behind_reads_negative_delays_and_still_cancels() {
        // The receiver's clock 1 s behind: every reading is OWD - 1 s < 0.
        let t0 = 1_700_000_000_000_000_000u64;
        let e = Edge::at(0, t0, RocketClock::realtime(0));
        let m0 = Instant::now();
        let behind = -1_000_000_000;
        assert_eq!(
            owd_ns(t0 + 40 * US - 1_000_000_000, stamp(t0)),
            40_000 - 1_000_000_000
        );
        assert_eq!(play(&e, t0, behind, 40 * US, t0 + 90 * US, m0), None);
        assert_eq!(
            play(
                &e,
                t0 + 10 * US,
                behind,
                41 * US,
                t0 + 100 * US,
                m0 + us(10)
            ),
            Some(us(1))
        );
        assert_eq!(e.hold_until(m0 + us(10)), Some(m0 + us(11)));
    }
}

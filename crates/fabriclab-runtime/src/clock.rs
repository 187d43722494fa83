//! Timestamps: every event is stamped with both CLOCK_MONOTONIC (for
//! durations and ordering within a host) and CLOCK_REALTIME (for lining up
//! hosts), in nanoseconds.

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamp {
    pub mono_ns: u64,
    pub real_ns: u64,
}

fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Stamp {
    pub fn now() -> Stamp {
        Stamp {
            mono_ns: read(libc::CLOCK_MONOTONIC),
            real_ns: read(libc::CLOCK_REALTIME),
        }
    }
}

/// CLOCK_REALTIME alone, in ns: Packet Rocket's stamps (crate::edge).
pub fn realtime_ns() -> u64 {
    read(libc::CLOCK_REALTIME)
}

//! Units: simulated time is integer picoseconds, sizes are bytes, rates are
//! bits per second.

pub const PS_PER_S: u64 = 1_000_000_000_000;
pub const PS_PER_MS: u64 = 1_000_000_000;
pub const PS_PER_US: u64 = 1_000_000;

/// Serialization time of `bytes` at `rate_bps`, rounded to the nearest picosecond.
#[inline]
pub fn ser_time_ps(bytes: u64, rate_bps: u64) -> u64 {
    // Frames (up to 2.3 MB) stay within u64, where the division is several
    // times cheaper than u128's; the same result either way.
    if let Some(num) = bytes
        .checked_mul(8 * PS_PER_S)
        .and_then(|n| n.checked_add(rate_bps / 2))
    {
        return num / rate_bps;
    }
    let num = bytes as u128 * 8 * PS_PER_S as u128;
    let r = rate_bps as u128;
    ((num + r / 2) / r) as u64
}

//! Serialization times against hand-computed values, on both sides of the
//! u64 fast path (bytes * 8e12 within u64 up to about 2.3 MB).

use fabriclab_core::time::ser_time_ps;

#[test]
fn frames_at_10_gbps() {
    // 1538 wire bytes * 8 bits / 1e10 bit/s = 1.2304 us; an 84-byte ACK 67.2 ns.
    assert_eq!(ser_time_ps(1538, 10_000_000_000), 1_230_400);
    assert_eq!(ser_time_ps(84, 10_000_000_000), 67_200);
    // 9078-byte jumbo frame at 25 Gbit/s: 9078 * 8 / 25e9 s = 2.90496 us.
    assert_eq!(ser_time_ps(9078, 25_000_000_000), 2_904_960);
}

#[test]
fn rounds_to_the_nearest_picosecond() {
    // 1 byte at 3 bit/s: 8/3 s = 2 666 666 666 666.67 ps.
    assert_eq!(ser_time_ps(1, 3), 2_666_666_666_667);
    // 1 byte at 7 bit/s: 8/7 s = 1 142 857 142 857.14 ps.
    assert_eq!(ser_time_ps(1, 7), 1_142_857_142_857);
}

#[test]
fn sizes_past_the_u64_product() {
    // 3 MB: 3e6 * 8e12 > 2^64, the u128 path. At 100 Gbit/s: 240 us.
    assert_eq!(ser_time_ps(3_000_000, 100_000_000_000), 240_000_000);
    // Either side of the boundary at 1 Gbit/s: 8 ns per byte.
    let edge = u64::MAX / 8_000_000_000_000;
    for b in [edge - 1, edge, edge + 1, edge + 2] {
        assert_eq!(ser_time_ps(b, 1_000_000_000), b * 8_000);
    }
}

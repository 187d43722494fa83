//! Gradient values for functional runs of the simulator: what worker
//! `worker` contributes at position `index` of packet `packet` of its
//! `message`-th contribution to job `job`, a float32 in [-1, 1) from a
//! counter-based generator (SplitMix64 of the coordinates and the seed), so
//! any value can be recomputed on its own, by the simulator's workers and
//! by a test's reference (Python reaches it through `_core.agg_worker_values`).

fn mix64(mut z: u64) -> u64 {
    // SplitMix64's finalizer (Steele, Lea and Flood, OOPSLA 2014).
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One gradient value: 24 random bits scaled to [-1, 1) (exact in float32).
pub fn worker_value(
    seed: u64,
    job: u16,
    worker: u32,
    message: u64,
    packet: u64,
    index: u32,
) -> f32 {
    let mut h = mix64(seed ^ 0x5041_4e41_4d41);
    for x in [job as u64, worker as u64, message, packet, index as u64] {
        h = mix64(h ^ x);
    }
    ((h >> 40) as f32) / (1u32 << 23) as f32 - 1.0
}

/// The `count` values of one packet.
pub fn worker_vector(
    seed: u64,
    job: u16,
    worker: u32,
    message: u64,
    packet: u64,
    count: u32,
) -> Vec<f32> {
    (0..count)
        .map(|i| worker_value(seed, job, worker, message, packet, i))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_in_range_reproducible_and_differ_by_coordinate() {
        let v = worker_vector(7, 1, 2, 3, 4, 1000);
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        assert_eq!(v, worker_vector(7, 1, 2, 3, 4, 1000));
        assert_ne!(v[..10], worker_vector(7, 1, 3, 3, 4, 10)[..]);
        assert_ne!(v[..10], worker_vector(8, 1, 2, 3, 4, 10)[..]);
        // Roughly uniform: the mean of 1000 draws within 0.1 of 0.
        assert!((v.iter().sum::<f32>() / 1000.0).abs() < 0.1);
    }
}

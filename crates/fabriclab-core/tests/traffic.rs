use fabriclab_core::apps::traffic::Cdf;
use rand::SeedableRng;

#[test]
fn quantile_interpolates_linearly_with_point_mass() {
    let cdf = Cdf::new(&[(10.0, 0.0), (10.0, 0.5), (30.0, 1.0)]).unwrap();
    assert_eq!(cdf.quantile(0.2), 10.0);
    assert_eq!(cdf.quantile(0.75), 20.0);
    assert_eq!(cdf.quantile(1.0), 30.0);
    // Mean by hand: half the mass at 10, half uniform on [10, 30] (mean 20).
    assert!((cdf.mean() - 15.0).abs() < 1e-12);
}

#[test]
fn sampled_mean_matches_hand_mean() {
    let cdf = Cdf::new(&[(100.0, 0.25), (1000.0, 1.0)]).unwrap();
    // 0.25 * 100 + 0.75 * (100 + 1000) / 2 = 437.5
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let n = 200_000;
    let mean = (0..n)
        .map(|_| cdf.sample_bytes(&mut rng) as f64)
        .sum::<f64>()
        / n as f64;
    assert!((mean / 437.5 - 1.0).abs() < 0.01, "mean {mean}");
}

#[test]
fn bad_cdfs_are_refused_with_reasons() {
    assert!(Cdf::new(&[(10.0, 0.5), (5.0, 1.0)])
        .unwrap_err()
        .contains("sizes"));
    assert!(Cdf::new(&[(10.0, 0.5), (20.0, 0.4), (30.0, 1.0)])
        .unwrap_err()
        .contains("probabilities"));
    assert!(Cdf::new(&[(10.0, 0.5), (20.0, 0.9)])
        .unwrap_err()
        .contains("last probability"));
}

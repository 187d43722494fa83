//! Packet Rocket's estimated clocks: a hand-built correction table read by
//! hand, and applied to a hand-built clock (docs/clockwork-control.md,
//! "Estimated clocks").

use fabriclab_core::engine::clock::{HostClockSpec, Stamping};
use fabriclab_core::engine::{ClockSpec, Clocks};
use fabriclab_core::transport::clock_correction::FIELD;
use fabriclab_core::transport::{ClockCorrection, CorrectionPiece};

fn piece(host: u32, from_local_ps: i64, offset_ps: i64, drift_ppm: f64) -> CorrectionPiece {
    CorrectionPiece {
        host,
        from_local_ps,
        offset_ps,
        drift_ppm,
    }
}

#[test]
fn a_hand_built_table_gives_the_readings_worked_out_by_hand() {
    // Host 0: from 0, 5 us plus 10 ppm; from 1 ms, 4 us minus 20 ppm. Host 1: none.
    let k = ClockCorrection::new(
        &[
            piece(0, 0, 5_000_000, 10.0),
            piece(0, 1_000_000_000, 4_000_000, -20.0),
        ],
        2,
        FIELD,
    )
    .unwrap();
    // 0.5 ms: 5 us + 10e-6 x 5e8 ps = 5,005,000 ps.
    assert_eq!(k.correction_ps(0, 500_000_000), 5_005_000);
    assert_eq!(k.corrected_ps(0, 500_000_000), 494_995_000);
    // Before the first piece it extends backwards: 5 us - 10e-6 x 1e6 = 4,999,990.
    assert_eq!(k.corrected_ps(0, -1_000_000), -1_000_000 - 4_999_990);
    // The second piece from its start on: 4 us; at 3 ms, 4 us - 20e-6 x 2e9 = 3,960,000.
    assert_eq!(k.corrected_ps(0, 1_000_000_000), 996_000_000);
    assert_eq!(k.corrected_ps(0, 3_000_000_000), 3_000_000_000 - 3_960_000);
    // -20e-6 x 25,000 = -0.5 ps: rounded away from zero, to -1.
    assert_eq!(k.correction_ps(0, 1_000_025_000), 3_999_999);
    // A host without pieces reads its clock as it is.
    assert_eq!(k.corrected_ps(1, 123_456_789), 123_456_789);
}

#[test]
fn bad_tables_are_refused_naming_the_field() {
    let e = ClockCorrection::new(&[piece(2, 0, 0, 0.0)], 2, FIELD).unwrap_err();
    assert!(e.contains("packet_rocket_correction[0].host"), "{e}");
    let e =
        ClockCorrection::new(&[piece(0, 5, 0, 0.0), piece(0, 5, 0, 0.0)], 2, FIELD).unwrap_err();
    assert!(
        e.contains("packet_rocket_correction[1].from_local_ps"),
        "{e}"
    );
    let e = ClockCorrection::new(&[piece(0, 0, 0, f64::NAN)], 2, FIELD).unwrap_err();
    assert!(e.contains("packet_rocket_correction[0].drift_ppm"), "{e}");
}

/// One host whose clock starts 70 us ahead and runs 100 ppm fast, without
/// wander: it reads L(t) = t + 70 us + 1e-4 t.
fn hand_clock() -> Clocks {
    let spec = ClockSpec {
        offset_sigma_ps: 0,
        drift_sigma_ppm: 0.0,
        wander_ppm: 0.0,
        wander_every_ps: 1_000_000_000,
        nic_sigma_ps: 0,
        software_median_ps: 0,
        software_shape: 1.0,
        hosts: vec![HostClockSpec {
            offset_ps: Some(70_000_000),
            drift_ppm: Some(100.0),
            stamping: Stamping::Nic,
        }],
        groups: vec![],
    };
    Clocks::new(&spec, 1, 1).unwrap()
}

#[test]
fn the_exact_correction_of_a_hand_built_clock_gives_true_time() {
    let mut c = hand_clock();
    // At t = 1 ms the clock reads 1e9 + 7e7 + 1e5 ps.
    let l = c.read_ps(0, 1_000_000_000);
    assert_eq!(l, 1_070_100_000);
    // L - t = 70 us + 1e-4 t = 70 us + (1e-4 / 1.0001) (L - 70 us): a piece from
    // L = 70 us with offset 70 us and slope 100 / 1.0001 ppm is exact.
    let exact = ClockCorrection::new(
        &[piece(0, 70_000_000, 70_000_000, 100.0 / 1.0001)],
        1,
        FIELD,
    )
    .unwrap();
    for t in [0u64, 1_000_000_000, 2_500_000_000, 10_000_000_000] {
        let got = exact.corrected_ps(0, c.read_ps(0, t));
        assert!((got - t as i64).abs() <= 1, "t = {t}: {got}");
    }
    // An estimate of the offset alone leaves the drift: at 1 ms, 1e-4 x 1e9 = 100,000 ps.
    let offset_only = ClockCorrection::new(&[piece(0, 0, 70_000_000, 0.0)], 1, FIELD).unwrap();
    assert_eq!(offset_only.corrected_ps(0, l), 1_000_100_000);
}

#[test]
fn readings_at_the_schemas_bounds_do_not_overflow() {
    // The scenario accepts ±2^62 for readings, offsets and piece starts. A piece from -2^62 with offset
    // -2^62 and 1 ppm, read at L = 2^62: L - from = 2^63 (beyond i64), the slope's term
    // 1e-6 x 2^63 = 9,223,372,036,854.775808 ps -> 9,223,372,036,855, so the correction is
    // -2^62 + 9,223,372,036,855 and the corrected reading L - correction = 2^63 - 9,223,372,036,855,
    // which fits in i64.
    let b: i64 = 1 << 62;
    let k = ClockCorrection::new(&[piece(0, -b, -b, 1.0)], 1, FIELD).unwrap();
    assert_eq!(k.correction_ps(0, b), -b + 9_223_372_036_855);
    assert_eq!(k.corrected_ps(0, b), i64::MAX - 9_223_372_036_855 + 1);
    // A corrected reading beyond i64 saturates: offset -2^62, no drift, at L = i64::MAX.
    let k = ClockCorrection::new(&[piece(0, 0, -b, 0.0)], 1, FIELD).unwrap();
    assert_eq!(k.corrected_ps(0, i64::MAX), i64::MAX);
    assert_eq!(k.corrected_ps(0, b - 1), i64::MAX);
}

//! Packet Rocket's clock in the runtime (crate::clock::RocketClock): the
//! emulated error and the shared correction table applied to a reading,
//! checked against hand-worked numbers; bad options refused naming the field.

#![allow(non_snake_case)]

use fabriclab_runtime::clock::{realtime_ns, ClockMode, EmulatedClock, RocketClock};
use std::io::Write;
use std::sync::OnceLock;

/// An epoch: today's CLOCK_REALTIME in whole seconds, read once (a table's
/// epoch must be within 100 days of now), ns.
fn e() -> i64 {
    static E: OnceLock<i64> = OnceLock::new();
    *E.get_or_init(|| realtime_ns() as i64 / 1_000_000_000 * 1_000_000_000)
}
const MS: i64 = 1_000_000;

fn table(text: &str) -> String {
    let mut f = tempfile();
    f.1.write_all(text.as_bytes()).unwrap();
    f.0
}

fn tempfile() -> (String, std::fs::File) {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let p = std::env::temp_dir().join(format!(
        "fabriclab-rocket-clock-{}-{}.json",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let f = std::fs::File::create(&p).unwrap();
    (p.to_string_lossy().into_owned(), f)
}

fn clock(
    rank: u32,
    mode: Option<&str>,
    em: EmulatedClock,
    t: Option<&str>,
) -> Result<RocketClock, String> {
    RocketClock::from_options(
        rank,
        2,
        mode,
        (em.offset_ns, em.drift_ppm, Some(em.epoch_ns)),
        t,
    )
}

/// Rank 1's emulated clock: 3 ms ahead and 50 ppm fast from E.
fn fast() -> EmulatedClock {
    EmulatedClock {
        offset_ns: 3 * MS,
        drift_ppm: 50.0,
        epoch_ns: e(),
    }
}

#[test]
fn the_emulated_clock_reads_the_hand_computed_error() {
    let E = e();
    // 2 s after the epoch: 3 ms + 50e-6 x 2e9 ns = 3,100,000 ns ahead;
    // 1 s before it: 3 ms - 50,000 ns.
    assert_eq!(fast().read_ns(E + 2_000 * MS), E + 2_000 * MS + 3_100_000);
    assert_eq!(fast().read_ns(E - 1_000 * MS), E - 1_000 * MS + 2_950_000);
    // "host" reads it, "ideal" ignores it.
    let host = clock(1, Some("host"), fast(), None).unwrap();
    assert_eq!(host.mode, ClockMode::Host);
    assert_eq!(
        host.reading_ns((E + 2_000 * MS) as u64),
        (E + 2_000 * MS + 3_100_000) as u64
    );
    let ideal = clock(1, Some("ideal"), fast(), None).unwrap();
    assert_eq!(
        ideal.reading_ns((E + 2_000 * MS) as u64),
        (E + 2_000 * MS) as u64
    );
    // Without a mode or a table: "host" (the runtime's clock before).
    assert_eq!(clock(1, None, fast(), None).unwrap().mode, ClockMode::Host);
}

#[test]
fn the_exact_table_gives_true_time_and_an_offset_only_one_leaves_the_drift() {
    let E = e();
    // The table's pieces are on rank 1's clock in ps since its epoch E. At
    // true time E + x the clock reads L = E + 3 ms + (1 + 50e-6) x, so the
    // exact correction is 3 ms at L - E = 3 ms, slope 50 / 1.00005 ppm:
    // 3 ms + 50e-6 / 1.00005 x (1.00005 x) = 3 ms + 50e-6 x, the error.
    let exact = table(&format!(
        r#"{{"epoch_ns": {E}, "pieces": [{{"host": 1, "from_local_ps": 3000000000,
        "offset_ps": 3000000000, "drift_ppm": {}}}]}}"#,
        50.0 / 1.00005
    ));
    let c = clock(1, None, fast(), Some(&exact)).unwrap();
    assert_eq!(c.mode, ClockMode::Estimated); // the default with a table
    for x in [-1_000 * MS, 0, 2_000 * MS, 60_000 * MS] {
        let got = c.reading_ns((E + x) as u64) as i64 - (E + x);
        assert!(got.abs() <= 1, "x = {x}: {got} ns off true time");
    }
    // Rank 0 has no pieces: its clock reads as it is (here: unemulated).
    let r0 = clock(0, None, EmulatedClock::default(), Some(&exact)).unwrap();
    assert_eq!(r0.reading_ns(E as u64 + 7), E as u64 + 7);
    // Offset only: at x = 2 s the drift's 50e-6 x 2e9 = 100,000 ns is left.
    let offset_only = table(&format!(
        r#"{{"epoch_ns": {E}, "pieces": [{{"host": 1, "from_local_ps": 0,
        "offset_ps": 3000000000, "drift_ppm": 0}}]}}"#
    ));
    let c = clock(1, Some("estimated"), fast(), Some(&offset_only)).unwrap();
    assert_eq!(
        c.reading_ns((E + 2_000 * MS) as u64) as i64 - (E + 2_000 * MS),
        100_000
    );
}

#[test]
fn a_table_whose_epoch_is_over_100_days_from_now_is_refused() {
    // Its pieces are i64 ps since the epoch (±106.75 days): a table with
    // epoch 0 would freeze every reading, so it is refused at load, naming
    // the field; 99 days away is still taken, and reads a hand-computed value.
    let day = 86_400_000_000_000i64;
    let at = |epoch: i64| {
        format!(
            r#"{{"epoch_ns": {epoch}, "pieces": [{{"host": 1, "from_local_ps": 0, "offset_ps": 1000000, "drift_ppm": 0}}]}}"#
        )
    };
    for epoch in [0, e() - 101 * day, e() + 101 * day] {
        let e = clock(1, None, EmulatedClock::default(), Some(&table(&at(epoch)))).unwrap_err();
        assert!(
            e.starts_with("packet_rocket_correction.epoch_ns:") && e.contains("100 days"),
            "{e}"
        );
    }
    // 99 days before now: rank 1 reads true time less the 1 µs offset.
    let c = clock(
        1,
        None,
        EmulatedClock::default(),
        Some(&table(&at(e() - 99 * day))),
    )
    .unwrap();
    let t = realtime_ns();
    assert_eq!(c.reading_ns(t), t - 1_000);
}

#[test]
fn a_table_for_another_world_size_is_refused() {
    // Made for 2 ranks: a 4-rank job would leave ranks 2 and 3 uncorrected.
    let E = e();
    let two = table(&format!(
        r#"{{"epoch_ns": {E}, "ranks": 2, "pieces": [{{"host": 1, "from_local_ps": 0, "offset_ps": 0, "drift_ppm": 0}}]}}"#
    ));
    let four = RocketClock::from_options(0, 4, None, (0, 0.0, None), Some(&two)).unwrap_err();
    assert!(
        four.starts_with("packet_rocket_correction.ranks:") && four.contains("2 ranks"),
        "{four}"
    );
    assert!(RocketClock::from_options(0, 2, None, (0, 0.0, None), Some(&two)).is_ok());
    // A table that does not say (written before the field) loads for any world size.
    let old = table(&format!(r#"{{"epoch_ns": {E}, "pieces": []}}"#));
    assert!(RocketClock::from_options(0, 4, None, (0, 0.0, None), Some(&old)).is_ok());
}

#[test]
fn the_emulated_clocks_epoch_comes_from_the_table_when_none_is_given() {
    // The table says its probes were taken on clocks with epoch C = E - 10 s.
    // Rank 1 (3 ms ahead, 50 ppm fast) given no epoch takes C: at true time E
    // its raw clock reads E + 3 ms + 50e-6 x 10 s = E + 3,500,000 ns.
    let E = e();
    let C = E - 10_000 * MS;
    let t = table(&format!(
        r#"{{"epoch_ns": {E}, "ranks": 2, "clock_epoch_ns": {C}, "pieces": []}}"#
    ));
    let c = RocketClock::from_options(1, 2, Some("host"), (3 * MS, 50.0, None), Some(&t)).unwrap();
    assert_eq!(c.emulated.epoch_ns, C);
    assert_eq!(c.reading_ns(E as u64), (E + 3_500_000) as u64);
    // The same epoch given explicitly is taken; another one is refused.
    assert!(
        RocketClock::from_options(1, 2, Some("host"), (3 * MS, 50.0, Some(C)), Some(&t)).is_ok()
    );
    let x = RocketClock::from_options(1, 2, Some("host"), (3 * MS, 50.0, Some(E)), Some(&t))
        .unwrap_err();
    assert!(
        x.starts_with("clock_epoch_ns:") && x.contains(&C.to_string()),
        "{x}"
    );
    // Without a table and without an epoch: now (read at construction).
    let before = realtime_ns() as i64;
    let c = RocketClock::from_options(1, 2, Some("host"), (0, 0.0, None), None).unwrap();
    assert!(c.emulated.epoch_ns >= before && c.emulated.epoch_ns <= realtime_ns() as i64);
}

#[test]
fn an_emulated_offset_over_a_day_is_refused() {
    let day = 86_400_000_000_000i64;
    for off in [day + 1, -day - 1, i64::MIN, i64::MAX / 2] {
        let em = EmulatedClock {
            offset_ns: off,
            ..EmulatedClock::default()
        };
        let e = clock(1, Some("host"), em, None).unwrap_err();
        assert!(e.starts_with("clock_offset_ns:"), "{e}");
    }
    // -1 day still reads, and moves: not frozen at 0.
    let em = EmulatedClock {
        offset_ns: -day,
        ..EmulatedClock::default()
    };
    let c = clock(1, Some("host"), em, None).unwrap();
    assert_eq!(c.reading_ns(5 * day as u64), 4 * day as u64);
}

#[test]
fn bad_options_and_tables_are_refused_naming_the_field() {
    let E = e();
    let em = EmulatedClock::default();
    let bad = |mode: Option<&str>, em: EmulatedClock, text: Option<&str>| {
        let path = text.map(table);
        clock(1, mode, em, path.as_deref()).unwrap_err()
    };
    let e = bad(Some("raw"), em, None);
    assert!(e.starts_with("packet_rocket_clock: \"raw\""), "{e}");
    let e = bad(Some("estimated"), em, None);
    assert!(
        e.starts_with("packet_rocket_clock:") && e.contains("correction table"),
        "{e}"
    );
    let mut fast = em;
    fast.drift_ppm = 1500.0;
    let e = bad(None, fast, None);
    assert!(e.starts_with("clock_drift_ppm:"), "{e}");
    let e = clock(1, None, em, Some("/nonexistent/table.json")).unwrap_err();
    assert!(
        e.starts_with("packet_rocket_correction: cannot read"),
        "{e}"
    );
    let e = bad(None, em, Some(r#"{"pieces": []}"#));
    assert!(
        e.starts_with("packet_rocket_correction:") && e.contains("epoch_ns"),
        "{e}"
    );
    let piece = |h: u32, d: f64| {
        format!(
            r#"{{"epoch_ns": {E}, "pieces": [{{"host": {h}, "from_local_ps": 0, "offset_ps": 0, "drift_ppm": {d}}}]}}"#
        )
    };
    let e = bad(None, em, Some(&piece(2, 0.0)));
    assert!(
        e.starts_with("packet_rocket_correction.pieces[0].host:"),
        "{e}"
    );
    let e = bad(None, em, Some(&piece(1, 2500.0)));
    assert!(
        e.starts_with("packet_rocket_correction.pieces[0].drift_ppm:"),
        "{e}"
    );
}

// ------------------------------------------ the pause decisions, no network

/// Rank 0 sends to rank 1 at true times `E + k × gap_ns`, k in 0..n, each
/// message `fwd_ns(k)` on the way and 50 µs back; rank 0's edge (T = 2 ms)
/// gets each echo in true-time order. Stamps, the receiver's reading and the
/// sender's reading at the echo all come from the two `RocketClock`s at those
/// true times: the runtime's pause decisions on synthetic, load-free time.
fn pauses(
    mode: &str,
    table_path: Option<&str>,
    n: u64,
    gap_ns: u64,
    fwd_ns: impl Fn(u64) -> u64,
) -> fabriclab_runtime::EdgeStats {
    use fabriclab_runtime::edge::{owd_ns, stamp, Edge};
    use std::time::{Duration, Instant};
    let E = e();
    let em = |off: i64, d: f64| EmulatedClock {
        offset_ns: off,
        drift_ppm: d,
        epoch_ns: E,
    };
    let c0 = clock(0, Some(mode), em(0, -1000.0), table_path).unwrap();
    let c1 = clock(1, Some(mode), em(2 * MS, 1000.0), table_path).unwrap();
    let t0 = E as u64;
    let edge = Edge::at(2 * MS as u64, c0.reading_ns(t0), c0.clone());
    let base = Instant::now();
    let mut echoes: Vec<(u64, u32, i64)> = (0..n)
        .map(|k| {
            let sent = t0 + k * gap_ns;
            let arrived = sent + fwd_ns(k);
            let s = stamp(c0.reading_ns(sent));
            (arrived + 50_000, s, owd_ns(c1.reading_ns(arrived), s))
        })
        .collect();
    echoes.sort_by_key(|x| x.0);
    for (at, s, owd) in echoes {
        let mono = base + Duration::from_nanos(at - t0);
        edge.on_echo(c0.reading_ns(at), mono, s, owd);
    }
    edge.stats()
}

/// The exact correction of rank 1 (2 ms, +1000 ppm) against rank 0 (−1000
/// ppm), epoch E: one piece from L = E + 2 ms, value 2 ms, slope 2000 /
/// 1.001 ppm (tests/test_runtime_rocket_clock.py's exact_table, by hand).
fn exact_pair_table() -> String {
    table(&format!(
        r#"{{"epoch_ns": {}, "pieces": [{{"host": 1, "from_local_ps": 2000000000,
        "offset_ps": 2000000000, "drift_ppm": {}}}]}}"#,
        e(),
        2000.0 / 1.001
    ))
}

#[test]
fn a_fast_receiver_clock_pauses_its_sender_by_hand_and_the_exact_table_pauses_as_ideal() {
    // Constant 50 µs each way, a message every 1 ms, k = 0..=1400. On host
    // clocks rank 1 reads 2 ms + 1000 ppm ahead and rank 0 1000 ppm behind,
    // so message k's OWD reads d + 2 ms + 50 ns + 2000 × k ns: its excess over
    // the base (k = 0) is 2 µs × k, over T = 2 ms for k > 1000, and each such
    // echo starts a pause of 2000 × (k − 1000) ns (at most 0.8 ms, so the
    // next echo, 899.1 µs later on rank 0's clock, is never ignored):
    // 400 pauses, 2000 × (1 + ... + 400) = 160,400,000 ns.
    let flat = |_| 50_000;
    let host = pauses("host", None, 1401, MS as u64, flat);
    assert_eq!((host.echoes, host.pauses), (1401, 400));
    assert_eq!(host.paused_ns, 160_400_000);
    let t = exact_pair_table();
    for mode in ["ideal", "estimated"] {
        let s = pauses(mode, Some(&t), 1401, MS as u64, flat);
        assert_eq!((s.echoes, s.pauses, s.paused_ns), (1401, 0, 0), "{mode}");
    }
    // With queueing: every 10th message (k % 10 = 9) is 2.5 ms late on the
    // way, a message every 5 ms for 3 s. Ideal: each late one is 2.5 ms over
    // the base, 0.5 ms over T: 60 pauses of 500 µs (the next echo is 5 ms
    // later, never inside a pause). The exact table reads within 1 ns of
    // rank 0's clock, which runs 1000 ppm slow: the same 60 pauses, each the
    // 0.5 ms of true time as rank 0 reads it, 497,500 ns (within a few). Host: the
    // drift adds 10 µs per message, so it pauses on far more of them.
    let late = |k: u64| if k % 10 == 9 { 2_550_000 } else { 50_000 };
    let ideal = pauses("ideal", Some(&t), 600, 5 * MS as u64, late);
    assert_eq!((ideal.pauses, ideal.paused_ns), (60, 60 * 500_000));
    let est = pauses("estimated", Some(&t), 600, 5 * MS as u64, late);
    assert_eq!(est.pauses, 60);
    assert!(est.paused_ns.abs_diff(60 * 497_500) <= 60 * 4, "{est:?}");
    let host = pauses("host", None, 600, 5 * MS as u64, late);
    assert!(host.pauses > 300, "{host:?}");
}

#[test]
fn a_watched_table_is_replaced_when_its_file_changes_and_kept_when_the_new_one_is_bad() {
    use std::time::Duration;
    let E = e();
    let at = |offset_ps: i64, clock_epoch: Option<i64>| {
        let ce = clock_epoch.map_or(String::new(), |c| format!(r#""clock_epoch_ns": {c}, "#));
        format!(
            r#"{{"epoch_ns": {E}, "ranks": 2, {ce}"pieces": [{{"host": 1, "from_local_ps": 0, "offset_ps": {offset_ps}, "drift_ppm": 0}}]}}"#
        )
    };
    // Rank 1's clock 1 ms ahead of rank 0's.
    let path = table(&at(1_000_000_000, None));
    // Replaces the file whole (a temp file renamed over it, as rocket-table writes), with a new mtime.
    let replace = |text: &str| {
        std::thread::sleep(Duration::from_millis(20));
        let tmp = format!("{path}.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    };
    let c = RocketClock::from_options(1, 2, Some("estimated"), (0, 0.0, Some(E)), Some(&path))
        .unwrap()
        .with_reload(&path, 2, Duration::ZERO)
        .unwrap();
    let shared = c.clone(); // the edge's copy: the same watched table
    let t = (E + 5_000 * MS) as u64;
    assert_eq!(c.reading_ns(t), t - 1_000_000);
    c.now_ns(); // unchanged file: nothing re-read
    assert_eq!(c.reload.as_ref().unwrap().reloads(), 0);
    // A refit says 2 ms: the next reading on the live path takes it, in every copy.
    replace(&at(2_000_000_000, Some(E)));
    c.now_ns();
    assert_eq!(c.reading_ns(t), t - 2_000_000);
    assert_eq!(shared.reading_ns(t), t - 2_000_000);
    assert_eq!(c.reload.as_ref().unwrap().reloads(), 1);
    // Not a table, or one for clocks of another epoch: the 2 ms table stays.
    replace("{");
    c.now_ns();
    replace(&at(3_000_000_000, Some(E - 1)));
    c.now_ns();
    assert_eq!(c.reading_ns(t), t - 2_000_000);
    assert_eq!(c.reload.as_ref().unwrap().reloads(), 1);
    // Checked at most every `every`: with an hour, a changed file waits.
    replace(&at(2_000_000_000, Some(E)));
    let slow = RocketClock::from_options(1, 2, Some("estimated"), (0, 0.0, Some(E)), Some(&path))
        .unwrap()
        .with_reload(&path, 2, Duration::from_secs(3600))
        .unwrap();
    replace(&at(4_000_000_000, Some(E)));
    slow.now_ns();
    assert_eq!(slow.reading_ns(t), t - 2_000_000);
    // A refit landing between the table's read and the watch's start (review_rtable B6): with the mtime
    // taken before the read (the 4 ms table), the first check sees the change and takes the 5 ms one.
    let before = fabriclab_runtime::clock::table_mtime(&path);
    let raced =
        RocketClock::from_options(1, 2, Some("estimated"), (0, 0.0, Some(E)), Some(&path)).unwrap();
    replace(&at(5_000_000_000, Some(E)));
    let raced = raced
        .with_reload_since(&path, 2, Duration::ZERO, before)
        .unwrap();
    assert_eq!(raced.reading_ns(t), t - 4_000_000);
    raced.now_ns();
    assert_eq!(raced.reading_ns(t), t - 5_000_000);
    // Without a table there is nothing to re-read.
    let none = RocketClock::from_options(1, 2, Some("host"), (0, 0.0, Some(E)), None).unwrap();
    let err = none.with_reload(&path, 2, Duration::ZERO).unwrap_err();
    assert!(
        err.starts_with("packet_rocket_correction_reload_ms:"),
        "{err}"
    );
}

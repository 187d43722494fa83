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

// ------------------------------------------------- Packet Rocket's clock

use fabriclab_rocket::correction::{ClockCorrection, CorrectionPiece};
use std::sync::Arc;

/// Which clock Packet Rocket's stamps and echoes read: the simulator's
/// `packet_rocket_clock` names and meanings (docs/clockwork-control.md,
/// "Packet Rocket in the runtime", "Clocks").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockMode {
    /// CLOCK_REALTIME as it is: no emulated error, no correction.
    Ideal,
    /// The host's clock: CLOCK_REALTIME with this rank's emulated error.
    Host,
    /// The host's clock less the correction table's estimate of its error.
    Estimated,
}

impl ClockMode {
    pub fn parse(s: &str, field: &str) -> Result<ClockMode, String> {
        match s {
            "ideal" => Ok(ClockMode::Ideal),
            "host" => Ok(ClockMode::Host),
            "estimated" => Ok(ClockMode::Estimated),
            _ => Err(format!(
                "{field}: {s:?} is not one of ideal, host, estimated"
            )),
        }
    }
}

/// An emulated host clock, as the clock agent's (`--offset-ns`,
/// `--drift-ppm`, `--epoch-ns`; python/fabriclab/observe/clock/agent.py):
/// at true time t (CLOCK_REALTIME, ns) it reads
/// `t + offset_ns + drift_ppm × 10⁻⁶ × (t − epoch_ns)`, the last term
/// rounded half to even (Python's `round`), so a rank and its agent read
/// the same ns.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EmulatedClock {
    pub offset_ns: i64,
    pub drift_ppm: f64,
    pub epoch_ns: i64,
}

/// The largest emulated drift (the clock agent's bound).
pub const MAX_EMULATED_DRIFT_PPM: f64 = 1000.0;

/// The largest emulated offset, ±1 day (the clock agent's bound): a reading
/// stays far from 0, where it would clamp, and from the correction's range.
pub const MAX_EMULATED_OFFSET_NS: i64 = 86_400_000_000_000;

/// How far a correction table's `epoch_ns` may be from now: ±100 days. The
/// pieces are in i64 ps since the epoch, which covers ±106.75 days; beyond
/// it every reading would clamp to one value, a frozen clock.
pub const MAX_TABLE_EPOCH_AGE_NS: i64 = 100 * MAX_EMULATED_OFFSET_NS;

/// The largest emulated clock epoch, ±2^62 ns (the clock agent's bound).
pub const MAX_EPOCH_NS: i64 = 1 << 62;

impl EmulatedClock {
    pub fn read_ns(&self, true_ns: i64) -> i64 {
        let d = (self.drift_ppm * 1e-6 * (true_ns as i128 - self.epoch_ns as i128) as f64)
            .round_ties_even() as i64;
        true_ns.saturating_add(self.offset_ns).saturating_add(d)
    }
}

/// A correction table for the runtime: pieces on each rank's clock in ps
/// since `epoch_ns` (the probes' stamp origin: `fabriclab clock join`'s
/// `stamp_origin_ns`), host = rank. Optional (tables written before them
/// still load): `ranks`, the world size the table was made for, and
/// `clock_epoch_ns`, the emulated clocks' epoch its probes were taken on.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    epoch_ns: i64,
    #[serde(default)]
    ranks: Option<u32>,
    #[serde(default)]
    clock_epoch_ns: Option<i64>,
    pieces: Vec<CorrectionPiece>,
}

#[derive(Debug)]
pub struct Correction {
    epoch_ns: i64,
    clock_epoch_ns: Option<i64>,
    table: ClockCorrection,
}

impl Correction {
    /// A table file's JSON text (`{"epoch_ns": ..., "pieces": [{host,
    /// from_local_ps, offset_ps, drift_ppm}, ...]}`) for `world_size`
    /// ranks, read at CLOCK_REALTIME `now_ns`; errors name `field` and the
    /// entry. An `epoch_ns` more than [`MAX_TABLE_EPOCH_AGE_NS`] from
    /// `now_ns` is refused.
    pub fn parse(
        text: &str,
        world_size: u32,
        field: &str,
        now_ns: i64,
    ) -> Result<Correction, String> {
        let t: TableFile = serde_json::from_str(text)
            .map_err(|e| format!("{field}: not a correction table ({e}); expected {{\"epoch_ns\": int, \"ranks\": int (optional), \"clock_epoch_ns\": int (optional), \"pieces\": [{{\"host\", \"from_local_ps\", \"offset_ps\", \"drift_ppm\"}}, ...]}}"))?;
        let age = (now_ns as i128 - t.epoch_ns as i128).abs();
        if age > MAX_TABLE_EPOCH_AGE_NS as i128 {
            return Err(format!(
                "{field}.epoch_ns: {} is {:.1} days from now; it must be within 100 days (pieces are ps \
                 since it; give the probe phase's epoch as fabriclab clock rocket-table writes it)",
                t.epoch_ns,
                age as f64 / 86_400e9
            ));
        }
        if let Some(r) = t.ranks {
            if r != world_size {
                return Err(format!(
                    "{field}.ranks: the table was made for {r} ranks, the job has {world_size}; \
                     make one for this world size (fabriclab clock rocket-table)"
                ));
            }
        }
        if let Some(c) = t.clock_epoch_ns {
            if c.unsigned_abs() > MAX_EPOCH_NS as u64 {
                return Err(format!(
                    "{field}.clock_epoch_ns: must be within ±2^62 ns (CLOCK_REALTIME ns), got {c}"
                ));
            }
        }
        let table =
            ClockCorrection::new(&t.pieces, world_size as usize, &format!("{field}.pieces"))?;
        Ok(Correction {
            epoch_ns: t.epoch_ns,
            clock_epoch_ns: t.clock_epoch_ns,
            table,
        })
    }

    /// The emulated clocks' epoch the table's probes were taken on, if it says.
    pub fn clock_epoch_ns(&self) -> Option<i64> {
        self.clock_epoch_ns
    }

    /// Rank `rank`'s clock reading `local_ns`, corrected (ns, the ps
    /// rounded half up).
    pub fn corrected_ns(&self, rank: u32, local_ns: i64) -> i64 {
        let ps = (local_ns as i128 - self.epoch_ns as i128) * 1000;
        let ps = ps.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        let c = self.table.corrected_ps(rank, ps) as i128;
        (self.epoch_ns as i128 + (c + 500).div_euclid(1000)) as i64
    }
}

/// The clock Packet Rocket reads on one rank: the one place the emulated
/// error and the correction are applied to the runtime's readings (the
/// stamp, the echo's OWD, the sender's reading at the echo).
#[derive(Debug, Clone)]
pub struct RocketClock {
    pub mode: ClockMode,
    pub rank: u32,
    pub emulated: EmulatedClock,
    pub correction: Option<Arc<Correction>>,
    /// The table's file re-read when it changes (`with_reload`); its table
    /// then replaces `correction`.
    pub reload: Option<Arc<Reload>>,
}

/// A correction table's file watched for a refit (docs/clockwork-control.md,
/// "Packet Rocket in the runtime", "Live refit"): at most every `every`, at
/// a reading on the live path (`RocketClock::now_ns`: a stamp, an echo, the
/// sender's reading at an echo, so at chunk boundaries), the file's mtime is
/// read; when it changed, the file is parsed as at start and replaces the
/// table. A file that no longer parses, or says another world size or clock
/// epoch, is not taken: the previous table stays, and the rank says so once
/// on stderr.
#[derive(Debug)]
pub struct Reload {
    path: String,
    world_size: u32,
    clock_epoch_ns: i64,
    every: std::time::Duration,
    table: std::sync::RwLock<Arc<Correction>>,
    /// The last check and the mtime then.
    seen: std::sync::Mutex<(std::time::Instant, Option<std::time::SystemTime>)>,
    reloads: std::sync::atomic::AtomicU64,
}

impl Reload {
    fn check(&self, rank: u32) {
        let Ok(mut seen) = self.seen.try_lock() else {
            return; // another thread of this rank is checking
        };
        let now = std::time::Instant::now();
        if now.duration_since(seen.0) < self.every {
            return;
        }
        seen.0 = now;
        let mtime = table_mtime(&self.path);
        if mtime.is_none() || mtime == seen.1 {
            return;
        }
        seen.1 = mtime;
        let field = "packet_rocket_correction";
        let got = std::fs::read_to_string(&self.path)
            .map_err(|e| format!("{field}: cannot read {:?} ({e})", self.path))
            .and_then(|t| Correction::parse(&t, self.world_size, field, realtime_ns() as i64))
            .and_then(|c| match c.clock_epoch_ns() {
                Some(e) if e != self.clock_epoch_ns => Err(format!(
                    "{field}.clock_epoch_ns: {e}, but this rank's clocks run from {}",
                    self.clock_epoch_ns
                )),
                _ => Ok(c),
            });
        match got {
            Ok(c) => {
                *self.table.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(c);
                self.reloads
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) => eprintln!("fabriclab rank {rank}: kept the previous correction table: {e}"),
        }
    }

    /// How many times the table was replaced.
    pub fn reloads(&self) -> u64 {
        self.reloads.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A correction table file's mtime (None if it cannot be read): take it before
/// reading the table, for `RocketClock::with_reload_since`.
pub fn table_mtime(path: &str) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl RocketClock {
    /// CLOCK_REALTIME as it is (the runtime's clock before issue 27's
    /// emulation: `"host"` without emulated error).
    pub fn realtime(rank: u32) -> RocketClock {
        RocketClock {
            mode: ClockMode::Host,
            rank,
            emulated: EmulatedClock::default(),
            correction: None,
            reload: None,
        }
    }

    /// This clock with its table's file `path` re-read when it changes, checked
    /// at most every `every` (`Reload`); the error names
    /// `packet_rocket_correction_reload_ms`.
    pub fn with_reload(
        self,
        path: &str,
        world_size: u32,
        every: std::time::Duration,
    ) -> Result<RocketClock, String> {
        let mtime = table_mtime(path);
        self.with_reload_since(path, world_size, every, mtime)
    }

    /// `with_reload`, with the file's mtime taken before its table was read
    /// (`table_mtime`): a refit that replaces the file between that read and
    /// this call then differs from `mtime` and is taken at the first check,
    /// rather than missed until the next refit (review_rtable B6).
    pub fn with_reload_since(
        mut self,
        path: &str,
        world_size: u32,
        every: std::time::Duration,
        mtime: Option<std::time::SystemTime>,
    ) -> Result<RocketClock, String> {
        let Some(c) = self.correction.clone() else {
            return Err(
                "packet_rocket_correction_reload_ms: needs a correction table \
                        (packet_rocket_correction) to re-read"
                    .into(),
            );
        };
        self.reload = Some(Arc::new(Reload {
            path: path.to_string(),
            world_size,
            clock_epoch_ns: self.emulated.epoch_ns,
            every,
            table: std::sync::RwLock::new(c),
            seen: std::sync::Mutex::new((std::time::Instant::now(), mtime)),
            reloads: std::sync::atomic::AtomicU64::new(0),
        }));
        Ok(self)
    }

    /// The table a reading applies now: the reloaded one, else the one given.
    fn table(&self) -> Option<Arc<Correction>> {
        match &self.reload {
            Some(r) => Some(r.table.read().unwrap_or_else(|p| p.into_inner()).clone()),
            None => self.correction.clone(),
        }
    }

    /// The reading at true time `true_ns` (CLOCK_REALTIME).
    pub fn reading_ns(&self, true_ns: u64) -> u64 {
        let t = true_ns as i64;
        let r = match self.mode {
            ClockMode::Ideal => t,
            ClockMode::Host => self.emulated.read_ns(t),
            ClockMode::Estimated => {
                let local = self.emulated.read_ns(t);
                self.table()
                    .map_or(local, |c| c.corrected_ns(self.rank, local))
            }
        };
        r.max(0) as u64
    }

    /// The reading now; first, when the table is watched, a due check of
    /// its file (`Reload`).
    pub fn now_ns(&self) -> u64 {
        if let Some(r) = &self.reload {
            r.check(self.rank);
        }
        self.reading_ns(realtime_ns())
    }
}

impl RocketClock {
    /// Rank `rank`'s clock from the Communicator's options (their names are
    /// the fields errors name): `mode` (None: `"estimated"` with a table,
    /// else `"host"`), the emulated error (`clock_offset_ns`,
    /// `clock_drift_ppm`, `clock_epoch_ns`; the epoch None: the table's
    /// `clock_epoch_ns`, else now), and the correction table's file. An
    /// explicit epoch other than the table's is refused.
    pub fn from_options(
        rank: u32,
        world_size: u32,
        mode: Option<&str>,
        (offset_ns, drift_ppm, epoch_ns): (i64, f64, Option<i64>),
        correction_file: Option<&str>,
    ) -> Result<RocketClock, String> {
        if !drift_ppm.is_finite() || drift_ppm.abs() > MAX_EMULATED_DRIFT_PPM {
            return Err(format!(
                "clock_drift_ppm: must be a number within ±{MAX_EMULATED_DRIFT_PPM} ppm, got {drift_ppm}"
            ));
        }
        if offset_ns.unsigned_abs() > MAX_EMULATED_OFFSET_NS as u64 {
            return Err(format!(
                "clock_offset_ns: must be within ±{MAX_EMULATED_OFFSET_NS} ns (1 day), got {offset_ns}"
            ));
        }
        let field = "packet_rocket_correction";
        let correction = correction_file
            .map(|path| {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("{field}: cannot read {path:?} ({e})"))?;
                Correction::parse(&text, world_size, field, realtime_ns() as i64).map(Arc::new)
            })
            .transpose()?;
        let table_epoch = correction.as_ref().and_then(|c| c.clock_epoch_ns());
        let epoch_ns = match (epoch_ns, table_epoch) {
            (Some(e), Some(t)) if e != t => {
                return Err(format!(
                    "clock_epoch_ns: {e} differs from the correction table's clock_epoch_ns {t} (the \
                     emulated clocks its probes were taken on); give none (the table's is used) or {t}"
                ))
            }
            (Some(e), _) => e,
            (None, Some(t)) => t,
            (None, None) => realtime_ns() as i64,
        };
        let emulated = EmulatedClock {
            offset_ns,
            drift_ppm,
            epoch_ns,
        };
        let mode = match mode {
            Some(m) => ClockMode::parse(m, "packet_rocket_clock")?,
            None if correction.is_some() => ClockMode::Estimated,
            None => ClockMode::Host,
        };
        if mode == ClockMode::Estimated && correction.is_none() {
            return Err(
                "packet_rocket_clock: \"estimated\" needs a correction table \
                 (packet_rocket_correction, a file as `fabriclab runtime bench --packet-rocket-clock \
                 estimated` makes); give one, or \"host\" or \"ideal\""
                    .into(),
            );
        }
        Ok(RocketClock {
            mode,
            rank,
            emulated,
            correction,
            reload: None,
        })
    }
}

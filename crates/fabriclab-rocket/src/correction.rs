//! A given correction of host clocks (`packet_rocket_clock = "estimated"`,
//! docs/clockwork-control.md, "Estimated clocks"): what an estimator
//! recovered of each host's offset, as a table of linear pieces on the
//! host's own clock. The one application of such a table, shared by the
//! simulator's transport (fabriclab-core, hosts = host indices, readings in
//! ps of simulated time) and the runtime's Packet Rocket (fabriclab-runtime's
//! clock.rs, hosts = ranks, readings in ps since the table's epoch). The
//! estimate itself is made in Python (`fabriclab.observe.clock.calibrate`).
//!
//! A host's piece `k` holds from its `from_local_ps` up to the next piece's:
//! on it, `correction(L) = offset_ps + drift_ppm × (L − from_local_ps) / 10⁶`,
//! and the corrected reading is `L − correction(L)`, rounded to the
//! picosecond. Before a host's first piece the first one extends backwards;
//! after its last, the last extends forwards. A host without pieces reads
//! its clock uncorrected.
//!
//! The arithmetic runs in `i128`: the scenario accepts readings, offsets and
//! piece starts up to ±2⁶², whose differences leave `i64`. A correction or
//! corrected reading beyond `i64` saturates at its bound.

use serde::Deserialize;

/// The largest slope a piece may have (the scenario's bound): it keeps the
/// slope's term within ±2^55 ps for readings up to ±2^62 ps.
pub const MAX_DRIFT_PPM: f64 = 2000.0;

/// One linear piece of one host's correction, as the scenario gives it.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CorrectionPiece {
    /// Host index.
    pub host: u32,
    /// The host's clock reading from which this piece holds, ps.
    pub from_local_ps: i64,
    /// The correction (the host's clock minus the reference's) at `from_local_ps`, ps.
    pub offset_ps: i64,
    /// The correction's slope against the host's clock, ppm.
    pub drift_ppm: f64,
}

/// Every host's pieces, each host's in order of `from_local_ps`.
#[derive(Debug, Clone)]
pub struct ClockCorrection {
    pieces: Vec<Vec<CorrectionPiece>>,
}

impl ClockCorrection {
    /// The table for `hosts` hosts, given as the input field `field` (its
    /// errors name `field[i].host` etc.); a host beyond them, a slope not
    /// finite or beyond ±[`MAX_DRIFT_PPM`], or a host's pieces not strictly
    /// increasing in `from_local_ps` is an error naming the field.
    pub fn new(
        table: &[CorrectionPiece],
        hosts: usize,
        field: &str,
    ) -> Result<ClockCorrection, String> {
        let mut pieces = vec![Vec::new(); hosts];
        for (i, p) in table.iter().enumerate() {
            let at = format!("{field}[{i}]");
            let own: &mut Vec<CorrectionPiece> =
                pieces.get_mut(p.host as usize).ok_or_else(|| {
                    format!("{at}.host: host {} does not exist ({hosts} hosts)", p.host)
                })?;
            if !p.drift_ppm.is_finite() || p.drift_ppm.abs() > MAX_DRIFT_PPM {
                return Err(format!(
                    "{at}.drift_ppm: must be a finite number within ±{MAX_DRIFT_PPM} ppm, got {}",
                    p.drift_ppm
                ));
            }
            if let Some(last) = own.last() {
                if p.from_local_ps <= last.from_local_ps {
                    return Err(format!(
                        "{at}.from_local_ps: host {}'s pieces must be in strictly increasing \
                         from_local_ps ({} follows {})",
                        p.host, p.from_local_ps, last.from_local_ps
                    ));
                }
            }
            own.push(*p);
        }
        Ok(ClockCorrection { pieces })
    }

    /// The correction of host `host` at its clock reading `local_ps`, ps.
    pub fn correction_ps(&self, host: u32, local_ps: i64) -> i64 {
        saturate(self.correction_wide(host, local_ps))
    }

    /// Host `host`'s clock reading `local_ps`, corrected.
    pub fn corrected_ps(&self, host: u32, local_ps: i64) -> i64 {
        saturate(local_ps as i128 - self.correction_wide(host, local_ps))
    }

    fn correction_wide(&self, host: u32, local_ps: i64) -> i128 {
        let own = match self.pieces.get(host as usize) {
            Some(v) if !v.is_empty() => v,
            _ => return 0,
        };
        // The last piece starting at or before the reading (the first one before them all).
        let k = own
            .partition_point(|p| p.from_local_ps <= local_ps)
            .saturating_sub(1);
        let p = &own[k];
        let dl = (local_ps as i128 - p.from_local_ps as i128) as f64;
        // |drift_ppm| <= MAX_DRIFT_PPM keeps the slope's term within ±2^55.
        p.offset_ps as i128 + (p.drift_ppm * dl / 1e6).round() as i128
    }
}

fn saturate(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

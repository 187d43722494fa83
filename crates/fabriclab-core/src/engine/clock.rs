//! Host clocks: what each host's own clock reads at a true time, and the
//! noise of the timestamps it takes.
//!
//! A host's clock reads `t + offset + phase(t)`, where `phase` integrates
//! its oscillator's drift (ppm). The drift is constant within a wander step
//! of `wander_every_ps`; at each step it moves by a draw of N(0,
//! `wander_ppm`) (a random walk, clamped to ±[`MAX_DRIFT_PPM`]). Hosts of a
//! group share one oscillator: one drift and one walk (VMs on one physical
//! machine); offsets stay per host.
//!
//! Nothing here schedules an event. The walk's step k of an oscillator is a
//! pure function of (seed, oscillator, k) (counter-based draws), so a reading
//! depends only on the host and the true time, whatever was read before; the
//! steps are kept once computed (a prefix, extended on demand), which makes a
//! reading O(1) after the first reading that far.

use crate::fabric::topology::mix64;
use serde::Deserialize;

/// Drifts are kept within ±1,000 ppm (the scenario refuses more; a walk is
/// clamped there).
pub const MAX_DRIFT_PPM: f64 = 1000.0;

/// How a host stamps its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Stamping {
    /// NIC hardware stamps: Gaussian noise of `nic_sigma_ps`.
    Nic,
    /// Kernel software stamps: a log-normal error of median
    /// `software_median_ps` and shape `software_shape`, late on a receive
    /// and early on a send.
    Software,
}

/// One host's clock as the scenario gives it: explicit values, or `None`
/// for a draw from the section's distributions.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostClockSpec {
    pub offset_ps: Option<i64>,
    pub drift_ppm: Option<f64>,
    pub stamping: Stamping,
}

/// The clocks section, resolved: one entry per host, in host order.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClockSpec {
    /// Start offsets drawn from N(0, offset_sigma_ps).
    pub offset_sigma_ps: u64,
    /// Oscillator drifts drawn from N(0, drift_sigma_ppm).
    pub drift_sigma_ppm: f64,
    /// Each wander step moves the drift by N(0, wander_ppm).
    pub wander_ppm: f64,
    pub wander_every_ps: u64,
    pub nic_sigma_ps: u64,
    pub software_median_ps: u64,
    pub software_shape: f64,
    pub hosts: Vec<HostClockSpec>,
    /// Hosts (indices) sharing one oscillator; a host in no group has its own.
    pub groups: Vec<Vec<u32>>,
}

/// Streams of the counter-based draws, kept apart.
const OFFSET: u64 = 1;
const DRIFT: u64 = 2;
const WALK: u64 = 3;
const STAMP: u64 = 4;

/// A uniform draw in (0, 1] from a key.
fn uniform(key: u64) -> f64 {
    ((mix64(key) >> 11) + 1) as f64 / (1u64 << 53) as f64
}

/// A standard normal draw from a key (Box-Muller over two derived uniforms).
fn gauss(key: u64) -> f64 {
    let u1 = uniform(key);
    let u2 = uniform(key ^ 0x5851_F42D_4C95_7F2D);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The key of draw `index` of stream `stream` for `who` under `seed`.
fn key(seed: u64, stream: u64, who: u64, index: u64) -> u64 {
    mix64(mix64(mix64(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15)) ^ who) ^ index)
}

#[derive(Debug, Clone)]
struct Oscillator {
    /// The host whose index keys this oscillator's draws (its group's first).
    id: u32,
    /// Per wander step k: the drift during the step (ppm) and the phase
    /// accumulated at its start (ps).
    steps: Vec<(f64, f64)>,
}

/// Every host's clock.
#[derive(Debug, Clone)]
pub struct Clocks {
    seed: u64,
    wander_ppm: f64,
    /// 0: the drift never wanders.
    every_ps: u64,
    osc_of: Vec<u32>,
    offset_ps: Vec<i64>,
    stamping: Vec<Stamping>,
    oscs: Vec<Oscillator>,
    nic_sigma_ps: f64,
    software_median_ps: f64,
    software_shape: f64,
}

impl Clocks {
    /// The clocks of `hosts` hosts from a resolved section (errors name the field).
    pub fn new(spec: &ClockSpec, hosts: usize, seed: u64) -> Result<Clocks, String> {
        if spec.hosts.len() != hosts {
            return Err(format!(
                "clocks.hosts: {} entries for {hosts} hosts",
                spec.hosts.len()
            ));
        }
        let finite = |x: f64, f: &str| {
            if x.is_finite() && x >= 0.0 {
                Ok(())
            } else {
                Err(format!("clocks.{f}: must be finite and not negative"))
            }
        };
        finite(spec.drift_sigma_ppm, "drift_sigma_ppm")?;
        finite(spec.wander_ppm, "wander_ppm")?;
        finite(spec.software_shape, "software_shape")?;
        let mut osc_of = vec![u32::MAX; hosts];
        let mut oscs = Vec::new();
        for (g, members) in spec.groups.iter().enumerate() {
            if members.is_empty() {
                return Err(format!("clocks.groups[{g}]: an empty group"));
            }
            for &h in members {
                let slot = osc_of.get_mut(h as usize).ok_or(format!(
                    "clocks.groups[{g}]: host index {h} out of range (0..{hosts})"
                ))?;
                if *slot != u32::MAX {
                    return Err(format!(
                        "clocks.groups[{g}]: host {h} is already in another group"
                    ));
                }
                *slot = oscs.len() as u32;
            }
            oscs.push(Oscillator {
                id: members[0],
                steps: Vec::new(),
            });
        }
        for (h, slot) in osc_of.iter_mut().enumerate() {
            if *slot == u32::MAX {
                *slot = oscs.len() as u32;
                oscs.push(Oscillator {
                    id: h as u32,
                    steps: Vec::new(),
                });
            }
        }
        // Each oscillator's starting drift: a member's explicit one (all
        // explicit ones of a group agree), else a draw.
        let mut drift0: Vec<Option<(f64, usize)>> = vec![None; oscs.len()];
        for (h, hs) in spec.hosts.iter().enumerate() {
            if let Some(d) = hs.drift_ppm {
                if !d.is_finite() || d.abs() > MAX_DRIFT_PPM {
                    return Err(format!(
                        "clocks.hosts[{h}].drift_ppm: {d} is beyond ±{MAX_DRIFT_PPM} ppm"
                    ));
                }
                let o = osc_of[h] as usize;
                match drift0[o] {
                    Some((d0, h0)) if d0 != d => {
                        return Err(format!(
                            "clocks.hosts[{h}].drift_ppm: {d} differs from host {h0}'s {d0}, which shares its oscillator"
                        ))
                    }
                    _ => drift0[o] = Some((d, h)),
                }
            }
        }
        for (o, osc) in oscs.iter_mut().enumerate() {
            let d = match drift0[o] {
                Some((d, _)) => d,
                None => spec.drift_sigma_ppm * gauss(key(seed, DRIFT, osc.id as u64, 0)),
            };
            osc.steps
                .push((d.clamp(-MAX_DRIFT_PPM, MAX_DRIFT_PPM), 0.0));
        }
        let offset_ps = spec
            .hosts
            .iter()
            .enumerate()
            .map(|(h, hs)| {
                hs.offset_ps.unwrap_or_else(|| {
                    (spec.offset_sigma_ps as f64 * gauss(key(seed, OFFSET, h as u64, 0))).round()
                        as i64
                })
            })
            .collect();
        Ok(Clocks {
            seed,
            wander_ppm: spec.wander_ppm,
            every_ps: if spec.wander_ppm > 0.0 {
                spec.wander_every_ps
            } else {
                0
            },
            osc_of,
            offset_ps,
            stamping: spec.hosts.iter().map(|h| h.stamping).collect(),
            oscs,
            nic_sigma_ps: spec.nic_sigma_ps as f64,
            software_median_ps: spec.software_median_ps as f64,
            software_shape: spec.software_shape,
        })
    }

    pub fn hosts(&self) -> usize {
        self.osc_of.len()
    }
    /// The oscillator host `host` runs on (hosts of one group share it).
    pub fn oscillator(&self, host: u32) -> u32 {
        self.osc_of[host as usize]
    }
    pub fn offset_ps(&self, host: u32) -> i64 {
        self.offset_ps[host as usize]
    }
    /// The drift host `host`'s clock starts with (ppm).
    pub fn initial_drift_ppm(&self, host: u32) -> f64 {
        self.oscs[self.osc_of[host as usize] as usize].steps[0].0
    }

    /// Wander step k of oscillator `o` (drift, phase at its start), computing
    /// the steps up to it once.
    fn step(&mut self, o: usize, k: usize) -> (f64, f64) {
        let (seed, every, wander) = (self.seed, self.every_ps as f64, self.wander_ppm);
        let osc = &mut self.oscs[o];
        while osc.steps.len() <= k {
            let i = osc.steps.len();
            let (d, phase) = osc.steps[i - 1];
            let next = d + wander * gauss(key(seed, WALK, osc.id as u64, i as u64));
            osc.steps.push((
                next.clamp(-MAX_DRIFT_PPM, MAX_DRIFT_PPM),
                phase + d * every / 1e6,
            ));
        }
        osc.steps[k]
    }

    /// The drift of host `host`'s clock at true time `t_ps` (ppm).
    pub fn drift_ppm(&mut self, host: u32, t_ps: u64) -> f64 {
        let o = self.osc_of[host as usize] as usize;
        let k = t_ps.checked_div(self.every_ps).unwrap_or(0) as usize;
        self.step(o, k).0
    }

    /// What host `host`'s clock reads at true time `t_ps`, in ps (without
    /// stamping noise): `t + offset + ∫ drift`.
    pub fn read_ps(&mut self, host: u32, t_ps: u64) -> i64 {
        let o = self.osc_of[host as usize] as usize;
        let k = t_ps.checked_div(self.every_ps).unwrap_or(0);
        let (d, phase) = self.step(o, k as usize);
        let dt = (t_ps - k * self.every_ps) as f64;
        let phase = phase + d * dt / 1e6;
        t_ps as i64 + self.offset_ps[host as usize] + phase.round() as i64
    }

    /// A timestamp host `host` takes at true time `t_ps`: its clock's
    /// reading plus its stamping noise. `key` names the stamp (the same key
    /// gives the same noise); `rx`: a receive (a software stamp is late)
    /// rather than a send (early).
    pub fn stamp_ps(&mut self, host: u32, t_ps: u64, stamp: u64, rx: bool) -> i64 {
        let read = self.read_ps(host, t_ps);
        let z = gauss(key(self.seed, STAMP, host as u64, stamp));
        let noise = match self.stamping[host as usize] {
            Stamping::Nic => self.nic_sigma_ps * z,
            Stamping::Software => {
                let late = self.software_median_ps * (self.software_shape * z).exp();
                if rx {
                    late
                } else {
                    -late
                }
            }
        };
        read + noise.round() as i64
    }

    /// The earliest true time at which host `host`'s clock reads at least
    /// `local_ps` (0 if it already did at time 0).
    pub fn true_time_ps(&mut self, host: u32, local_ps: i64) -> u64 {
        if self.read_ps(host, 0) >= local_ps {
            return 0;
        }
        // Newton's steps on the piecewise-linear reading, then the last
        // picoseconds one at a time (the reading's slope is 1 ± 0.001).
        let mut t: u64 = 0;
        for _ in 0..64 {
            let err = local_ps - self.read_ps(host, t);
            if err.abs() <= 2 {
                break;
            }
            let slope = 1.0 + self.drift_ppm(host, t) / 1e6;
            t = (t as f64 + err as f64 / slope).max(0.0) as u64;
        }
        while self.read_ps(host, t) < local_ps {
            t += 1;
        }
        while t > 0 && self.read_ps(host, t - 1) >= local_ps {
            t -= 1;
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(hosts: Vec<HostClockSpec>, groups: Vec<Vec<u32>>, wander_ppm: f64) -> ClockSpec {
        ClockSpec {
            offset_sigma_ps: 100_000_000,
            drift_sigma_ppm: 6.0,
            wander_ppm,
            wander_every_ps: 1_000_000_000,
            nic_sigma_ps: 0,
            software_median_ps: 0,
            software_shape: 1.0,
            hosts,
            groups,
        }
    }

    fn host(offset_ps: Option<i64>, drift_ppm: Option<f64>) -> HostClockSpec {
        HostClockSpec {
            offset_ps,
            drift_ppm,
            stamping: Stamping::Nic,
        }
    }

    #[test]
    fn a_reading_is_true_time_plus_offset_plus_drift_times_t() {
        let s = spec(
            vec![
                host(Some(1_000), Some(10.0)),
                host(Some(-5_000_000), Some(-25.0)),
            ],
            vec![],
            0.0,
        );
        let mut c = Clocks::new(&s, 2, 7).unwrap();
        // 1 ms at +10 ppm gains 10 ns; at -25 ppm loses 25 ns.
        assert_eq!(c.read_ps(0, 1_000_000_000), 1_000_000_000 + 1_000 + 10_000);
        assert_eq!(
            c.read_ps(1, 1_000_000_000),
            1_000_000_000 - 5_000_000 - 25_000
        );
        // 2.5 s at +10 ppm: 25 us.
        assert_eq!(
            c.read_ps(0, 2_500_000_000_000),
            2_500_000_000_000 + 1_000 + 25_000_000
        );
        assert_eq!(c.read_ps(0, 0), 1_000);
        // With zero noise a stamp is the reading.
        assert_eq!(
            c.stamp_ps(0, 1_000_000_000, 3, true),
            1_000_000_000 + 11_000
        );
    }

    #[test]
    fn hosts_of_one_group_share_drift_and_walk() {
        let hosts = vec![
            host(Some(0), Some(8.0)),
            host(Some(500), None),
            host(Some(0), None),
        ];
        let mut c = Clocks::new(&spec(hosts, vec![vec![0, 1]], 0.5), 3, 11).unwrap();
        assert_eq!(c.oscillator(0), c.oscillator(1));
        assert_ne!(c.oscillator(0), c.oscillator(2));
        assert_eq!(c.initial_drift_ppm(1), 8.0);
        for k in 0..50u64 {
            let t = k * 777_777_777;
            assert_eq!(c.drift_ppm(0, t), c.drift_ppm(1, t));
            // Same oscillator, offsets 500 ps apart.
            assert_eq!(c.read_ps(1, t) - c.read_ps(0, t), 500);
        }
        // The walk moved the drift, and host 2's walk is its own.
        assert_ne!(c.drift_ppm(0, 40_000_000_000), 8.0);
        assert_ne!(
            c.drift_ppm(2, 40_000_000_000),
            c.drift_ppm(0, 40_000_000_000)
        );
    }

    #[test]
    fn the_walk_integrates_piecewise_constant_drift() {
        let mut c = Clocks::new(&spec(vec![host(Some(0), Some(5.0))], vec![], 0.3), 1, 3).unwrap();
        let every = 1_000_000_000u64;
        let d: Vec<f64> = (0..4).map(|k| c.drift_ppm(0, k * every)).collect();
        assert_eq!(d[0], 5.0);
        // Half-way through step 3: the phase is every × (d0 + d1 + d2) + every/2 × d3.
        let t = 3 * every + every / 2;
        let phase =
            ((d[0] + d[1] + d[2]) * every as f64 / 1e6 + d[3] * (every / 2) as f64 / 1e6).round();
        assert_eq!(c.read_ps(0, t), t as i64 + phase as i64);
    }

    #[test]
    fn readings_do_not_depend_on_read_order() {
        let hosts = || vec![host(None, None), host(None, None), host(None, None)];
        let times: Vec<u64> = (0..200).map(|i| (i * 7_919 % 200) * 123_456_789).collect();
        let mut a = Clocks::new(&spec(hosts(), vec![vec![2, 0]], 0.2), 3, 99).unwrap();
        let forward: Vec<i64> = times
            .iter()
            .map(|&t| a.read_ps((t % 3) as u32, t))
            .collect();
        let mut b = Clocks::new(&spec(hosts(), vec![vec![2, 0]], 0.2), 3, 99).unwrap();
        let mut backward: Vec<i64> = times
            .iter()
            .rev()
            .map(|&t| b.read_ps((t % 3) as u32, t))
            .collect();
        backward.reverse();
        assert_eq!(forward, backward);
        // Another seed, other clocks.
        let mut c = Clocks::new(&spec(hosts(), vec![vec![2, 0]], 0.2), 3, 100).unwrap();
        assert_ne!(c.read_ps(1, 1_000), a.read_ps(1, 1_000));
    }

    #[test]
    fn true_time_inverts_the_reading() {
        let mut c = Clocks::new(
            &spec(vec![host(Some(-3_000_000), Some(-700.0))], vec![], 2.0),
            1,
            5,
        )
        .unwrap();
        for local in [0i64, 1, 999_999, 5_000_000_000, 123_456_789_012] {
            let t = c.true_time_ps(0, local);
            assert!(c.read_ps(0, t) >= local);
            assert!(t == 0 || c.read_ps(0, t - 1) < local);
        }
    }

    #[test]
    fn stamping_noise_has_its_distribution() {
        let mut s = spec(
            vec![
                host(Some(0), Some(0.0)),
                HostClockSpec {
                    offset_ps: Some(0),
                    drift_ppm: Some(0.0),
                    stamping: Stamping::Software,
                },
            ],
            vec![],
            0.0,
        );
        s.nic_sigma_ps = 20_000;
        s.software_median_ps = 1_000_000;
        s.software_shape = 0.8;
        let mut c = Clocks::new(&s, 2, 4).unwrap();
        let t = 5_000_000_000u64;
        let n = 20_000u64;
        // nic: zero mean, sigma 20 ns (the sample's within 2 % and 0.5 ns).
        let nic: Vec<f64> = (0..n)
            .map(|k| (c.stamp_ps(0, t, k, true) - t as i64) as f64)
            .collect();
        let mean = nic.iter().sum::<f64>() / n as f64;
        let sd = (nic.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!(
            mean.abs() < 500.0 && (sd - 20_000.0).abs() < 400.0,
            "{mean} {sd}"
        );
        // software: late on receive, early on send, median 1 us, p99 = 1 us x e^(0.8 x 2.326) = 6.43 us.
        let mut rx: Vec<i64> = (0..n)
            .map(|k| c.stamp_ps(1, t, k, true) - t as i64)
            .collect();
        rx.sort_unstable();
        assert!(rx[0] > 0);
        assert!(
            (rx[n as usize / 2] - 1_000_000).abs() < 30_000,
            "{}",
            rx[n as usize / 2]
        );
        assert!(
            (rx[n as usize * 99 / 100] - 6_430_000).abs() < 400_000,
            "{}",
            rx[n as usize * 99 / 100]
        );
        assert!((0..100).all(|k| c.stamp_ps(1, t, k, false) < t as i64));
        // One key, one draw: a stamp repeated is the same stamp.
        assert_eq!(c.stamp_ps(1, t, 7, true), c.stamp_ps(1, t, 7, true));
    }

    #[test]
    fn bad_input_names_the_field() {
        let e = Clocks::new(&spec(vec![host(None, Some(1000.5))], vec![], 0.0), 1, 1).unwrap_err();
        assert!(e.starts_with("clocks.hosts[0].drift_ppm"), "{e}");
        let hosts = vec![host(None, Some(1.0)), host(None, Some(2.0))];
        let e = Clocks::new(&spec(hosts, vec![vec![0, 1]], 0.0), 2, 1).unwrap_err();
        assert!(e.starts_with("clocks.hosts[1].drift_ppm"), "{e}");
        let e = Clocks::new(
            &spec(vec![host(None, None)], vec![vec![0], vec![0]], 0.0),
            1,
            1,
        )
        .unwrap_err();
        assert!(e.starts_with("clocks.groups[1]"), "{e}");
    }
}

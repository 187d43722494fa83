//! DCQCN's reaction point (Zhu et al., "Congestion Control for Large-Scale
//! RDMA Deployments", SIGCOMM'15, section 3), in the form NICs run it and
//! the ns-3 HPCC repository models it: a sending rate `R_C`, a target rate
//! `R_T` and a congestion estimate `alpha`, driven by congestion
//! notification packets (CNPs) and three periodic timers.
//!
//! - **Alpha** (every `alpha_interval_ps`, from the first CNP on):
//!   `alpha = (1 - g) alpha + g` if a CNP arrived during the period, else
//!   `alpha = (1 - g) alpha`. The first CNP sets `alpha = 1`.
//! - **Rate decrease** (checked every `decrease_interval_ps` from the first
//!   CNP on): if a CNP arrived since the last check, `R_T = R_C` (only once
//!   the rate has begun to recover, unless `clamp_target`), then
//!   `R_C = max(min_rate, R_C (1 - alpha / 2))`; the increase stage returns
//!   to 0 and the increase timer restarts.
//! - **Rate increase** (every `increase_interval_ps` after a decrease), at
//!   stage i: fast recovery while i < F, `R_C = (R_C + R_T) / 2`; at i = F
//!   additive increase, `R_T += R_AI`; beyond, hyper increase,
//!   `R_T += R_HAI`; in both `R_T` is capped at the line rate and
//!   `R_C = (R_C + R_T) / 2`. Then i increases.
//!
//! The timers are not events: [`DcqcnRp::advance`] plays every timer tick
//! up to `now` in time order, so the state at any instant is what an
//! event-driven model would have, while the sender needs an event only when
//! it sends. At equal times the tick scheduled earliest goes first, as in an
//! event queue with first-in-first-out ties (ns-3's): the increase (its
//! period is the longest), then alpha, then the decrease check.
//!
//! [`Dcqcn`] puts the reaction point behind the transport's congestion
//! control trait: the sender paces its new packets at `R_C` (a
//! retransmission goes at once) and keeps no window (RoCE's queue pairs
//! have none); CNPs ride on ACKs as the ECN echo, as the HPCC repository's
//! NICs flag them, at most one per `cnp_interval_ps` per flow ([`CnpPacer`]
//! at the receiver: the paper's notification point; 0 flags every ACK of a
//! marked packet, as the HPCC repository does). The paper's byte counter
//! is not modelled: the increase timer alone drives recovery, as there.
//!
//! The reaction point is a [`SharedRp`] (and the notification point a
//! [`SharedNp`]): the messages of one RoCE queue pair (QP) hold the same
//! one, so the rate, alpha and timers carry from one message to the next,
//! as a NIC keeps them per QP (Zhu et al. define the RP and NP per flow,
//! and a RoCE flow is a QP; NVIDIA's DCQCN description: a CNP names the QP
//! whose packet was marked and the sending NIC throttles that QP's rate).
//! The HPCC repository's simulator opens an `RdmaQueuePair` per flow at
//! line rate (`RdmaHw::AddQueuePair`) and deletes it when the flow
//! completes (`QpComplete`): its DCQCN state restarts per message. A
//! message of its own QP holds a reaction point nobody else does, as there.

use super::cc::{AckInfo, CcState, CongestionControl};
use std::sync::{Arc, Mutex};

/// DCQCN's parameters. Defaults: the ns-3 HPCC repository's (`RdmaHw`):
/// g = 1/16, alpha every 55 us, decrease checks every 4 us, increase timer
/// 1500 us, F = 5, R_AI = 5 Mbit/s, R_HAI = 50 Mbit/s, minimum 100 Mbit/s,
/// no clamping; CNPs at most every 50 us per flow (the paper's N).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DcqcnParams {
    pub g: f64,
    pub alpha_interval_ps: u64,
    pub decrease_interval_ps: u64,
    pub increase_interval_ps: u64,
    pub fast_recovery_steps: u32,
    pub rate_ai_bps: f64,
    pub rate_hai_bps: f64,
    pub min_rate_bps: f64,
    pub clamp_target: bool,
    pub cnp_interval_ps: u64,
}

impl Default for DcqcnParams {
    fn default() -> Self {
        DcqcnParams {
            g: 1.0 / 16.0,
            alpha_interval_ps: 55_000_000,
            decrease_interval_ps: 4_000_000,
            increase_interval_ps: 1_500_000_000,
            fast_recovery_steps: 5,
            rate_ai_bps: 5e6,
            rate_hai_bps: 50e6,
            min_rate_bps: 100e6,
            clamp_target: false,
            cnp_interval_ps: 50_000_000,
        }
    }
}

#[derive(Debug, Clone)]
pub struct DcqcnRp {
    p: DcqcnParams,
    line_bps: f64,
    rate_bps: f64,
    target_bps: f64,
    alpha: f64,
    /// Timers run from the first CNP on.
    started: bool,
    next_alpha_ps: u64,
    next_decrease_ps: u64,
    /// The increase timer runs after a decrease.
    next_increase_ps: Option<u64>,
    stage: u32,
    cnp_for_alpha: bool,
    cnp_for_decrease: bool,
    /// Latest time played by `advance`.
    now_ps: u64,
    pub cnps: u64,
    pub decreases: u64,
}

impl DcqcnRp {
    /// A flow starting at line rate.
    pub fn new(line_bps: f64, p: DcqcnParams) -> DcqcnRp {
        DcqcnRp {
            p,
            line_bps,
            rate_bps: line_bps,
            target_bps: line_bps,
            alpha: 1.0,
            started: false,
            next_alpha_ps: 0,
            next_decrease_ps: 0,
            next_increase_ps: None,
            stage: 0,
            cnp_for_alpha: false,
            cnp_for_decrease: false,
            now_ps: 0,
            cnps: 0,
            decreases: 0,
        }
    }

    pub fn rate_bps(&self) -> f64 {
        self.rate_bps
    }
    pub fn target_bps(&self) -> f64 {
        self.target_bps
    }
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
    pub fn stage(&self) -> u32 {
        self.stage
    }

    /// A CNP arrived at `now` (after playing the timers up to `now`).
    pub fn on_cnp(&mut self, now: u64) {
        self.advance(now);
        self.cnps += 1;
        if self.started && !self.cnp_for_decrease {
            // Decrease checks without a CNP change nothing, so `advance`
            // leaves them unplayed: move to the first check after `now`.
            let step = self.p.decrease_interval_ps;
            if self.next_decrease_ps <= now {
                self.next_decrease_ps += (now - self.next_decrease_ps) / step * step + step;
            }
        }
        self.cnp_for_decrease = true;
        if !self.started {
            // The first CNP: alpha starts at 1 and the timers start. The
            // rate itself is cut at the first decrease check.
            self.started = true;
            self.alpha = 1.0;
            self.cnp_for_alpha = false;
            self.target_bps = self.rate_bps;
            self.next_alpha_ps = now + self.p.alpha_interval_ps;
            self.next_decrease_ps = now + self.p.decrease_interval_ps;
        } else {
            self.cnp_for_alpha = true;
        }
    }

    /// Plays every timer tick at or before `now`, in time order.
    pub fn advance(&mut self, now: u64) {
        if now < self.now_ps {
            return;
        }
        self.now_ps = now;
        if !self.started {
            return;
        }
        loop {
            let inc = self.next_increase_ps.unwrap_or(u64::MAX);
            let dec = if self.cnp_for_decrease {
                self.next_decrease_ps
            } else {
                u64::MAX
            };
            let t = self.next_alpha_ps.min(dec).min(inc);
            if t > now {
                return;
            }
            if t == inc {
                self.increase_tick();
            } else if t == self.next_alpha_ps {
                self.alpha_tick();
            } else {
                self.decrease_tick(t);
            }
            if self.idle_forever() {
                self.skip_idle(now);
                return;
            }
        }
    }

    fn alpha_tick(&mut self) {
        let g = self.p.g;
        self.alpha = (1.0 - g) * self.alpha + if self.cnp_for_alpha { g } else { 0.0 };
        self.cnp_for_alpha = false;
        self.next_alpha_ps += self.p.alpha_interval_ps;
    }

    fn decrease_tick(&mut self, t: u64) {
        self.next_decrease_ps += self.p.decrease_interval_ps;
        self.cnp_for_decrease = false;
        if self.p.clamp_target || self.stage > 0 {
            self.target_bps = self.rate_bps;
        }
        self.rate_bps = (self.rate_bps * (1.0 - self.alpha / 2.0)).max(self.p.min_rate_bps);
        self.stage = 0;
        self.next_increase_ps = Some(t + self.p.increase_interval_ps);
        self.decreases += 1;
    }

    fn increase_tick(&mut self) {
        let f = self.p.fast_recovery_steps;
        if self.stage == f {
            self.target_bps = (self.target_bps + self.p.rate_ai_bps).min(self.line_bps);
        } else if self.stage > f {
            self.target_bps = (self.target_bps + self.p.rate_hai_bps).min(self.line_bps);
        }
        self.rate_bps = (self.rate_bps + self.target_bps) / 2.0;
        self.stage += 1;
        *self.next_increase_ps.as_mut().expect("ticking") += self.p.increase_interval_ps;
    }

    /// Without CNPs, once both rates sit at the line rate and alpha is
    /// negligible, further ticks change nothing that matters.
    fn idle_forever(&self) -> bool {
        !self.cnp_for_alpha
            && !self.cnp_for_decrease
            && self.rate_bps >= self.line_bps
            && self.target_bps >= self.line_bps
            && self.alpha < 1e-12
    }

    /// Moves the idle timers past `now` without playing each tick.
    fn skip_idle(&mut self, now: u64) {
        let skip = |next: &mut u64, step: u64| {
            if *next <= now {
                *next += (now - *next) / step * step + step;
            }
        };
        skip(&mut self.next_alpha_ps, self.p.alpha_interval_ps);
        self.alpha = 0.0;
        if let Some(mut n) = self.next_increase_ps {
            if n <= now {
                let ticks = (now - n) / self.p.increase_interval_ps + 1;
                self.stage = self.stage.saturating_add(ticks.min(u32::MAX as u64) as u32);
                skip(&mut n, self.p.increase_interval_ps);
            }
            self.next_increase_ps = Some(n);
        }
    }
}

/// The notification point: a receiver sends at most one CNP per flow every
/// `cnp_interval_ps` while marked packets arrive (section 3.2).
#[derive(Debug, Clone, Default)]
pub struct CnpPacer {
    next_ps: u64,
}

impl CnpPacer {
    /// Whether a packet arriving at `now`, marked or not, triggers a CNP.
    pub fn on_packet(&mut self, now: u64, marked: bool, interval_ps: u64) -> bool {
        if marked && now >= self.next_ps {
            self.next_ps = now + interval_ps;
            true
        } else {
            false
        }
    }
}

/// A reaction point shared by the messages of one queue pair.
pub type SharedRp = Arc<Mutex<DcqcnRp>>;

/// A notification point shared by the messages of one queue pair.
pub type SharedNp = Arc<Mutex<CnpPacer>>;

/// DCQCN as the transport's congestion control: a paced sender without a window.
#[derive(Debug)]
pub struct Dcqcn {
    rp: SharedRp,
}

impl Dcqcn {
    /// A message on a queue pair of its own, starting at line rate.
    pub fn new(line_bps: f64, p: DcqcnParams) -> Dcqcn {
        Dcqcn::on_qp(Arc::new(Mutex::new(DcqcnRp::new(line_bps, p))))
    }

    /// A message of the queue pair whose reaction point is `rp`.
    pub fn on_qp(rp: SharedRp) -> Dcqcn {
        Dcqcn { rp }
    }

    fn rp(&self) -> std::sync::MutexGuard<'_, DcqcnRp> {
        self.rp
            .lock()
            .expect("a reaction point is never left mid-update")
    }
}

impl CongestionControl for Dcqcn {
    fn name(&self) -> &'static str {
        "dcqcn"
    }
    fn ecn_capable(&self) -> bool {
        true
    }
    fn on_ack(&mut self, _st: &mut CcState, _ack: &AckInfo) {
        // No window to move: the sender keeps a windowless controller's
        // window infinite (`windowless`, and ssthresh stays infinite through
        // `ssthresh_after_loss`); the pacer alone limits it.
    }
    fn ssthresh_after_loss(&mut self, _st: &CcState, _flight_bytes: u64) -> f64 {
        f64::INFINITY
    }
    fn alpha(&self) -> Option<f64> {
        Some(self.rp().alpha())
    }
    fn on_feedback(&mut self, now: u64, ece: bool) {
        if ece {
            self.rp().on_cnp(now);
        }
    }
    fn pacing_rate_bps(&mut self, now: u64) -> Option<f64> {
        let mut rp = self.rp();
        rp.advance(now);
        Some(rp.rate_bps())
    }
    fn windowless(&self) -> bool {
        true
    }
}

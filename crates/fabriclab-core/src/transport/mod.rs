//! Transport: a reliable window-based sender/receiver pair with pluggable
//! congestion control.

pub mod cc;
pub mod clock_correction;
pub mod cubic;
pub mod dcqcn;
pub mod rocket;
pub mod sack;
pub mod tcp;

pub use cc::{CongestionControl, Dctcp, NewReno};
pub use clock_correction::{ClockCorrection, CorrectionPiece};
pub use cubic::Cubic;
pub use dcqcn::{Dcqcn, DcqcnParams};
pub use rocket::Rocket;
pub use tcp::{Segment, SenderConfig, TcpReceiver, TcpSender, WindowState};

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CcKind {
    Newreno,
    Dctcp,
    /// RFC 9438 (see [`cubic`]).
    Cubic,
    /// Rate-based, for RoCE over PFC (see [`dcqcn`]).
    Dcqcn,
}

fn fast_convergence_default() -> bool {
    true
}

/// DCQCN's parameters as the scenario gives them (see [`DcqcnParams`]).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DcqcnSpec {
    pub g: f64,
    pub alpha_interval_ps: u64,
    pub decrease_interval_ps: u64,
    pub increase_interval_ps: u64,
    pub fast_recovery_steps: u32,
    pub rate_ai_bps: u64,
    pub rate_hai_bps: u64,
    pub min_rate_bps: u64,
    pub clamp_target: bool,
    pub cnp_interval_ps: u64,
}

impl DcqcnSpec {
    pub fn params(&self) -> DcqcnParams {
        DcqcnParams {
            g: self.g,
            alpha_interval_ps: self.alpha_interval_ps,
            decrease_interval_ps: self.decrease_interval_ps,
            increase_interval_ps: self.increase_interval_ps,
            fast_recovery_steps: self.fast_recovery_steps,
            rate_ai_bps: self.rate_ai_bps as f64,
            rate_hai_bps: self.rate_hai_bps as f64,
            min_rate_bps: self.min_rate_bps as f64,
            clamp_target: self.clamp_target,
            cnp_interval_ps: self.cnp_interval_ps,
        }
    }
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransportSpec {
    pub cc: CcKind,
    pub mss_bytes: u32,
    pub init_cwnd_packets: u32,
    pub min_rto_ps: u64,
    pub initial_rto_ps: u64,
    pub max_rto_ps: u64,
    pub dupack_threshold: u32,
    pub dctcp_g: f64,
    pub dctcp_initial_alpha: f64,
    /// CUBIC's fast convergence (RFC 9438 §4.7), with `cc` cubic.
    #[serde(default = "fast_convergence_default")]
    pub cubic_fast_convergence: bool,
    /// TCP Small Queues: payload bytes one connection may hold in its host's NIC queue.
    pub tsq_limit_bytes: u64,
    /// Messages between the same two hosts in the same class continue one
    /// connection's window and RTT state instead of starting afresh.
    #[serde(default)]
    pub persistent_connections: bool,
    /// Open every new connection with a SYN / SYN-ACK exchange (packet backend).
    #[serde(default)]
    pub handshake: bool,
    /// Selective acknowledgments (RFC 2018) and SACK-based loss recovery
    /// (RFC 6675) instead of NewReno's (packet backend; not with DCQCN).
    #[serde(default)]
    pub sack: bool,
    /// DCQCN's parameters (used when `cc` is dcqcn; the defaults otherwise).
    #[serde(default)]
    pub dcqcn: Option<DcqcnSpec>,
    /// Packet Rocket's threshold T (see [`rocket`]): a flow whose echoed
    /// one-way delay exceeds its path's base by more than T is held at its
    /// sender; `None`: off (packet backend).
    #[serde(default)]
    pub packet_rocket_threshold_ps: Option<u64>,
    /// Whose clocks stamp and read Packet Rocket's one-way delays.
    #[serde(default)]
    pub packet_rocket_clock: RocketClock,
    /// Which echoes a Packet Rocket pause ignores.
    #[serde(default)]
    pub packet_rocket_ignore: RocketIgnore,
    /// The hosts (host indices) whose senders run Packet Rocket; a
    /// connection from any other host runs without it. `None`: every host.
    #[serde(default)]
    pub packet_rocket_hosts: Option<Vec<u32>>,
    /// With `packet_rocket_clock` estimated: each host's clock correction
    /// (see [`clock_correction`]); empty: every host reads its clock raw.
    #[serde(default)]
    pub packet_rocket_correction: Vec<CorrectionPiece>,
}

/// Which echoes a Packet Rocket pause ignores ([`rocket::Ignore`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RocketIgnore {
    /// Echoes of packets sent before the last pause ended (issue 27's reading).
    #[default]
    Ended,
    /// As `ended`, but an echo arriving during a pause may move its end later (ours).
    Extend,
    /// Only echoes of packets sent during a pause (ours).
    During,
}

impl RocketIgnore {
    pub fn rule(self) -> rocket::Ignore {
        match self {
            RocketIgnore::Ended => rocket::Ignore::BeforeEnd,
            RocketIgnore::Extend => rocket::Ignore::Extend,
            RocketIgnore::During => rocket::Ignore::During,
        }
    }
}

/// The clocks Packet Rocket's one-way delays are read on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RocketClock {
    /// True simulated time at both ends.
    #[default]
    Ideal,
    /// Each host's own clock (the scenario's `[clocks]`; true time without it).
    Host,
    /// Each host's own clock less the given correction
    /// (`packet_rocket_correction`): what an estimator recovered of it.
    Estimated,
}

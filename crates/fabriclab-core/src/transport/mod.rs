//! Transport: a reliable window-based sender/receiver pair with pluggable
//! congestion control.

pub mod cc;
pub mod tcp;

pub use cc::{CongestionControl, Dctcp, NewReno};
pub use tcp::{Segment, SenderConfig, TcpReceiver, TcpSender, WindowState};

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CcKind {
    Newreno,
    Dctcp,
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
    /// TCP Small Queues: payload bytes one connection may hold in its host's NIC queue.
    pub tsq_limit_bytes: u64,
    /// Messages between the same two hosts in the same class continue one
    /// connection's window and RTT state instead of starting afresh.
    #[serde(default)]
    pub persistent_connections: bool,
    /// Open every new connection with a SYN / SYN-ACK exchange (packet backend).
    #[serde(default)]
    pub handshake: bool,
}

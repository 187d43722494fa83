//! The resolved scenario as the core reads it (JSON produced by the Python
//! scenario layer). Every field is explicit here: defaults are filled in by
//! the Python schema, so the core never guesses a unit or a value.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimSpec {
    pub seed: u64,
    pub backend: BackendKind,
    pub topology: TopologySpec,
    pub queue: QueueSpec,
    pub transport: TransportSpec,
    pub routing: RoutingSpec,
    #[serde(default)]
    pub traffic: Vec<PoissonSpec>,
    #[serde(default)]
    pub flows: Vec<FlowSpec>,
    #[serde(default)]
    pub collectives: Vec<crate::collective::CollectiveSpec>,
    #[serde(default)]
    pub jobs: Vec<crate::job::JobSpec>,
    /// Hard stop of simulated time; `None` runs until no event is left.
    #[serde(default)]
    pub stop_ps: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Packet,
    Flow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    Host,
    Switch,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    pub name: String,
    pub kind: NodeKind,
}

/// A full-duplex link: two directed ports, one at each end.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub a: u32,
    pub b: u32,
    pub rate_bps: u64,
    pub delay_ps: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    pub nodes: Vec<NodeSpec>,
    pub links: Vec<LinkSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Discipline {
    Fifo,
    Prio,
}

/// Egress queue discipline of every switch port. Limits and ECN thresholds
/// apply per band (as Linux `prio` gives each band its own child FIFO).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    pub discipline: Discipline,
    pub bands: u8,
    /// `priomap[class]` is the band of traffic class `class` (band 0 is served first).
    pub priomap: [u8; 8],
    pub limit_bytes: Option<u64>,
    pub limit_packets: Option<u64>,
    pub ecn_threshold_bytes: Option<u64>,
    pub ecn_threshold_packets: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CcKind {
    Newreno,
    Dctcp,
}

#[derive(Debug, Clone, Deserialize)]
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
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingSpec {
    pub ecmp_hash_seed: u64,
}

/// Poisson background flows sized to a target load.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoissonSpec {
    /// Offered load as a fraction of the summed host link rate of `hosts`.
    pub load: f64,
    /// Empirical CDF of flow sizes: points `(size_bytes, cumulative probability)`.
    pub cdf: Vec<(f64, f64)>,
    pub start_ps: u64,
    pub duration_ps: u64,
    /// Host indices (order of hosts in the node list) that send and receive.
    pub hosts: Vec<u32>,
    pub class: u8,
    pub tag: String,
}

/// One explicit flow (message).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    pub size_bytes: u64,
    pub start_ps: u64,
    pub class: u8,
    /// Explicit path as node indices from the source host to the destination host.
    #[serde(default)]
    pub path: Option<Vec<u32>>,
}

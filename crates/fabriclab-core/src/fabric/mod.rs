//! The fabric: what the scenario says about nodes and links, the graph and
//! its routing ([`topology`]), and frame sizes on the wire ([`frame`]).
//! Below the engine: it knows no event, packet or application.

pub mod aggregation;
pub mod frame;
pub mod topology;

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    Host,
    Switch,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    pub name: String,
    pub kind: NodeKind,
}

/// A full-duplex link: two directed ports, one at each end.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub a: u32,
    pub b: u32,
    pub rate_bps: u64,
    pub delay_ps: u64,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    pub nodes: Vec<NodeSpec>,
    pub links: Vec<LinkSpec>,
}

/// What a timed link event does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LinkAction {
    Down,
    Up,
    /// Serialize at `rate_bps` from now on (a degraded NIC or link).
    Rate,
    /// Lose each packet sent with probability `loss` from now on.
    Loss,
}

/// At `at_ps`, link `link` (index into `topology.links`, both directions) changes.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkEventSpec {
    pub at_ps: u64,
    pub link: u32,
    pub action: LinkAction,
    #[serde(default)]
    pub rate_bps: Option<u64>,
    #[serde(default)]
    pub loss: Option<f64>,
}

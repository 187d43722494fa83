//! Logic on switches: a hook that sees every packet a chosen switch
//! receives, before forwarding, and may absorb it, hold packets in a
//! bounded buffer of its own, and emit new packets to any of the switch's
//! egress ports: [`tap`] counts a class and mirrors it to a port;
//! [`panama`] is PANAMA's aggregation accelerator, attached to the switches
//! of the scenario's aggregation trees.
//!
//! Logic keeps at most one pending timer, in smoltcp's shape: after every
//! call the backend asks [`SwitchLogic::poll_at`] and calls
//! [`SwitchLogic::poll`] then.

mod hook;
pub mod panama;
pub mod tap;

pub(super) use hook::Logics;

use super::header::Packet;
use crate::engine::Table;
use serde::Deserialize;

/// What to do with the packet the logic was shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Forward it as the switch would without logic.
    Forward,
    /// The logic took it (dropped, or holding it): the switch forgets it.
    Absorb,
}

/// What logic may do while handling a packet or a timer.
pub struct LogicCtx<'a> {
    pub now: u64,
    /// Egress ports of the switch the logic sits on, in port order.
    pub ports: &'a [u32],
    /// Packets to send: (egress port of this switch, packet).
    pub emit: &'a mut Vec<(u32, Packet)>,
    /// Aggregation packets' vectors, in functional runs.
    pub vectors: Option<&'a mut super::agg_values::VectorSlab>,
}

pub trait SwitchLogic: Send + Sync {
    /// A packet arrived at the switch over `ingress` (the port whose wire brought it).
    fn on_packet(&mut self, ctx: &mut LogicCtx, ingress: u32, pkt: &Packet) -> Verdict;
    /// When the logic next wants [`SwitchLogic::poll`] (None: never).
    fn poll_at(&self) -> Option<u64> {
        None
    }
    fn poll(&mut self, _ctx: &mut LogicCtx) {}
    /// Rows for the `switch_logic` result table: (node, counter name, value).
    fn counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    /// Rows for the `switch_logic_series` table: (series name, time, value).
    fn series(&self) -> Vec<(&'static str, u64, u64)> {
        Vec::new()
    }
}

/// Logic to attach to a switch, by kind (node indices resolved by the
/// scenario layer).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SwitchLogicSpec {
    /// Count packets of `class`; mirror each to the egress port toward
    /// `mirror_to` (a neighbour); absorb them instead of forwarding if `absorb`.
    Tap {
        node: u32,
        class: u8,
        mirror_to: Option<u32>,
        absorb: bool,
    },
}

impl SwitchLogicSpec {
    pub fn node(&self) -> u32 {
        match self {
            SwitchLogicSpec::Tap { node, .. } => *node,
        }
    }
}

/// A table of every logic's counters.
pub fn counters_table(rows: Vec<(String, String, u64)>) -> Table {
    use crate::engine::Column;
    Table::new("switch_logic")
        .col(
            "node",
            Column::Str(rows.iter().map(|r| r.0.clone()).collect()),
        )
        .col(
            "counter",
            Column::Str(rows.iter().map(|r| r.1.clone()).collect()),
        )
        .col("value", Column::U64(rows.iter().map(|r| r.2).collect()))
}

/// A table of every logic's time series: (node, series, time, value).
pub fn series_table(rows: Vec<(String, &'static str, u64, u64)>) -> Table {
    use crate::engine::Column;
    Table::new("switch_logic_series")
        .col(
            "node",
            Column::Str(rows.iter().map(|r| r.0.clone()).collect()),
        )
        .col(
            "series",
            Column::Str(rows.iter().map(|r| r.1.to_string()).collect()),
        )
        .col("time_ps", Column::U64(rows.iter().map(|r| r.2).collect()))
        .col("value", Column::U64(rows.iter().map(|r| r.3).collect()))
}

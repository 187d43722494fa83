//! Applications on the message interface. Each kind reads its own scenario
//! section and is listed once in [`REGISTRY`]; nothing else names an app type.

pub mod ccl;
pub mod collective;
pub mod graph;
pub mod job;
pub mod probes;
pub mod qps;
pub mod slack;
pub mod traffic;

use crate::engine::App;
use crate::fabric::topology::Topology;

/// What an app kind may use while building its apps.
pub struct BuildEnv<'a> {
    pub topo: &'a Topology,
    /// The scenario's seed (apps derive their own streams from it).
    pub seed: u64,
    /// The scenario's in-network aggregation section, if any.
    pub aggregation: Option<&'a crate::fabric::aggregation::AggregationSpec>,
}

/// An application kind: the scenario key it reads and how it builds its apps
/// from that section's JSON value (errors name the field).
pub struct AppKind {
    pub key: &'static str,
    pub build: fn(&serde_json::Value, &BuildEnv) -> Result<Vec<Box<dyn App>>, String>,
    /// The JSON Schema of the section `build` reads (from its serde types).
    pub schema: fn() -> serde_json::Value,
}

/// Every app kind, in the order their apps are added to a simulation.
pub const REGISTRY: &[AppKind] = &[
    traffic::POISSON,
    traffic::FLOWS,
    collective::KIND,
    job::KIND,
    graph::KIND,
    probes::KIND,
];

/// The schema of a section that is a list of `T` (every app section is one).
pub fn list_schema<T: schemars::JsonSchema>() -> serde_json::Value {
    schemars::schema_for!(Vec<T>).to_value()
}

/// Deserializes an app section, naming it on error.
pub fn section<T: serde::de::DeserializeOwned>(
    key: &str,
    v: &serde_json::Value,
) -> Result<T, String> {
    T::deserialize(v).map_err(|e| format!("{key}: {e}"))
}

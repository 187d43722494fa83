//! fabriclab-core: a deterministic discrete-event simulator of data-center
//! fabrics, with a packet-level and a flow-level backend behind one message
//! interface. Pure Rust; the Python binding lives in `fabriclab-py`.
//!
//! Layers, each importing only those below it (docs/architecture.md;
//! `tests/layers.rs` fails on an upward import):
//!
//! 1. `time`, `event`: units and the event queue;
//! 2. `fabric` (nodes, links, routing, frame sizes), `transport` (TCP in
//!    poll shape): no events, no apps;
//! 3. `engine`: the main loop, the message interface (`Api`, `App`), the
//!    backend interface (`Backend`, opaque `NetEv`), probes, result tables;
//! 4. `net` (the packet and flow backends) and `apps` (traffic, collectives,
//!    training jobs), side by side: neither imports the other;
//! 5. `scenario` (the resolved scenario and the builder) and `results`.

pub mod apps;
pub mod engine;
pub mod event;
pub mod fabric;
pub mod net;
pub mod results;
pub mod scenario;
pub mod time;
pub mod transport;

/// The plan format and its step graph (the `fabriclab-plan` crate).
pub use fabriclab_plan as plan;
pub use scenario::{build, build_from_json};

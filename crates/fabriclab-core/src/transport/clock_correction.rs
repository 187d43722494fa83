//! A given correction of host clocks (`packet_rocket_clock = "estimated"`,
//! docs/clockwork-control.md, "Estimated clocks"): the table and its one
//! application live in `fabriclab-rocket` (shared with the runtime's Packet
//! Rocket); the core only applies it, under the field name below.

pub use fabriclab_rocket::correction::{ClockCorrection, CorrectionPiece, MAX_DRIFT_PPM};

/// The scenario field the table comes from (its errors name it).
pub const FIELD: &str = "transport.packet_rocket_correction";

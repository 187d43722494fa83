//! Packet Rocket's pause rule lives in the `fabriclab-rocket` crate, which
//! the runtime's connections use too (one implementation of the rule).

pub use fabriclab_rocket::{Ignore, Rocket};

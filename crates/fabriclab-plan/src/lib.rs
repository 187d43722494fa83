//! fabriclab-plan: the collective plan format (version 1) and its step
//! graph, shared by the simulator core and the real runtime so that both
//! read a plan the same way. See docs/plans.md for the format.
//!
//! A plan gives every rank an ordered list of steps on byte ranges of one
//! buffer, with explicit dependencies on earlier steps of the same rank.
//! [`Plan::from_json`] reads a whole plan document; [`graph::PlanGraph`]
//! checks the structure (peers, dependencies, message matching) and
//! [`graph::PlanRun`] walks one execution without side effects.

pub mod format;
pub mod graph;

pub use format::{Collective, Hop, Op, Plan, Step, PLAN_VERSION};
pub use graph::{Action, PlanGraph, PlanRun};

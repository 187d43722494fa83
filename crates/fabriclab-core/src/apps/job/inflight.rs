//! What the job keeps of its allreduces in flight, whichever engine runs
//! them: an allreduce's progress ([`Allreduce`], its engine's own part in
//! [`Run`]) and each of its messages on the wire ([`JobMsg`]). The engines
//! (`ring.rs`, `plan.rs`) and their dispatcher (`allreduce.rs`) all build on
//! these types.

use fabriclab_plan::PlanRun;

/// An allreduce in flight.
pub(super) struct Allreduce {
    pub fusion: u32,
    pub iteration: u32,
    pub start_ps: u64,
    pub done_workers: u32,
    /// Messages arrived so far (all workers, all rounds or steps).
    pub received: u32,
    /// Messages sent at a class other than the urgent one.
    pub low_sends: u32,
    /// The engine's own progress.
    pub run: Run,
}

/// An engine's progress through one allreduce.
pub(super) enum Run {
    /// Ring: messages arrived per round.
    Ring { arrived: Vec<u32> },
    /// Plan: the walk through the plan's step graph.
    Plan(PlanRun),
    /// Aggregation: every worker's contribution is in the fabric.
    Aggregate,
}

/// A message of the job in flight.
#[derive(Debug, Clone, Copy)]
pub(super) struct JobMsg {
    pub allreduce: u32,
    /// The ring round, or the plan step of the sender.
    pub round: u32,
    pub sender: u32,
    pub receiver: u32,
    pub bytes: u64,
    pub urgent: bool,
}

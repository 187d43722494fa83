//! Plan format version 1: the JSON document and its steps.

use serde::{Deserialize, Serialize};

/// The plan format version this crate reads.
pub const PLAN_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Send,
    Recv,
}

/// One hop of a pinned path: a node index of the topology, or a node name
/// (the simulator's scenario layer turns names into indices).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum Hop {
    Node(u32),
    Name(String),
}

impl Hop {
    /// The node index, if this hop is already resolved.
    pub fn node(&self) -> Option<u32> {
        match self {
            Hop::Node(n) => Some(*n),
            Hop::Name(_) => None,
        }
    }
}

/// A step of a rank: a send of `[offset, offset + bytes)` to `peer`, or the
/// matching receive from `peer` that reduces into (`reduce`) or replaces the
/// local bytes. `deps` are indices of earlier steps of the same rank.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub op: Op,
    pub peer: u32,
    pub offset: u64,
    pub bytes: u64,
    #[serde(default)]
    pub reduce: bool,
    #[serde(default)]
    pub deps: Vec<u32>,
    /// Explicit node path for a send, from the sender's node to the receiver's; else routed.
    #[serde(default)]
    pub path: Option<Vec<Hop>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    Broadcast,
    Reduce,
    Allreduce,
    Allgather,
    ReduceScatter,
    /// Every rank's buffer is `nranks` equal blocks; block j goes to rank j,
    /// which keeps it as its block i (the sender's rank): the blocks'
    /// transpose, in place, without reduction. A receive may land at another
    /// offset than its send read (same length).
    Alltoall,
}

impl Collective {
    pub fn name(self) -> &'static str {
        match self {
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::Allreduce => "allreduce",
            Collective::Allgather => "allgather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::Alltoall => "alltoall",
        }
    }
    /// Whether the collective has a root rank.
    pub fn rooted(self) -> bool {
        matches!(self, Collective::Broadcast | Collective::Reduce)
    }
}

/// A whole plan document.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub version: u32,
    pub collective: Collective,
    pub nranks: u32,
    pub size_bytes: u64,
    #[serde(default)]
    pub root: Option<u32>,
    #[serde(default)]
    pub algorithm: String,
    /// Planner facts (rings, trees, rates, chunk size); not interpreted here.
    #[serde(default)]
    pub meta: serde_json::Value,
    pub ranks: Vec<Vec<Step>>,
}

impl Plan {
    /// Reads a plan document and checks what the format itself promises:
    /// the version, one step list per rank, a root for rooted collectives,
    /// and every step's range inside the buffer. The step graph's checks
    /// (peers, dependencies, matching) are [`crate::PlanGraph::new`]'s; the
    /// meaning (races, postconditions) is the Python verifier's.
    pub fn from_json(text: &str) -> Result<Plan, String> {
        let p: Plan = serde_json::from_str(text).map_err(|e| format!("plan: {e}"))?;
        p.check()?;
        Ok(p)
    }

    /// [`Plan::from_json`] and the step graph's structural checks: what a
    /// plan must pass before anything runs it.
    pub fn read_checked(text: &str) -> Result<Plan, String> {
        let p = Plan::from_json(text)?;
        crate::PlanGraph::new("plan", p.ranks.clone())?;
        Ok(p)
    }

    fn check(&self) -> Result<(), String> {
        if self.version != PLAN_VERSION {
            return Err(format!(
                "plan version: expected {PLAN_VERSION}, got {}",
                self.version
            ));
        }
        if self.nranks as usize != self.ranks.len() {
            return Err(format!(
                "plan: nranks is {} but ranks lists {}",
                self.nranks,
                self.ranks.len()
            ));
        }
        if self.size_bytes == 0 {
            return Err("plan: size_bytes must be positive".into());
        }
        match (self.collective.rooted(), self.root) {
            (true, None) => return Err(format!("plan: {} needs a root", self.collective.name())),
            (true, Some(r)) if r >= self.nranks => {
                return Err(format!("plan: root {r} is not a rank (0..{})", self.nranks))
            }
            _ => {}
        }
        let alltoall = self.collective == Collective::Alltoall;
        if alltoall && self.size_bytes % self.nranks as u64 != 0 {
            return Err(format!(
                "plan: size_bytes {} does not split into nranks ({}) equal blocks (an alltoall needs a multiple of nranks)",
                self.size_bytes, self.nranks
            ));
        }
        for (r, steps) in self.ranks.iter().enumerate() {
            for (i, s) in steps.iter().enumerate() {
                if alltoall && s.reduce {
                    return Err(format!(
                        "plan: rank {r} step {i}: an alltoall does not reduce"
                    ));
                }
                if s.offset
                    .checked_add(s.bytes)
                    .is_none_or(|end| end > self.size_bytes)
                {
                    return Err(format!(
                        "plan: rank {r} step {i}: range [{}, {}+{}) is outside the buffer of {} bytes",
                        s.offset, s.offset, s.bytes, self.size_bytes
                    ));
                }
            }
        }
        Ok(())
    }
}

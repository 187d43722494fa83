//! The scenario's `graph_jobs` section: a job as a dependency graph per
//! rank (what an LLM job's shape lowers to, and what an execution trace
//! reader would produce).
//!
//! Ranks that run the same program share it (`programs`): a pipeline
//! stage's data- and tensor-parallel ranks differ only in their groups and
//! peers, which a rank names through its own `groups` and `peers` lists (a
//! node's `slot` indexes them). This keeps a 1,024-rank job's graph as
//! small as its number of distinct stages.

use fabriclab_plan::Step;
use serde::Deserialize;

/// What a node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GraphNodeKind {
    /// `duration_ps` of the rank's GPU (scaled by its slowdown); a rank's
    /// compute nodes run one at a time, in the order they became ready.
    Compute,
    /// The rank's part in collective `plan` over group `groups[slot]`,
    /// scaled to `bytes`; the k-th collective a rank joins on a group meets
    /// the k-th of every other member.
    Collective,
    /// `bytes` to rank `peers[slot]`; done when they have arrived.
    Send,
    /// The matching receive from rank `peers[slot]` (the k-th receive from
    /// a peer matches the peer's k-th send to this rank); done on arrival.
    Recv,
}

/// One node of a program. Every field is given (unused ones are 0).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GraphNode {
    pub kind: GraphNodeKind,
    /// Indices of earlier nodes of the same program.
    pub deps: Vec<u32>,
    /// Compute: its duration at slowdown 1.
    pub duration_ps: u64,
    /// Collective: index into the rank's `groups`; send/recv: into its `peers`.
    pub slot: u32,
    /// Collective: index into the job's `plans`.
    pub plan: u32,
    /// Collective: its buffer size; send: the message size.
    pub bytes: u64,
    /// Index into the job's `labels`: the timeline's kind.
    pub label: u32,
    /// The timeline's index (micro-batch, bucket, ...).
    pub index: u32,
}

/// A rank: where it runs, its program, its groups and peers.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GraphRank {
    pub host: u32,
    pub program: u32,
    /// Group ids (indices into the job's `groups`) by slot.
    pub groups: Vec<u32>,
    /// Rank ids by slot.
    pub peers: Vec<u32>,
    /// Compute durations are multiplied by this (a straggler: > 1).
    pub slowdown: f64,
}

/// A communicator group: its ranks in plan order, and its label (tp, dp, ...).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GraphGroup {
    pub label: u32,
    pub ranks: Vec<u32>,
}

/// A collective plan over `steps.len()` ranks for `size_bytes`, its byte
/// ranges scaled to each collective's size.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GraphPlan {
    /// allreduce, reduce_scatter, allgather, ... (for the telemetry).
    pub op: String,
    pub algorithm: String,
    pub size_bytes: u64,
    pub steps: Vec<Vec<Step>>,
}

/// The queue pairs of the connection from rank `rank` to rank `peer`:
/// each message between them is cut into one equal part per QP, part k on
/// QP k with source port `src_ports[k]` (the port the switches' ECMP hash
/// reads; NCCL's static spreading over `NCCL_IB_QPS_PER_CONNECTION` QPs,
/// with the ports a path manager such as C4P's chose).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GraphQps {
    pub rank: u32,
    pub peer: u32,
    pub src_ports: Vec<u16>,
}

/// A dependency-graph job.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GraphJobSpec {
    pub name: String,
    pub start_ps: u64,
    /// The program runs this many times; a rank starts iteration k + 1 once
    /// every node of its iteration k is done.
    pub iterations: u32,
    pub class: u8,
    /// Reduction throughput of a collective's reducing receives (bits/s).
    pub reduce_bps: u64,
    /// Software overhead before each message leaves.
    pub send_overhead_ps: u64,
    pub persistent_connections: bool,
    pub ranks: Vec<GraphRank>,
    pub groups: Vec<GraphGroup>,
    pub programs: Vec<Vec<GraphNode>>,
    pub plans: Vec<GraphPlan>,
    /// Names of node labels (timeline kinds) and group labels.
    pub labels: Vec<String>,
    /// Hold the run open until the job ends.
    pub end_run: bool,
    /// Record every collective message in the telemetry table (ccl.parquet).
    pub telemetry: bool,
    /// Rank pairs whose messages go over given queue pairs (source ports);
    /// the others send each message whole, on the default port.
    #[serde(default)]
    pub qps: Vec<GraphQps>,
}

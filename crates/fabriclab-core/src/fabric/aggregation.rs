//! In-network aggregation (PANAMA, MLSys'21) as the scenario resolves it:
//! which switches aggregate, each job's trees through them, and how its
//! workers send. The Python controller builds this section (trees per core
//! or spine switch, job placement); backends read it as it is, and apps
//! check their jobs against it.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AggregationSpec {
    /// Buffer of every aggregating switch's accelerator, shared equally by
    /// the jobs configured on it (64 MB in the paper's evaluation).
    pub memory_bytes: u64,
    /// Gradient bytes per aggregation packet (a multiple of 4: float32).
    pub vector_bytes: u32,
    /// Packets carry float32 vectors and accelerators sum them (functional
    /// mode, for checking numbers); otherwise sizes and times only.
    #[serde(default)]
    pub functional: bool,
    pub jobs: Vec<AggJobSpec>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AggJobSpec {
    /// The job id (JID) its packets carry.
    pub job: u16,
    /// Host indices of its workers.
    pub workers: Vec<u32>,
    /// Traffic class of its packets (lossless when PFC covers it).
    pub class: u8,
    /// Aggregate once this fraction of the workers have contributed (1 = all).
    pub sync_fraction: f64,
    pub window: AggWindowSpec,
    /// No result for this long: the outstanding VIDs of a tree are given up.
    pub timeout_ps: u64,
    /// Packets are sprayed over the trees round-robin: packet k to tree k mod T.
    pub trees: Vec<AggTreeSpec>,
}

/// How a worker limits the packets outstanding per tree.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum AggWindowSpec {
    /// PANAMA's congestion control (section 4.2): a DCTCP-like window per
    /// tree, results as ACKs, capped by `cwnd_cap`.
    Panama {
        initial_packets: u32,
        g: f64,
        initial_alpha: f64,
    },
    /// A fixed window, ECN ignored (SwitchML*); `cap`: bounded by the
    /// accelerators' `cwnd_cap` too (their slots), or not.
    Fixed { packets: u32, cap: bool },
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AggTreeSpec {
    /// The tree id (TID) its packets carry.
    pub tree: u8,
    /// Every switch of the tree: its children and its parent (none at the root).
    pub switches: Vec<AggSwitchSpec>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AggSwitchSpec {
    pub node: u32,
    /// Neighbours toward the workers (node indices) and how many workers
    /// each leads to, in the order their vectors are summed.
    pub children: Vec<(u32, u16)>,
    /// The neighbour toward the root; none at the root.
    pub parent: Option<u32>,
}

impl AggregationSpec {
    /// Checks what the core relies on (the scenario layer checks the rest
    /// with the user's names).
    pub fn validate(&self, num_hosts: u32) -> Result<(), String> {
        if self.vector_bytes == 0
            || self.vector_bytes % 4 != 0
            || self.vector_bytes / 4 > u16::MAX as u32
        {
            return Err(format!(
                "aggregation.vector_bytes: {} is not a positive multiple of 4 up to {}",
                self.vector_bytes,
                4 * u16::MAX as u32
            ));
        }
        let packet = self.vector_bytes as u64 + fabriclab_agg::wire::HEADER_BYTES as u64;
        if self.memory_bytes < packet {
            return Err(format!(
                "aggregation.memory_bytes: {} is smaller than one packet ({packet} bytes)",
                self.memory_bytes
            ));
        }
        let mut ids = std::collections::BTreeSet::new();
        for (i, j) in self.jobs.iter().enumerate() {
            let at = format!("aggregation.jobs[{i}]");
            if !ids.insert(j.job) {
                return Err(format!("{at}.job: id {} used twice", j.job));
            }
            if j.workers.is_empty() {
                return Err(format!("{at}.workers: none"));
            }
            if let Some(w) = j.workers.iter().find(|&&w| w >= num_hosts) {
                return Err(format!(
                    "{at}.workers: host index {w} out of range (0..{num_hosts})"
                ));
            }
            let mut seen = j.workers.clone();
            seen.sort_unstable();
            if seen.windows(2).any(|w| w[0] == w[1]) {
                return Err(format!("{at}.workers: a host is listed twice"));
            }
            if j.class > 7 {
                return Err(format!("{at}.class: {} not within 0..=7", j.class));
            }
            if !(j.sync_fraction > 0.0 && j.sync_fraction <= 1.0) {
                return Err(format!(
                    "{at}.sync_fraction: must be within (0, 1], got {}",
                    j.sync_fraction
                ));
            }
            if j.trees.is_empty() {
                return Err(format!("{at}.trees: a job needs at least one tree"));
            }
            if j.timeout_ps == 0 {
                return Err(format!("{at}.timeout_ps: must be positive"));
            }
            match j.window {
                AggWindowSpec::Panama {
                    initial_packets,
                    g,
                    initial_alpha,
                } => {
                    if initial_packets == 0 {
                        return Err(format!("{at}.window.initial_packets: must be positive"));
                    }
                    if !(g > 0.0 && g <= 1.0) || !(0.0..=1.0).contains(&initial_alpha) {
                        return Err(format!(
                            "{at}.window: g within (0, 1] and initial_alpha within [0, 1] needed"
                        ));
                    }
                }
                AggWindowSpec::Fixed { packets, .. } if packets == 0 => {
                    return Err(format!("{at}.window.packets: must be positive"));
                }
                AggWindowSpec::Fixed { .. } => {}
            }
            let mut tids = std::collections::BTreeSet::new();
            for (k, t) in j.trees.iter().enumerate() {
                if !tids.insert(t.tree) {
                    return Err(format!("{at}.trees[{k}].tree: id {} used twice", t.tree));
                }
                if t.switches.iter().filter(|s| s.parent.is_none()).count() != 1 {
                    return Err(format!(
                        "{at}.trees[{k}]: a tree has exactly one root (a switch without parent)"
                    ));
                }
            }
        }
        Ok(())
    }
}

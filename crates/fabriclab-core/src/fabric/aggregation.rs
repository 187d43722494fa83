//! In-network aggregation (PANAMA, MLSys'21) as the scenario resolves it:
//! which switches aggregate, each job's trees through them, and how its
//! workers send. The Python controller builds this section (trees per core
//! or spine switch, job placement); backends read it as it is, and apps
//! check their jobs against it.

use crate::fabric::topology::Topology;
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
    /// The `cwnd_cap` the controller gives every worker of each job's trees
    /// when it configures them (section 4.2: like a window negotiated at
    /// connection setup), per job and tree in spec order: the smallest
    /// [`fabriclab_agg::accel::cwnd_cap_packets`] of the tree's switches,
    /// whose share is `memory_bytes` over the jobs configured on them, so
    /// that not even the first window overflows an accelerator.
    pub fn setup_cwnd_caps(&self) -> Vec<Vec<u16>> {
        use std::collections::{BTreeMap, BTreeSet};
        let mut jobs_at: BTreeMap<u32, BTreeSet<u16>> = BTreeMap::new();
        for j in &self.jobs {
            for sw in j.trees.iter().flat_map(|t| &t.switches) {
                jobs_at.entry(sw.node).or_default().insert(j.job);
            }
        }
        let packet = self.vector_bytes + fabriclab_agg::wire::HEADER_BYTES as u32;
        self.jobs
            .iter()
            .map(|j| {
                let trees_at = |node: u32| {
                    j.trees
                        .iter()
                        .filter(|t| t.switches.iter().any(|s| s.node == node))
                        .count()
                };
                j.trees
                    .iter()
                    .map(|t| {
                        t.switches
                            .iter()
                            .map(|sw| {
                                let share = self.memory_bytes / jobs_at[&sw.node].len() as u64;
                                fabriclab_agg::accel::cwnd_cap_packets(
                                    share,
                                    packet,
                                    sw.children.len(),
                                    trees_at(sw.node),
                                )
                            })
                            .min()
                            .unwrap_or(u16::MAX)
                    })
                    .collect()
            })
            .collect()
    }

    /// Checks what the core relies on (the scenario layer checks the rest
    /// with the user's names).
    pub fn validate(&self, num_hosts: u32) -> Result<(), String> {
        if self.vector_bytes == 0
            || !self.vector_bytes.is_multiple_of(4)
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
                    if g <= 0.0
                        || !(0.0..=1.0).contains(&g)
                        || !(0.0..=1.0).contains(&initial_alpha)
                    {
                        return Err(format!(
                            "{at}.window: g within (0, 1] and initial_alpha within [0, 1] needed"
                        ));
                    }
                }
                AggWindowSpec::Fixed { packets: 0, .. } => {
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

/// A child of a tree switch, resolved to ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeChild {
    /// The child: a worker host, or a switch of the tree.
    pub node: u32,
    /// How many workers it leads to.
    pub workers: u16,
    /// The switch's egress port toward the child (results go down it).
    pub down: u32,
    /// The child's egress port toward the switch (contributions come up it).
    pub up: u32,
}

/// A switch of a tree, resolved to ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeSwitch {
    /// The switch's node index.
    pub node: u32,
    /// In the order of the spec (the order vectors are summed).
    pub children: Vec<TreeChild>,
    /// The parent node and this switch's egress port toward it; none at the root.
    pub parent: Option<(u32, u32)>,
}

/// A job's tree, checked against the topology and resolved to ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreePorts {
    /// The tree id (TID).
    pub tree: u8,
    /// Its switches in the order of the spec.
    pub switches: Vec<TreeSwitch>,
}

/// `from`'s first egress port toward its neighbour `to`.
fn port_to(topo: &Topology, from: u32, to: u32) -> Option<u32> {
    topo.out_ports[from as usize]
        .iter()
        .copied()
        .find(|&p| topo.ports[p as usize].to == to)
}

/// Every job's trees (in the spec's order) resolved to ports, after
/// checking each one against the topology: its switches are switches,
/// linked as stated, children and parents agree, each child's worker count
/// is what lies below it, and every worker of the job reaches the root by
/// exactly one way. The one check both backends run on the section.
pub fn resolve_trees(
    topo: &Topology,
    agg: &AggregationSpec,
) -> Result<Vec<Vec<TreePorts>>, String> {
    use crate::fabric::NodeKind;
    use std::collections::BTreeMap;
    let names = &topo.names;
    let mut out = Vec::with_capacity(agg.jobs.len());
    for (i, j) in agg.jobs.iter().enumerate() {
        let mut trees = Vec::with_capacity(j.trees.len());
        for (k, t) in j.trees.iter().enumerate() {
            let at = format!("aggregation.jobs[{i}].trees[{k}]");
            let mut by_node: BTreeMap<u32, usize> = BTreeMap::new();
            for (s, sw) in t.switches.iter().enumerate() {
                let n = sw.node as usize;
                if n >= names.len() || topo.kinds[n] == NodeKind::Host {
                    return Err(format!(
                        "{at}.switches[{s}].node: not a switch of the topology"
                    ));
                }
                if by_node.insert(sw.node, s).is_some() {
                    return Err(format!("{at}: switch '{}' listed twice", names[n]));
                }
            }
            // The workers' nodes (workers are host indices).
            let nodes: Vec<u32> = j.workers.iter().map(|&h| topo.hosts[h as usize]).collect();
            // Workers below each switch, from the hosts up.
            let mut below_host: BTreeMap<u32, u32> = BTreeMap::new();
            for sw in &t.switches {
                for &(c, w) in &sw.children {
                    let ok = (c as usize) < names.len() && port_to(topo, sw.node, c).is_some();
                    if !ok {
                        return Err(format!(
                            "{at}: a child of '{}' is not its neighbour",
                            names[sw.node as usize]
                        ));
                    }
                    if topo.kinds[c as usize] == NodeKind::Host {
                        if !nodes.contains(&c) || w != 1 {
                            return Err(format!(
                                "{at}: host '{}' under '{}' is not one worker of the job",
                                names[c as usize], names[sw.node as usize]
                            ));
                        }
                        if below_host.insert(c, sw.node).is_some() {
                            return Err(format!(
                                "{at}: worker '{}' joins the tree twice",
                                names[c as usize]
                            ));
                        }
                    } else {
                        match by_node.get(&c) {
                            Some(&cs) if t.switches[cs].parent == Some(sw.node) => {}
                            _ => return Err(format!("{at}: child '{}' of '{}' is not a switch of the tree with it as parent", names[c as usize], names[sw.node as usize])),
                        }
                    }
                }
                if let Some(p) = sw.parent {
                    let linked = (p as usize) < names.len() && port_to(topo, sw.node, p).is_some();
                    let lists_me = by_node
                        .get(&p)
                        .is_some_and(|&ps| t.switches[ps].children.iter().any(|c| c.0 == sw.node));
                    if !linked || !lists_me {
                        return Err(format!("{at}: the parent of '{}' is not a linked switch of the tree listing it as a child", names[sw.node as usize]));
                    }
                }
            }
            let root = t
                .switches
                .iter()
                .find(|s| s.parent.is_none())
                .expect("validated: one root")
                .node;
            for &w in &nodes {
                let Some(&first) = below_host.get(&w) else {
                    return Err(format!(
                        "{at}: worker '{}' cannot reach the tree's root '{}'",
                        names[w as usize], names[root as usize]
                    ));
                };
                // A worker sends on its first port: the tree must take it there.
                let uplink = topo.out_ports[w as usize]
                    .first()
                    .map(|&p| topo.ports[p as usize].to);
                if uplink != Some(first) {
                    return Err(format!(
                        "{at}: worker '{}' sends on its first port, to '{}', but the tree takes it under '{}'",
                        names[w as usize],
                        uplink.map_or("nothing", |u| names[u as usize].as_str()),
                        names[first as usize]
                    ));
                }
                let (mut node, mut steps) = (first, 0);
                while let Some(p) = t.switches[by_node[&node]].parent {
                    node = p;
                    steps += 1;
                    if steps > t.switches.len() {
                        return Err(format!("{at}: the parents form a cycle"));
                    }
                }
                if node != root {
                    return Err(format!(
                        "{at}: worker '{}' cannot reach the tree's root '{}'",
                        names[w as usize], names[root as usize]
                    ));
                }
            }
            // Worker counts: a child switch leads to the workers below it.
            fn below(
                t: &AggTreeSpec,
                by_node: &BTreeMap<u32, usize>,
                node: u32,
                hosts: &BTreeMap<u32, u32>,
            ) -> u32 {
                t.switches[by_node[&node]]
                    .children
                    .iter()
                    .map(|&(c, _)| {
                        if hosts.contains_key(&c) {
                            1
                        } else {
                            below(t, by_node, c, hosts)
                        }
                    })
                    .sum()
            }
            let mut switches = Vec::with_capacity(t.switches.len());
            for sw in &t.switches {
                for &(c, w) in &sw.children {
                    if by_node.contains_key(&c) && below(t, &by_node, c, &below_host) != w as u32 {
                        return Err(format!(
                            "{at}: '{}' counts {w} workers below '{}', the tree has {}",
                            names[sw.node as usize],
                            names[c as usize],
                            below(t, &by_node, c, &below_host)
                        ));
                    }
                }
                let link = |a: u32, b: u32| port_to(topo, a, b).expect("checked: neighbours");
                switches.push(TreeSwitch {
                    node: sw.node,
                    children: sw
                        .children
                        .iter()
                        .map(|&(c, w)| TreeChild {
                            node: c,
                            workers: w,
                            down: link(sw.node, c),
                            up: link(c, sw.node),
                        })
                        .collect(),
                    parent: sw.parent.map(|p| (p, link(sw.node, p))),
                });
            }
            trees.push(TreePorts {
                tree: t.tree,
                switches,
            });
        }
        out.push(trees);
    }
    Ok(out)
}

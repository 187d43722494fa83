//! PANAMA's aggregation accelerator on a switch (section 5): aggregation
//! packets (protocol [`PROTO_AGG`]) go to the accelerator of
//! `fabriclab_agg`, the one definition shared with the software
//! aggregator; everything else bypasses it at no cost. Timing only
//! (packets carry sizes) or functional (they carry float32 vectors, in the
//! backend's slab, and the accelerator sums them).

use super::{LogicCtx, SwitchLogic, Verdict};
use crate::net::packet::header::{Packet, PROTO_AGG};
use fabriclab_agg::accel::{Accelerator, NoValues, TreeConfig, Verdict as AccelVerdict};
use fabriclab_agg::wire::Header;

/// The occupancy series keeps at most one sample per this much time (the last).
pub const OCCUPANCY_SAMPLE_PS: u64 = 1_000_000;

/// The accelerator, timing only or functional.
enum Accel {
    Timing(Accelerator<NoValues>, Vec<(u32, Header, NoValues)>),
    Functional(Accelerator<Vec<f32>>, Vec<(u32, Header, Vec<f32>)>),
}

pub struct Panama {
    accel: Accel,
    /// Aggregation packets of no job or tree configured here.
    not_mine: u64,
    peak_bytes: u64,
    /// (time, bytes used) after changes, one per [`OCCUPANCY_SAMPLE_PS`].
    occupancy: Vec<(u64, u64)>,
}

impl Panama {
    /// An accelerator with `memory_bytes` of buffer and the trees through
    /// this switch (ports are this switch's egress ports toward each neighbour).
    pub fn new(
        memory_bytes: u64,
        trees: Vec<TreeConfig>,
        functional: bool,
    ) -> Result<Panama, String> {
        let accel = if functional {
            let mut a = Accelerator::new(memory_bytes);
            for t in trees {
                a.configure(t)?;
            }
            Accel::Functional(a, Vec::new())
        } else {
            let mut a = Accelerator::new(memory_bytes);
            for t in trees {
                a.configure(t)?;
            }
            Accel::Timing(a, Vec::new())
        };
        Ok(Panama {
            accel,
            not_mine: 0,
            peak_bytes: 0,
            occupancy: Vec::new(),
        })
    }

    fn counters_of(&self) -> (fabriclab_agg::accel::Counters, u64, u64) {
        match &self.accel {
            Accel::Timing(a, _) => (a.counters, a.used_bytes(), a.share_bytes()),
            Accel::Functional(a, _) => (a.counters, a.used_bytes(), a.share_bytes()),
        }
    }

    fn sample(&mut self, now: u64) {
        let used = self.counters_of().1;
        self.peak_bytes = self.peak_bytes.max(used);
        match self.occupancy.last_mut() {
            Some(last) if last.1 == used => {}
            Some(last) if now / OCCUPANCY_SAMPLE_PS == last.0 / OCCUPANCY_SAMPLE_PS => {
                *last = (now, used)
            }
            _ => self.occupancy.push((now, used)),
        }
    }
}

impl SwitchLogic for Panama {
    fn on_packet(&mut self, ctx: &mut LogicCtx, ingress: u32, pkt: &Packet) -> Verdict {
        if pkt.proto != PROTO_AGG {
            return Verdict::Forward;
        }
        // Ports come in pairs: the packet arrived over `ingress` (neighbour
        // -> here); the accelerator names the port by this switch's egress
        // toward that neighbour, `ingress ^ 1`.
        let h = pkt.agg_header();
        let verdict = match &mut self.accel {
            Accel::Timing(a, out) => {
                let v = a.on_packet(ingress ^ 1, h, NoValues, out);
                for (port, h, _) in out.drain(..) {
                    ctx.emit.push((port, Packet::agg(&h, pkt.class)));
                }
                v
            }
            Accel::Functional(a, out) => {
                let slab = ctx
                    .vectors
                    .as_deref_mut()
                    .expect("functional runs have a vector slab");
                let v = a.on_packet(ingress ^ 1, h, slab.take(pkt.vector_slot()), out);
                for (port, h, vec) in out.drain(..) {
                    let mut p = Packet::agg(&h, pkt.class);
                    p.set_vector_slot(slab.put(vec));
                    ctx.emit.push((port, p));
                }
                v
            }
        };
        if verdict == AccelVerdict::NotMine {
            self.not_mine += 1;
        }
        self.sample(ctx.now);
        Verdict::Absorb
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let (c, _, share) = self.counters_of();
        vec![
            ("agg_received".into(), c.received),
            ("agg_aggregated".into(), c.aggregated),
            ("agg_results_sent".into(), c.results_sent),
            ("agg_skipped".into(), c.skipped),
            ("agg_stale".into(), c.stale),
            ("agg_overflow".into(), c.overflow),
            ("agg_unknown".into(), c.unknown + self.not_mine),
            ("agg_mismatched".into(), c.mismatched),
            ("agg_peak_bytes".into(), self.peak_bytes),
            ("agg_share_bytes".into(), share),
        ]
    }

    fn series(&self) -> Vec<(&'static str, u64, u64)> {
        self.occupancy
            .iter()
            .map(|&(t, b)| ("agg_used_bytes", t, b))
            .collect()
    }
}

/// Each aggregating switch's tree configurations (by node), from the
/// scenario's aggregation section, after checking every tree: its switches
/// are switches, linked as stated, children and parents agree, each
/// child's worker count is what lies below it, and every worker of the job
/// reaches the root by exactly one way.
pub fn configs(
    topo: &crate::fabric::topology::Topology,
    agg: &crate::fabric::aggregation::AggregationSpec,
) -> Result<std::collections::BTreeMap<u32, Vec<TreeConfig>>, String> {
    use crate::fabric::NodeKind;
    use std::collections::BTreeMap;
    let names = &topo.names;
    let port_to = |from: u32, to: u32| -> Option<u32> {
        topo.out_ports[from as usize]
            .iter()
            .copied()
            .find(|&p| topo.ports[p as usize].to == to)
    };
    let mut out: BTreeMap<u32, Vec<TreeConfig>> = BTreeMap::new();
    for (i, j) in agg.jobs.iter().enumerate() {
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
            // Workers below each switch, from the hosts up.
            let mut below_host: BTreeMap<u32, u32> = BTreeMap::new();
            for sw in &t.switches {
                for &(c, w) in &sw.children {
                    let ok = (c as usize) < names.len() && port_to(sw.node, c).is_some();
                    if !ok {
                        return Err(format!(
                            "{at}: a child of '{}' is not its neighbour",
                            names[sw.node as usize]
                        ));
                    }
                    if topo.kinds[c as usize] == NodeKind::Host {
                        if !j.workers.contains(&c) || w != 1 {
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
                    let linked = (p as usize) < names.len() && port_to(sw.node, p).is_some();
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
            for &w in &j.workers {
                let Some(&first) = below_host.get(&w) else {
                    return Err(format!(
                        "{at}: worker '{}' cannot reach the tree's root '{}'",
                        names[w as usize], names[root as usize]
                    ));
                };
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
                t: &crate::fabric::aggregation::AggTreeSpec,
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
                out.entry(sw.node).or_default().push(TreeConfig {
                    job: j.job,
                    tree: t.tree,
                    children: sw
                        .children
                        .iter()
                        .map(|&(c, w)| (port_to(sw.node, c).expect("checked"), w))
                        .collect(),
                    parent: sw.parent.map(|p| port_to(sw.node, p).expect("checked")),
                    sync_fraction: j.sync_fraction,
                });
            }
        }
    }
    Ok(out)
}

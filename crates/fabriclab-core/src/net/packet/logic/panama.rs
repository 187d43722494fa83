//! PANAMA's aggregation accelerator on a switch (section 5): aggregation
//! packets (protocol [`PROTO_AGG`]) go to the accelerator of
//! `fabriclab_agg`, the one definition shared with the software
//! aggregator; everything else bypasses it at no cost. Timing only
//! (packets carry sizes) or functional (they carry float32 vectors, in the
//! backend's slab, and the accelerator sums them).

use super::{LogicCtx, SwitchLogic, Verdict};
use crate::fabric::aggregation::resolve_trees;
use crate::net::packet::header::{Packet, PROTO_AGG};
use fabriclab_agg::accel::{Accelerator, NoValues, TreeConfig, Vector, Verdict as AccelVerdict};
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
        fn configured<V: Vector>(
            memory_bytes: u64,
            trees: Vec<TreeConfig>,
        ) -> Result<Accelerator<V>, String> {
            let mut a = Accelerator::new(memory_bytes);
            for t in trees {
                a.configure(t)?;
            }
            Ok(a)
        }
        let accel = if functional {
            Accel::Functional(configured(memory_bytes, trees)?, Vec::new())
        } else {
            Accel::Timing(configured(memory_bytes, trees)?, Vec::new())
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
/// scenario's aggregation section, after the section's trees passed
/// [`resolve_trees`]' checks against the topology.
pub fn configs(
    topo: &crate::fabric::topology::Topology,
    agg: &crate::fabric::aggregation::AggregationSpec,
) -> Result<std::collections::BTreeMap<u32, Vec<TreeConfig>>, String> {
    let mut out: std::collections::BTreeMap<u32, Vec<TreeConfig>> = Default::default();
    for (j, trees) in agg.jobs.iter().zip(resolve_trees(topo, agg)?) {
        for t in trees {
            for sw in t.switches {
                out.entry(sw.node).or_default().push(TreeConfig {
                    job: j.job,
                    tree: t.tree,
                    children: sw.children.iter().map(|c| (c.down, c.workers)).collect(),
                    parent: sw.parent.map(|(_, port)| port),
                    sync_fraction: j.sync_fraction,
                });
            }
        }
    }
    Ok(out)
}

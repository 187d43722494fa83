//! The resolved scenario as the core reads it (JSON produced by the Python
//! scenario layer) and the simulation built from it. Every field is
//! explicit: defaults are filled in by the Python schema, so the core never
//! guesses a unit or a value. Fabric sections are typed here; each
//! application section belongs to its app kind in [`crate::apps::REGISTRY`].

use crate::apps::{BuildEnv, REGISTRY};
use crate::engine::{Backend, Simulation};
use crate::fabric::frame::wire_bytes;
use crate::fabric::topology::Topology;
use crate::fabric::NodeKind;
use crate::fabric::{LinkAction, LinkEventSpec, TopologySpec};
use crate::net::flow::tcp::{FlowModel, PortQueue, ShortFlowSpec};
use crate::net::flow::FlowNet;
use crate::net::packet::{
    NodeOverride, PacketNet, PfcSpec, PortQueues, QueueOverride, QueueSpec, SwitchBufferSpec,
    SwitchLogicSpec,
};
use crate::transport::{RocketClock, TransportSpec};
use serde::Deserialize;

/// The fabric part of a scenario: everything but the applications.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FabricSpec {
    pub seed: u64,
    pub backend: BackendKind,
    /// The flow backend's model of a flow; absent: `fluid` (the scenario
    /// layer always names it; its default there is `tcp`).
    #[serde(default)]
    pub flow_model: FlowModel,
    pub topology: TopologySpec,
    /// Egress queues of switch ports.
    pub queue: QueueSpec,
    /// Egress queues of host NIC ports; `None`: unlimited, never marking.
    #[serde(default)]
    pub host_queue: Option<QueueSpec>,
    /// Per node or per link direction (packet backend).
    #[serde(default)]
    pub queue_overrides: Vec<QueueOverride>,
    /// Per node: a forwarding capacity (packet backend).
    #[serde(default)]
    pub node_overrides: Vec<NodeOverride>,
    /// Priority flow control at switches (packet backend).
    #[serde(default)]
    pub pfc: Option<PfcSpec>,
    /// Logic attached to chosen switches (packet backend).
    #[serde(default)]
    pub switch_logic: Vec<SwitchLogicSpec>,
    /// In-network aggregation: accelerators on switches, jobs' trees and
    /// workers (packet backend; the flow backend models each tree as one
    /// fluid object).
    #[serde(default)]
    pub aggregation: Option<crate::fabric::aggregation::AggregationSpec>,
    /// A buffer shared by each switch's egress queues, dynamic threshold (packet backend).
    #[serde(default)]
    pub switch_buffer: Option<SwitchBufferSpec>,
    pub transport: TransportSpec,
    pub routing: RoutingSpec,
    /// Timed link changes (both backends).
    #[serde(default)]
    pub link_events: Vec<LinkEventSpec>,
    /// Host clocks (offsets, drifts and their wander, stamping noise);
    /// `None`: every host's clock reads true time.
    #[serde(default)]
    pub clocks: Option<crate::engine::ClockSpec>,
    /// Hard stop of simulated time; `None` runs until no event is left.
    #[serde(default)]
    pub stop_ps: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Packet,
    Flow,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoutingSpec {
    pub ecmp_hash_seed: u64,
    /// After a link goes down or up, routing follows this much later.
    #[serde(default)]
    pub convergence_ps: u64,
    /// Resilient ECMP hashing (only flows on a failed link move).
    #[serde(default)]
    pub resilient_hash: bool,
}

/// A resolved scenario: its fabric, and each app kind's section (in
/// registry order) as the JSON value that kind reads.
#[derive(Debug, Clone)]
pub struct SimSpec {
    pub fabric: FabricSpec,
    pub apps: Vec<(&'static str, serde_json::Value)>,
}

impl SimSpec {
    pub fn from_json(json: &str) -> Result<SimSpec, String> {
        let mut map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(json).map_err(|e| format!("scenario: {e}"))?;
        let mut apps = Vec::new();
        for kind in REGISTRY {
            if let Some(v) = map.remove(kind.key) {
                apps.push((kind.key, v));
            }
        }
        let fabric: FabricSpec = serde_json::from_value(serde_json::Value::Object(map))
            .map_err(|e| format!("scenario: {e}"))?;
        Ok(SimSpec { fabric, apps })
    }
}

/// Parses a resolved scenario (JSON) and builds its simulation.
pub fn build_from_json(json: &str) -> Result<Simulation, String> {
    build(&SimSpec::from_json(json)?)
}

/// Builds a simulation from a resolved scenario.
pub fn build(spec: &SimSpec) -> Result<Simulation, String> {
    let f = &spec.fabric;
    let mut topo = Topology::build(&f.topology)?;
    topo.resilient_hash = f.routing.resilient_hash;
    let t = &f.transport;
    // The scenario layer checks the user's range (64..=9000); zero would never move a byte.
    if t.mss_bytes == 0 {
        return Err("transport.mss_bytes: must be positive".into());
    }
    if t.init_cwnd_packets == 0 {
        return Err("transport.init_cwnd_packets: must be positive".into());
    }
    if let Some(a) = &f.aggregation {
        a.validate(topo.num_hosts() as u32)?;
    }
    let backend: Box<dyn Backend> = match f.backend {
        BackendKind::Packet => {
            let n = topo.names.len() as u32;
            for (i, o) in f.queue_overrides.iter().enumerate() {
                if o.from >= n || o.to.is_some_and(|t| t >= n) {
                    return Err(format!(
                        "queue_overrides[{i}]: node index out of range (0..{n})"
                    ));
                }
                if let Some(to) = o.to {
                    if !topo.out_ports[o.from as usize]
                        .iter()
                        .any(|&p| topo.ports[p as usize].to == to)
                    {
                        return Err(format!(
                            "queue_overrides[{i}]: no link from '{}' to '{}'",
                            topo.names[o.from as usize], topo.names[to as usize]
                        ));
                    }
                }
            }
            let queues = PortQueues {
                switch: f.queue.clone(),
                host: f.host_queue.clone(),
                overrides: f.queue_overrides.clone(),
            };
            // Packet Rocket reads its own copy of the host clocks (a reading
            // is a pure function of host and time).
            let rocket_clocks = match (&f.clocks, t.packet_rocket_clock) {
                (Some(c), RocketClock::Host | RocketClock::Estimated) => {
                    Some(crate::engine::Clocks::new(c, topo.num_hosts(), f.seed)?)
                }
                _ => None,
            };
            let correction = match t.packet_rocket_clock {
                RocketClock::Estimated => Some(crate::transport::ClockCorrection::new(
                    &t.packet_rocket_correction,
                    topo.num_hosts(),
                    crate::transport::clock_correction::FIELD,
                )?),
                _ => None,
            };
            Box::new(
                PacketNet::new(
                    &topo,
                    &queues,
                    t,
                    f.pfc.clone(),
                    f.seed,
                    &f.switch_logic,
                    f.switch_buffer.clone(),
                    f.aggregation.as_ref(),
                )?
                .with_packet_rocket(&topo, rocket_clocks, correction)
                .with_node_overrides(&topo, &f.node_overrides)?,
            )
        }
        BackendKind::Flow => {
            if t.cc == crate::transport::CcKind::Cubic {
                return Err(
                    "transport.cc: \"cubic\" is modelled by the packet backend only; \
                     needs backend \"packet\" (the flow backend reads \"newreno\" or \"dctcp\")"
                        .into(),
                );
            }
            if t.packet_rocket_threshold_ps.is_some() {
                return Err(
                    "transport.packet_rocket_threshold_ps: Packet Rocket holds packets, \
                     which the flow backend has none of; needs backend \"packet\""
                        .into(),
                );
            }
            if !f.switch_logic.is_empty() {
                return Err(
                    "switch_logic: the flow backend has no packets; needs backend \"packet\""
                        .into(),
                );
            }
            if !f.node_overrides.is_empty() {
                return Err(
                    "node_overrides[0].forwarding_pps: a per-packet forwarding capacity needs \
                     backend \"packet\" (the flow backend has no packets)"
                        .into(),
                );
            }
            let short = ShortFlowSpec {
                model: f.flow_model,
                ports: flow_port_queues(&topo, f, t.mss_bytes),
                ecn_capable: t.cc == crate::transport::CcKind::Dctcp,
                init_cwnd_packets: t.init_cwnd_packets,
                tsq_limit_bytes: t.tsq_limit_bytes,
                min_rto_ps: t.min_rto_ps,
            };
            Box::new(FlowNet::new(
                &topo,
                t.mss_bytes,
                short,
                f.aggregation.as_ref(),
            )?)
        }
    };
    let nl = f.topology.links.len() as u32;
    for (i, e) in f.link_events.iter().enumerate() {
        if e.link >= nl {
            return Err(format!(
                "link_events[{i}].link: link index {} out of range (0..{nl})",
                e.link
            ));
        }
        match e.action {
            LinkAction::Rate if e.rate_bps.is_none_or(|r| r == 0) => {
                return Err(format!(
                    "link_events[{i}].rate_bps: a positive rate is needed"
                ))
            }
            LinkAction::Loss if e.loss.is_none_or(|x| !(0.0..=1.0).contains(&x)) => {
                return Err(format!(
                    "link_events[{i}].loss: a probability within [0, 1] is needed"
                ))
            }
            _ => {}
        }
    }
    let env = BuildEnv {
        topo: &topo,
        seed: f.seed,
        aggregation: f.aggregation.as_ref(),
    };
    let mut apps = Vec::new();
    for (key, value) in &spec.apps {
        let kind = REGISTRY.iter().find(|k| k.key == *key).expect("registered");
        apps.extend((kind.build)(value, &env)?);
    }
    let clocks = match &f.clocks {
        Some(c) => Some(crate::engine::Clocks::new(c, topo.num_hosts(), f.seed)?),
        None => None,
    };
    let mut sim = Simulation::new(topo, backend, f.routing.ecmp_hash_seed, t.mss_bytes);
    if let Some(c) = clocks {
        sim.set_clocks(c);
    }
    sim.set_link_events(f.link_events.clone(), f.routing.convergence_ps);
    for a in apps {
        sim.add_app(a);
    }
    Ok(sim)
}

/// Each port's queue as the flow backend's short-flow model reads it: the
/// discipline the packet backend would give the port (its override, the
/// host queue for a host's NIC, else `[queue]`), with thresholds and limits
/// in wire bytes (packet counts at full segments).
fn flow_port_queues(topo: &Topology, f: &FabricSpec, mss_bytes: u32) -> Vec<PortQueue> {
    let full = wire_bytes(mss_bytes) as f64;
    let bytes = |b: Option<u64>, pk: Option<u64>| -> Option<f64> {
        let x = b
            .map(|b| b as f64)
            .into_iter()
            .chain(pk.map(|n| n as f64 * full))
            .fold(f64::INFINITY, f64::min);
        (x < f64::INFINITY).then_some(x)
    };
    topo.ports
        .iter()
        .map(|p| {
            let host_port = topo.kinds[p.from as usize] == NodeKind::Host;
            let over = f
                .queue_overrides
                .iter()
                .rev()
                .find(|o| o.from == p.from && o.to.is_none_or(|t| t == p.to));
            let spec = match (over, host_port, &f.host_queue) {
                (Some(o), _, _) => &o.queue,
                (None, true, Some(h)) => h,
                (None, true, None) => return PortQueue::unlimited(),
                (None, false, _) => &f.queue,
            };
            let mut band_of = [0u8; 8];
            if spec.discipline == crate::net::packet::Discipline::Prio {
                for (c, b) in band_of.iter_mut().enumerate() {
                    *b = spec.priomap[c].min(spec.bands.max(1) - 1);
                }
            }
            PortQueue {
                band_of,
                mark_bytes: bytes(spec.ecn_threshold_bytes, spec.ecn_threshold_packets),
                limit_bytes: bytes(spec.limit_bytes, spec.limit_packets),
            }
        })
        .collect()
}

/// The JSON Schema of the resolved scenario the core reads, derived from
/// the serde types themselves: [`FabricSpec`]'s, with every registered app
/// kind's section as a further property (none required). Shared
/// definitions live in one `$defs`; the Python contract test compares it
/// with what the scenario layer emits.
pub fn core_schema() -> serde_json::Value {
    use serde_json::Value;
    let mut root = schemars::schema_for!(FabricSpec).to_value();
    let mut defs = match root.as_object_mut().and_then(|o| o.remove("$defs")) {
        Some(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    for kind in REGISTRY {
        let mut s = (kind.schema)();
        let o = s.as_object_mut().expect("a schema object");
        o.remove("$schema");
        if let Some(Value::Object(d)) = o.remove("$defs") {
            for (name, def) in d {
                match defs.get(&name) {
                    Some(old) if *old != def => {
                        panic!("schema definition {name} differs between sections")
                    }
                    _ => {
                        defs.insert(name, def);
                    }
                }
            }
        }
        root["properties"][kind.key] = s;
    }
    root["$defs"] = Value::Object(defs);
    root
}

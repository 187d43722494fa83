//! fabriclab-core: a deterministic discrete-event simulator of data-center
//! fabrics, with a packet-level and a flow-level backend behind one message
//! interface. Pure Rust; the Python binding lives in `fabriclab-py`.

pub mod collective;
pub mod event;
pub mod job;
pub mod net;
pub mod packet;
pub mod qdisc;
pub mod results;
pub mod sim;
pub mod slack;
pub mod spec;
pub mod time;
pub mod topology;
pub mod traffic;
pub mod transport;

/// The plan format and its step graph (the `fabriclab-plan` crate).
pub use fabriclab_plan as plan;

use net::{flow::FlowNet, packet::PacketNet, Backend};
use sim::{Message, Simulation};
use spec::{BackendKind, SimSpec};
use topology::{mix64, Topology};
use traffic::{Cdf, FlowList, PoissonTraffic};

/// Parses a resolved scenario (JSON) and builds its simulation.
pub fn build_from_json(json: &str) -> Result<Simulation, String> {
    let spec: SimSpec = serde_json::from_str(json).map_err(|e| format!("scenario: {e}"))?;
    build(&spec)
}

/// Builds a simulation from a resolved scenario.
pub fn build(spec: &SimSpec) -> Result<Simulation, String> {
    let topo = Topology::build(&spec.topology)?;
    let t = &spec.transport;
    if t.mss_bytes == 0 || t.mss_bytes > 9000 {
        return Err("transport.mss_bytes: must be within 1..=9000".into());
    }
    if t.init_cwnd_packets == 0 {
        return Err("transport.init_cwnd_packets: must be positive".into());
    }
    let nh = topo.num_hosts() as u32;
    let backend: Box<dyn Backend> = match spec.backend {
        BackendKind::Packet => Box::new(PacketNet::new(&topo, &spec.queue, t)),
        BackendKind::Flow => Box::new(FlowNet::new(&topo, t.mss_bytes)),
    };
    let mut apps: Vec<Box<dyn sim::App>> = Vec::new();
    for (i, tr) in spec.traffic.iter().enumerate() {
        let cdf = Cdf::new(&tr.cdf).map_err(|e| format!("traffic[{i}].{e}"))?;
        if !(tr.load > 0.0 && tr.load <= 1.0) {
            return Err(format!(
                "traffic[{i}].load: must be within (0, 1], got {}",
                tr.load
            ));
        }
        if tr.hosts.len() < 2 {
            return Err(format!("traffic[{i}].hosts: needs at least two hosts"));
        }
        if let Some(h) = tr.hosts.iter().find(|&&h| h >= nh) {
            return Err(format!(
                "traffic[{i}].hosts: host index {h} out of range (0..{nh})"
            ));
        }
        let rate: f64 = tr.hosts.iter().map(|&h| topo.host_rate_bps(h) as f64).sum();
        let seed = mix64(spec.seed ^ mix64(0x7472_6166_6669_63 + i as u64));
        apps.push(Box::new(PoissonTraffic::new(
            seed,
            cdf,
            tr.load,
            tr.hosts.clone(),
            rate,
            tr.start_ps,
            tr.duration_ps,
            tr.class,
            tr.tag.clone(),
        )));
    }
    if !spec.flows.is_empty() {
        let mut list = Vec::with_capacity(spec.flows.len());
        for (i, f) in spec.flows.iter().enumerate() {
            if f.src >= nh || f.dst >= nh {
                return Err(format!("flows[{i}]: host index out of range (0..{nh})"));
            }
            if f.src == f.dst {
                return Err(format!("flows[{i}]: src and dst must differ"));
            }
            if f.size_bytes == 0 {
                return Err(format!("flows[{i}].size_bytes: must be positive"));
            }
            if let Some(p) = &f.path {
                topo.explicit_route(p, f.src, f.dst)
                    .map_err(|e| format!("flows[{i}].{e}"))?;
            }
            list.push((
                f.start_ps,
                Message {
                    src: f.src,
                    dst: f.dst,
                    size_bytes: f.size_bytes,
                    class: f.class,
                    path: f.path.clone(),
                    persistent: false,
                },
            ));
        }
        apps.push(Box::new(FlowList::new(list)));
    }
    for c in &spec.collectives {
        for (r, steps) in c.steps.iter().enumerate() {
            for (i, st) in steps.iter().enumerate() {
                if let (Some(p), Some(&peer_host)) = (&st.path, c.rank_hosts.get(st.peer as usize))
                {
                    let nodes: Option<Vec<u32>> = p.iter().map(plan::Hop::node).collect();
                    let nodes = nodes.ok_or_else(|| {
                        format!("{}: rank {r} step {i}: path names a node instead of giving its index", c.name)
                    })?;
                    topo.explicit_route(&nodes, c.rank_hosts[r], peer_host)
                        .map_err(|e| format!("{}: rank {r} step {i}: {e}", c.name))?;
                }
            }
        }
        apps.push(Box::new(collective::CollectiveApp::new(c.clone(), nh)?));
    }
    for j in &spec.jobs {
        apps.push(Box::new(job::TrainingJob::new(j.clone(), nh)?));
    }
    let mut sim = Simulation::new(topo, backend, spec.routing.ecmp_hash_seed, t.mss_bytes);
    for a in apps {
        sim.add_app(a);
    }
    Ok(sim)
}

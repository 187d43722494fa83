//! The fabric graph and its routing: directed ports, hop distances to every
//! host, and per-flow ECMP path selection.

use crate::packet::wire_bytes;
use crate::spec::{NodeKind, TopologySpec};
use crate::time::ser_time_ps;
use std::collections::VecDeque;

/// One direction of a link: the egress port at `from` towards `to`.
#[derive(Debug, Clone)]
pub struct PortInfo {
    pub from: u32,
    pub to: u32,
    pub rate_bps: u64,
    pub delay_ps: u64,
}

/// The 5-tuple of a message's connection, hashed for ECMP.
#[derive(Debug, Clone, Copy)]
pub struct FiveTuple {
    pub src: u32,
    pub dst: u32,
    pub src_port: u16,
    pub dst_port: u16,
    pub protocol: u8,
}

impl FiveTuple {
    pub fn reversed(&self) -> FiveTuple {
        FiveTuple { src: self.dst, dst: self.src, src_port: self.dst_port, dst_port: self.src_port, protocol: self.protocol }
    }
}

const UNREACHABLE: u16 = u16::MAX;

pub struct Topology {
    pub names: Vec<String>,
    pub kinds: Vec<NodeKind>,
    pub ports: Vec<PortInfo>,
    pub out_ports: Vec<Vec<u32>>,
    /// Node id of each host, in host-index order.
    pub hosts: Vec<u32>,
    /// `dist[node * hosts.len() + host_index]`: hops from `node` to that host,
    /// never transiting through another host.
    dist: Vec<u16>,
}

/// splitmix64 finaliser: a fixed, well-mixed 64-bit hash step.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Topology {
    pub fn build(spec: &TopologySpec) -> Result<Topology, String> {
        let n = spec.nodes.len();
        if n == 0 {
            return Err("topology.nodes: must not be empty".into());
        }
        let names = spec.nodes.iter().map(|x| x.name.clone()).collect();
        let kinds: Vec<NodeKind> = spec.nodes.iter().map(|x| x.kind).collect();
        let mut ports = Vec::with_capacity(spec.links.len() * 2);
        let mut out_ports = vec![Vec::new(); n];
        for (i, l) in spec.links.iter().enumerate() {
            if l.a as usize >= n || l.b as usize >= n {
                return Err(format!("topology.links[{i}]: node index out of range (0..{n})"));
            }
            if l.a == l.b {
                return Err(format!("topology.links[{i}]: a link must join two different nodes"));
            }
            if l.rate_bps == 0 {
                return Err(format!("topology.links[{i}].rate_bps: must be positive"));
            }
            for (from, to) in [(l.a, l.b), (l.b, l.a)] {
                out_ports[from as usize].push(ports.len() as u32);
                ports.push(PortInfo { from, to, rate_bps: l.rate_bps, delay_ps: l.delay_ps });
            }
        }
        let hosts: Vec<u32> = (0..n as u32).filter(|&v| kinds[v as usize] == NodeKind::Host).collect();
        if hosts.len() < 2 {
            return Err("topology.nodes: at least two hosts are needed".into());
        }
        let nh = hosts.len();
        let mut dist = vec![UNREACHABLE; n * nh];
        let mut bfs = VecDeque::new();
        for (hi, &h) in hosts.iter().enumerate() {
            dist[h as usize * nh + hi] = 0;
            bfs.clear();
            bfs.push_back(h);
            while let Some(u) = bfs.pop_front() {
                if u != h && kinds[u as usize] == NodeKind::Host {
                    continue; // hosts do not forward
                }
                let du = dist[u as usize * nh + hi];
                for &p in &out_ports[u as usize] {
                    let v = ports[p as usize].to as usize;
                    if dist[v * nh + hi] == UNREACHABLE {
                        dist[v * nh + hi] = du + 1;
                        bfs.push_back(v as u32);
                    }
                }
            }
        }
        let topo = Topology { names, kinds, ports, out_ports, hosts, dist };
        for (hi, &h) in topo.hosts.iter().enumerate() {
            for (hj, &g) in topo.hosts.iter().enumerate() {
                if hi != hj && topo.dist[g as usize * nh + hi] == UNREACHABLE {
                    return Err(format!(
                        "topology: host '{}' cannot reach host '{}' (every host must reach every other host)",
                        topo.names[g as usize], topo.names[h as usize]
                    ));
                }
            }
        }
        Ok(topo)
    }

    pub fn num_hosts(&self) -> usize {
        self.hosts.len()
    }

    /// Summed egress rate of a host's ports.
    pub fn host_rate_bps(&self, host_index: u32) -> u64 {
        let node = self.hosts[host_index as usize] as usize;
        self.out_ports[node].iter().map(|&p| self.ports[p as usize].rate_bps).sum()
    }

    /// ECMP route (egress port ids) from host `src` to host `dst` (host indices):
    /// at every node, the next hop is chosen among the ports on shortest paths
    /// by a hash of the 5-tuple, the scenario's hash seed and the node id.
    pub fn ecmp_route(&self, tuple: &FiveTuple, seed: u64) -> Vec<u32> {
        let nh = self.hosts.len();
        let dst_hi = tuple.dst as usize;
        let dst_node = self.hosts[dst_hi];
        let mut u = self.hosts[tuple.src as usize];
        let flow_hash = mix64(
            seed ^ mix64(
                ((tuple.src as u64) << 32 | tuple.dst as u64)
                    ^ mix64((tuple.src_port as u64) << 24 | (tuple.dst_port as u64) << 8 | tuple.protocol as u64),
            ),
        );
        let mut route = Vec::new();
        let mut cand: Vec<u32> = Vec::new();
        while u != dst_node {
            let du = self.dist[u as usize * nh + dst_hi];
            cand.clear();
            for &p in &self.out_ports[u as usize] {
                let v = self.ports[p as usize].to as usize;
                if self.dist[v * nh + dst_hi] + 1 == du {
                    cand.push(p);
                }
            }
            let pick = if cand.len() == 1 { 0 } else { (mix64(flow_hash ^ u as u64) % cand.len() as u64) as usize };
            let p = cand[pick];
            route.push(p);
            u = self.ports[p as usize].to;
        }
        route
    }

    /// Route along an explicit node path; errors name the offending hop.
    pub fn explicit_route(&self, path: &[u32], src: u32, dst: u32) -> Result<Vec<u32>, String> {
        if path.len() < 2 {
            return Err("path: needs at least the source and destination nodes".into());
        }
        if path[0] != self.hosts[src as usize] || *path.last().unwrap() != self.hosts[dst as usize] {
            return Err("path: must start at the source host's node and end at the destination host's node".into());
        }
        let mut route = Vec::with_capacity(path.len() - 1);
        for w in path.windows(2) {
            let (a, b) = (w[0], w[1]);
            if a as usize >= self.names.len() || b as usize >= self.names.len() {
                return Err(format!("path: node index out of range (0..{})", self.names.len()));
            }
            let p = self.out_ports[a as usize]
                .iter()
                .copied()
                .find(|&p| self.ports[p as usize].to == b)
                .ok_or_else(|| format!("path: no link from node {a} to node {b}"))?;
            route.push(p);
        }
        Ok(route)
    }

    /// Ideal FCT: the message alone on an idle fabric with no window limit.
    /// Its packets leave back to back at the path's bottleneck rate, and the
    /// last packet then crosses every other hop store-and-forward:
    /// `wire_total/bottleneck + sum over other hops of ser(last packet) + sum of delays`.
    /// Exact for paths of equal rates; a lower bound otherwise.
    pub fn ideal_fct_ps(&self, route: &[u32], size_bytes: u64, mss_bytes: u32) -> u64 {
        let mss = mss_bytes as u64;
        let full = size_bytes / mss;
        let rest = size_bytes % mss;
        let last_payload = if rest > 0 { rest } else { mss.min(size_bytes) };
        let total_wire =
            full * wire_bytes(mss as u32) as u64 + if rest > 0 { wire_bytes(rest as u32) as u64 } else { 0 };
        let total_wire = total_wire.max(wire_bytes(0) as u64);
        let last_wire = wire_bytes(last_payload as u32) as u64;
        let (mut bi, mut brate) = (0usize, u64::MAX);
        for (i, &p) in route.iter().enumerate() {
            if self.ports[p as usize].rate_bps < brate {
                brate = self.ports[p as usize].rate_bps;
                bi = i;
            }
        }
        let mut t = ser_time_ps(total_wire, brate);
        for (i, &p) in route.iter().enumerate() {
            let port = &self.ports[p as usize];
            t += port.delay_ps;
            if i != bi {
                t += ser_time_ps(last_wire, port.rate_bps);
            }
        }
        t
    }
}

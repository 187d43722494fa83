//! The fabric graph and its routing: directed ports, hop distances to every
//! host, and per-flow ECMP path selection.

use super::frame::wire_bytes;
use super::{NodeKind, TopologySpec};
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
        FiveTuple {
            src: self.dst,
            dst: self.src,
            src_port: self.dst_port,
            dst_port: self.src_port,
            protocol: self.protocol,
        }
    }
}

const UNREACHABLE: u16 = u16::MAX;
const NO_ROW: u32 = u32::MAX;

pub struct Topology {
    pub names: Vec<String>,
    pub kinds: Vec<NodeKind>,
    pub ports: Vec<PortInfo>,
    pub out_ports: Vec<Vec<u32>>,
    /// Node id of each host, in host-index order.
    pub hosts: Vec<u32>,
    /// Resilient ECMP hashing: a flow keeps its next hop unless that link
    /// is down (then it is hashed over the links up); see [`Topology::ecmp_route`].
    pub resilient_hash: bool,
    /// Column of each switch in `dist` (`NO_ROW` for hosts).
    switch_row: Vec<u32>,
    num_switches: usize,
    /// Per host index, its attachment group: hosts attached to the same set
    /// of switches are equally far from every switch.
    host_group: Vec<u32>,
    /// `dist[group * switches + switch_row]`: hops from a switch to any host
    /// of that group, never transiting through a host. Hosts have no column
    /// (they do not forward; see [`Topology::dist`]). The table holds
    /// groups x switches entries, not nodes x hosts: 21 MB instead of 9 GB
    /// for a k = 64 fat-tree.
    dist: Vec<u16>,
    /// Per egress port: whether its link is up (timed link events).
    port_up: Vec<bool>,
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
        let names: Vec<String> = spec.nodes.iter().map(|x| x.name.clone()).collect();
        let kinds: Vec<NodeKind> = spec.nodes.iter().map(|x| x.kind).collect();
        let mut ports = Vec::with_capacity(spec.links.len() * 2);
        let mut out_ports = vec![Vec::new(); n];
        for (i, l) in spec.links.iter().enumerate() {
            if l.a as usize >= n || l.b as usize >= n {
                return Err(format!(
                    "topology.links[{i}]: node index out of range (0..{n})"
                ));
            }
            if l.a == l.b {
                return Err(format!(
                    "topology.links[{i}]: a link must join two different nodes"
                ));
            }
            if l.rate_bps == 0 {
                return Err(format!("topology.links[{i}].rate_bps: must be positive"));
            }
            for (from, to) in [(l.a, l.b), (l.b, l.a)] {
                out_ports[from as usize].push(ports.len() as u32);
                ports.push(PortInfo {
                    from,
                    to,
                    rate_bps: l.rate_bps,
                    delay_ps: l.delay_ps,
                });
            }
        }
        let hosts: Vec<u32> = (0..n as u32)
            .filter(|&v| kinds[v as usize] == NodeKind::Host)
            .collect();
        if hosts.len() < 2 {
            return Err("topology.nodes: at least two hosts are needed".into());
        }
        let mut switch_row = vec![NO_ROW; n];
        let mut ns = 0usize;
        for v in 0..n {
            if kinds[v] == NodeKind::Switch {
                switch_row[v] = ns as u32;
                ns += 1;
            }
        }
        let port_up = vec![true; ports.len()];
        let mut topo = Topology {
            names,
            kinds,
            ports,
            out_ports,
            hosts,
            resilient_hash: false,
            switch_row,
            num_switches: ns,
            host_group: Vec::new(),
            dist: Vec::new(),
            port_up,
        };
        let unreachable = topo.compute_routing();
        if let Some((a, b)) = unreachable {
            return Err(format!(
                "topology: host '{}' cannot reach host '{}' (every host must reach every other host)",
                names_of(spec, a),
                names_of(spec, b)
            ));
        }
        Ok(topo)
    }

    /// Whether the link of egress `port` is up (both directions share it).
    pub fn port_up(&self, port: u32) -> bool {
        self.port_up[port as usize]
    }

    /// Sets a link (ports `2 * link` and `2 * link + 1`) up or down. Routing
    /// follows only at the next [`Topology::compute_routing`] (convergence).
    pub fn set_link_up(&mut self, link: u32, up: bool) {
        self.port_up[2 * link as usize] = up;
        self.port_up[2 * link as usize + 1] = up;
    }

    /// Recomputes hop distances over the links that are up; returns a pair of
    /// hosts (node ids) that cannot reach each other, if any.
    pub fn compute_routing(&mut self) -> Option<(u32, u32)> {
        let (kinds, ports, out_ports, switch_row, ns) = (
            &self.kinds,
            &self.ports,
            &self.out_ports,
            &self.switch_row,
            self.num_switches,
        );
        let up = &self.port_up;
        // A host's switch neighbours over links that are up, sorted: its attachment group.
        let mut groups: std::collections::HashMap<Vec<u32>, u32> = std::collections::HashMap::new();
        let mut members: Vec<Vec<u32>> = Vec::new();
        let mut host_group = Vec::with_capacity(self.hosts.len());
        for (hi, &h) in self.hosts.iter().enumerate() {
            let mut att: Vec<u32> = out_ports[h as usize]
                .iter()
                .filter(|&&p| up[p as usize])
                .map(|&p| ports[p as usize].to)
                .filter(|&v| kinds[v as usize] == NodeKind::Switch)
                .collect();
            att.sort_unstable();
            att.dedup();
            let next = groups.len() as u32;
            let g = *groups.entry(att).or_insert(next);
            if g == next {
                members.push(Vec::new());
            }
            members[g as usize].push(hi as u32);
            host_group.push(g);
        }
        let mut attach: Vec<Vec<u32>> = vec![Vec::new(); groups.len()];
        for (att, &g) in &groups {
            attach[g as usize] = att.clone();
        }
        // One breadth-first search per group over the switches, from the
        // group's switches at distance 1; hosts are never expanded.
        let ng = attach.len();
        let mut dist = vec![UNREACHABLE; ng * ns];
        let mut bfs = VecDeque::new();
        for (g, att) in attach.iter().enumerate() {
            let row = &mut dist[g * ns..(g + 1) * ns];
            bfs.clear();
            for &w in att {
                row[switch_row[w as usize] as usize] = 1;
                bfs.push_back(w);
            }
            while let Some(u) = bfs.pop_front() {
                let du = row[switch_row[u as usize] as usize];
                for &p in &out_ports[u as usize] {
                    let v = ports[p as usize].to as usize;
                    if up[p as usize]
                        && kinds[v] == NodeKind::Switch
                        && row[switch_row[v] as usize] == UNREACHABLE
                    {
                        row[switch_row[v] as usize] = du + 1;
                        bfs.push_back(v as u32);
                    }
                }
            }
        }
        // Every host must reach every other: through a switch of its own
        // group that reaches the other's group, or over a direct link.
        let mut unreachable = None;
        'outer: for g_dst in 0..ng {
            let row = &dist[g_dst * ns..(g_dst + 1) * ns];
            for g_src in 0..ng {
                if attach[g_src]
                    .iter()
                    .any(|&w| row[switch_row[w as usize] as usize] != UNREACHABLE)
                {
                    continue;
                }
                for &a in &members[g_src] {
                    for &b in &members[g_dst] {
                        let (ha, hb) = (self.hosts[a as usize], self.hosts[b as usize]);
                        let direct = out_ports[ha as usize]
                            .iter()
                            .any(|&p| up[p as usize] && ports[p as usize].to == hb);
                        if ha != hb && !direct {
                            unreachable = Some((ha, hb));
                            break 'outer;
                        }
                    }
                }
            }
        }
        self.host_group = host_group;
        self.dist = dist;
        unreachable
    }

    /// Hops from `node` to host `hi`, never transiting through another host:
    /// a switch's from the table; a host's is 0 if it is that host, else one
    /// more than its nearest neighbour that can carry the packet on (a switch,
    /// or the destination itself).
    fn dist(&self, node: u32, hi: usize) -> u16 {
        let row = self.switch_row[node as usize];
        if row != NO_ROW {
            return self.dist[self.host_group[hi] as usize * self.num_switches + row as usize];
        }
        if node == self.hosts[hi] {
            return 0;
        }
        self.out_ports[node as usize]
            .iter()
            .filter(|&&p| self.port_up[p as usize])
            .map(|&p| self.ports[p as usize].to)
            .map(|v| {
                if v == self.hosts[hi] {
                    0
                } else if self.switch_row[v as usize] != NO_ROW {
                    self.dist(v, hi)
                } else {
                    UNREACHABLE
                }
            })
            .min()
            .map_or(UNREACHABLE, |d| d.saturating_add(1))
    }

    pub fn num_hosts(&self) -> usize {
        self.hosts.len()
    }

    /// Summed egress rate of a host's ports.
    pub fn host_rate_bps(&self, host_index: u32) -> u64 {
        let node = self.hosts[host_index as usize] as usize;
        self.out_ports[node]
            .iter()
            .map(|&p| self.ports[p as usize].rate_bps)
            .sum()
    }

    /// ECMP route (egress port ids) from host `src` to host `dst` (host indices):
    /// at every node, the next hop is chosen among the ports on shortest paths
    /// by a hash of the 5-tuple, the scenario's hash seed and the node id.
    /// With `resilient_hash`, the hash picks among the group's ports up or
    /// down (those whose far end is one hop nearer), and only a flow whose
    /// pick is down is hashed again over the ports up, as switches'
    /// resilient hashing keeps the other flows in place (Broadcom's
    /// "resilient hashing"; the C4 paper's figure 12 shows only the failed
    /// link's flows moving).
    /// `None` when the destination cannot be reached over links that are up.
    pub fn ecmp_route(&self, tuple: &FiveTuple, seed: u64) -> Option<Vec<u32>> {
        let dst_hi = tuple.dst as usize;
        let dst_node = self.hosts[dst_hi];
        let mut u = self.hosts[tuple.src as usize];
        let flow_hash = mix64(
            seed ^ mix64(
                ((tuple.src as u64) << 32 | tuple.dst as u64)
                    ^ mix64(
                        (tuple.src_port as u64) << 24
                            | (tuple.dst_port as u64) << 8
                            | tuple.protocol as u64,
                    ),
            ),
        );
        let mut route = Vec::new();
        let mut cand: Vec<u32> = Vec::new();
        while u != dst_node {
            let du = self.dist(u, dst_hi);
            if du == UNREACHABLE {
                return None;
            }
            cand.clear();
            for &p in &self.out_ports[u as usize] {
                let v = self.ports[p as usize].to as usize;
                if self.port_up[p as usize] && self.dist(v as u32, dst_hi).wrapping_add(1) == du {
                    cand.push(p);
                }
            }
            let pick = if cand.len() == 1 {
                0
            } else if self.resilient_hash {
                let full: Vec<u32> = self.out_ports[u as usize]
                    .iter()
                    .copied()
                    .filter(|&p| self.dist(self.ports[p as usize].to, dst_hi).wrapping_add(1) == du)
                    .collect();
                let first = full[(mix64(flow_hash ^ u as u64) % full.len() as u64) as usize];
                match cand.iter().position(|&p| p == first) {
                    Some(i) => i,
                    None => {
                        let again = mix64(flow_hash ^ u as u64 ^ 0x9E37_79B9_7F4A_7C15);
                        (again % cand.len() as u64) as usize
                    }
                }
            } else {
                (mix64(flow_hash ^ u as u64) % cand.len() as u64) as usize
            };
            let p = cand[pick];
            route.push(p);
            u = self.ports[p as usize].to;
        }
        Some(route)
    }

    /// A shortest route from host `src` to host `dst` (host indices) over
    /// every link, up or down (first port in port order at each step): where
    /// a message goes while routing knows no way around a failure.
    pub fn any_route(&self, src: u32, dst: u32) -> Vec<u32> {
        let (s, d) = (self.hosts[src as usize], self.hosts[dst as usize]);
        let mut via = vec![u32::MAX; self.names.len()];
        let mut bfs = VecDeque::from([s]);
        via[s as usize] = u32::MAX - 1;
        while let Some(u) = bfs.pop_front() {
            if u == d {
                break;
            }
            if u != s && self.kinds[u as usize] == NodeKind::Host {
                continue; // hosts do not forward
            }
            for &p in &self.out_ports[u as usize] {
                let v = self.ports[p as usize].to;
                if via[v as usize] == u32::MAX {
                    via[v as usize] = p;
                    bfs.push_back(v);
                }
            }
        }
        let mut route = Vec::new();
        let mut v = d;
        while v != s {
            let p = via[v as usize];
            route.push(p);
            v = self.ports[p as usize].from;
        }
        route.reverse();
        route
    }

    /// Route along an explicit node path; errors name the offending hop.
    pub fn explicit_route(&self, path: &[u32], src: u32, dst: u32) -> Result<Vec<u32>, String> {
        if path.len() < 2 {
            return Err("path: needs at least the source and destination nodes".into());
        }
        if path[0] != self.hosts[src as usize] || *path.last().unwrap() != self.hosts[dst as usize]
        {
            return Err(
                "path: must start at the source host's node and end at the destination host's node"
                    .into(),
            );
        }
        if let Some(&v) = path.iter().find(|&&v| v as usize >= self.names.len()) {
            return Err(format!(
                "path: node index {v} out of range (0..{})",
                self.names.len()
            ));
        }
        // Hosts do not forward, and a route visits a node once: a path through
        // another host, or one that loops, is refused (a packet would never arrive).
        for (i, &v) in path.iter().enumerate().take(path.len() - 1).skip(1) {
            if self.kinds[v as usize] == NodeKind::Host {
                return Err(format!(
                    "path: hop {i} is host '{}'; between its end hosts a path may pass through switches only",
                    self.names[v as usize]
                ));
            }
        }
        let mut seen = std::collections::HashSet::with_capacity(path.len());
        if let Some(&v) = path.iter().find(|&&v| !seen.insert(v)) {
            return Err(format!(
                "path: node '{}' appears twice; a path must be simple (no loops)",
                self.names[v as usize]
            ));
        }
        let mut route = Vec::with_capacity(path.len() - 1);
        for w in path.windows(2) {
            let (a, b) = (w[0], w[1]);
            let p = self.out_ports[a as usize]
                .iter()
                .copied()
                .find(|&p| self.ports[p as usize].to == b)
                .ok_or_else(|| {
                    format!(
                        "path: no link from '{}' to '{}'",
                        self.names[a as usize], self.names[b as usize]
                    )
                })?;
            route.push(p);
        }
        Ok(route)
    }

    /// Ideal FCT: the message alone on an idle fabric with no window limit,
    /// store-and-forward at every hop. Packet k ends hop h at
    /// `F(k, h) = max(F(k, h-1), F(k-1, h)) + ser(k, h)`, so the last packet's
    /// end is the heaviest monotone walk through the (packet, hop) grid. With
    /// N packets of L wire bytes but a last one of l, that walk carries
    /// packet 1 over hops 1..=j, packets 2..N-1 at the slowest hop j' <= j,
    /// and the last packet from hop j on:
    /// `max over j of [sum_{h<=j} L/r_h + (N-2) L/min_{h<=j} r_h + sum_{h>=j} l/r_h]`
    /// plus the delays (N = 1: `sum_h l/r_h`). Exact for any link rates;
    /// on equal rates it is `wire_total/r + (hops - 1) L/r`.
    pub fn ideal_fct_ps(&self, route: &[u32], size_bytes: u64, mss_bytes: u32) -> u64 {
        let mss = mss_bytes as u64;
        let delays: u64 = route.iter().map(|&p| self.ports[p as usize].delay_ps).sum();
        let n = size_bytes.div_ceil(mss).max(1);
        let full_wire = wire_bytes(mss as u32) as u64;
        let last_payload = size_bytes - (n - 1) * mss;
        let last_wire = wire_bytes(last_payload as u32) as u64;
        let rates: Vec<u64> = route
            .iter()
            .map(|&p| self.ports[p as usize].rate_bps)
            .collect();
        if n == 1 {
            return delays
                + rates
                    .iter()
                    .map(|&r| ser_time_ps(last_wire, r))
                    .sum::<u64>();
        }
        // Suffix sums of the last packet's times, prefix sums of a full one's.
        let mut tail = vec![0u64; rates.len() + 1];
        for h in (0..rates.len()).rev() {
            tail[h] = tail[h + 1] + ser_time_ps(last_wire, rates[h]);
        }
        let (mut head, mut slowest, mut best) = (0u64, u64::MAX, 0u64);
        for (h, &r) in rates.iter().enumerate() {
            head += ser_time_ps(full_wire, r);
            slowest = slowest.min(r);
            let walk = head + (n - 2) * ser_time_ps(full_wire, slowest) + tail[h];
            best = best.max(walk);
        }
        delays + best
    }
}

fn names_of(spec: &TopologySpec, node: u32) -> &str {
    &spec.nodes[node as usize].name
}

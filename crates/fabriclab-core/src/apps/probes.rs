//! The probe mesh (Huygens' coded probes, the talk's always-on mesh): every
//! host of the mesh (every host, or the `hosts` given) probes `peers`
//! others of the mesh, chosen seeded and distinct. Every
//! `pair_every_ps / peers` a host sends a coded pair to its next peer in
//! turn: two small messages `spacing_ps` apart by its own clock. Every probe
//! arriving at its peer is echoed back at once as a probe of the reverse
//! direction (a pair of the peer's own), so both directions are measured.
//!
//! Each probe is stamped on the sender's clock when it is sent and on the
//! receiver's clock when its last byte arrives (for a probe of one packet,
//! the packet's arrival), each with that host's stamping noise; the true
//! times are kept beside them. Probes are messages of the message interface:
//! real packets in the packet backend, meeting the queues.
//!
//! Each host keeps at most one pending timer: its next send.

use super::{AppKind, BuildEnv};
use crate::engine::{Api, App, Column, Message, MsgId, Table};
use crate::fabric::topology::mix64;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use std::collections::HashMap;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// Peers each host probes (fewer than the hosts).
    pub peers: u32,
    /// Between two pairs a host sends to one peer.
    pub pair_every_ps: u64,
    /// Between a pair's two probes, by the sender's clock.
    pub spacing_ps: u64,
    pub size_bytes: u64,
    pub class: u8,
    pub start_ps: u64,
    /// Pairs start until `start_ps + duration_ps`.
    pub duration_ps: u64,
    /// The hosts of the mesh (host indices, distinct); `None`: every host.
    #[serde(default)]
    pub hosts: Option<Vec<u32>>,
}

pub const KIND: AppKind = AppKind {
    key: "probes",
    build: build_probes,
    schema: || schemars::schema_for!(Option<ProbeSpec>).to_value(),
};

fn build_probes(v: &serde_json::Value, env: &BuildEnv) -> Result<Vec<Box<dyn App>>, String> {
    let spec: Option<ProbeSpec> = super::section("probes", v)?;
    let Some(spec) = spec else {
        return Ok(Vec::new());
    };
    let hosts = env.topo.num_hosts() as u32;
    let members: Vec<u32> = match &spec.hosts {
        None => (0..hosts).collect(),
        Some(list) => {
            let mut seen = vec![false; hosts as usize];
            for &h in list {
                if h >= hosts {
                    return Err(format!(
                        "probes.hosts: host {h} is not a host of the topology (it has {hosts})"
                    ));
                }
                if std::mem::replace(&mut seen[h as usize], true) {
                    return Err(format!("probes.hosts: host {h} is given twice"));
                }
            }
            list.clone()
        }
    };
    let n = members.len() as u32;
    if spec.peers == 0 || spec.peers >= n {
        return Err(format!(
            "probes.peers: {} peers need more hosts than that (the mesh has {n})",
            spec.peers
        ));
    }
    let gap = spec.pair_every_ps / spec.peers as u64;
    if spec.spacing_ps >= gap {
        return Err(format!(
            "probes.spacing_ps: {} ps is not shorter than a host's gap between pairs (pair_every_ps / peers = {gap} ps)",
            spec.spacing_ps
        ));
    }
    if spec.size_bytes == 0 {
        return Err("probes.size_bytes: must be positive".into());
    }
    let names = env
        .topo
        .hosts
        .iter()
        .map(|&n| env.topo.names[n as usize].clone())
        .collect();
    Ok(vec![Box::new(Probes::new(spec, hosts, &members, env.seed, names))])
}

/// A probe sent; `rx_ps` once it arrived.
#[derive(Debug, Clone)]
struct Row {
    src: u32,
    dst: u32,
    pair: u64,
    seq: u8,
    echo: bool,
    tx_ps: i64,
    true_tx_ps: u64,
    rx: Option<(i64, u64)>,
}

/// A host's next send: the first probe of slot `slot`, or the second probe
/// of the pair just begun.
#[derive(Debug, Clone, Copy)]
enum Next {
    First { slot: u64 },
    Second { slot: u64, dst: u32, pair: u64 },
}

pub struct Probes {
    spec: ProbeSpec,
    seed: u64,
    names: Vec<String>,
    /// The hosts of the mesh.
    members: Vec<u32>,
    /// Per host: its peers (none off the mesh), its slots' phase, its next send, its next pair id.
    peers: Vec<Vec<u32>>,
    phase_ps: Vec<u64>,
    next: Vec<Next>,
    next_pair: Vec<u64>,
    gap_ps: u64,
    end_ps: u64,
    rows: Vec<Row>,
    by_msg: HashMap<MsgId, usize>,
    /// (src, pair) of a probed pair -> the pair id of its echoes at the peer.
    echo_pair: HashMap<(u32, u64), u64>,
    /// Per host: probes (own and echoes) and their bytes sent.
    sent: Vec<u64>,
}

impl Probes {
    fn new(spec: ProbeSpec, hosts: u32, members: &[u32], seed: u64, names: Vec<String>) -> Probes {
        let mut rng = ChaCha8Rng::seed_from_u64(mix64(seed ^ 0x5052_4f42_4553));
        let gap_ps = spec.pair_every_ps / spec.peers as u64;
        let mut peers = vec![Vec::new(); hosts as usize];
        let mut phase_ps = vec![0; hosts as usize];
        // Members are drawn in the order given (every host: 0, 1, ...); a
        // host's peers are the others, by their place in the list.
        for (k, &h) in members.iter().enumerate() {
            let mut p: Vec<u32> = sample(&mut rng, members.len() - 1, spec.peers as usize)
                .into_iter()
                .map(|i| members[if i >= k { i + 1 } else { i }])
                .collect();
            p.sort_unstable();
            peers[h as usize] = p;
            phase_ps[h as usize] = rng.gen_range(0..gap_ps);
        }
        Probes {
            members: members.to_vec(),
            end_ps: spec.start_ps.saturating_add(spec.duration_ps),
            seed,
            names,
            peers,
            phase_ps,
            next: vec![Next::First { slot: 0 }; hosts as usize],
            next_pair: vec![0; hosts as usize],
            gap_ps,
            rows: Vec::new(),
            by_msg: HashMap::new(),
            echo_pair: HashMap::new(),
            sent: vec![0; hosts as usize],
            spec,
        }
    }

    fn slot_ps(&self, host: u32, slot: u64) -> u64 {
        self.spec.start_ps + self.phase_ps[host as usize] + slot * self.gap_ps
    }

    /// Schedules host `host`'s first probe of slot `slot`, if the mesh still runs then.
    fn schedule_slot(&mut self, api: &mut Api, host: u32, slot: u64) {
        let at = self.slot_ps(host, slot);
        if at < self.end_ps {
            self.next[host as usize] = Next::First { slot };
            api.schedule(at, host as u64);
        }
    }

    /// The same 5-tuple for every probe from `src` to `dst` (one path, as
    /// Huygens' UDP probes of one pair of ports).
    fn src_port(&self, src: u32, dst: u32) -> u16 {
        49152 + (mix64(self.seed ^ ((src as u64) << 32 | dst as u64)) % 16384) as u16
    }

    /// Sends probe `seq` of pair `pair` from `src` to `dst` now, stamped on `src`'s clock.
    fn send(&mut self, api: &mut Api, src: u32, dst: u32, pair: u64, seq: u8, echo: bool) {
        let m = Message {
            src,
            dst,
            size_bytes: self.spec.size_bytes,
            class: self.spec.class,
            tag: pair << 1 | seq as u64,
            src_port: Some(self.src_port(src, dst)),
            ..Default::default()
        };
        match api.send(&m) {
            Ok(id) => {
                let tx_ps = api.stamp_ps(src, stamp_key(src, dst, pair, seq, false), false);
                self.by_msg.insert(id, self.rows.len());
                self.rows.push(Row {
                    src,
                    dst,
                    pair,
                    seq,
                    echo,
                    tx_ps,
                    // The true instant at which the sender's clock showed the stamp (its noise
                    // included), so that tx_ps - true_tx_ps is the clock's error exactly.
                    true_tx_ps: api.true_time_ps(src, tx_ps),
                    rx: None,
                });
                self.sent[src as usize] += 1;
            }
            Err(e) => api.fail(format!("probes: {e}")),
        }
    }
}

/// The key of a probe's stamp: its hosts, pair, index and side, so each
/// stamp draws noise of its own.
fn stamp_key(src: u32, dst: u32, pair: u64, seq: u8, rx: bool) -> u64 {
    mix64(mix64(mix64(src as u64) ^ dst as u64) ^ (pair << 2 | (seq as u64) << 1 | rx as u64))
}

impl App for Probes {
    fn start(&mut self, api: &mut Api) {
        for k in 0..self.members.len() {
            self.schedule_slot(api, self.members[k], 0);
        }
    }

    fn on_timer(&mut self, api: &mut Api, token: u64) {
        let h = token as u32;
        match self.next[h as usize] {
            Next::First { slot } => {
                let k = self.peers[h as usize].len() as u64;
                let dst = self.peers[h as usize][(slot % k) as usize];
                let pair = self.next_pair[h as usize];
                self.next_pair[h as usize] += 1;
                self.send(api, h, dst, pair, 0, false);
                let at = api.local_time_ps(h) + self.spec.spacing_ps as i64;
                let at = api.true_time_ps(h, at);
                self.next[h as usize] = Next::Second { slot, dst, pair };
                api.schedule(at, h as u64);
            }
            Next::Second { slot, dst, pair } => {
                self.send(api, h, dst, pair, 1, false);
                self.schedule_slot(api, h, slot + 1);
            }
        }
    }

    fn on_complete(&mut self, api: &mut Api, msg: MsgId) {
        let Some(i) = self.by_msg.remove(&msg) else {
            return;
        };
        let (src, dst, pair, seq, echo) = {
            let r = &self.rows[i];
            (r.src, r.dst, r.pair, r.seq, r.echo)
        };
        let rx_ps = api.stamp_ps(dst, stamp_key(src, dst, pair, seq, true), true);
        self.rows[i].rx = Some((rx_ps, api.true_time_ps(dst, rx_ps)));
        if echo {
            return;
        }
        // The echo: the peer's own pair back to the sender, one per probed pair.
        let echo_pair = match self.echo_pair.remove(&(src, pair)) {
            Some(p) => p,
            None => {
                let p = self.next_pair[dst as usize];
                self.next_pair[dst as usize] += 1;
                self.echo_pair.insert((src, pair), p);
                p
            }
        };
        self.send(api, dst, src, echo_pair, seq, true);
    }

    fn tag(&self) -> &str {
        "probes"
    }

    fn tables(&self) -> Vec<Table> {
        let mut done: Vec<&Row> = self.rows.iter().filter(|r| r.rx.is_some()).collect();
        done.sort_by_key(|r| (r.src, r.pair, r.seq));
        let ns = |ps: i64| ps.div_euclid(1000);
        let probes = Table::new("probes")
            .col(
                "src",
                Column::Str(
                    done.iter()
                        .map(|r| self.names[r.src as usize].clone())
                        .collect(),
                ),
            )
            .col(
                "dst",
                Column::Str(
                    done.iter()
                        .map(|r| self.names[r.dst as usize].clone())
                        .collect(),
                ),
            )
            .col("pair", Column::U64(done.iter().map(|r| r.pair).collect()))
            .col(
                "seq",
                Column::U32(done.iter().map(|r| r.seq as u32).collect()),
            )
            .col(
                "tx_ns",
                Column::I64(done.iter().map(|r| ns(r.tx_ps)).collect()),
            )
            .col(
                "rx_ns",
                Column::I64(done.iter().map(|r| ns(r.rx.expect("arrived").0)).collect()),
            )
            .col(
                "true_tx_ps",
                Column::U64(done.iter().map(|r| r.true_tx_ps).collect()),
            )
            .col(
                "true_rx_ps",
                Column::U64(done.iter().map(|r| r.rx.expect("arrived").1).collect()),
            );
        let load = Table::new("probe_load")
            .col("host", Column::Str(self.names.clone()))
            .col("probes_sent", Column::U64(self.sent.clone()));
        vec![probes, load]
    }
}

//! The message interface: what an application sees of the simulation.
//!
//! An application moves tagged bytes from host A to host B in a class,
//! optionally on an explicit path ([`Api::send`]); it is told when they
//! start arriving and when all have arrived ([`App::on_receive`],
//! [`App::on_complete`]), and keeps its own timers ([`Api::schedule`]).

use super::clock::Clocks;
use super::events::{AppTimers, Ev, PackedEv};
use super::net::{Arrival, Backend, BackendSend, Completion, Ctx};
use super::probe::Probe;
use super::record::MsgRecord;
use super::table::Table;
use crate::event::EventQueue;
use crate::fabric::topology::{FiveTuple, Topology};

pub type MsgId = u32;

/// A request to move `size_bytes` from host `src` to host `dst` (host indices).
#[derive(Debug, Clone, Default)]
pub struct Message {
    pub src: u32,
    pub dst: u32,
    pub size_bytes: u64,
    pub class: u8,
    /// The application's own label of this message (operation, chunk, ...),
    /// kept in its record and written to messages.parquet.
    pub tag: u64,
    /// Explicit route as node indices (source host ... destination host).
    pub path: Option<Vec<u32>>,
    /// Continue the persistent connection of this host pair and class (packet
    /// backend), as long-lived application connections do.
    pub persistent: bool,
    /// Call `on_receive` for every in-order advance at the destination
    /// (each data packet), not only the first.
    pub notify_packets: bool,
    /// Not a transfer but worker `src`'s contribution to in-network
    /// aggregation job `aggregate` of the scenario's aggregation section
    /// (`dst` must equal `src`): it completes, at the worker, once the
    /// aggregated result of all its bytes came back.
    pub aggregate: Option<u16>,
    /// The source port of its 5-tuple, which the ECMP hash reads (a RoCE
    /// connection's UDP source port); by default one derived from its id.
    pub src_port: Option<u16>,
    /// The application's queue-pair identity, unique within the app (the
    /// engine tells apps apart); a backend may keep per-QP state across
    /// the messages naming one QP. None: the message is a QP of its own.
    pub qp: Option<u64>,
}

/// The ephemeral source port of message `id` when its app names none.
pub fn default_src_port(id: MsgId) -> u16 {
    1024 + (id % 64512) as u16
}

/// The 5-tuple of a message's connection: its source port, a fixed
/// destination port, protocol TCP (6).
pub fn message_tuple(src_port: u16, src: u32, dst: u32) -> FiveTuple {
    FiveTuple {
        src,
        dst,
        src_port,
        dst_port: 5001,
        protocol: 6,
    }
}

/// Forward and reverse ECMP routes of a message over the links routing
/// knows to be up; while the destination is unreachable, the route it
/// would take with every link up (its packets are lost until routing
/// converges on a way around).
pub(super) fn ecmp_routes(
    topo: &Topology,
    src_port: u16,
    src: u32,
    dst: u32,
    seed: u64,
) -> (Vec<u32>, Vec<u32>) {
    let tuple = message_tuple(src_port, src, dst);
    let fwd = topo
        .ecmp_route(&tuple, seed)
        .unwrap_or_else(|| topo.any_route(src, dst));
    let rev = topo
        .ecmp_route(&tuple.reversed(), seed)
        .unwrap_or_else(|| topo.any_route(dst, src));
    (fwd, rev)
}

/// An application: traffic generator, collective, training job.
pub trait App: Send + Sync {
    fn start(&mut self, api: &mut Api);
    fn on_timer(&mut self, api: &mut Api, token: u64);
    /// All bytes of `msg` have arrived at its destination.
    fn on_complete(&mut self, _api: &mut Api, _msg: MsgId) {}
    /// In-order bytes of `msg` reached its destination: `bytes` so far.
    /// Called for the first arrival of every message, and for every advance
    /// of messages sent with `notify_packets`; the last call comes just
    /// before `on_complete`.
    fn on_receive(&mut self, _api: &mut Api, _msg: MsgId, _bytes: u64) {}
    /// Routing converged after a link went down and `msg`'s pinned path
    /// crosses it: its packets are lost until the app moves it
    /// ([`Api::set_path`]) or the link comes back.
    fn on_route_lost(&mut self, _api: &mut Api, _msg: MsgId) {}
    /// Routing converged after a link went down or up (after the live
    /// messages moved).
    fn on_routing_changed(&mut self, _api: &mut Api) {}
    /// Label written in the flows table's `tag` column and messages' `app`.
    fn tag(&self) -> &str;
    /// The app's own result tables (tables of one name from several apps
    /// are concatenated, so apps of a kind use the same columns).
    fn tables(&self) -> Vec<Table> {
        Vec::new()
    }
}

/// The interface an application sees.
pub struct Api<'a> {
    pub(super) now: u64,
    pub(super) app: u16,
    pub(super) queue: &'a mut EventQueue<PackedEv>,
    pub(super) timers: &'a mut AppTimers,
    pub(super) backend: &'a mut dyn Backend,
    pub(super) topo: &'a Topology,
    pub(super) msgs: &'a mut Vec<MsgRecord>,
    pub(super) net: NetOut<'a>,
    pub(super) error: &'a mut Option<String>,
    pub(super) holds: &'a mut Holds,
    pub(super) hash_seed: u64,
    pub(super) mss_bytes: u32,
    pub(super) clocks: Option<&'a mut Clocks>,
}

/// The engine's buffers a backend writes into while an app calls it.
pub(super) struct NetOut<'a> {
    pub completions: &'a mut Vec<Completion>,
    pub arrivals: &'a mut Vec<Arrival>,
    pub probes: &'a mut [Box<dyn Probe>],
}

/// How many apps hold the run open, and whether any ever did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Holds {
    pub held: u32,
    pub ever: bool,
}

impl Holds {
    pub(super) fn released(&self) -> bool {
        self.ever && self.held == 0
    }
}

impl Api<'_> {
    pub fn now(&self) -> u64 {
        self.now
    }
    /// What host `host`'s clock reads now (ps; negative before its zero):
    /// simulated time when the scenario gives hosts no clocks.
    pub fn local_time_ps(&mut self, host: u32) -> i64 {
        match self.clocks.as_deref_mut() {
            Some(c) => c.read_ps(host, self.now),
            None => self.now as i64,
        }
    }
    /// A timestamp host `host` takes now: its clock's reading plus its
    /// stamping noise (none without clocks). `key` names the stamp (the same
    /// key gives the same noise); `rx`: a receive rather than a send.
    pub fn stamp_ps(&mut self, host: u32, key: u64, rx: bool) -> i64 {
        match self.clocks.as_deref_mut() {
            Some(c) => c.stamp_ps(host, self.now, key, rx),
            None => self.now as i64,
        }
    }
    /// The earliest true time at which host `host`'s clock reads `local_ps`
    /// (to act at a time of the host's clock).
    pub fn true_time_ps(&mut self, host: u32, local_ps: i64) -> u64 {
        match self.clocks.as_deref_mut() {
            Some(c) => c.true_time_ps(host, local_ps),
            None => local_ps.max(0) as u64,
        }
    }
    pub fn topology(&self) -> &Topology {
        self.topo
    }

    /// The backend and its context for a call made now.
    fn net_ctx(&mut self) -> (Ctx<'_>, &mut dyn Backend) {
        let ctx = Ctx {
            now: self.now,
            queue: self.queue,
            completions: self.net.completions,
            arrivals: self.net.arrivals,
            probes: self.net.probes,
            topo: self.topo,
        };
        (ctx, &mut *self.backend)
    }

    /// Sends a message; its arrival is reported to this app's `on_receive`
    /// and `on_complete`.
    pub fn send(&mut self, m: &Message) -> Result<MsgId, String> {
        let nh = self.topo.num_hosts() as u32;
        if m.src >= nh || m.dst >= nh {
            return Err(format!("host index out of range (0..{nh})"));
        }
        if m.aggregate.is_some() != (m.src == m.dst) {
            return Err(match m.aggregate {
                None => "source and destination must differ".into(),
                Some(_) => {
                    "an aggregation contribution has its worker as source and destination".into()
                }
            });
        }
        if m.size_bytes == 0 {
            return Err("size_bytes must be positive".into());
        }
        if m.aggregate.is_some() && m.path.is_some() {
            return Err("an aggregation contribution follows its trees, not a path".into());
        }
        let id = self.msgs.len() as u32;
        let src_port = m.src_port.unwrap_or_else(|| default_src_port(id));
        let (fwd, rev) = match &m.path {
            _ if m.aggregate.is_some() => {
                let up = self.topo.out_ports[self.topo.hosts[m.src as usize] as usize][0];
                (vec![up], vec![up ^ 1])
            }
            Some(p) => {
                let back: Vec<u32> = p.iter().rev().copied().collect();
                (
                    self.topo.explicit_route(p, m.src, m.dst)?,
                    self.topo.explicit_route(&back, m.dst, m.src)?,
                )
            }
            None => ecmp_routes(self.topo, src_port, m.src, m.dst, self.hash_seed),
        };
        let ideal = self.topo.ideal_fct_ps(&fwd, m.size_bytes, self.mss_bytes);
        self.msgs.push(MsgRecord {
            src: m.src,
            dst: m.dst,
            size_bytes: m.size_bytes,
            class: m.class,
            tag: m.tag,
            start_ps: self.now,
            first_byte_ps: None,
            end_ps: None,
            ideal_fct_ps: ideal,
            retransmits: 0,
            cnps: 0,
            app: self.app,
            route: fwd.clone().into_boxed_slice(),
            pinned: m.path.is_some(),
            reroutes: 0,
            route_lost: false,
            src_port,
        });
        if !self.net.probes.is_empty() {
            let rec = &self.msgs[id as usize];
            for p in self.net.probes.iter_mut() {
                p.message_started(self.now, id, rec);
            }
        }
        let send = BackendSend {
            msg: id,
            size_bytes: m.size_bytes,
            class: m.class,
            persistent: m.persistent,
            notify_packets: m.notify_packets,
            fwd,
            rev,
            aggregate: m.aggregate,
            qp: m.qp.map(|q| (self.app, q)),
        };
        let (mut ctx, backend) = self.net_ctx();
        backend.send(&mut ctx, send);
        Ok(id)
    }

    /// Egress ports of the route ECMP gives a message from host `src` to
    /// host `dst` with source port `src_port`, over the links routing knows
    /// to be up; None when unreachable.
    pub fn ecmp_route(&self, src: u32, dst: u32, src_port: u16) -> Option<Vec<u32>> {
        self.topo
            .ecmp_route(&message_tuple(src_port, src, dst), self.hash_seed)
    }

    /// Moves a message still being sent to another class (its packets
    /// already in queues keep theirs); false for a message no longer being
    /// sent (nothing changes).
    pub fn set_class(&mut self, msg: MsgId, class: u8) -> bool {
        let (mut ctx, backend) = self.net_ctx();
        backend.set_class(&mut ctx, msg, class)
    }

    /// Moves a live message onto an explicit node path (source host ...
    /// destination host); its ACKs take the reverse. False when the message
    /// has no traffic left in the network.
    pub fn set_path(&mut self, msg: MsgId, path: &[u32]) -> Result<bool, String> {
        let rec = self.msgs.get(msg as usize).ok_or("no such message")?;
        let (src, dst) = (rec.src, rec.dst);
        let fwd = self.topo.explicit_route(path, src, dst)?;
        let back: Vec<u32> = path.iter().rev().copied().collect();
        let rev = self.topo.explicit_route(&back, dst, src)?;
        let route = fwd.clone().into_boxed_slice();
        let (mut ctx, backend) = self.net_ctx();
        if !backend.reroute(&mut ctx, msg, fwd, rev) {
            return Ok(false);
        }
        let rec = &mut self.msgs[msg as usize];
        rec.route = route;
        rec.pinned = true;
        rec.route_lost = false;
        rec.reroutes += 1;
        Ok(true)
    }

    /// Stops the simulation with an error (reported by `run_until`).
    pub fn fail(&mut self, message: String) {
        if self.error.is_none() {
            *self.error = Some(message);
        }
    }

    /// Keeps the run going until this app calls [`Api::release_run`]; once
    /// every app that held it has released it, the run ends there, even
    /// with other traffic still going (a job measured against endless
    /// background flows).
    pub fn hold_run(&mut self) {
        self.holds.held += 1;
        self.holds.ever = true;
    }
    pub fn release_run(&mut self) {
        self.holds.held = self.holds.held.saturating_sub(1);
    }

    /// Calls this app's `on_timer(token)` at `at_ps` (not before now).
    pub fn schedule(&mut self, at_ps: u64, token: u64) {
        let slot = self.timers.add(self.app, token);
        self.queue
            .schedule(at_ps.max(self.now), Ev::App(slot).pack());
    }
}

//! The engine: simulated time, the event queue, the main loop, and the
//! message interface ([`Api`], [`App`]). It knows no packet and no
//! application: a backend implements [`Backend`] and owns its events
//! ([`NetEv`] is opaque here); applications implement [`App`].
//!
//! The files, from the bottom up: `events.rs` (the events as the queue holds
//! them), `record.rs` (what is kept of every message), `table.rs` (result
//! tables), `probe.rs` (observers), `clock.rs` (host clocks), `net.rs` (the
//! backend interface),
//! `api.rs` (the application interface), and this file, the main loop.

pub mod api;
pub mod clock;
pub mod events;
pub mod net;
pub mod probe;
pub mod record;
pub mod table;

pub use api::{Api, App, Message, MsgId};
pub use clock::{ClockSpec, Clocks};
pub use events::{Ev, NetEv};
pub use net::{
    Arrival, Backend, BackendSend, BandSample, ClassSample, Completion, Ctx, LinkChange, LinkStats,
};
pub use probe::{PortEvent, Probe};
pub use record::MsgRecord;
pub use table::{merge_tables, Column, Table};

use crate::event::{EventQueue, Position};
use crate::fabric::topology::Topology;
use crate::fabric::{LinkAction, LinkEventSpec};
use api::{Holds, NetOut};
use events::{AppTimers, PackedEv};

/// Queue samples kept by the engine's sampler: one row per band whose queue
/// or counters changed since the previous sample (or whose queue is not empty).
#[derive(Debug, Default, Clone)]
pub struct Samples {
    pub time_ps: Vec<u64>,
    pub rows: Vec<BandSample>,
    /// Per port and class, the transmitted bytes where they changed since
    /// the previous sample (time of each row in `class_time_ps`).
    pub class_time_ps: Vec<u64>,
    pub class_rows: Vec<ClassSample>,
    /// When sampling stopped because it reached its row budget, if it did.
    pub stopped_at_ps: Option<u64>,
}

pub struct Simulation {
    now: u64,
    queue: EventQueue<PackedEv>,
    timers: AppTimers,
    topo: Topology,
    backend: Box<dyn Backend>,
    apps: Vec<Box<dyn App>>,
    probes: Vec<Box<dyn Probe>>,
    msgs: Vec<MsgRecord>,
    completions: Vec<Completion>,
    arrivals: Vec<Arrival>,
    events: u64,
    /// Time of the last event that did something (stale timers excluded).
    last_active_ps: u64,
    started: bool,
    hash_seed: u64,
    mss_bytes: u32,
    error: Option<String>,
    sample_every_ps: Option<u64>,
    sample_max_rows: usize,
    samples: Samples,
    last_sample: Vec<BandSample>,
    scratch: Vec<BandSample>,
    last_classes: Vec<ClassSample>,
    link_events: Vec<LinkEventSpec>,
    convergence_ps: u64,
    /// Apps holding the run open ([`Api::hold_run`]): once some did and all
    /// have released it, the run ends, whatever else is still going.
    holds: Holds,
    /// Host clocks; `None`: every clock reads true time.
    clocks: Option<Clocks>,
}

/// Each host's clock at time 0: its oscillator, offset and drift.
fn clock_table(c: &Clocks, topo: &Topology) -> Table {
    let hosts = 0..c.hosts() as u32;
    Table::new("clocks")
        .col(
            "host",
            Column::Str(
                hosts
                    .clone()
                    .map(|h| topo.names[topo.hosts[h as usize] as usize].clone())
                    .collect(),
            ),
        )
        .col(
            "oscillator",
            Column::U32(hosts.clone().map(|h| c.oscillator(h)).collect()),
        )
        .col(
            "offset_ps",
            Column::I64(hosts.clone().map(|h| c.offset_ps(h)).collect()),
        )
        .col(
            "drift_ppm",
            Column::F64(hosts.map(|h| c.initial_drift_ppm(h)).collect()),
        )
}

impl Simulation {
    pub fn new(
        topo: Topology,
        backend: Box<dyn Backend>,
        hash_seed: u64,
        mss_bytes: u32,
    ) -> Simulation {
        Simulation {
            now: 0,
            queue: EventQueue::new(),
            timers: AppTimers::default(),
            topo,
            backend,
            apps: Vec::new(),
            probes: Vec::new(),
            msgs: Vec::new(),
            completions: Vec::new(),
            arrivals: Vec::new(),
            events: 0,
            last_active_ps: 0,
            started: false,
            hash_seed,
            mss_bytes,
            error: None,
            sample_every_ps: None,
            sample_max_rows: usize::MAX,
            samples: Samples::default(),
            last_sample: Vec::new(),
            scratch: Vec::new(),
            last_classes: Vec::new(),
            link_events: Vec::new(),
            convergence_ps: 0,
            holds: Holds::default(),
            clocks: None,
        }
    }

    /// Gives every host a clock of its own (before the run starts); without
    /// it every host's clock reads true time.
    pub fn set_clocks(&mut self, clocks: Clocks) {
        assert!(
            !self.started,
            "clocks must be set before the simulation starts"
        );
        assert_eq!(clocks.hosts(), self.topo.num_hosts(), "a clock per host");
        self.clocks = Some(clocks);
    }

    /// Timed link events (before the run starts; checked by the builder) and
    /// the delay after a link goes down or up before routing follows.
    pub fn set_link_events(&mut self, events: Vec<LinkEventSpec>, convergence_ps: u64) {
        assert!(
            !self.started,
            "link events must be set before the simulation starts"
        );
        self.link_events = events;
        self.convergence_ps = convergence_ps;
    }

    pub fn add_app(&mut self, app: Box<dyn App>) {
        assert!(
            !self.started,
            "apps must be added before the simulation starts"
        );
        self.apps.push(app);
    }

    /// Attaches an observer (before the run starts).
    pub fn add_probe(&mut self, probe: Box<dyn Probe>) {
        assert!(
            !self.started,
            "probes must be added before the simulation starts"
        );
        self.probes.push(probe);
    }

    /// Samples every port's bands every `every_ps` while the network is busy
    /// (before the run starts), keeping at most `max_rows` rows: sampling
    /// stops when a sample would pass them (`Samples::stopped_at_ps`).
    /// Sampling does not change the run.
    pub fn sample_queues(&mut self, every_ps: u64, max_rows: usize) {
        assert!(!self.started && every_ps > 0);
        self.sample_every_ps = Some(every_ps);
        self.sample_max_rows = max_rows;
    }

    pub fn now_ps(&self) -> u64 {
        self.now
    }
    /// Events that did something (stale timer events and samples are not counted).
    pub fn events(&self) -> u64 {
        self.events
    }
    /// When the last effective event happened: the end of the simulated activity.
    pub fn last_active_ps(&self) -> u64 {
        self.last_active_ps
    }
    pub fn topology(&self) -> &Topology {
        &self.topo
    }
    /// The node path ECMP gives a message from host `src` to host `dst`
    /// (host indices) with source port `src_port`, over the links routing
    /// knows to be up; `None` when unreachable or a host is out of range.
    pub fn ecmp_path(&self, src: u32, dst: u32, src_port: u16) -> Option<Vec<u32>> {
        let nh = self.topo.num_hosts() as u32;
        if src >= nh || dst >= nh || src == dst {
            return None;
        }
        let tuple = api::message_tuple(src_port, src, dst);
        let route = self.topo.ecmp_route(&tuple, self.hash_seed)?;
        let mut nodes = vec![self.topo.hosts[src as usize]];
        nodes.extend(route.iter().map(|&p| self.topo.ports[p as usize].to));
        Some(nodes)
    }

    pub fn messages(&self) -> &[MsgRecord] {
        &self.msgs
    }
    pub fn app_tag(&self, app: u16) -> &str {
        self.apps[app as usize].tag()
    }
    /// Every app's result tables, then the backend's, tables of one name
    /// concatenated, then the clocks' ground truth (`clocks`) if hosts have clocks.
    pub fn app_tables(&self) -> Vec<Table> {
        let mut all: Vec<Table> = self.apps.iter().flat_map(|a| a.tables()).collect();
        all.extend(self.backend.tables());
        if let Some(c) = &self.clocks {
            all.push(clock_table(c, &self.topo));
        }
        merge_tables(all)
    }
    /// What host `host`'s clock reads at true time `t_ps` (after a run: the
    /// host-clock columns of telemetry); `None` when hosts have no clocks.
    pub fn host_clock_ps(&mut self, host: u32, t_ps: u64) -> Option<i64> {
        self.clocks.as_mut().map(|c| c.read_ps(host, t_ps))
    }
    pub fn probes(&self) -> &[Box<dyn Probe>] {
        &self.probes
    }
    pub fn link_stats(&self) -> Vec<LinkStats> {
        self.backend.link_stats(self.last_active_ps)
    }
    pub fn samples(&self) -> &Samples {
        &self.samples
    }
    /// Packets or flows still inside the network.
    pub fn in_flight(&self) -> usize {
        self.backend.in_flight()
    }

    fn with_app<R>(&mut self, app: u16, f: impl FnOnce(&mut dyn App, &mut Api) -> R) -> R {
        let mut api = Api {
            now: self.now,
            app,
            queue: &mut self.queue,
            timers: &mut self.timers,
            backend: self.backend.as_mut(),
            topo: &self.topo,
            msgs: &mut self.msgs,
            net: NetOut {
                completions: &mut self.completions,
                arrivals: &mut self.arrivals,
                probes: &mut self.probes,
            },
            error: &mut self.error,
            holds: &mut self.holds,
            hash_seed: self.hash_seed,
            mss_bytes: self.mss_bytes,
            clocks: self.clocks.as_mut(),
        };
        f(self.apps[app as usize].as_mut(), &mut api)
    }

    fn start(&mut self) {
        self.started = true;
        for i in 0..self.apps.len() {
            self.with_app(i as u16, |a, api| a.start(api));
        }
        if let Some(dt) = self.sample_every_ps {
            self.queue.schedule(dt, Ev::Sample.pack());
        }
        for (i, e) in self.link_events.iter().enumerate() {
            self.queue.schedule(e.at_ps, Ev::Link(i as u32).pack());
        }
    }

    fn net_ctx(&mut self) -> (Ctx<'_>, &mut dyn Backend) {
        (
            Ctx {
                now: self.now,
                queue: &mut self.queue,
                completions: &mut self.completions,
                arrivals: &mut self.arrivals,
                probes: &mut self.probes,
                topo: &self.topo,
            },
            self.backend.as_mut(),
        )
    }

    /// A link changes now; routing follows after the convergence delay.
    fn link_event(&mut self, i: u32) {
        let e = self.link_events[i as usize].clone();
        let change = match e.action {
            LinkAction::Down => LinkChange::Down,
            LinkAction::Up => LinkChange::Up,
            LinkAction::Rate => LinkChange::Rate(e.rate_bps.expect("checked by the builder")),
            LinkAction::Loss => LinkChange::Loss(e.loss.expect("checked by the builder")),
        };
        let (mut ctx, backend) = self.net_ctx();
        backend.link_change(&mut ctx, e.link, change);
        if matches!(e.action, LinkAction::Down | LinkAction::Up) {
            let at = self.now + self.convergence_ps;
            self.queue.schedule(at, Ev::Converge(i).pack());
        }
    }

    /// Routing learns the link's state: distances are recomputed and every
    /// live message routed by ECMP takes its hash's path over the links up
    /// (the same path as before when nothing on it changed); a pinned
    /// message whose path crosses a link down is reported to its app.
    fn converge(&mut self, i: u32) {
        let e = &self.link_events[i as usize];
        self.topo.set_link_up(e.link, e.action == LinkAction::Up);
        self.topo.compute_routing();
        let mut live = Vec::new();
        self.backend.live_messages(&mut live);
        live.sort_unstable();
        for msg in live {
            let rec = &self.msgs[msg as usize];
            if rec.pinned {
                let broken = rec.route.iter().any(|&p| !self.topo.port_up(p));
                if broken && !rec.route_lost {
                    self.msgs[msg as usize].route_lost = true;
                    let app = self.msgs[msg as usize].app;
                    self.with_app(app, |a, api| a.on_route_lost(api, msg));
                }
                continue;
            }
            let (fwd, rev) =
                api::ecmp_routes(&self.topo, rec.src_port, rec.src, rec.dst, self.hash_seed);
            if *fwd == *rec.route {
                // The forward path stands; the ACKs' may still have moved.
                let (mut ctx, backend) = self.net_ctx();
                backend.reroute(&mut ctx, msg, fwd, rev);
                continue;
            }
            let rec = &mut self.msgs[msg as usize];
            rec.route = fwd.clone().into_boxed_slice();
            rec.reroutes += 1;
            let (mut ctx, backend) = self.net_ctx();
            backend.reroute(&mut ctx, msg, fwd, rev);
        }
        for a in 0..self.apps.len() {
            self.with_app(a as u16, |app, api| app.on_routing_changed(api));
        }
    }

    /// Arrivals first (an app hears of a message's bytes before its end),
    /// then completions, each in the order the backend reported them.
    fn dispatch(&mut self) {
        let arrived = std::mem::take(&mut self.arrivals);
        for a in &arrived {
            let rec = &mut self.msgs[a.msg as usize];
            if rec.first_byte_ps.is_none() {
                rec.first_byte_ps = Some(self.now);
            }
            let app = rec.app;
            self.with_app(app, |x, api| x.on_receive(api, a.msg, a.bytes));
        }
        if self.arrivals.is_empty() {
            self.arrivals = arrived;
            self.arrivals.clear();
        }
        let done = std::mem::take(&mut self.completions);
        for c in &done {
            let rec = &mut self.msgs[c.msg as usize];
            rec.end_ps = Some(self.now);
            rec.retransmits = c.retransmits;
            rec.cnps = c.cnps;
            if !self.probes.is_empty() {
                let rec = &self.msgs[c.msg as usize];
                for p in self.probes.iter_mut() {
                    p.message_completed(self.now, c.msg, rec);
                }
            }
            let app = self.msgs[c.msg as usize].app;
            self.with_app(app, |a, api| a.on_complete(api, c.msg));
        }
        if self.completions.is_empty() {
            self.completions = done;
            self.completions.clear();
        }
    }

    fn sample(&mut self) {
        let mut cur = std::mem::take(&mut self.scratch);
        cur.clear();
        self.backend.sample_bands(&mut cur);
        let mut classes = Vec::with_capacity(self.last_classes.len());
        self.backend.sample_classes(&mut classes);
        // Rows this sample adds: busy or changed bands, changed classes.
        let bands: Vec<usize> = (0..cur.len())
            .filter(|&i| {
                let s = &cur[i];
                let idle = BandSample {
                    port: s.port,
                    band: s.band,
                    ..Default::default()
                };
                s.queue_bytes > 0 || *self.last_sample.get(i).unwrap_or(&idle) != *s
            })
            .collect();
        let changed: Vec<usize> = (0..classes.len())
            .filter(|&i| classes[i].tx_bytes != self.last_classes.get(i).map_or(0, |l| l.tx_bytes))
            .collect();
        if self.samples.rows.len() + self.samples.class_rows.len() + bands.len() + changed.len()
            > self.sample_max_rows
        {
            self.samples.stopped_at_ps = Some(self.now);
            self.scratch = cur;
            return;
        }
        for i in bands {
            self.samples.time_ps.push(self.now);
            self.samples.rows.push(cur[i]);
        }
        self.scratch = std::mem::replace(&mut self.last_sample, cur);
        for i in changed {
            self.samples.class_time_ps.push(self.now);
            self.samples.class_rows.push(classes[i]);
        }
        self.last_classes = classes;
        if !self.queue.is_empty() {
            let dt = self.sample_every_ps.expect("sampling on");
            self.queue.schedule(self.now + dt, Ev::Sample.pack());
        }
    }

    /// Lets the backend finish the work it did without events before `upto`;
    /// that work counts as activity, as the events would have.
    fn settle(&mut self, upto: Position) {
        if let Some(t) = self.backend.settle(upto) {
            self.last_active_ps = self.last_active_ps.max(t);
        }
    }

    /// Runs every event with time `<= until_ps`. Returns whether events remain.
    pub fn run_until(&mut self, until_ps: u64) -> Result<bool, String> {
        if !self.started {
            self.start();
        }
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        while let Some((t, ev)) = self.queue.pop_until(until_ps) {
            self.now = t;
            let effective = match ev.unpack() {
                Ev::App(slot) => {
                    let (app, token) = self.timers.take(slot);
                    self.with_app(app, |a, api| a.on_timer(api, token));
                    true
                }
                Ev::Net(net) => {
                    // Once the holds are released, one event and back.
                    let more = (!self.holds.released()).then_some(until_ps);
                    let mut ctx = Ctx {
                        now: t,
                        queue: &mut self.queue,
                        completions: &mut self.completions,
                        arrivals: &mut self.arrivals,
                        probes: &mut self.probes,
                        topo: &self.topo,
                    };
                    let (n, last) = self.backend.handle_run(&mut ctx, net, more);
                    self.now = ctx.now;
                    if n > 0 {
                        self.events += n;
                        self.last_active_ps = last;
                    }
                    false
                }
                Ev::Sample => {
                    self.settle(self.queue.position());
                    self.sample();
                    false
                }
                Ev::Link(i) => {
                    self.link_event(i);
                    true
                }
                Ev::Converge(i) => {
                    self.converge(i);
                    true
                }
            };
            if effective {
                self.events += 1;
                self.last_active_ps = t;
            }
            if !self.completions.is_empty() || !self.arrivals.is_empty() {
                self.dispatch();
            }
            if let Some(e) = &self.error {
                return Err(e.clone());
            }
            if self.holds.released() {
                self.settle(self.queue.position());
                return Ok(false);
            }
        }
        if self.queue.peek_time().is_some() {
            // The next event is later than `until_ps`.
            self.now = self.now.max(until_ps);
            self.settle(Position::after(until_ps));
            return Ok(true);
        }
        self.settle(Position::after(self.now));
        Ok(false)
    }
}

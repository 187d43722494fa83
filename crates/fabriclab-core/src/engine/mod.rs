//! The engine: simulated time, the event queue, the main loop, and the
//! message interface ([`Api`], [`App`]). It knows no packet and no
//! application: a backend implements [`Backend`] and owns its events
//! ([`NetEv`] is opaque here); applications implement [`App`].

pub mod api;
pub mod net;
pub mod probe;
pub mod table;

pub use api::{Api, App, Message, MsgId, MsgRecord};
pub use net::{Arrival, Backend, BackendSend, BandSample, Completion, Ctx, LinkStats, NetEv};
pub use probe::{PortEvent, Probe};
pub use table::{merge_tables, Column, Table};

use crate::event::EventQueue;
use crate::fabric::topology::Topology;
use api::NetOut;

/// Every event of a simulation: a backend's own, an application's timer, or
/// the engine's queue sampler.
#[derive(Debug, Clone, Copy)]
pub enum Ev {
    Net(NetEv),
    App { app: u16, token: u64 },
    Sample,
}

/// Queue samples kept by the engine's sampler: one row per band whose queue
/// or counters changed since the previous sample (or whose queue is not empty).
#[derive(Debug, Default, Clone)]
pub struct Samples {
    pub time_ps: Vec<u64>,
    pub rows: Vec<BandSample>,
}

pub struct Simulation {
    now: u64,
    queue: EventQueue<Ev>,
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
    samples: Samples,
    last_sample: Vec<BandSample>,
    scratch: Vec<BandSample>,
}

impl Simulation {
    pub fn new(topo: Topology, backend: Box<dyn Backend>, hash_seed: u64, mss_bytes: u32) -> Simulation {
        Simulation {
            now: 0,
            queue: EventQueue::new(),
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
            samples: Samples::default(),
            last_sample: Vec::new(),
            scratch: Vec::new(),
        }
    }

    pub fn add_app(&mut self, app: Box<dyn App>) {
        assert!(!self.started, "apps must be added before the simulation starts");
        self.apps.push(app);
    }

    /// Attaches an observer (before the run starts).
    pub fn add_probe(&mut self, probe: Box<dyn Probe>) {
        assert!(!self.started, "probes must be added before the simulation starts");
        self.probes.push(probe);
    }

    /// Samples every port's bands every `every_ps` while the network is busy
    /// (before the run starts). Sampling does not change the run.
    pub fn sample_queues(&mut self, every_ps: u64) {
        assert!(!self.started && every_ps > 0);
        self.sample_every_ps = Some(every_ps);
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
    pub fn messages(&self) -> &[MsgRecord] {
        &self.msgs
    }
    pub fn app_tag(&self, app: u16) -> &str {
        self.apps[app as usize].tag()
    }
    /// Every app's result tables, tables of one name concatenated.
    pub fn app_tables(&self) -> Vec<Table> {
        merge_tables(self.apps.iter().flat_map(|a| a.tables()).collect())
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
            backend: self.backend.as_mut(),
            topo: &self.topo,
            msgs: &mut self.msgs,
            net: NetOut { completions: &mut self.completions, arrivals: &mut self.arrivals, probes: &mut self.probes },
            error: &mut self.error,
            hash_seed: self.hash_seed,
            mss_bytes: self.mss_bytes,
        };
        f(self.apps[app as usize].as_mut(), &mut api)
    }

    fn start(&mut self) {
        self.started = true;
        for i in 0..self.apps.len() {
            self.with_app(i as u16, |a, api| a.start(api));
        }
        if let Some(dt) = self.sample_every_ps {
            self.queue.schedule(dt, Ev::Sample);
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
        for (i, s) in cur.iter().enumerate() {
            let idle = BandSample { port: s.port, band: s.band, ..Default::default() };
            let changed = *self.last_sample.get(i).unwrap_or(&idle) != *s;
            if s.queue_bytes > 0 || changed {
                self.samples.time_ps.push(self.now);
                self.samples.rows.push(*s);
            }
        }
        self.scratch = std::mem::replace(&mut self.last_sample, cur);
        if !self.queue.is_empty() {
            let dt = self.sample_every_ps.expect("sampling on");
            self.queue.schedule(self.now + dt, Ev::Sample);
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
        while let Some(t) = self.queue.peek_time() {
            if t > until_ps {
                self.now = self.now.max(until_ps);
                return Ok(true);
            }
            let (t, ev) = self.queue.pop().expect("peeked");
            self.now = t;
            let effective = match ev {
                Ev::App { app, token } => {
                    self.with_app(app, |a, api| a.on_timer(api, token));
                    true
                }
                Ev::Net(net) => {
                    let mut ctx = Ctx {
                        now: t,
                        queue: &mut self.queue,
                        completions: &mut self.completions,
                        arrivals: &mut self.arrivals,
                        probes: &mut self.probes,
                    };
                    self.backend.handle(&mut ctx, net)
                }
                Ev::Sample => {
                    self.sample();
                    false
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
        }
        Ok(false)
    }
}

//! The simulation: one owned object holding the event queue, the network
//! backend and the applications. Applications reach the network only through
//! the message interface ([`Api::send`] and [`App::on_complete`]).

use crate::event::EventQueue;
use crate::net::{Backend, LinkStats};
use crate::topology::{FiveTuple, Topology};

/// Every event of a simulation. Backends own the network events; apps get
/// timers tagged with their index and a token of their choosing.
#[derive(Debug, Clone, Copy)]
pub enum Ev {
    /// Egress port finished serializing its head packet.
    PortTx(u32),
    /// The head packet on a link's wire reaches the far end.
    WireHead(u32),
    /// A connection's transport asked to be polled (its `poll_at`).
    ConnTimer(u32),
    /// Flow backend: the earliest flow drains.
    FlowDrain,
    /// Flow backend: a drained message arrives after its propagation delay.
    FlowDeliver(u32),
    /// Application timer.
    AppTimer { app: u16, token: u64 },
}

/// What a backend needs from the engine while handling an event.
pub struct Ctx<'a> {
    pub now: u64,
    pub queue: &'a mut EventQueue<Ev>,
    pub completions: &'a mut Vec<Completion>,
}

/// A message fully arrived at its destination at `Ctx::now`.
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub msg: u32,
    pub retransmits: u64,
}

pub type MsgId = u32;

/// A request to move `size_bytes` from host `src` to host `dst` (host indices).
#[derive(Debug, Clone)]
pub struct Message {
    pub src: u32,
    pub dst: u32,
    pub size_bytes: u64,
    pub class: u8,
    /// Explicit route as node indices (source host ... destination host).
    pub path: Option<Vec<u32>>,
    /// Continue the persistent connection of this host pair and class (packet
    /// backend), as long-lived application connections do.
    pub persistent: bool,
}

#[derive(Debug, Clone)]
pub struct MsgRecord {
    pub src: u32,
    pub dst: u32,
    pub size_bytes: u64,
    pub class: u8,
    pub start_ps: u64,
    pub end_ps: Option<u64>,
    pub ideal_fct_ps: u64,
    pub retransmits: u64,
    pub app: u16,
}

/// An application: traffic generator, collective, training job.
pub trait App: Send + Sync {
    fn start(&mut self, api: &mut Api);
    fn on_timer(&mut self, api: &mut Api, token: u64);
    fn on_complete(&mut self, _api: &mut Api, _msg: MsgId) {}
    /// Label written in the flows table's `tag` column.
    fn tag(&self) -> &str;
    /// For reading an app's own results after a run.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// The interface an application sees.
pub struct Api<'a> {
    now: u64,
    app: u16,
    queue: &'a mut EventQueue<Ev>,
    backend: &'a mut dyn Backend,
    topo: &'a Topology,
    msgs: &'a mut Vec<MsgRecord>,
    completions: &'a mut Vec<Completion>,
    error: &'a mut Option<String>,
    hash_seed: u64,
    mss_bytes: u32,
}

impl Api<'_> {
    pub fn now(&self) -> u64 {
        self.now
    }
    pub fn topology(&self) -> &Topology {
        self.topo
    }

    /// Sends a message; its completion is reported to this app's `on_complete`.
    pub fn send(&mut self, m: &Message) -> Result<MsgId, String> {
        let nh = self.topo.num_hosts() as u32;
        if m.src >= nh || m.dst >= nh {
            return Err(format!("host index out of range (0..{nh})"));
        }
        if m.src == m.dst {
            return Err("source and destination must differ".into());
        }
        if m.size_bytes == 0 {
            return Err("size_bytes must be positive".into());
        }
        let id = self.msgs.len() as u32;
        // Each message is a connection: ephemeral source port from the id,
        // a fixed destination port, protocol TCP (6).
        let tuple = FiveTuple {
            src: m.src,
            dst: m.dst,
            src_port: 1024 + (id % 64512) as u16,
            dst_port: 5001,
            protocol: 6,
        };
        let fwd = match &m.path {
            Some(p) => self.topo.explicit_route(p, m.src, m.dst)?,
            None => self.topo.ecmp_route(&tuple, self.hash_seed),
        };
        let rev = match &m.path {
            Some(p) => {
                let back: Vec<u32> = p.iter().rev().copied().collect();
                self.topo.explicit_route(&back, m.dst, m.src)?
            }
            None => self.topo.ecmp_route(&tuple.reversed(), self.hash_seed),
        };
        let ideal = self.topo.ideal_fct_ps(&fwd, m.size_bytes, self.mss_bytes);
        self.msgs.push(MsgRecord {
            src: m.src,
            dst: m.dst,
            size_bytes: m.size_bytes,
            class: m.class,
            start_ps: self.now,
            end_ps: None,
            ideal_fct_ps: ideal,
            retransmits: 0,
            app: self.app,
        });
        let mut ctx = Ctx {
            now: self.now,
            queue: self.queue,
            completions: self.completions,
        };
        self.backend
            .send(&mut ctx, id, m.size_bytes, m.class, m.persistent, fwd, rev);
        Ok(id)
    }

    /// Moves a message still being sent to another class (its packets
    /// already in queues keep theirs); false for a message no longer being
    /// sent (nothing changes).
    pub fn set_class(&mut self, msg: MsgId, class: u8) -> bool {
        let mut ctx = Ctx {
            now: self.now,
            queue: self.queue,
            completions: self.completions,
        };
        self.backend.set_class(&mut ctx, msg, class)
    }

    /// Stops the simulation with an error (reported by `run_until`).
    pub fn fail(&mut self, message: String) {
        if self.error.is_none() {
            *self.error = Some(message);
        }
    }

    /// Calls this app's `on_timer(token)` at `at_ps` (not before now).
    pub fn schedule(&mut self, at_ps: u64, token: u64) {
        self.queue.schedule(
            at_ps.max(self.now),
            Ev::AppTimer {
                app: self.app,
                token,
            },
        );
    }
}

pub struct Simulation {
    now: u64,
    queue: EventQueue<Ev>,
    topo: Topology,
    backend: Box<dyn Backend>,
    apps: Vec<Box<dyn App>>,
    msgs: Vec<MsgRecord>,
    completions: Vec<Completion>,
    events: u64,
    /// Time of the last event that did something (stale timers excluded).
    last_active_ps: u64,
    started: bool,
    hash_seed: u64,
    mss_bytes: u32,
    error: Option<String>,
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
            topo,
            backend,
            apps: Vec::new(),
            msgs: Vec::new(),
            completions: Vec::new(),
            events: 0,
            last_active_ps: 0,
            started: false,
            hash_seed,
            mss_bytes,
            error: None,
        }
    }

    pub fn add_app(&mut self, app: Box<dyn App>) {
        assert!(
            !self.started,
            "apps must be added before the simulation starts"
        );
        self.apps.push(app);
    }

    pub fn now_ps(&self) -> u64 {
        self.now
    }
    /// Events that did something (stale timer events are not counted).
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
    pub fn apps(&self) -> impl Iterator<Item = &dyn App> {
        self.apps.iter().map(|a| a.as_ref())
    }
    pub fn link_stats(&self) -> Vec<LinkStats> {
        self.backend.link_stats(self.last_active_ps)
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
            completions: &mut self.completions,
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
    }

    fn dispatch_completions(&mut self) {
        let done = std::mem::take(&mut self.completions);
        for c in done {
            let rec = &mut self.msgs[c.msg as usize];
            rec.end_ps = Some(self.now);
            rec.retransmits = c.retransmits;
            let app = rec.app;
            self.with_app(app, |a, api| a.on_complete(api, c.msg));
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
                Ev::AppTimer { app, token } => {
                    self.with_app(app, |a, api| a.on_timer(api, token));
                    true
                }
                net => {
                    let mut ctx = Ctx {
                        now: t,
                        queue: &mut self.queue,
                        completions: &mut self.completions,
                    };
                    self.backend.handle(&mut ctx, net)
                }
            };
            if effective {
                self.events += 1;
                self.last_active_ps = t;
            }
            if !self.completions.is_empty() {
                self.dispatch_completions();
            }
            if let Some(e) = &self.error {
                return Err(e.clone());
            }
        }
        Ok(false)
    }
}

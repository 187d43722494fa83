//! The executor: one rank's part of a plan, driven by `PlanRun`'s actions.
//!
//! A `Send` lends the step's byte range of the buffer to the connection of
//! stream `k % streams` (k: the message's sequence on the rank pair; no
//! staging copy, `conn::Body`); the step completes when the writer has
//! handed all of it to the kernel. Before the executor writes into a range
//! with a send still in flight, and before an op returns, it takes the
//! loans back (a copy of what is left), so a send carries the bytes the
//! range held when it started, as the plan format says. The k-th message from a peer is the k-th receive from it;
//! `Reduce` sums it into the buffer, a plain receive copies it in on
//! `Completed`. Messages of a later op (a peer ahead of us) wait in a
//! queue; the per-connection credit bounds them.

use crate::clock::Stamp;
use crate::conn::{Body, Conn, Event, Gone, Payload, Slot, PIECE_BYTES};
use crate::dtype::{reduce_sum, DType};
use crate::pool::Pool;
pub use crate::prepared::{Prepared, Record};
use crate::{bootstrap, Config, ErrorKind, RtError};
use fabriclab_plan::{Action, Collective, Op, PlanRun};
use std::collections::VecDeque;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Communicator {
    pub(crate) cfg: Config,
    /// Indexed by peer * streams + stream (this rank's own slots are None).
    pub(crate) conns: Vec<Option<Conn>>,
    pub(crate) rx: Receiver<Event>,
    pub(crate) closed: Vec<bool>,
    early: Vec<Event>,
    next_op: u64,
    failed: Option<RtError>,
    pub(crate) telemetry: Vec<Record>,
    /// Message buffers shared by the connections (crate::pool).
    pool: Arc<Pool>,
    /// The heartbeat thread: dropping the sender stops it.
    beat: Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Communicator {
    /// Joins the job: rendezvous and connections to every other rank.
    pub fn new(cfg: Config) -> Result<Communicator, RtError> {
        cfg.check()?;
        let links = if cfg.world_size > 1 {
            bootstrap::connect_all(&cfg)?
        } else {
            Vec::new()
        };
        let (tx, rx) = channel();
        let s = cfg.streams as usize;
        let mut conns: Vec<Option<Conn>> = (0..cfg.world_size as usize * s).map(|_| None).collect();
        let pool = Arc::new(Pool::default());
        for l in links {
            let (peer, stream) = (l.peer, l.stream);
            let c = Conn::start_with_pool(peer, stream, l.tcp, &cfg, tx.clone(), pool.clone())
                .map_err(RtError::io("starting connection threads"))?;
            conns[peer as usize * s + stream as usize] = Some(c);
        }
        let closed = vec![false; conns.len()];
        let beat = if conns.iter().any(|c| c.is_some()) {
            let posters: Vec<_> = conns.iter().flatten().filter_map(|c| c.poster()).collect();
            let every = (cfg.timeout / 4).max(Duration::from_millis(5));
            let (stop, stopped) = channel::<()>();
            let h = std::thread::Builder::new()
                .name("flrt-heartbeat".into())
                .spawn(move || {
                    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                        posters.iter().for_each(|p| p.beat());
                    }
                })
                .map_err(RtError::io("starting the heartbeat thread"))?;
            Some((stop, h))
        } else {
            None
        };
        Ok(Communicator {
            cfg,
            conns,
            rx,
            closed,
            early: Vec::new(),
            next_op: 0,
            failed: None,
            telemetry: Vec::new(),
            pool,
            beat,
        })
    }

    pub fn rank(&self) -> u32 {
        self.cfg.rank
    }
    pub fn world_size(&self) -> u32 {
        self.cfg.world_size
    }
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Packet Rocket's counters summed over this rank's connections since
    /// it joined (None when the option is off).
    pub fn rocket_stats(&self) -> Option<crate::EdgeStats> {
        self.cfg.packet_rocket_threshold?;
        let mut t = crate::EdgeStats::default();
        for s in self.conns.iter().flatten().filter_map(|c| c.edge_stats()) {
            t.add(&s);
        }
        Some(t)
    }

    /// The telemetry records since the last call.
    pub fn take_telemetry(&mut self) -> Vec<Record> {
        std::mem::take(&mut self.telemetry)
    }

    /// Runs this rank's part of `p` in place on `buf`; returns the op id.
    /// After a peer failure the communicator is unusable (like NCCL's).
    pub fn run(&mut self, p: &Prepared, buf: &mut [u8], dt: DType) -> Result<u64, RtError> {
        if let Some(e) = &self.failed {
            return Err(RtError {
                message: format!("communicator failed earlier: {}", e.message),
                ..e.clone()
            });
        }
        self.check_plan(p, buf.len(), dt)?;
        let op_id = self.next_op;
        self.next_op += 1;
        match self.execute(p, buf, dt, op_id) {
            Ok(()) => Ok(op_id),
            Err(e) => {
                self.send_abort(&e, false);
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    fn check_plan(&self, p: &Prepared, len: usize, dt: DType) -> Result<(), RtError> {
        let plan = &p.plan;
        if plan.nranks != self.cfg.world_size {
            return Err(RtError::input(format!(
                "plan: nranks is {} but the world size is {}",
                plan.nranks, self.cfg.world_size
            )));
        }
        if plan.size_bytes != len as u64 {
            return Err(RtError::input(format!(
                "buffer: has {len} bytes but the plan's size_bytes is {}",
                plan.size_bytes
            )));
        }
        let e = dt.size_bytes() as u64;
        for (i, s) in plan.ranks[self.cfg.rank as usize].iter().enumerate() {
            if s.reduce && (s.offset % e != 0 || s.bytes % e != 0) {
                return Err(RtError::input(format!(
                    "plan: rank {} step {i} reduces bytes [{}, {}) which are not whole {dt:?} elements of {e} bytes (plan in elements, see docs/runtime.md)",
                    self.cfg.rank, s.offset, s.offset + s.bytes
                )));
            }
        }
        Ok(())
    }

    fn execute(
        &mut self,
        p: &Prepared,
        buf: &mut [u8],
        dt: DType,
        op_id: u64,
    ) -> Result<(), RtError> {
        let me = self.cfg.rank as usize;
        let nsteps = p.plan.ranks[me].len();
        let mut st = OpState {
            op_id,
            dt,
            streams: p
                .streams
                .map_or(self.cfg.streams, |k| k.min(self.cfg.streams)),
            payload: (0..nsteps).map(|_| None).collect(),
            got: p.recv_step.iter().map(|v| vec![false; v.len()]).collect(),
            post: vec![Stamp::default(); nsteps],
            start: vec![Stamp::default(); nsteps],
            stream: vec![0; nsteps],
            sent_done: vec![false; nsteps],
            done: false,
            q: VecDeque::new(),
            local: Vec::new(),
            lent: Vec::new(),
            slots: (0..nsteps).map(|_| None).collect(),
        };
        let r = self.follow(p, &mut st, buf);
        // whatever ended the op, no send reads the buffer after it returns
        // and no reader writes into it
        st.unlend(0, usize::MAX);
        for (c, slot) in st.slots.iter_mut().filter_map(|x| x.take()) {
            slot.revoke();
            if let Some(c) = &self.conns[c] {
                c.posts.unpost(&slot);
            }
        }
        r
    }

    /// Posts receive `step` (started, its message not here yet) for its
    /// connection's reader to read (or sum) straight into the buffer.
    fn post_landing(&mut self, p: &Prepared, st: &mut OpState, step: u32, buf: &mut [u8]) {
        let s = &p.plan.ranks[self.cfg.rank as usize][step as usize];
        let k = p.my_seq[step as usize];
        let c = (s.peer * self.cfg.streams + k % st.streams) as usize;
        let Some(conn) = &self.conns[c] else { return };
        let (o, b) = (s.offset as usize, s.bytes as usize);
        if s.reduce && b < PIECE_BYTES {
            // a reducing receive smaller than a piece gains nothing from
            // landing; summed on the readers, the 4-rank soak of 1 KiB
            // allreduces ran at 1.4-1.8 ms per op in 4 runs of 14 (never
            // with the executor summing; docs/performance.md)
            return;
        }
        st.unlend(o, o + b);
        // SAFETY: `execute` revokes every slot before it returns; no other
        // step touches the range while this one runs (Prepared::land).
        let reduce = s.reduce.then_some(st.dt);
        let slot = unsafe { Slot::new(st.op_id, k, buf[o..o + b].as_mut_ptr(), b, reduce) };
        conn.posts.post(slot.clone());
        st.slots[step as usize] = Some((c, slot));
    }

    /// Runs the op's actions and events until this rank is done or fails.
    fn follow(&mut self, p: &Prepared, st: &mut OpState, buf: &mut [u8]) -> Result<(), RtError> {
        let (n, op_id) = (self.cfg.world_size as usize, st.op_id);
        let mut acts = Vec::new();
        let mut run = PlanRun::start(&p.graph, &mut acts);
        st.q.extend(acts.drain(..));
        let (mut mine, rest): (Vec<Event>, Vec<Event>) = std::mem::take(&mut self.early)
            .into_iter()
            .partition(|e| matches!(e, Event::Data { hdr, .. } if hdr.op_id == op_id));
        self.early = rest;
        // A connection that closed during an earlier op is checked against
        // this op once the messages of this op that arrived before the close
        // are counted (`mine` is used from its end): a peer that ran ahead
        // and exited cleanly is not blamed.
        for peer in 0..n {
            for s in 0..self.cfg.streams as usize {
                if self.closed[peer * self.cfg.streams as usize + s] {
                    let (peer, stream) = (peer as u32, s as u32);
                    mine.insert(
                        0,
                        Event::Closed {
                            peer,
                            stream,
                            error: None,
                        },
                    );
                }
            }
        }
        let mut last_progress = Instant::now();
        loop {
            self.drain_actions(p, st, &mut run, buf)?;
            if st.done {
                return Ok(());
            }
            let ev = if let Some(e) = st.local.pop() {
                e
            } else if let Some(e) = mine.pop() {
                e
            } else {
                let poll = (self.cfg.timeout / 4).max(Duration::from_millis(5));
                match self.rx.recv_timeout(poll) {
                    Ok(e) => e,
                    Err(RecvTimeoutError::Timeout) => {
                        if let Some(e) = self.check_waits(p, st, last_progress.elapsed()) {
                            return Err(self.resolve_blame(e, Vec::new()));
                        }
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        return Err(RtError::bootstrap("all connections are gone".into()))
                    }
                }
            };
            if let Event::Abort {
                peer,
                culprit,
                reason,
                provisional,
            } = &ev
            {
                if *culprit == self.cfg.rank || *provisional {
                    // blamed, or another rank is tracing a failure: say whom
                    // this rank waits for and follow the chain from there
                    let note = format!("rank {peer} reported rank {culprit}: {reason}");
                    let e = self.wait_error(p, st, note);
                    let seed = vec![(*peer, *culprit, reason.clone())];
                    return Err(self.resolve_blame(e, seed));
                }
            }
            // A peer that closed or refused our write may have closed because a
            // third rank failed: its abort report can still be on the way, so
            // trace the blame (as after a timeout) before naming it.
            let traced = matches!(ev, Event::WriteFailed { .. } | Event::Closed { .. });
            match self.on_event(p, st, &mut run, ev) {
                Ok(true) => last_progress = Instant::now(),
                Ok(false) => {}
                Err(e) if traced && e.kind == ErrorKind::PeerFailed => {
                    return Err(self.resolve_blame(e, Vec::new()))
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn drain_actions(
        &mut self,
        p: &Prepared,
        st: &mut OpState,
        run: &mut PlanRun,
        buf: &mut [u8],
    ) -> Result<(), RtError> {
        let me = self.cfg.rank;
        let steps = &p.plan.ranks[me as usize];
        let mut more = Vec::new();
        while let Some(a) = st.q.pop_front() {
            match a {
                Action::Started { rank, step } if rank == me => {
                    st.post[step as usize] = Stamp::now();
                    let i = step as usize;
                    if p.land[i] && st.payload[i].is_none() {
                        self.post_landing(p, st, step, buf);
                    }
                }
                Action::Send { rank, step } if rank == me => {
                    let s = &steps[step as usize];
                    let seq = p.my_seq[step as usize];
                    // The plan may spread its messages over fewer of the connections.
                    let stream = seq % st.streams;
                    st.stream[step as usize] = stream;
                    let (o, b) = (s.offset as usize, s.bytes as usize);
                    // SAFETY: `buf` outlives the loan: `execute` takes every
                    // loan back before it returns, and `st.unlend` before
                    // the range is written.
                    let body = unsafe { Body::lend(buf[o..o + b].as_ptr(), b, self.pool.clone()) };
                    st.lent.push((o, o + b, step, body.clone()));
                    let idx = (s.peer * self.cfg.streams + stream) as usize;
                    let sent = match self.conns[idx].as_mut() {
                        Some(c) => c.send_data(st.op_id, seq, step, s.offset, body),
                        None => Err(Gone),
                    };
                    match sent {
                        Ok(Some(ev)) => st.local.push(ev), // written directly
                        Ok(None) => {}
                        Err(Gone) => return Err(RtError::peer(ErrorKind::PeerFailed, s.peer, format!("rank {}: the connection to rank {} is gone (op {}, send step {step})", me, s.peer, st.op_id))),
                    }
                }
                Action::Reduce { rank, step } if rank == me => {
                    let s = &steps[step as usize];
                    let pl = st.payload[step as usize]
                        .take()
                        .expect("reduce without data");
                    if !pl.landed {
                        st.unlend(s.offset as usize, (s.offset + s.bytes) as usize);
                        reduce_sum(
                            st.dt,
                            &mut buf[s.offset as usize..(s.offset + s.bytes) as usize],
                            &pl.data,
                        );
                    }
                    drop(pl);
                    run.reduced(&p.graph, me, step, &mut more);
                    st.q.extend(more.drain(..));
                }
                Action::Completed { rank, step } if rank == me => {
                    let s = &steps[step as usize];
                    if s.op == Op::Recv && !s.reduce {
                        let pl = st.payload[step as usize]
                            .take()
                            .expect("receive without data");
                        if !pl.landed {
                            st.unlend(s.offset as usize, (s.offset + s.bytes) as usize);
                            buf[s.offset as usize..(s.offset + s.bytes) as usize]
                                .copy_from_slice(&pl.data);
                        }
                    }
                    if s.op == Op::Recv && self.cfg.telemetry {
                        let (post, start) = (st.post[step as usize], st.start[step as usize]);
                        self.telemetry.push(Record {
                            op_id: st.op_id,
                            rank: me,
                            peer: s.peer,
                            step,
                            is_send: false,
                            seq: p.my_seq[step as usize],
                            offset_bytes: s.offset,
                            bytes: s.bytes,
                            stream: st.stream[step as usize],
                            reduce: s.reduce,
                            post,
                            start,
                            end: Stamp::now(),
                            wait_ns: start.mono_ns.saturating_sub(post.mono_ns),
                        });
                    }
                }
                Action::RankDone { rank } if rank == me => st.done = true,
                _ => {} // other ranks' actions: their own processes run them
            }
        }
        Ok(())
    }

    /// Handles one event; true if it was progress of this op.
    fn on_event(
        &mut self,
        p: &Prepared,
        st: &mut OpState,
        run: &mut PlanRun,
        ev: Event,
    ) -> Result<bool, RtError> {
        let me = self.cfg.rank;
        let mut out = Vec::new();
        match ev {
            Event::Data {
                peer,
                stream,
                hdr,
                payload,
                arrived,
            } => {
                if hdr.op_id > st.op_id {
                    self.early.push(Event::Data {
                        peer,
                        stream,
                        hdr,
                        payload,
                        arrived,
                    });
                    return Ok(false);
                }
                let k = hdr.seq as usize;
                let bad = |m: String| Err(RtError::peer(ErrorKind::Corrupt, peer, m));
                if hdr.op_id < st.op_id {
                    return bad(format!("rank {peer} sent message {k} of op {} during op {} (the ranks run different sequences of collectives)", hdr.op_id, st.op_id));
                }
                let Some(&j) = p.recv_step[peer as usize].get(k) else {
                    return bad(format!(
                        "rank {peer} sent message {k} of op {} but the plan has {} from it",
                        hdr.op_id,
                        p.recv_step[peer as usize].len()
                    ));
                };
                let s = &p.plan.ranks[me as usize][j as usize];
                // The header names the range the sender read: its send step's. Only an
                // alltoall's receive may land elsewhere (docs/plans.md).
                let sent = &p.plan.ranks[peer as usize][p.send_index[peer as usize][k] as usize];
                let moves = p.plan.collective == Collective::Alltoall;
                if hdr.offset != sent.offset
                    || (!moves && hdr.offset != s.offset)
                    || hdr.len_bytes != s.bytes
                    || st.got[peer as usize][k]
                {
                    return bad(format!("rank {peer}'s message {k} of op {} (recv step {j}) carries bytes [{}, +{}) but the plan expects [{}, +{}) once (different plans on different ranks?)", hdr.op_id, hdr.offset, hdr.len_bytes, sent.offset, s.bytes));
                }
                st.got[peer as usize][k] = true;
                if let Some((c, slot)) = st.slots[j as usize].take() {
                    if !payload.landed {
                        // it came before the slot was posted
                        if let Some(c) = &self.conns[c] {
                            c.posts.unpost(&slot);
                        }
                    }
                }
                st.payload[j as usize] = Some(payload);
                st.start[j as usize] = arrived;
                st.stream[j as usize] = stream;
                run.delivered(&p.graph, peer, p.send_index[peer as usize][k], &mut out);
            }
            Event::Sent {
                peer,
                op_id,
                step,
                start,
                end,
            } => {
                debug_assert_eq!(op_id, st.op_id);
                let i = step as usize;
                st.sent_done[i] = true;
                st.lent.retain(|l| l.2 != step);
                if self.cfg.telemetry {
                    let s = &p.plan.ranks[me as usize][i];
                    self.telemetry.push(Record {
                        op_id,
                        rank: me,
                        peer,
                        step,
                        is_send: true,
                        seq: p.my_seq[i],
                        offset_bytes: s.offset,
                        bytes: s.bytes,
                        stream: st.stream[i],
                        reduce: false,
                        post: st.post[i],
                        start,
                        end,
                        wait_ns: start.mono_ns.saturating_sub(st.post[i].mono_ns),
                    });
                }
                run.delivered(&p.graph, me, step, &mut out);
            }
            Event::WriteFailed {
                peer,
                op_id,
                step,
                error,
            } => {
                return Err(RtError::peer(ErrorKind::PeerFailed, peer, format!("rank {peer} failed: sending to it failed (op {op_id}, send step {step}): {error}")));
            }
            Event::Closed {
                peer,
                stream,
                error,
            } => {
                self.closed[(peer * self.cfg.streams + stream) as usize] = true;
                self.check_closed(st, peer, stream, error)?;
                return Ok(false);
            }
            Event::Broken {
                peer,
                stream,
                what,
                error,
            } => {
                let at = match what {
                    Some((op, k)) if op == st.op_id => {
                        match p.recv_step[peer as usize].get(k as usize) {
                            Some(j) => format!("op {op}, message {k}, recv step {j}"),
                            None => format!("op {op}, message {k}"),
                        }
                    }
                    Some((op, k)) => format!("op {op}, message {k}"),
                    None => "between messages".into(),
                };
                return Err(RtError::peer(
                    ErrorKind::Corrupt,
                    peer,
                    format!("bad message from rank {peer} (stream {stream}, {at}): {error}"),
                ));
            }
            Event::Abort {
                peer,
                culprit,
                reason,
                ..
            } => {
                let m = if culprit == me {
                    format!("rank {peer} aborted, blaming this rank ({me}): {reason}")
                } else {
                    format!("rank {culprit} failed (reported by rank {peer}): {reason}")
                };
                let blamed = if culprit == me { peer } else { culprit };
                return Err(RtError::peer(ErrorKind::PeerFailed, blamed, m));
            }
        }
        st.q.extend(out);
        Ok(true)
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        if let Some((stop, h)) = self.beat.take() {
            drop(stop);
            let _ = h.join();
        }
        // every connection's linger runs at once: a frozen peer delays the
        // close by one linger, not one per connection
        for c in self.conns.iter_mut().flatten() {
            c.begin_close();
        }
        for c in self.conns.iter_mut().flatten() {
            c.close();
        }
    }
}

pub(crate) struct OpState {
    pub(crate) op_id: u64,
    pub(crate) dt: DType,
    /// Connections per rank pair this op's messages use (message k: stream k % streams).
    pub(crate) streams: u32,
    pub(crate) payload: Vec<Option<Payload>>,
    pub(crate) got: Vec<Vec<bool>>,
    pub(crate) post: Vec<Stamp>,
    pub(crate) start: Vec<Stamp>,
    pub(crate) stream: Vec<u32>,
    pub(crate) sent_done: Vec<bool>,
    pub(crate) done: bool,
    pub(crate) q: VecDeque<Action>,
    /// Events of messages the executor wrote itself.
    pub(crate) local: Vec<Event>,
    /// Ranges of the buffer lent to sends not yet reported written:
    /// (start, end, send step, payload).
    pub(crate) lent: Vec<(usize, usize, u32, Arc<Body>)>,
    /// Per receive step: the slot posted for its message (connection index, slot).
    pub(crate) slots: Vec<Option<(usize, Arc<Slot>)>>,
}

impl OpState {
    /// Takes back the loans of sends in flight that overlap bytes
    /// `lo..hi`, before the executor writes there.
    fn unlend(&mut self, lo: usize, hi: usize) {
        self.lent.retain(|l| {
            let overlaps = l.0 < hi && lo < l.1;
            if overlaps {
                l.3.keep();
            }
            !overlaps
        });
    }
}

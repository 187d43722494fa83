//! One connection to a peer: a writer thread that sends queued messages in
//! order and a reader thread that reads whole messages and hands them to
//! the executor's event channel. Blocking I/O on a thread pair per
//! connection keeps the receives (and sends) of different peers concurrent
//! without an event loop; docs/runtime.md says why.
//!
//! Closing is graceful: the writer flushes what is queued and sends FIN
//! (`shutdown(Write)`), the reader reads and discards until the peer's FIN
//! or the linger deadline, then the socket closes with nothing unread. A
//! socket closed (or shut for reading) with bytes unread or still arriving
//! makes the kernel answer with an RST, and an RST discards what the peer
//! has not received yet. A reader that sees the peer's FIN at a message
//! boundary answers with its own, so a close does not wait for the peer to
//! close in turn. Reads and writes wake every [`poll_interval`] while the
//! peer is quiet, so both threads notice a close; while bytes flow they do
//! not time out.

use crate::clock::{realtime_ns, Stamp};
use crate::edge::{self, Edge, EdgeStats};
use crate::wire::{
    Header, FLAG_CHECKSUM, FLAG_PROVISIONAL, FLAG_STAMPED, HEADER_BYTES, KIND_ABORT, KIND_DATA,
    KIND_ECHO, KIND_HEARTBEAT,
};
use crate::{Config, Fault};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Received bytes not yet consumed by the executor, per connection. The
/// reader pauses while they reach the limit, so TCP's flow control, not
/// memory, absorbs a peer that runs ahead (e.g. the root of a broadcast).
pub struct Credit {
    state: Mutex<(u64, bool)>, // (unconsumed bytes, closed)
    cv: Condvar,
    limit: u64,
}

impl Credit {
    fn wait_below_limit(&self) -> bool {
        let mut g = self.state.lock().unwrap();
        while g.0 >= self.limit && !g.1 {
            g = self.cv.wait(g).unwrap();
        }
        !g.1
    }
    fn take(&self, n: u64) {
        self.state.lock().unwrap().0 += n;
    }
    fn give(&self, n: u64) {
        self.state.lock().unwrap().0 -= n;
        self.cv.notify_all();
    }
    fn close(&self) {
        self.state.lock().unwrap().1 = true;
        self.cv.notify_all();
    }
}

/// A received payload; dropping it returns its bytes to the connection's credit.
pub struct Payload {
    pub data: Vec<u8>,
    credit: Arc<Credit>,
}

impl Drop for Payload {
    fn drop(&mut self) {
        self.credit.give(self.data.len() as u64);
    }
}

pub enum Event {
    Data {
        peer: u32,
        stream: u32,
        hdr: Header,
        payload: Payload,
        arrived: Stamp,
    },
    /// `provisional`: the sender timed out and is still tracing whom to blame.
    Abort {
        peer: u32,
        culprit: u32,
        reason: String,
        provisional: bool,
    },
    Sent {
        peer: u32,
        op_id: u64,
        step: u32,
        start: Stamp,
        end: Stamp,
    },
    WriteFailed {
        peer: u32,
        op_id: u64,
        step: u32,
        error: String,
    },
    /// The connection ended at a message boundary (`error` None: EOF).
    Closed {
        peer: u32,
        stream: u32,
        error: Option<String>,
    },
    /// A message was cut short, failed its checksum or made no sense.
    Broken {
        peer: u32,
        stream: u32,
        what: Option<(u64, u32)>,
        error: String,
    },
}

pub enum Job {
    /// `data` starts with HEADER_BYTES of room for the header.
    Data {
        op_id: u64,
        seq: u32,
        step: u32,
        offset: u64,
        data: Vec<u8>,
    },
    Abort {
        culprit: u32,
        reason: String,
        provisional: bool,
        flushed: Sender<()>,
    },
    Heartbeat,
    /// Packet Rocket's echo of a stamped data message (crate::edge).
    Echo {
        stamp: u32,
        owd_ns: i64,
    },
    /// The connection is closing: send FIN after the jobs queued before.
    Close,
}

/// How long a read or write waits for the peer before its thread checks
/// whether the connection is closing (the socket's SO_RCVTIMEO and
/// SO_SNDTIMEO): `timeout / 4`, between 5 ms and 100 ms.
pub fn poll_interval(timeout: Duration) -> Duration {
    (timeout / 4).clamp(Duration::from_millis(5), Duration::from_millis(100))
}

/// A read or write error that only says the poll interval passed.
fn polled(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// What the reader and the writer of a connection know of its peer.
#[derive(Clone)]
pub struct Liveness {
    /// CLOCK_MONOTONIC ns of the last bytes heard from the peer on this connection.
    pub heard: Arc<AtomicU64>,
    /// CLOCK_MONOTONIC ns at which a close stops waiting for the peer (0: open).
    closing: Arc<AtomicU64>,
    timeout: Duration,
}

impl Liveness {
    fn hear(&self) {
        self.heard.store(Stamp::now().mono_ns, Ordering::Release);
    }
    fn silent_ns(&self, now: u64) -> u64 {
        now.saturating_sub(self.heard.load(Ordering::Acquire))
    }
    fn closing(&self) -> bool {
        self.closing.load(Ordering::Acquire) != 0
    }
    /// A closing connection stops waiting for its peer at the linger
    /// deadline, or at once when the peer has been silent for `timeout`
    /// (dead or frozen, as the failure rules say).
    fn linger_over(&self) -> bool {
        let end = self.closing.load(Ordering::Acquire);
        if end == 0 {
            return false;
        }
        let now = Stamp::now().mono_ns;
        now >= end || self.silent_ns(now) >= self.timeout.as_nanos() as u64
    }
}

/// What every write needs: the frame lock (the executor's direct writes,
/// the writer thread and heartbeats never interleave frames) and how long
/// to keep trying while the peer does not read.
#[derive(Clone)]
pub struct WriteCtx {
    pub peer: u32,
    lock: Arc<Mutex<()>>,
    pub live: Liveness,
    late_timeout: Duration,
}

impl WriteCtx {
    /// Writes a whole frame. The socket's write timeout is a poll interval:
    /// while the peer does not read, the write goes on as long as the peer
    /// is heard from (it is alive, just busy), `late_timeout` has not passed
    /// and a close's linger has not ended.
    fn write_frame(&self, s: &mut TcpStream, mut buf: &[u8]) -> std::io::Result<()> {
        let _g = self.lock.lock().unwrap();
        let t0 = Stamp::now().mono_ns;
        while !buf.is_empty() {
            if self.live.linger_over() {
                return Err(std::io::Error::new(
                    ErrorKind::TimedOut,
                    "closing: the peer took nothing more before the linger ended",
                ));
            }
            match s.write(buf) {
                Ok(0) => {
                    return Err(std::io::Error::new(
                        ErrorKind::WriteZero,
                        "connection closed",
                    ))
                }
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if polled(&e) => {
                    let now = Stamp::now().mono_ns;
                    let silent = self.live.silent_ns(now);
                    if silent >= self.live.timeout.as_nanos() as u64 {
                        return Err(std::io::Error::new(
                            ErrorKind::TimedOut,
                            format!(
                                "the peer neither read nor sent anything for {:.1} s",
                                silent as f64 / 1e9
                            ),
                        ));
                    }
                    if now - t0 >= self.late_timeout.as_nanos() as u64 {
                        return Err(std::io::Error::new(
                            ErrorKind::TimedOut,
                            "the peer did not read for late_timeout",
                        ));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A handle that posts jobs to a connection's writer (for the heartbeat thread).
#[derive(Clone)]
pub struct Poster {
    tx: Sender<Job>,
    queued: Arc<AtomicUsize>,
}

impl Poster {
    /// Posts Packet Rocket's echo of a stamped data message.
    fn echo(&self, stamp: u32, owd_ns: i64) {
        self.queued.fetch_add(1, Ordering::AcqRel);
        if self.tx.send(Job::Echo { stamp, owd_ns }).is_err() {
            self.queued.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Posts a heartbeat unless the writer already has work queued.
    pub fn beat(&self) {
        if self.queued.load(Ordering::Acquire) == 0 {
            self.queued.fetch_add(1, Ordering::AcqRel);
            if self.tx.send(Job::Heartbeat).is_err() {
                self.queued.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// Messages up to this size are written by the executor itself when the
/// connection's writer is idle (one thread hand-off less per message); they
/// fit the socket buffer, so the write does not block on the peer. Larger
/// ones go to the writer thread, so sends to different peers overlap.
pub const DIRECT_MAX_BYTES: usize = 64 << 10;

/// The connection's writer is gone (closed or its thread ended).
#[derive(Debug)]
pub struct Gone;

pub struct Conn {
    pub peer: u32,
    pub stream: u32,
    pub tx: Option<Sender<Job>>,
    tcp: TcpStream,
    /// Jobs queued on or being written by the writer thread.
    queued: Arc<AtomicUsize>,
    fault: Arc<Mutex<Option<Fault>>>,
    checksum: bool,
    pub wctx: WriteCtx,
    credit: Arc<Credit>,
    /// Packet Rocket's sending edge, when the config turns it on.
    edge: Option<Arc<Edge>>,
    threads: Vec<JoinHandle<()>>,
}

impl Conn {
    pub fn start(
        peer: u32,
        stream: u32,
        tcp: TcpStream,
        cfg: &Config,
        events: Sender<Event>,
    ) -> std::io::Result<Conn> {
        let credit = Arc::new(Credit {
            state: Mutex::new((0, false)),
            cv: Condvar::new(),
            limit: cfg.max_unconsumed_bytes.max(1),
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let (r, w) = (tcp.try_clone()?, tcp.try_clone()?);
        let (ev2, cr2) = (events.clone(), credit.clone());
        let live = Liveness {
            heard: Arc::new(AtomicU64::new(Stamp::now().mono_ns)),
            closing: Arc::new(AtomicU64::new(0)),
            timeout: cfg.timeout,
        };
        let wctx = WriteCtx {
            peer,
            lock: Arc::new(Mutex::new(())),
            live: live.clone(),
            late_timeout: cfg.late_timeout,
        };
        tcp.set_read_timeout(Some(poll_interval(cfg.timeout)))?;
        tcp.set_write_timeout(Some(poll_interval(cfg.timeout)))?;
        let queued = Arc::new(AtomicUsize::new(0));
        let edge = cfg
            .packet_rocket_threshold
            .map(|t| Arc::new(Edge::new(t.as_nanos() as u64, realtime_ns())));
        // the reader echoes stamped data through the writer (it must not
        // block on the socket itself: the writer may be mid-message)
        let echo = Poster {
            tx: tx.clone(),
            queued: queued.clone(),
        };
        let e2 = edge.clone();
        let reader = std::thread::Builder::new()
            .name(format!("flrt-read-{peer}.{stream}"))
            .spawn(move || read_loop(peer, stream, r, cr2, events, live, echo, e2))?;
        let checksum = cfg.checksum;
        let fault = Arc::new(Mutex::new(cfg.fault));
        let (f2, q2, w2, e3) = (fault.clone(), queued.clone(), wctx.clone(), edge.clone());
        let writer = std::thread::Builder::new()
            .name(format!("flrt-write-{peer}.{stream}"))
            .spawn(move || write_loop(w2, w, rx, ev2, checksum, f2, q2, e3))?;
        Ok(Conn {
            peer,
            stream,
            tx: Some(tx),
            tcp,
            queued,
            fault,
            checksum,
            wctx,
            credit,
            edge,
            threads: vec![reader, writer],
        })
    }

    /// Packet Rocket's counters, when it is on.
    pub fn edge_stats(&self) -> Option<EdgeStats> {
        self.edge.as_ref().map(|e| e.stats())
    }

    /// Sends a data message: written at once when small, the writer is
    /// idle and Packet Rocket holds nothing (the Sent or WriteFailed event
    /// is returned), else queued (None): a hold waits on the writer thread.
    pub fn send_data(
        &mut self,
        op_id: u64,
        seq: u32,
        step: u32,
        offset: u64,
        data: Vec<u8>,
    ) -> Result<Option<Event>, Gone> {
        if data.len() <= DIRECT_MAX_BYTES + HEADER_BYTES
            && self.queued.load(Ordering::Acquire) == 0
            && self
                .edge
                .as_ref()
                .is_none_or(|e| e.hold_until(Instant::now()).is_none())
        {
            let f = &self.fault;
            return Ok(Some(write_data(
                &self.wctx,
                &mut self.tcp,
                op_id,
                seq,
                step,
                offset,
                data,
                self.checksum,
                f,
                self.edge.as_deref(),
            )));
        }
        self.post(Job::Data {
            op_id,
            seq,
            step,
            offset,
            data,
        })?;
        Ok(None)
    }

    pub fn poster(&self) -> Option<Poster> {
        Some(Poster {
            tx: self.tx.clone()?,
            queued: self.queued.clone(),
        })
    }

    /// Queues a job on the writer thread.
    pub fn post(&self, job: Job) -> Result<(), Gone> {
        let tx = self.tx.as_ref().ok_or(Gone)?;
        self.queued.fetch_add(1, Ordering::AcqRel);
        tx.send(job).map_err(|_| {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            Gone
        })
    }

    /// Starts a graceful close: nothing more is posted, the writer writes
    /// what is queued and sends FIN, the reader discards what arrives until
    /// the peer's FIN. Both give up at the linger deadline, `timeout` from
    /// now (or once the peer has been silent for `timeout`).
    pub fn begin_close(&mut self) {
        let Some(tx) = self.tx.take() else { return };
        let end = Stamp::now().mono_ns + self.wctx.live.timeout.as_nanos() as u64;
        self.wctx.live.closing.store(end, Ordering::Release);
        let _ = tx.send(Job::Close);
        self.credit.close();
    }

    /// Closes the connection gracefully and waits for both threads: at most
    /// the linger deadline plus one [`poll_interval`].
    pub fn close(&mut self) {
        self.begin_close();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.close();
    }
}

/// Reads until `buf` is full; Ok(n < len) only when EOF came after n
/// bytes. The poll interval passing is an error only once closing.
fn read_full(s: &mut TcpStream, buf: &mut [u8], live: &Liveness) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => return Ok(got),
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if polled(&e) && !live.closing() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reads and discards until the peer's FIN, an error or the end of a
/// close's linger, so that the socket closes with nothing unread.
fn drain(s: &mut TcpStream, live: &Liveness) {
    let mut sink = vec![0u8; 64 << 10];
    while !live.linger_over() {
        match s.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => live.hear(),
            Err(e) if e.kind() == ErrorKind::Interrupted || polled(&e) => {}
            Err(_) => return,
        }
    }
}

/// How the reader stopped delivering messages.
enum End {
    /// The peer sent FIN at a message boundary: it closed.
    Fin,
    /// The connection failed (e.g. reset); nothing more can be read.
    Failed,
    /// Closing, or the peer sent something broken: discard the rest.
    Discard,
}

#[allow(clippy::too_many_arguments)]
fn read_loop(
    peer: u32,
    stream: u32,
    mut s: TcpStream,
    credit: Arc<Credit>,
    ev: Sender<Event>,
    live: Liveness,
    echo: Poster,
    edge: Option<Arc<Edge>>,
) {
    let r = read_messages(
        peer,
        stream,
        &mut s,
        &credit,
        &ev,
        &live,
        &echo,
        edge.as_deref(),
    );
    drop(echo);
    match r {
        // the peer has closed: it reads nothing more, so close our side
        // too (its close waits for our FIN), unless our close already does
        End::Fin if !live.closing() => {
            let _ = s.shutdown(Shutdown::Write);
        }
        End::Fin | End::Failed => {}
        End::Discard => drain(&mut s, &live),
    }
}

/// Reads whole messages and passes them on until the connection ends.
#[allow(clippy::too_many_arguments)]
fn read_messages(
    peer: u32,
    stream: u32,
    s: &mut TcpStream,
    credit: &Arc<Credit>,
    ev: &Sender<Event>,
    live: &Liveness,
    echo: &Poster,
    edge: Option<&Edge>,
) -> End {
    let broken = |what, error| Event::Broken {
        peer,
        stream,
        what,
        error,
    };
    loop {
        if !credit.wait_below_limit() || live.closing() {
            return End::Discard;
        }
        let mut hb = [0u8; HEADER_BYTES];
        match read_full(s, &mut hb, live) {
            _ if live.closing() => return End::Discard,
            Ok(0) => {
                let _ = ev.send(Event::Closed {
                    peer,
                    stream,
                    error: None,
                });
                return End::Fin;
            }
            Ok(n) if n < HEADER_BYTES => {
                let _ = ev.send(broken(None, format!("truncated header: got {n} of {HEADER_BYTES} bytes before the connection closed")));
                return End::Discard;
            }
            Ok(_) => {}
            Err(e) => {
                let _ = ev.send(Event::Closed {
                    peer,
                    stream,
                    error: Some(e.to_string()),
                });
                return End::Failed;
            }
        }
        live.hear();
        let h = match Header::decode(&hb) {
            Ok(h) => h,
            Err(e) => {
                let _ = ev.send(broken(None, e));
                return End::Discard;
            }
        };
        if h.kind == KIND_HEARTBEAT {
            continue;
        }
        if h.kind == KIND_ECHO {
            if let Some(e) = edge {
                e.on_echo(realtime_ns(), Instant::now(), h.aux, h.offset as i64);
            }
            continue;
        }
        if h.kind == KIND_DATA && h.flags & FLAG_STAMPED != 0 {
            echo.echo(h.aux, edge::owd_ns(realtime_ns(), h.aux));
        }
        let what = Some((h.op_id, h.seq));
        if h.len_bytes > (1 << 40) || (h.kind == KIND_ABORT && h.len_bytes > 1 << 16) {
            let _ = ev.send(broken(
                what,
                format!("message length {} is implausible", h.len_bytes),
            ));
            return End::Discard;
        }
        credit.take(h.len_bytes);
        let payload = Payload {
            data: Vec::new(),
            credit: credit.clone(),
        };
        // read_to_end into reserved capacity (no zeroing pass over the
        // payload), in pieces of at most 1 MiB so that a long message on a
        // slow link keeps the peer "heard from"; a read that times out keeps
        // what it read (read_to_end's contract) and goes on unless closing
        let mut data = Vec::with_capacity(h.len_bytes as usize);
        let mut r = Ok(0);
        while (data.len() as u64) < h.len_bytes {
            let (had, piece) = (data.len(), (h.len_bytes - data.len() as u64).min(1 << 20));
            r = (&mut *s).take(piece).read_to_end(&mut data);
            if data.len() > had {
                live.hear();
            }
            match &r {
                Ok(n) if *n > 0 => {}
                Err(e) if polled(e) && !live.closing() => {}
                _ => break,
            }
        }
        if live.closing() {
            return End::Discard;
        }
        match r.map(|_| data.len()) {
            Ok(n) if n < h.len_bytes as usize => {
                let _ = ev.send(broken(what, format!("truncated message: got {n} of {} payload bytes before the connection closed", h.len_bytes)));
                return End::Discard;
            }
            Ok(_) => {}
            Err(e) => {
                let _ = ev.send(broken(
                    what,
                    format!("connection failed inside a message: {e}"),
                ));
                return End::Failed;
            }
        }
        let arrived = Stamp::now();
        if h.flags & FLAG_CHECKSUM != 0 && crc32fast::hash(&data) != h.payload_crc {
            let _ = ev.send(broken(
                what,
                "payload checksum mismatch (corrupted data)".into(),
            ));
            return End::Discard;
        }
        let mut payload = payload;
        payload.data = data; // the Payload now owns the bytes counted by `take`
        let e = if h.kind == KIND_DATA {
            Event::Data {
                peer,
                stream,
                hdr: h,
                payload,
                arrived,
            }
        } else {
            Event::Abort {
                peer,
                culprit: h.aux,
                reason: String::from_utf8_lossy(&payload.data).into_owned(),
                provisional: h.flags & FLAG_PROVISIONAL != 0,
            }
        };
        if ev.send(e).is_err() {
            return End::Discard;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn write_data(
    w: &WriteCtx,
    s: &mut TcpStream,
    op_id: u64,
    seq: u32,
    step: u32,
    offset: u64,
    mut data: Vec<u8>,
    checksum: bool,
    fault: &Mutex<Option<Fault>>,
    edge: Option<&Edge>,
) -> Event {
    let peer = w.peer;
    if let Some(e) = edge {
        hold(w, e);
    }
    let start = Stamp::now();
    let len = (data.len() - HEADER_BYTES) as u64;
    let crc = if checksum {
        crc32fast::hash(&data[HEADER_BYTES..])
    } else {
        0
    };
    let mut cut = None;
    {
        let mut f = fault.lock().unwrap();
        match *f {
            Some(Fault::Corrupt { peer: p, seq: q }) if p == peer && q == seq => {
                data[HEADER_BYTES] ^= 0xff;
                *f = None;
            }
            Some(Fault::Truncate { peer: p, seq: q }) if p == peer && q == seq => {
                cut = Some(HEADER_BYTES + (len as usize) / 2);
                *f = None;
            }
            _ => {}
        }
    }
    // the stamp is read after the CRC: the OWD must not include the
    // sender's own time over the payload
    let h = Header {
        kind: KIND_DATA,
        flags: (if checksum { FLAG_CHECKSUM } else { 0 })
            | (if edge.is_some() { FLAG_STAMPED } else { 0 }),
        op_id,
        seq,
        aux: edge.map_or(0, |_| edge::stamp(realtime_ns())),
        offset,
        len_bytes: len,
        payload_crc: crc,
    };
    data[..HEADER_BYTES].copy_from_slice(&h.encode());
    let r = match cut {
        Some(n) => w
            .write_frame(s, &data[..n])
            .and_then(|_| s.shutdown(Shutdown::Write)),
        None => w.write_frame(s, &data),
    };
    drop(data);
    match r {
        Ok(()) => Event::Sent {
            peer,
            op_id,
            step,
            start,
            end: Stamp::now(),
        },
        Err(e) => Event::WriteFailed {
            peer,
            op_id,
            step,
            error: e.to_string(),
        },
    }
}

/// Waits while Packet Rocket holds the connection (or until a close's
/// linger ends), in sleeps of at most a millisecond, on CLOCK_MONOTONIC.
fn hold(w: &WriteCtx, e: &Edge) {
    let t0 = Instant::now();
    let mut now = t0;
    while let Some(end) = e.hold_until(now) {
        if w.live.linger_over() {
            break;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(1)));
        now = Instant::now();
    }
    e.add_held((now - t0).as_nanos() as u64);
}

#[allow(clippy::too_many_arguments)]
fn write_loop(
    w: WriteCtx,
    mut s: TcpStream,
    jobs: Receiver<Job>,
    ev: Sender<Event>,
    checksum: bool,
    fault: Arc<Mutex<Option<Fault>>>,
    queued: Arc<AtomicUsize>,
    edge: Option<Arc<Edge>>,
) {
    for job in jobs {
        match job {
            Job::Data {
                op_id,
                seq,
                step,
                offset,
                data,
            } => {
                let e = write_data(
                    &w,
                    &mut s,
                    op_id,
                    seq,
                    step,
                    offset,
                    data,
                    checksum,
                    &fault,
                    edge.as_deref(),
                );
                queued.fetch_sub(1, Ordering::AcqRel);
                if ev.send(e).is_err() {
                    return;
                }
            }
            Job::Abort {
                culprit,
                reason,
                provisional,
                flushed,
            } => {
                let body = reason.as_bytes();
                let h = Header {
                    kind: KIND_ABORT,
                    flags: if provisional { FLAG_PROVISIONAL } else { 0 },
                    op_id: 0,
                    seq: 0,
                    aux: culprit,
                    offset: 0,
                    len_bytes: body.len() as u64,
                    payload_crc: 0,
                };
                let mut m = h.encode().to_vec();
                m.extend_from_slice(body);
                let _ = w.write_frame(&mut s, &m);
                queued.fetch_sub(1, Ordering::AcqRel);
                let _ = flushed.send(());
            }
            Job::Heartbeat => {
                let h = Header {
                    kind: KIND_HEARTBEAT,
                    flags: 0,
                    op_id: 0,
                    seq: 0,
                    aux: 0,
                    offset: 0,
                    len_bytes: 0,
                    payload_crc: 0,
                };
                let r = w.write_frame(&mut s, &h.encode());
                queued.fetch_sub(1, Ordering::AcqRel);
                if r.is_err() {
                    // the reader or the executor reports the broken connection
                }
            }
            Job::Echo { stamp, owd_ns } => {
                let h = Header::echo(stamp, owd_ns);
                let _ = w.write_frame(&mut s, &h.encode());
                queued.fetch_sub(1, Ordering::AcqRel);
            }
            Job::Close => break,
        }
    }
    let _g = w.lock.lock().unwrap();
    let _ = s.shutdown(Shutdown::Write);
}

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
//!
//! The reader's side is in [`read`], the writer's (and the executor's
//! direct writes) in [`write`]; a send's payload, lent from the
//! executor's buffer, in [`body`]; receives read straight into the buffer
//! in [`land`].

mod body;
mod land;
mod read;
mod write;

use crate::clock::Stamp;
use crate::edge::{Edge, EdgeStats};
use crate::pool::Pool;
use crate::wire::Header;
use crate::{Config, Fault};
pub use body::Body;
pub use land::{Posts, Slot, PIECE_BYTES};
use read::read_loop;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use write::{frame_data, try_direct, write_loop, write_whole, Direct};
pub use write::{Frame, WriteCtx};

/// Received bytes not yet consumed by the executor, per connection. The
/// reader pauses while they reach the limit, so TCP's flow control, not
/// memory, absorbs a peer that runs ahead (e.g. the root of a broadcast).
pub struct Credit {
    state: Mutex<(u64, bool)>, // (unconsumed bytes, closed)
    cv: Condvar,
    limit: u64,
}

impl Credit {
    pub(super) fn wait_below_limit(&self) -> bool {
        let mut g = self.state.lock().unwrap();
        while g.0 >= self.limit && !g.1 {
            g = self.cv.wait(g).unwrap();
        }
        !g.1
    }
    pub(super) fn take(&self, n: u64) {
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

/// A received payload; dropping it returns its bytes to the connection's
/// credit and its buffer to the communicator's pool.
pub struct Payload {
    pub data: Vec<u8>,
    /// The payload was read (or summed) straight into the receive's range
    /// (a posted [`Slot`]); `data` is empty.
    pub landed: bool,
    pub(super) credit: Arc<Credit>,
    pub(super) pool: Arc<Pool>,
}

impl Drop for Payload {
    fn drop(&mut self) {
        let data = std::mem::take(&mut self.data);
        self.credit.give(data.len() as u64);
        self.pool.give(data);
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
    /// A data message whose payload is a [`Body`] (lent or owned).
    Send {
        op_id: u64,
        seq: u32,
        step: u32,
        offset: u64,
        body: Arc<Body>,
    },
    Abort {
        culprit: u32,
        reason: String,
        provisional: bool,
        flushed: Sender<()>,
    },
    Heartbeat,
    /// A data message the executor framed but the socket had no room for.
    Frame(write::Frame),
    /// Finish the executor's partial direct write (kept under the frame lock).
    Flush,
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
pub(super) fn polled(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// What the reader and the writer of a connection know of its peer.
#[derive(Clone)]
pub struct Liveness {
    /// CLOCK_MONOTONIC ns of the last bytes heard from the peer on this connection.
    pub heard: Arc<AtomicU64>,
    /// CLOCK_MONOTONIC ns at which a close stops waiting for the peer (0: open).
    pub(super) closing: Arc<AtomicU64>,
    pub(super) timeout: Duration,
}

impl Liveness {
    pub(super) fn hear(&self) {
        self.heard.store(Stamp::now().mono_ns, Ordering::Release);
    }
    pub(super) fn silent_ns(&self, now: u64) -> u64 {
        now.saturating_sub(self.heard.load(Ordering::Acquire))
    }
    pub(super) fn closing(&self) -> bool {
        self.closing.load(Ordering::Acquire) != 0
    }
    /// A closing connection stops waiting for its peer at the linger
    /// deadline, or at once when the peer has been silent for `timeout`
    /// (dead or frozen, as the failure rules say).
    pub(super) fn linger_over(&self) -> bool {
        let end = self.closing.load(Ordering::Acquire);
        if end == 0 {
            return false;
        }
        let now = Stamp::now().mono_ns;
        now >= end || self.silent_ns(now) >= self.timeout.as_nanos() as u64
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
    pub(super) fn echo(&self, stamp: u32, owd_ns: i64) {
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
/// connection's writer is idle (one thread hand-off less per message), as
/// far as the socket takes them without waiting; the writer thread writes
/// the rest. Larger ones go to the writer thread, so sends to different
/// peers overlap.
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
    /// Receives posted for the reader to land in place (conn::land).
    pub posts: Arc<Posts>,
    threads: Vec<JoinHandle<()>>,
}

impl Conn {
    /// Starts the connection's threads with a buffer pool of its own.
    pub fn start(
        peer: u32,
        stream: u32,
        tcp: TcpStream,
        cfg: &Config,
        events: Sender<Event>,
    ) -> std::io::Result<Conn> {
        Conn::start_with_pool(peer, stream, tcp, cfg, events, Arc::new(Pool::default()))
    }

    /// Starts the connection's threads; message buffers come from and go
    /// back to `pool` (the communicator's, shared by its connections).
    pub fn start_with_pool(
        peer: u32,
        stream: u32,
        tcp: TcpStream,
        cfg: &Config,
        events: Sender<Event>,
        pool: Arc<Pool>,
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
            lock: Arc::new(Mutex::new(None)),
            live: live.clone(),
            late_timeout: cfg.late_timeout,
            pool: pool.clone(),
            events: None,
        };
        tcp.set_read_timeout(Some(poll_interval(cfg.timeout)))?;
        tcp.set_write_timeout(Some(poll_interval(cfg.timeout)))?;
        let queued = Arc::new(AtomicUsize::new(0));
        let edge = cfg
            .packet_rocket_threshold
            .map(|t| Arc::new(Edge::new(t.as_nanos() as u64, cfg.rocket_clock.clone())));
        // the reader echoes stamped data through the writer (it must not
        // block on the socket itself: the writer may be mid-message)
        let echo = Poster {
            tx: tx.clone(),
            queued: queued.clone(),
        };
        // (the clock: the reader echoes on it even when this rank's edge is off)
        let e2 = (edge.clone(), cfg.rocket_clock.clone());
        let posts = Arc::new(Posts::default());
        let p2 = posts.clone();
        let reader = std::thread::Builder::new()
            .name(format!("flrt-read-{peer}.{stream}"))
            .spawn(move || read_loop(peer, stream, r, (cr2, pool, p2), events, live, echo, e2))?;
        let checksum = cfg.checksum;
        let fault = Arc::new(Mutex::new(cfg.fault));
        let w2 = WriteCtx {
            events: Some(ev2.clone()),
            ..wctx.clone()
        };
        let (f2, q2, e3) = (fault.clone(), queued.clone(), edge.clone());
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
            posts,
            threads: vec![reader, writer],
        })
    }

    /// Packet Rocket's counters, when it is on.
    pub fn edge_stats(&self) -> Option<EdgeStats> {
        self.edge.as_ref().map(|e| e.stats())
    }

    /// Sends a data message. When it is small, the writer is idle and
    /// Packet Rocket holds nothing, the executor frames it and writes what
    /// the socket takes at once (never waiting for the peer): written whole,
    /// the Sent (or WriteFailed) event is returned; otherwise the writer
    /// thread gets the frame or its rest and reports it (None). Larger
    /// messages are queued on the writer (None); a hold waits there.
    pub fn send_data(
        &mut self,
        op_id: u64,
        seq: u32,
        step: u32,
        offset: u64,
        body: Arc<Body>,
    ) -> Result<Option<Event>, Gone> {
        if body.len() <= DIRECT_MAX_BYTES
            && self.queued.load(Ordering::Acquire) == 0
            && self
                .edge
                .as_ref()
                .is_none_or(|e| e.hold_until(Instant::now()).is_none())
        {
            let (w, edge) = (&self.wctx, self.edge.as_deref());
            let f = frame_data(
                w,
                op_id,
                seq,
                step,
                offset,
                body,
                self.checksum,
                &self.fault,
                edge,
            );
            if f.cut.is_some() {
                // the fault hook's truncation: written as before, then FIN
                return Ok(Some(write_whole(w, &mut self.tcp, f)));
            }
            return match try_direct(w, &self.tcp, f) {
                Direct::Done(e) => Ok(Some(e)),
                Direct::Full(f) => self.post(Job::Frame(f)).map(|_| None),
                Direct::Partial => self.post(Job::Flush).map(|_| None),
            };
        }
        self.post(Job::Send {
            op_id,
            seq,
            step,
            offset,
            body,
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

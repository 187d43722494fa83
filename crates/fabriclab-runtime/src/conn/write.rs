//! A connection's writing side: the frame lock every write takes, the
//! data message's framing (checksum, fault hook, Packet Rocket's stamp and
//! hold) and the writer thread's loop.

use super::body::Body;
use super::{poll_interval, polled, Event, Job, Liveness};
use crate::clock::Stamp;
use crate::edge::{self, Edge};
use crate::pool::Pool;
use crate::wire::{
    Header, FLAG_CHECKSUM, FLAG_PROVISIONAL, FLAG_STAMPED, HEADER_BYTES, KIND_ABORT, KIND_DATA,
    KIND_HEARTBEAT,
};
use crate::Fault;
use std::io::{ErrorKind, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A data message framed for the wire (header written, checksum and
/// stamp taken), with what its Sent event reports. Its bytes are the
/// header, then the body's, handed to the kernel together (`sendmsg`).
pub struct Frame {
    head: [u8; HEADER_BYTES],
    body: Arc<Body>,
    /// The fault hook's truncation: write this many bytes, then FIN.
    pub(super) cut: Option<usize>,
    op_id: u64,
    step: u32,
    start: Stamp,
}

/// The rest of a frame the executor began writing without waiting: the
/// writer thread finishes it before any other frame (it is kept under the
/// frame lock) and reports its Sent event.
pub(super) struct Pending {
    frame: Frame,
    done: usize,
}

/// What became of the executor's direct write ([`try_direct`]).
pub(super) enum Direct {
    /// Written whole (or failed): the Sent (WriteFailed) event.
    Done(Event),
    /// The socket took nothing: the frame, for the writer thread.
    Full(Frame),
    /// The socket took part of it: the rest is pending for the writer thread.
    Partial,
}

/// What every write needs: the frame lock (the executor's direct writes,
/// the writer thread and heartbeats never interleave frames; it also keeps
/// the rest of a partial direct write) and how long to keep trying while
/// the peer does not read.
#[derive(Clone)]
pub struct WriteCtx {
    pub peer: u32,
    pub(super) lock: Arc<Mutex<Option<Pending>>>,
    pub live: Liveness,
    pub(super) late_timeout: Duration,
    /// Where a written message's buffer goes back.
    pub pool: Arc<Pool>,
    /// The writer thread's copy: where a finished pending frame's event goes.
    pub(super) events: Option<Sender<Event>>,
}

impl WriteCtx {
    /// Writes a whole frame. The socket's write timeout is a poll interval:
    /// while the peer does not read, the write goes on as long as the peer
    /// is heard from (it is alive, just busy), `late_timeout` has not passed
    /// and a close's linger has not ended.
    fn write_frame(&self, s: &mut TcpStream, buf: &[u8]) -> std::io::Result<()> {
        let mut g = self.lock.lock().unwrap();
        self.finish_pending(&mut g, s);
        self.write_all(s, buf)
    }

    /// Writes the rest of a partial direct write, if any, and reports it.
    fn finish_pending(&self, g: &mut Option<Pending>, s: &mut TcpStream) {
        if let Some(p) = g.take() {
            let r = self.write_range(s, &p.frame, p.done, p.frame.len());
            let e = self.sent(p.frame, r);
            if let Some(ev) = &self.events {
                let _ = ev.send(e);
            }
        }
    }

    /// The event of a frame's write (an owned body's buffer goes back to
    /// the pool when its last holder drops it).
    fn sent(&self, f: Frame, r: std::io::Result<()>) -> Event {
        let (peer, op_id, step) = (self.peer, f.op_id, f.step);
        match r {
            Ok(()) => Event::Sent {
                peer,
                op_id,
                step,
                start: f.start,
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

    /// Writes all of `buf`, the frame lock held.
    /// A write waiting for room since `t0` (monotonic ns) has waited too
    /// long: the peer silent for the liveness timeout, or not reading for
    /// `late_timeout`.
    fn check_stall(&self, t0: u64) -> std::io::Result<()> {
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
        Ok(())
    }

    fn write_all(&self, s: &mut TcpStream, mut buf: &[u8]) -> std::io::Result<()> {
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
                Err(e) if polled(&e) => self.check_stall(t0)?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Writes bytes `from..to` of a data frame, the frame lock held: in
    /// non-blocking sends (the body's lock is held only inside one), with
    /// a `poll` for room of at most a poll interval between them, under
    /// the same rules as [`WriteCtx::write_all`].
    fn write_range(
        &self,
        s: &TcpStream,
        f: &Frame,
        mut from: usize,
        to: usize,
    ) -> std::io::Result<()> {
        let t0 = Stamp::now().mono_ns;
        let fd = s.as_raw_fd();
        let wait_ms = poll_interval(self.live.timeout).as_millis() as i32;
        while from < to {
            if self.live.linger_over() {
                return Err(std::io::Error::new(
                    ErrorKind::TimedOut,
                    "closing: the peer took nothing more before the linger ended",
                ));
            }
            match send_some(fd, f, from, to) {
                Ok(0) => {
                    return Err(std::io::Error::new(
                        ErrorKind::WriteZero,
                        "connection closed",
                    ))
                }
                Ok(n) => from += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    let mut pfd = libc::pollfd {
                        fd,
                        events: libc::POLLOUT,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd.
                    if unsafe { libc::poll(&mut pfd, 1, wait_ms) } != 0 {
                        continue; // room, an error to read, or a signal
                    }
                    self.check_stall(t0)?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Frame {
    fn len(&self) -> usize {
        HEADER_BYTES + self.body.len()
    }
}

/// One non-blocking `sendmsg` of bytes `from..to` of a frame (header and
/// body as two pieces, no copy between them); the bytes the kernel took.
fn send_some(fd: i32, f: &Frame, from: usize, to: usize) -> std::io::Result<usize> {
    f.body.with(|b| {
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; 2];
        let mut k = 0;
        if from < HEADER_BYTES {
            let h = &f.head[from..to.min(HEADER_BYTES)];
            iov[k] = libc::iovec {
                iov_base: h.as_ptr() as *mut _,
                iov_len: h.len(),
            };
            k += 1;
        }
        if to > HEADER_BYTES {
            let p = &b[from.max(HEADER_BYTES) - HEADER_BYTES..to - HEADER_BYTES];
            iov[k] = libc::iovec {
                iov_base: p.as_ptr() as *mut _,
                iov_len: p.len(),
            };
            k += 1;
        }
        // SAFETY: a zeroed msghdr is valid; the iovecs point at live bytes.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = k as _;
        // SAFETY: a valid socket and message.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    })
}

#[allow(clippy::too_many_arguments)]
pub(super) fn write_data(
    w: &WriteCtx,
    s: &mut TcpStream,
    op_id: u64,
    seq: u32,
    step: u32,
    offset: u64,
    body: Arc<Body>,
    checksum: bool,
    fault: &Mutex<Option<Fault>>,
    edge: Option<&Edge>,
) -> Event {
    let f = frame_data(w, op_id, seq, step, offset, body, checksum, fault, edge);
    write_whole(w, s, f)
}

/// Frames a data message: waits out Packet Rocket's hold, takes the
/// checksum, applies the fault hook, stamps and writes the header.
#[allow(clippy::too_many_arguments)]
pub(super) fn frame_data(
    w: &WriteCtx,
    op_id: u64,
    seq: u32,
    step: u32,
    offset: u64,
    body: Arc<Body>,
    checksum: bool,
    fault: &Mutex<Option<Fault>>,
    edge: Option<&Edge>,
) -> Frame {
    let peer = w.peer;
    if let Some(e) = edge {
        hold(w, e);
    }
    let start = Stamp::now();
    let len = body.len() as u64;
    let crc = if checksum {
        body.with(crc32fast::hash)
    } else {
        0
    };
    let mut cut = None;
    {
        let mut f = fault.lock().unwrap();
        match *f {
            Some(Fault::Corrupt { peer: p, seq: q }) if p == peer && q == seq => {
                body.corrupt_first_byte();
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
        aux: edge.map_or(0, |e| edge::stamp(e.now_ns())),
        offset,
        len_bytes: len,
        payload_crc: crc,
    };
    Frame {
        head: h.encode(),
        body,
        cut,
        op_id,
        step,
        start,
    }
}

/// Writes a frame whole, waiting for the peer as long as the rules allow.
pub(super) fn write_whole(w: &WriteCtx, s: &mut TcpStream, f: Frame) -> Event {
    let mut g = w.lock.lock().unwrap();
    w.finish_pending(&mut g, s);
    let r = match f.cut {
        Some(n) => w
            .write_range(s, &f, 0, n)
            .and_then(|_| s.shutdown(Shutdown::Write)),
        None => w.write_range(s, &f, 0, f.len()),
    };
    drop(g);
    w.sent(f, r)
}

/// The executor's write of a frame: only what the socket takes at once
/// (`MSG_DONTWAIT`), so a congested peer never blocks the executor (which
/// also reduces and receives for every other peer). Called only while the
/// writer thread has nothing queued, so no pending rest exists.
pub(super) fn try_direct(w: &WriteCtx, s: &TcpStream, f: Frame) -> Direct {
    let mut g = w.lock.lock().unwrap();
    debug_assert!(g.is_none());
    let fd = s.as_raw_fd();
    let mut done = 0;
    while done < f.len() {
        let e = match send_some(fd, &f, done, f.len()) {
            Ok(n) if n > 0 => {
                done += n;
                continue;
            }
            Ok(_) => std::io::Error::new(ErrorKind::WriteZero, "connection closed"),
            Err(e) => e,
        };
        match e.kind() {
            ErrorKind::Interrupted => {}
            ErrorKind::WouldBlock if done == 0 => return Direct::Full(f),
            ErrorKind::WouldBlock => {
                *g = Some(Pending { frame: f, done });
                return Direct::Partial;
            }
            _ => return Direct::Done(w.sent(f, Err(e))),
        }
    }
    Direct::Done(w.sent(f, Ok(())))
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
pub(super) fn write_loop(
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
            Job::Send {
                op_id,
                seq,
                step,
                offset,
                body,
            } => {
                let e = write_data(
                    &w,
                    &mut s,
                    op_id,
                    seq,
                    step,
                    offset,
                    body,
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
            Job::Frame(f) => {
                let e = write_whole(&w, &mut s, f);
                queued.fetch_sub(1, Ordering::AcqRel);
                if ev.send(e).is_err() {
                    return;
                }
            }
            Job::Flush => {
                w.finish_pending(&mut w.lock.lock().unwrap(), &mut s);
                queued.fetch_sub(1, Ordering::AcqRel);
            }
            Job::Echo { stamp, owd_ns } => {
                let h = Header::echo(stamp, owd_ns);
                let _ = w.write_frame(&mut s, &h.encode());
                queued.fetch_sub(1, Ordering::AcqRel);
            }
            Job::Close => break,
        }
    }
    let mut g = w.lock.lock().unwrap();
    w.finish_pending(&mut g, &mut s);
    let _ = s.shutdown(Shutdown::Write);
}

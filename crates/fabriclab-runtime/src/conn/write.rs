//! A connection's writing side: the frame lock every write takes, the
//! data message's framing (checksum, fault hook, Packet Rocket's stamp and
//! hold) and the writer thread's loop.

use super::{polled, Event, Job, Liveness};
use crate::clock::{realtime_ns, Stamp};
use crate::edge::{self, Edge};
use crate::pool::Pool;
use crate::wire::{
    Header, FLAG_CHECKSUM, FLAG_PROVISIONAL, FLAG_STAMPED, HEADER_BYTES, KIND_ABORT, KIND_DATA,
    KIND_HEARTBEAT,
};
use crate::Fault;
use std::io::{ErrorKind, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What every write needs: the frame lock (the executor's direct writes,
/// the writer thread and heartbeats never interleave frames) and how long
/// to keep trying while the peer does not read.
#[derive(Clone)]
pub struct WriteCtx {
    pub peer: u32,
    pub(super) lock: Arc<Mutex<()>>,
    pub live: Liveness,
    pub(super) late_timeout: Duration,
    /// Where a written message's buffer goes back.
    pub pool: Arc<Pool>,
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

#[allow(clippy::too_many_arguments)]
pub(super) fn write_data(
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
    w.pool.give(data);
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

//! Receives read straight into the executor's buffer.
//!
//! When a receive step starts before its message has arrived, and no other
//! step of the rank can touch its range meanwhile (`Prepared`'s `land`),
//! the executor posts the range on the connection the message will come
//! on. A reader that finds its message posted reads a plain receive's
//! payload into the range instead of a pooled buffer (no copy), and sums a
//! reducing receive's into it piece by piece as the pieces arrive
//! ([`PIECE_BYTES`], while they are in cache; each element is summed once,
//! as the executor would, so the result is the same to the bit). The
//! reader writes the range only under the slot's lock
//! and only in non-blocking reads; the executor withdraws every slot still
//! posted before its op returns ([`Slot::revoke`]), so nothing writes into
//! the buffer after that. A message that arrived before its slot was
//! posted goes the usual way (pooled buffer, copy on completion).

use super::{polled, Liveness};
use crate::dtype::{reduce_sum, DType};
use std::io::ErrorKind;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};

/// A reducing receive is read in pieces of this size and each is summed
/// into the range at once (the piece and its range stay in a core's cache).
pub const PIECE_BYTES: usize = 128 << 10;

/// A posted receive: message `seq` of op `op_id` goes to `len` bytes at
/// `dst`, summed into them when `reduce` names the element type.
pub struct Slot {
    pub op_id: u64,
    pub seq: u32,
    pub len: usize,
    pub reduce: Option<DType>,
    /// The destination; None once revoked.
    dst: Mutex<Option<*mut u8>>,
}

// SAFETY: the pointer is written through only under the mutex, and the
// executor revokes it under the same mutex before the memory is used
// otherwise (the module's contract).
unsafe impl Send for Slot {}
unsafe impl Sync for Slot {}

impl Slot {
    /// # Safety
    /// `len` bytes at `dst` must stay valid, and untouched by anyone else,
    /// until [`Slot::revoke`] or until the message is reported landed.
    pub unsafe fn new(
        op_id: u64,
        seq: u32,
        dst: *mut u8,
        len: usize,
        reduce: Option<DType>,
    ) -> Arc<Slot> {
        Arc::new(Slot {
            op_id,
            seq,
            len,
            reduce,
            dst: Mutex::new(Some(dst)),
        })
    }

    /// Withdraws the destination: waits for a read into it in progress
    /// (one non-blocking call at most), then no reader writes there again.
    pub fn revoke(&self) {
        *self.dst.lock().unwrap() = None;
    }
}

/// The slots posted on one connection, shared by the executor and the reader.
#[derive(Default)]
pub struct Posts(Mutex<Vec<Arc<Slot>>>);

impl Posts {
    pub fn post(&self, s: Arc<Slot>) {
        self.0.lock().unwrap().push(s);
    }

    /// Removes `s` if it is still posted.
    pub fn unpost(&self, s: &Arc<Slot>) {
        self.0.lock().unwrap().retain(|x| !Arc::ptr_eq(x, s));
    }

    /// Takes the slot of message `seq` of op `op_id` if it is posted for
    /// exactly `len` bytes.
    pub(super) fn take(&self, op_id: u64, seq: u32, len: u64) -> Option<Arc<Slot>> {
        let mut g = self.0.lock().unwrap();
        let i = g
            .iter()
            .position(|s| s.op_id == op_id && s.seq == seq && s.len as u64 == len)?;
        Some(g.swap_remove(i))
    }
}

/// How a read into a slot ended.
pub(super) enum Landed {
    /// All of it arrived; `crc_ok` says whether it matched (when checked).
    Whole {
        crc_ok: bool,
    },
    /// The slot was revoked (the op ended); the rest was read and dropped.
    Revoked,
    /// EOF after this many bytes.
    Short(usize),
    Failed(std::io::Error),
    /// The connection is closing.
    Closing,
}

/// Reads the payload of `slot.len` bytes into the slot's destination, in
/// non-blocking reads under its lock with a `poll` for data of at most
/// `wait_ms` between them; `crc`: the payload's expected CRC32, if checked.
/// `scratch`: the reader's buffer for pieces (and for a revoked slot's rest).
pub(super) fn read_into(
    s: &TcpStream,
    slot: &Slot,
    live: &Liveness,
    wait_ms: i32,
    crc: Option<u32>,
    scratch: &mut Vec<u8>,
) -> Landed {
    if let Some(dt) = slot.reduce {
        return reduce_into(s, slot, dt, live, wait_ms, crc, scratch);
    }
    let fd = s.as_raw_fd();
    let sink = scratch;
    let mut got = 0;
    while got < slot.len {
        let want = (slot.len - got).min(1 << 20);
        let r = {
            let g = slot.dst.lock().unwrap();
            let p = match *g {
                // SAFETY: a posted destination of slot.len bytes (Slot::new).
                Some(p) => unsafe { p.add(got) },
                None => {
                    if sink.len() < want {
                        sink.resize(want, 0);
                    }
                    sink.as_mut_ptr()
                }
            };
            // SAFETY: p has room for `want` bytes (the slot's range or the sink).
            unsafe { recv_some(fd, p, want) }
        };
        match r {
            Ok(0) => return Landed::Short(got),
            Ok(n) => {
                got += n;
                live.hear();
            }
            Err(e) => {
                if let Some(end) = waited(fd, e, live, wait_ms) {
                    return end;
                }
            }
        }
    }
    let g = slot.dst.lock().unwrap();
    match *g {
        None => Landed::Revoked,
        Some(p) => Landed::Whole {
            // SAFETY: the posted destination, now holding the payload.
            crc_ok: crc.is_none_or(|c| {
                crc32fast::hash(unsafe { std::slice::from_raw_parts(p, slot.len) }) == c
            }),
        },
    }
}

/// One non-blocking `recv` of at most `want` bytes into `p`.
///
/// # Safety
/// `p` must have room for `want` bytes.
unsafe fn recv_some(fd: i32, p: *mut u8, want: usize) -> std::io::Result<usize> {
    let n = libc::recv(fd, p.cast(), want, libc::MSG_DONTWAIT);
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// After a read error: waits up to `wait_ms` for data when there was none
/// (None: read again), or says how the read ends.
fn waited(fd: i32, e: std::io::Error, live: &Liveness, wait_ms: i32) -> Option<Landed> {
    match e.kind() {
        ErrorKind::Interrupted => None,
        ErrorKind::WouldBlock => {
            if live.closing() {
                return Some(Landed::Closing);
            }
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, wait_ms) };
            None
        }
        _ if polled(&e) && !live.closing() => None,
        _ => Some(Landed::Failed(e)),
    }
}

/// [`read_into`] for a reducing receive: reads pieces of at most
/// [`PIECE_BYTES`] into a buffer of the reader's and sums each piece's
/// whole elements into the range at once, under the slot's lock (a
/// revoked slot sums nothing more). The checksum is taken over the
/// payload as it arrives.
fn reduce_into(
    s: &TcpStream,
    slot: &Slot,
    dt: DType,
    live: &Liveness,
    wait_ms: i32,
    crc: Option<u32>,
    piece: &mut Vec<u8>,
) -> Landed {
    let fd = s.as_raw_fd();
    let e = dt.size_bytes();
    let mut hash = crc.map(|_| crc32fast::Hasher::new());
    if piece.len() < PIECE_BYTES + e {
        piece.resize(PIECE_BYTES + e, 0);
    }
    // got: payload bytes read; have: of them, in `piece` and not yet summed
    // (less than one element); done: bytes of the range summed
    let (mut got, mut have, mut done) = (0, 0, 0);
    while got < slot.len {
        let want = (slot.len - got).min(PIECE_BYTES);
        // SAFETY: piece has room for have (< e) + want bytes.
        match unsafe { recv_some(fd, piece[have..].as_mut_ptr(), want) } {
            Ok(0) => return Landed::Short(got),
            Ok(n) => {
                live.hear();
                if let Some(h) = &mut hash {
                    h.update(&piece[have..have + n]);
                }
                got += n;
                have += n;
                let whole = have / e * e;
                let g = slot.dst.lock().unwrap(); // held while summing
                if let Some(p) = *g {
                    // SAFETY: the posted range of slot.len bytes; done +
                    // whole <= got <= slot.len.
                    let dst = unsafe { std::slice::from_raw_parts_mut(p.add(done), whole) };
                    reduce_sum(dt, dst, &piece[..whole]);
                }
                drop(g);
                done += whole;
                piece.copy_within(whole..have, 0);
                have -= whole;
            }
            Err(err) => {
                if let Some(end) = waited(fd, err, live, wait_ms) {
                    return end;
                }
            }
        }
    }
    if slot.dst.lock().unwrap().is_none() {
        return Landed::Revoked;
    }
    Landed::Whole {
        crc_ok: match (hash, crc) {
            (Some(h), Some(c)) => h.finalize() == c,
            _ => true,
        },
    }
}

//! Plain receives read straight into the executor's buffer.
//!
//! When a plain (non-reducing) receive step starts before its message has
//! arrived, and no other step of the rank can touch its range meanwhile
//! (`Prepared`'s `land`), the executor posts the range on the connection
//! the message will come on. A reader that finds its message posted reads
//! the payload into the range instead of a pooled buffer, and the receive
//! needs no copy. The reader writes the range only under the slot's lock
//! and only in non-blocking reads; the executor withdraws every slot still
//! posted before its op returns ([`Slot::revoke`]), so nothing writes into
//! the buffer after that. A message that arrived before its slot was
//! posted goes the usual way (pooled buffer, copy on completion).

use super::{polled, Liveness};
use std::io::ErrorKind;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};

/// A posted receive: message `seq` of op `op_id` goes to `len` bytes at `dst`.
pub struct Slot {
    pub op_id: u64,
    pub seq: u32,
    pub len: usize,
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
    pub unsafe fn new(op_id: u64, seq: u32, dst: *mut u8, len: usize) -> Arc<Slot> {
        Arc::new(Slot {
            op_id,
            seq,
            len,
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
pub(super) fn read_into(
    s: &TcpStream,
    slot: &Slot,
    live: &Liveness,
    wait_ms: i32,
    crc: Option<u32>,
) -> Landed {
    let fd = s.as_raw_fd();
    let mut sink = Vec::new();
    let mut got = 0;
    while got < slot.len {
        let want = (slot.len - got).min(1 << 20);
        let r = {
            let g = slot.dst.lock().unwrap();
            let p = match *g {
                // SAFETY: a posted destination of slot.len bytes (Slot::new).
                Some(p) => unsafe { p.add(got) },
                None => {
                    sink.resize(want, 0);
                    sink.as_mut_ptr()
                }
            };
            // SAFETY: p has room for `want` bytes (the slot's range or the sink).
            let n = unsafe { libc::recv(fd, p.cast(), want, libc::MSG_DONTWAIT) };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        };
        match r {
            Ok(0) => return Landed::Short(got),
            Ok(n) => {
                got += n;
                live.hear();
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if live.closing() {
                    return Landed::Closing;
                }
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut pfd, 1, wait_ms) };
            }
            Err(e) if polled(&e) && !live.closing() => {}
            Err(e) => return Landed::Failed(e),
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

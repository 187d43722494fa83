//! A data message's payload on its way to the socket: either a range of
//! the executor's buffer, lent without a copy, or bytes of its own.
//!
//! The plan format says a send's bytes are taken when the send starts; a
//! lent range keeps that promise as long as nothing writes into it before
//! the writer is done with it. The executor keeps every range it lent in
//! the current op and, before it writes into one that overlaps (a reduce, a
//! receive's copy-in) or before the op returns for any reason, takes it
//! back with [`Body::keep`]: a copy of the bytes not yet written replaces
//! the loan. The writer reads a lent range only under the body's lock and
//! only in non-blocking sends, so taking it back waits for at most one
//! such call, never for the peer.

use crate::pool::Pool;
use std::sync::{Arc, Mutex};

enum Src {
    /// A range of the executor's buffer: valid until [`Body::keep`].
    Lent(*const u8, usize),
    /// Owned bytes: `vec[start..]` is the payload (the executor's staging
    /// copy leaves room for a header in front).
    Owned(Vec<u8>, usize),
}

/// One message's payload; shared by the executor and the writer.
pub struct Body {
    src: Mutex<Src>,
    len: usize,
    pool: Arc<Pool>,
}

// SAFETY: the lent pointer is read only under the mutex, and the lender
// (the executor) takes the loan back under the same mutex before the
// memory is written or goes away (the module's contract).
unsafe impl Send for Body {}
unsafe impl Sync for Body {}

impl Body {
    /// Lends `len` bytes at `ptr`.
    ///
    /// # Safety
    /// The bytes must stay valid and unwritten until [`Body::keep`] is
    /// called on the returned body (or the writer reports the message
    /// written, after which it reads them no more).
    pub unsafe fn lend(ptr: *const u8, len: usize, pool: Arc<Pool>) -> Arc<Body> {
        Arc::new(Body {
            src: Mutex::new(Src::Lent(ptr, len)),
            len,
            pool,
        })
    }

    /// Owns `v[start..]` as the payload; `v` goes back to `pool` when dropped.
    pub fn owned(v: Vec<u8>, start: usize, pool: Arc<Pool>) -> Arc<Body> {
        let len = v.len() - start;
        Arc::new(Body {
            src: Mutex::new(Src::Owned(v, start)),
            len,
            pool,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Runs `f` on the payload's bytes, the lock held.
    pub fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        let g = self.src.lock().unwrap();
        match &*g {
            // SAFETY: a loan is valid while it is held (see `lend`).
            Src::Lent(p, n) => f(unsafe { std::slice::from_raw_parts(*p, *n) }),
            Src::Owned(v, s) => f(&v[*s..]),
        }
    }

    /// Ends a loan: the payload becomes a copy of its bytes (from the
    /// pool). Owned bodies stay as they are. True if it copied.
    pub fn keep(&self) -> bool {
        let mut g = self.src.lock().unwrap();
        let Src::Lent(p, n) = *g else { return false };
        let mut v = self.pool.take(n);
        // SAFETY: the loan is still valid here (see `lend`).
        v.extend_from_slice(unsafe { std::slice::from_raw_parts(p, n) });
        *g = Src::Owned(v, 0);
        true
    }

    /// The fault hook: flips the payload's first byte (in a copy of its own).
    pub(super) fn corrupt_first_byte(&self) {
        self.keep();
        if let Src::Owned(v, s) = &mut *self.src.lock().unwrap() {
            if let Some(b) = v.get_mut(*s) {
                *b ^= 0xff;
            }
        }
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        if let Src::Owned(v, _) =
            std::mem::replace(self.src.get_mut().unwrap(), Src::Lent(std::ptr::null(), 0))
        {
            self.pool.give(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_loan_no_longer_sees_the_lenders_writes() {
        let pool = Arc::new(Pool::default());
        let mut buf: Vec<u8> = (1..=4).collect();
        // SAFETY: kept below before buf is written.
        let b = unsafe { Body::lend(buf[1..].as_ptr(), 3, pool.clone()) };
        assert_eq!(b.with(|s| s.to_vec()), vec![2, 3, 4]);
        assert!(b.keep());
        assert!(!b.keep());
        buf[2] = 99;
        assert_eq!(b.with(|s| s.to_vec()), vec![2, 3, 4]);
        assert_eq!(buf, [1, 2, 99, 4]);
        b.corrupt_first_byte();
        assert_eq!(b.with(|s| s.to_vec()), vec![2 ^ 0xff, 3, 4]);
        drop(b);
        assert!(pool.idle_bytes() >= 3, "the copy went back to the pool");
        let o = Body::owned(vec![0, 0, 5, 6], 2, pool);
        assert_eq!((o.len(), o.with(|s| s.to_vec())), (2, vec![5, 6]));
    }
}

//! Message buffers reused across messages and ops, one pool per
//! communicator. A fresh 1 MiB `Vec` per message costs an mmap, 256 page
//! faults with their zeroing, and an munmap when freed (glibc serves large
//! blocks, and a thread arena's trimmed top, from and back to the kernel):
//! a quarter of a rank's CPU in the profile of a 64 MiB ring allreduce
//! (docs/performance.md). Readers take a payload's buffer from it and the
//! payload gives it back when reduced or copied in; a send's loan taken
//! back (conn::Body) copies into a buffer from it.
//!
//! The pool keeps at most [`POOL_MAX_BYTES`] of idle capacity; what is
//! given back beyond that is freed, so memory stays bounded by the
//! connections' credit plus this constant.

use std::sync::Mutex;

/// Idle capacity the pool keeps (bytes).
pub const POOL_MAX_BYTES: usize = 64 << 20;

#[derive(Default)]
pub struct Pool {
    /// Idle buffers (length 0) and their total capacity.
    free: Mutex<(Vec<Vec<u8>>, usize)>,
}

impl Pool {
    /// An empty buffer with room for at least `cap` bytes: an idle one whose
    /// capacity is within [cap, 2 cap] (the smallest such), else a new one.
    pub fn take(&self, cap: usize) -> Vec<u8> {
        let mut g = self.free.lock().unwrap();
        let best =
            g.0.iter()
                .enumerate()
                .filter(|(_, v)| v.capacity() >= cap && v.capacity() / 2 <= cap)
                .min_by_key(|(_, v)| v.capacity())
                .map(|(i, _)| i);
        if let Some(i) = best {
            let v = g.0.swap_remove(i);
            g.1 -= v.capacity();
            return v;
        }
        drop(g);
        Vec::with_capacity(cap)
    }

    /// Gives a buffer back: kept for reuse while the pool's idle capacity
    /// stays within [`POOL_MAX_BYTES`], freed otherwise.
    pub fn give(&self, mut v: Vec<u8>) {
        let c = v.capacity();
        if c == 0 {
            return;
        }
        let mut g = self.free.lock().unwrap();
        if g.1 + c > POOL_MAX_BYTES {
            return;
        }
        v.clear();
        g.1 += c;
        g.0.push(v);
    }

    /// Idle capacity held (bytes).
    pub fn idle_bytes(&self) -> usize {
        self.free.lock().unwrap().1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_fitting_buffers_and_stays_bounded() {
        let p = Pool::default();
        let a = p.take(1000);
        let ptr = a.as_ptr();
        p.give(a);
        assert_eq!(p.idle_bytes(), 1000);
        // fits [cap, 2 cap]: the same memory comes back
        let b = p.take(600);
        assert_eq!((b.as_ptr(), b.len()), (ptr, 0));
        assert_eq!(p.idle_bytes(), 0);
        p.give(b);
        // too large for a 400-byte request (more than twice): a new buffer
        let c = p.take(400);
        assert_ne!(c.as_ptr(), ptr);
        assert_eq!(p.idle_bytes(), 1000);
        // too small for 1001 bytes
        assert!(p.take(1001).capacity() >= 1001);
        assert_eq!(p.idle_bytes(), 1000);
        // the bound: 64 MiB of idle capacity at most, whatever is given back
        for _ in 0..3 {
            p.give(Vec::with_capacity(POOL_MAX_BYTES / 2));
        }
        assert_eq!(p.idle_bytes(), 1000 + POOL_MAX_BYTES / 2);
        drop(c);
    }
}

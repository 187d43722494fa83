//! What a rank does when something fails: name the rank to blame, tell
//! the others, and follow the chain of blame when a stalled rank makes
//! several ranks time out at once.
//!
//! A rank that times out (or is blamed by a peer while it is itself
//! waiting) sends an abort naming the peer it waits for, then keeps
//! listening for a grace period (half the timeout, at most 1 s): if
//! the rank it blames reports that it is waiting for another rank in turn,
//! the blame moves on to that rank. So in a ring where rank 1 stalls, rank 0
//! (waiting for rank 2, which waits for rank 1) names rank 1, not rank 2.

use crate::clock::Stamp;
use crate::conn::{Event, Job};
use crate::exec::{Communicator, OpState, Prepared};
use crate::{ErrorKind, RtError};
use fabriclab_plan::Op;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

impl Communicator {
    /// Tells every peer which rank this one blames, and waits briefly for
    /// the frames to leave, so they arrive before our connections close.
    pub(crate) fn send_abort(&mut self, e: &RtError, provisional: bool) {
        let wait = !provisional;
        let culprit = e.peer.unwrap_or(self.cfg.rank);
        let (tx, rx) = channel();
        let mut n = 0;
        for c in self.conns.iter().flatten() {
            {
                if c.post(Job::Abort {
                    culprit,
                    reason: e.message.clone(),
                    provisional,
                    flushed: tx.clone(),
                })
                .is_ok()
                {
                    n += 1;
                }
            }
        }
        let deadline = Instant::now() + Duration::from_millis(500).min(self.cfg.timeout);
        for _ in 0..if wait { n } else { 0 } {
            if rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .is_err()
            {
                break;
            }
        }
    }

    /// A closed connection is a failure if this op still expects messages on it.
    pub(crate) fn check_closed(
        &self,
        st: &OpState,
        peer: u32,
        stream: u32,
        error: Option<String>,
    ) -> Result<(), RtError> {
        let s = self.cfg.streams as usize;
        let missing = st.got[peer as usize]
            .iter()
            .enumerate()
            .filter(|(k, g)| k % s == stream as usize && !**g)
            .count();
        if missing == 0 {
            return Ok(());
        }
        let why = error.map(|e| format!(" ({e})")).unwrap_or_default();
        Err(RtError::peer(ErrorKind::PeerFailed, peer, format!(
            "rank {peer} failed: it closed its connection{why} (exited or died) while rank {} still expects {missing} message(s) from it in op {}",
            self.cfg.rank, st.op_id
        )))
    }

    pub(crate) fn timeout_error(&self, p: &Prepared, st: &OpState) -> RtError {
        let me = self.cfg.rank as usize;
        let steps = &p.plan.ranks[me];
        let mut waits = Vec::new();
        for (peer, ks) in p.recv_step.iter().enumerate() {
            for (k, &j) in ks.iter().enumerate() {
                if !st.got[peer][k] && st.post[j as usize] != Stamp::default() {
                    waits.push((
                        peer as u32,
                        format!("message {k} from rank {peer} (recv step {j})"),
                    ));
                    break;
                }
            }
        }
        if waits.is_empty() {
            for (i, s) in steps.iter().enumerate() {
                if s.op == Op::Send && st.post[i] != Stamp::default() && !st.sent_done[i] {
                    waits.push((s.peer, format!("rank {} to take send step {i}", s.peer)));
                }
            }
        }
        let peer = waits.first().map(|w| w.0).unwrap_or(self.cfg.rank);
        let list: Vec<String> = waits.into_iter().map(|w| w.1).collect();
        RtError::peer(
            ErrorKind::PeerFailed,
            peer,
            format!(
            "rank {peer} failed: no progress for {:.1} s in op {} (timeout); rank {} waits for {}",
            self.cfg.timeout.as_secs_f64(), st.op_id, me, list.join(", ")
        ),
        )
    }

    /// After a timeout (or being blamed while waiting): tell everyone whom we
    /// wait for, then follow reports from the blamed rank for a grace period.
    /// `announce`: send our own provisional abort first (false when we only
    /// follow another rank's provisional report).
    pub(crate) fn resolve_blame(&mut self, first: RtError, announce: bool) -> RtError {
        if announce {
            self.send_abort(&first, true);
        }
        let me = self.cfg.rank;
        let mut e = first;
        let grace = (self.cfg.timeout / 2).min(Duration::from_secs(1));
        let deadline = Instant::now() + grace;
        let mut seen = vec![me];
        // every report (sender -> (blamed, reason)) heard in the grace period:
        // a report may come before we blame its sender
        let mut reports: Vec<(u32, u32, String)> = Vec::new();
        while let Ok(ev) = self
            .rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            if let Event::Abort {
                peer,
                culprit,
                reason,
                ..
            } = ev
            {
                reports.push((peer, culprit, reason));
            }
            while let Some((from, c, why)) = reports
                .iter()
                .find(|(from, c, _)| Some(*from) == e.peer && !seen.contains(c))
            {
                seen.push(*c);
                e = RtError::peer(
                    ErrorKind::PeerFailed,
                    *c,
                    format!(
                        "rank {c} failed (traced through rank {from}, which waits for it): {why}"
                    ),
                );
            }
        }
        e
    }
}

//! What a rank does when something fails: name the rank to blame, tell
//! the others, and follow the chain of blame when a stalled rank makes
//! several ranks time out at once.
//!
//! A rank that times out, or hears a provisional report of a failure while
//! it waits itself, sends a provisional abort naming the peer it waits for
//! (its edge of the wait-for graph), then keeps listening for a grace period
//! (the timeout, at most 1 s, renewed at each step): if the rank it blames
//! reports that it waits for another rank in turn, the blame moves on to
//! that rank, until a rank that reports nothing (the stalled one). So in a ring where rank 1 stalls, rank 0
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
        let s = st.streams as usize;
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

    /// What this rank waits for: (peer, description), receives first.
    fn waiting_for(&self, p: &Prepared, st: &OpState) -> Vec<(u32, String)> {
        let me = self.cfg.rank as usize;
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
            for (i, s) in p.plan.ranks[me].iter().enumerate() {
                if s.op == Op::Send && st.post[i] != Stamp::default() && !st.sent_done[i] {
                    waits.push((s.peer, format!("rank {} to take send step {i}", s.peer)));
                }
            }
        }
        waits
    }

    /// Nanoseconds since anything arrived from `peer` on any of its streams.
    fn silent_ns(&self, peer: u32) -> u64 {
        let s = self.cfg.streams as usize;
        let heard = (0..s)
            .filter_map(|k| self.conns[peer as usize * s + k].as_ref())
            .map(|c| c.wctx.live.heard.load(std::sync::atomic::Ordering::Acquire))
            .max()
            .unwrap_or(0);
        Stamp::now().mono_ns.saturating_sub(heard)
    }

    /// Called when no event came for a while: a failure if a peer this rank
    /// waits for is silent (no heartbeat either) for `timeout`, or alive but
    /// without progress for `late_timeout`.
    pub(crate) fn check_waits(
        &self,
        p: &Prepared,
        st: &OpState,
        idle: Duration,
    ) -> Option<RtError> {
        let waits = self.waiting_for(p, st);
        let me = self.cfg.rank;
        let list =
            |w: &[(u32, String)]| w.iter().map(|x| x.1.clone()).collect::<Vec<_>>().join(", ");
        for (peer, _) in &waits {
            let silent = self.silent_ns(*peer);
            if silent >= self.cfg.timeout.as_nanos() as u64 {
                return Some(self.blame(*peer, format!(
                    "rank {peer} failed: nothing heard from it for {:.1} s (timeout {:.1} s: its process died, froze or lost the network) in op {}; rank {me} waits for {}",
                    silent as f64 / 1e9, self.cfg.timeout.as_secs_f64(), st.op_id, list(&waits))));
            }
        }
        if idle >= self.cfg.late_timeout {
            let peer = waits.first().map(|w| w.0).unwrap_or(me);
            return Some(self.blame(peer, format!(
                "rank {peer} failed: alive but no progress for {:.1} s (late_timeout) in op {}; rank {me} waits for {}",
                idle.as_secs_f64(), st.op_id, list(&waits))));
        }
        None
    }

    /// The error of a rank that learns of a failure elsewhere (`note`)
    /// while it waits itself: it blames the first rank it waits for.
    pub(crate) fn wait_error(&self, p: &Prepared, st: &OpState, note: String) -> RtError {
        let waits = self.waiting_for(p, st);
        let me = self.cfg.rank;
        let first = waits.first().map(|w| w.0).unwrap_or(me);
        let list = waits
            .iter()
            .map(|x| x.1.clone())
            .collect::<Vec<_>>()
            .join(", ");
        self.blame(
            first,
            format!("rank {first} failed: rank {me} waits for {list} ({note})"),
        )
    }

    fn blame(&self, peer: u32, m: String) -> RtError {
        RtError::peer(ErrorKind::PeerFailed, peer, m)
    }

    /// After a timeout, or hearing of a failure while waiting: tell everyone
    /// whom we wait for (a provisional abort), then follow the reports of
    /// the rank we blame, and of the rank it blames, ..., for a grace period
    /// renewed at each step. `seed`: reports (sender, blamed, reason) already received.
    pub(crate) fn resolve_blame(
        &mut self,
        first: RtError,
        seed: Vec<(u32, u32, String)>,
    ) -> RtError {
        self.send_abort(&first, true);
        let me = self.cfg.rank;
        let mut e = first;
        let grace = self.cfg.timeout.min(Duration::from_secs(1));
        let mut deadline = Instant::now() + grace;
        let mut seen = vec![me];
        // every report (sender -> (blamed, reason)) heard in the grace period:
        // a report may come before we blame its sender
        let mut reports = seed;
        loop {
            while let Some((from, c, why)) = reports
                .iter()
                .find(|(from, c, _)| Some(*from) == e.peer && !seen.contains(c))
            {
                seen.push(*c);
                deadline = Instant::now() + grace; // the new blamed rank gets its grace too
                e = RtError::peer(
                    ErrorKind::PeerFailed,
                    *c,
                    format!(
                        "rank {c} failed (traced through rank {from}, which waits for it): {why}"
                    ),
                );
            }
            let Ok(ev) = self
                .rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            else {
                break;
            };
            if let Event::Abort {
                peer,
                culprit,
                reason,
                ..
            } = ev
            {
                reports.push((peer, culprit, reason));
            }
        }
        e
    }
}

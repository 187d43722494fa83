//! A worker's congestion control for one aggregation tree (PANAMA section
//! 4.2, figure 5). Counted in packets (VIDs), not bytes.
//!
//! - Result packets are implicit ACKs: a tree delivers in order, so the
//!   result for VID v acknowledges every VID up to v.
//! - The ECN bits of results (OR-ed by every accelerator on the way) feed
//!   DCTCP's estimate, as in RFC 8257 §3.3: once per observation window
//!   alpha = (1 - g) alpha + g F, F the fraction of marked results; on a
//!   marked result the window is cut to cwnd (1 - alpha/2), at most once
//!   per window of data. Unmarked results grow it as TCP does (RFC 5681):
//!   one packet per result below ssthresh, 1/cwnd above.
//! - The window never exceeds the `cwnd_cap` of the latest result: the
//!   smallest free accelerator buffer on the tree, in packets.

#[derive(Debug, Clone)]
pub struct TreeWindow {
    pub cwnd: f64,
    pub ssthresh: f64,
    pub alpha: f64,
    g: f64,
    acked: u32,
    marked: u32,
    window_end: u32,
    cwr_end: Option<u32>,
    /// Next VID to send; every VID below `una` has its result.
    pub next_vid: u32,
    pub una: u32,
    /// The latest `cwnd_cap` (u16::MAX before the first result).
    pub cap: u16,
}

impl TreeWindow {
    /// `initial` packets of window, DCTCP gain `g` (RFC 8257: 1/16), alpha starting at `alpha`.
    pub fn new(initial: f64, g: f64, alpha: f64) -> TreeWindow {
        TreeWindow {
            cwnd: initial.max(1.0),
            ssthresh: f64::INFINITY,
            alpha,
            g,
            acked: 0,
            marked: 0,
            window_end: 0,
            cwr_end: None,
            next_vid: 0,
            una: 0,
            cap: u16::MAX,
        }
    }

    /// Packets that may be outstanding: the window, capped, at least one.
    pub fn window(&self) -> u32 {
        (self.cwnd.floor() as u32).min(self.cap as u32).max(1)
    }
    pub fn in_flight(&self) -> u32 {
        self.next_vid - self.una
    }
    pub fn can_send(&self) -> bool {
        self.in_flight() < self.window()
    }
    /// Takes the next VID to send.
    pub fn on_send(&mut self) -> u32 {
        self.next_vid += 1;
        self.next_vid - 1
    }

    /// The result for `vid` arrived with its ECN mark and cwnd_cap. Returns
    /// false for a result already acknowledged (nothing changes).
    ///
    /// A result for a VID this worker has not sent yet means the tree got
    /// there without it (partial sync: the accelerators aggregate once a
    /// fraction of the workers contributed, and this one is behind): every
    /// VID up to it is done, and this worker will not send them.
    pub fn on_result(&mut self, vid: u32, ce: bool, cwnd_cap: u16) -> bool {
        if vid < self.una {
            return false;
        }
        if vid >= self.next_vid {
            self.next_vid = vid + 1;
        }
        // RFC 8257 counts acknowledged bytes: a result acknowledges every VID up to its own.
        let newly = vid + 1 - self.una;
        self.una = vid + 1;
        self.cap = cwnd_cap;
        self.acked += newly;
        self.marked += if ce { newly } else { 0 };
        if self.una > self.window_end {
            self.alpha =
                (1.0 - self.g) * self.alpha + self.g * self.marked as f64 / self.acked as f64;
            self.acked = 0;
            self.marked = 0;
            self.window_end = self.next_vid;
        }
        let may_cut = self.cwr_end.is_none_or(|e| self.una > e);
        if ce && may_cut {
            self.cwnd = (self.cwnd * (1.0 - self.alpha / 2.0)).max(1.0);
            self.ssthresh = self.cwnd;
            self.cwr_end = Some(self.next_vid);
        } else if !ce {
            self.cwnd += if self.cwnd < self.ssthresh {
                1.0
            } else {
                1.0 / self.cwnd
            };
        }
        self.cwnd = self.cwnd.min((self.cap as f64).max(1.0));
        true
    }

    /// No result for too long: a packet was lost (corruption, a failed
    /// link, or an overflow where nothing bounds the window). The
    /// accelerators have skipped those VIDs (section 5: the missing
    /// contribution is dropped and aggregation goes on with the next VID),
    /// so sending them again would only be stale: the outstanding VIDs are
    /// given up, the threshold halved and the window restarted from one
    /// packet. Returns how many VIDs were given up.
    pub fn on_timeout(&mut self) -> u32 {
        let lost = self.in_flight();
        self.ssthresh = (self.cwnd / 2.0).max(2.0);
        self.cwnd = 1.0;
        self.una = self.next_vid;
        self.cwr_end = None;
        lost
    }
}

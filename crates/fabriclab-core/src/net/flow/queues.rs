//! The flow backend's side of the queueing estimate ([`QueueEstimate`](super::tcp::QueueEstimate)):
//! when the standing queues are estimated again (a change among the
//! window-unlimited flows), when they are filled from what their holders
//! still have to send (deferred to the first reader), and what a flow's
//! packets wait in them (a path's wait, a round trip).

use super::tcp::{regrown_queue_bytes, FlowModel, FlowView, Holder, NONE};
use super::{message_wire_bytes, reuse, FlowNet, FluidFlow};
use crate::net::flow::maxmin::FlowDemand;

/// Wire bytes others sent across flow `f`'s tied port since it held it
/// (`bits_sent`: every port's).
fn moved_bytes(bits_sent: &[f64], f: &FluidFlow) -> f64 {
    if f.tied == NONE {
        0.0
    } else {
        (bits_sent[f.tied as usize] + f.remaining_bits - f.moved_base_bits) / 8.0
    }
}

/// The flows of `active` holding a standing queue (`bits_sent`: every
/// port's), with their rebuilt queues at a time, over port capacities and
/// a full segment's wire bytes (`regrow`; `None`: infinite, not computed).
fn holders<'a>(
    active: &'a [FluidFlow],
    bits_sent: &'a [f64],
    regrow: Option<(u64, &'a [f64], f64)>,
) -> impl Iterator<Item = Holder> + 'a {
    active
        .iter()
        .filter(|f| f.standing != NONE)
        .map(move |f| Holder {
            port: f.standing,
            tied: f.tied,
            class: f.class,
            left_bytes: f.remaining_bits / 8.0,
            moved_bytes: moved_bytes(bits_sent, f),
            regrown_bytes: match (f.regrow_from_ps, regrow) {
                (Some(t0), Some((now, capacity_bps, full_wire))) => regrown_queue_bytes(
                    (now - t0) as f64,
                    f.base_rtt_ps,
                    capacity_bps[f.standing as usize],
                    full_wire,
                ),
                _ => f64::INFINITY,
            },
        })
}

impl FlowNet {
    /// The standing queues of the window-unlimited flows (and aggregation
    /// trees): where the max-min allocation of those alone bottlenecks
    /// each. Flows in slow start are transients that do not move them; only
    /// a change among the window-unlimited flows does.
    pub(super) fn estimate_queues(&mut self) {
        self.long_changed = false;
        if std::mem::take(&mut self.fill_due) {
            // The fill replaced by the one below leaves its bytes moved to
            // tied ports where the new estimate has no holder (read there
            // behind a higher band's queue): those alone are set.
            let held = holders(&self.active, &self.bits_sent, None);
            self.queues.fill_moved(&self.short, held);
        }
        let mut long = std::mem::take(&mut self.long);
        long.clear();
        long.extend((0..self.active.len()).filter(|&i| self.active[i].ss.is_none()));
        // Which of them had their window cut at a tied port (its queue full).
        let mut cut = std::mem::take(&mut self.cut);
        cut.clear();
        cut.extend(long.iter().map(|&i| {
            let f = &self.active[i];
            f.tied != NONE
                && moved_bytes(&self.bits_sent, f)
                    >= self.queues.share_bytes(&self.short, f.tied, f.class)
        }));
        let mut demands: Vec<FlowDemand> = reuse(std::mem::take(&mut self.demands));
        demands.extend(
            long.iter()
                .map(|&i| FlowDemand::new(self.active[i].class, &self.active[i].route)),
        );
        let mut rates = std::mem::take(&mut self.long_rates);
        if let Some(a) = &self.agg {
            a.demands(&mut demands, &self.nic_flows, &self.capacity_bps);
            self.maxmin_long
                .rates(&demands, &self.capacity_bps, &mut rates);
        } else {
            self.keys.clear();
            self.keys
                .extend(long.iter().map(|&i| self.active[i].msg as u64));
            let (d, k, c) = (&demands, &self.keys, &self.capacity_bps);
            if std::mem::take(&mut self.long_rerouted) {
                self.maxmin_long.rates_keyed(d, k, c, &mut rates);
            } else {
                self.maxmin_long.rates_keyed_ports_kept(d, k, c, &mut rates);
            }
        }
        let mut views: Vec<FlowView> = reuse(std::mem::take(&mut self.views));
        views.extend(long.iter().zip(&rates).map(|(&i, &r)| {
            let f = &self.active[i];
            FlowView {
                class: f.class,
                route: &f.route,
                rate_bps: r,
                base_rtt_ps: f.base_rtt_ps,
                long: true,
            }
        }));
        self.queues.estimate(
            &self.short,
            &self.capacity_bps,
            demands.iter().zip(&rates).map(|(d, &r)| (d.ports, r)),
            &views,
            self.full_wire,
            self.tsq_wire,
            &mut self.standing,
        );
        self.views = reuse(views);
        self.demands = reuse(demands);
        for f in &mut self.active {
            if f.ss.is_some() {
                (f.standing, f.tied) = (NONE, NONE);
            }
        }
        let now = self.last_ps;
        for ((&i, &(s, d)), &cut) in long.iter().zip(&self.standing).zip(&cut) {
            let f = &mut self.active[i];
            // Its window was set by congestion signals at the port it held
            // (or at its tied port, now left); now held at a port without
            // any, it rebuilds its queue there from empty.
            let signals =
                |p: u32| p != NONE && self.short.ports[p as usize].signals(self.short.ecn_capable);
            if s == NONE || signals(s) {
                f.regrow_from_ps = None;
            } else if (signals(f.standing) && f.standing != s) || (cut && d != f.tied) {
                f.regrow_from_ps = Some(now);
            }
            (f.standing, f.tied) = (s, d);
            if d != NONE && d != f.moved_port {
                f.moved_port = d;
                f.moved_base_bits = self.bits_sent[d as usize] + f.remaining_bits;
            }
        }
        (self.long, self.cut, self.long_rates) = (long, cut, rates);
        self.fill_queues(now);
    }

    /// The standing queues at `now`, from what their holders still have to send.
    pub(super) fn fill_queues(&mut self, now: u64) {
        let regrow = Some((now, self.capacity_bps.as_slice(), self.full_wire));
        let held = holders(&self.active, &self.bits_sent, regrow);
        self.queues.fill(&self.short, &self.capacity_bps, held);
    }

    /// The queues' fill left by [`FlowNet::advance`], done before anything
    /// reads the queues or changes what the fill reads (a flow's class or
    /// base RTT, a capacity): the same fill at the same time.
    pub(super) fn settle_queues(&mut self) {
        if std::mem::take(&mut self.fill_due) {
            self.fill_queues(self.last_ps);
        }
    }

    /// Queueing a packet of flow `f` waits over `ports`, but at `skip` (the
    /// ports where the flow holds its own standing queue).
    /// `own_bytes` (wire bytes it has sent) are not ahead of itself: not
    /// counted in what it moved to a tied port (tcp::Holder).
    pub(super) fn path_wait_ps(
        &self,
        ports: &[u32],
        class: u8,
        skip: (u32, u32),
        own_bytes: f64,
    ) -> f64 {
        debug_assert!(!self.fill_due, "queues read before their fill");
        if self.short.model != FlowModel::Tcp {
            return 0.0;
        }
        ports
            .iter()
            .filter(|&&p| p != skip.0 && p != skip.1)
            .map(|&p| {
                self.queues.wait_excluding_ps(
                    &self.short,
                    p,
                    class,
                    own_bytes,
                    self.capacity_bps[p as usize],
                )
            })
            .sum()
    }

    /// A round trip of flow `i` now: its base RTT and the queues both ways.
    pub(super) fn rtt_ps(&self, i: usize) -> f64 {
        let f = &self.active[i];
        f.base_rtt_ps
            + self.path_wait_ps(&f.route, f.class, (NONE, NONE), self.sent_bytes(f))
            + self.path_wait_ps(&f.rev, f.class, (NONE, NONE), 0.0)
    }

    /// Wire bytes flow `f` has sent.
    pub(super) fn sent_bytes(&self, f: &FluidFlow) -> f64 {
        message_wire_bytes(f.size_bytes, self.mss_bytes) as f64 - f.remaining_bits / 8.0
    }
}

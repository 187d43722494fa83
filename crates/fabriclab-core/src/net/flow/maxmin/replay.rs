//! The keyed allocator's replay: a call that follows another keeps the
//! rounds of the last call that no change reaches (docs/architecture.md,
//! "The flow backend"), and each call's log is kept for the next.

use super::*;

impl MaxMin {
    /// Matches `flows` to the last keyed call's: the flows new or changed
    /// (`pending`), each unchanged past flow's index now (`now_of`), and
    /// the first round that froze a flow gone or changed (the replay stops
    /// there). `None`: nothing can be replayed.
    pub(super) fn plan_replay(
        &mut self,
        flows: &[FlowDemand],
        keys: &[u64],
        capacity_bps: &[f64],
    ) -> Option<u32> {
        let past = &self.past;
        if !past.valid || !same_bits(&past.capacity_bps, capacity_bps) {
            return None;
        }
        self.now_of.clear();
        self.now_of.resize(past.flows.len(), NONE);
        self.pending.clear();
        self.recapped.clear();
        let mut limit = NONE;
        let mut j = 0;
        for (i, (f, &key)) in flows.iter().zip(keys).enumerate() {
            if i > 0 && keys[i - 1] >= key {
                return None;
            }
            while j < past.flows.len() && past.flows[j].key < key {
                limit = limit.min(past.flows[j].round); // gone
                j += 1;
            }
            match past.flows.get(j) {
                Some(pf) if pf.key == key => {
                    let ports = &past.ports[pf.slot as usize];
                    // Element by element: routes are a few ports long.
                    if pf.level == f.level()
                        && ports.len() == f.ports.len()
                        && ports.iter().zip(f.ports).all(|(a, b)| a == b)
                    {
                        self.now_of[j] = i as u32;
                        if pf.cap_bps.to_bits() != f.cap_bps.to_bits() {
                            self.recapped.push((i as u32, pf.cap_bps));
                        }
                    } else {
                        limit = limit.min(pf.round);
                        self.pending.push(i as u32);
                    }
                    j += 1;
                }
                _ => self.pending.push(i as u32),
            }
        }
        for pf in &past.flows[j..] {
            limit = limit.min(pf.round);
        }
        Some(limit)
    }

    /// Progressive filling of a keyed call whose flows, now and last call,
    /// are all of one level, replaying the last call's rounds wherever no
    /// change reaches. A port is affected when a flow crossing it is new,
    /// gone or changed, or froze at another share or in another round than
    /// last call; the other ports hold last call's state at the replayed
    /// round `q` (the same flows frozen at the same shares), so each has a
    /// share of at least that round's share `s`, and only the ports it
    /// saturated are within its tolerance `t`. Each round takes the smallest
    /// of the affected ports' shares and watched caps (flows affected or
    /// recapped), and of round `q`'s saturated ports still unaffected and
    /// its unaffected flows' caps: if that is `s`, it is round `q` again
    /// (with any affected port or cap within `t`); if it is below `s` with
    /// its tolerance under `t`, a round of affected ports alone comes first;
    /// a round `q` with nothing unaffected left and no affected share within
    /// `t` is gone. Either way it is the round plain progressive filling
    /// takes, so the same rates to the bit. Flows of round `q` not frozen
    /// by it, or frozen elsewhere, become affected, and so do their ports.
    /// A share strictly between `s` and `t` cannot be told apart: returns
    /// false, having dropped the log, and the call is water-filled whole by
    /// [`MaxMin::solve`].
    pub(super) fn replay_affected(
        &mut self,
        flows: &[FlowDemand],
        keys: &[u64],
        capacity_bps: &[f64],
        rates: &mut Vec<f64>,
    ) -> bool {
        let Some(level) = flows.first().map(|f| f.level()) else {
            return false;
        };
        if self.past.level != Some(level) || !self.match_flows(flows, keys, capacity_bps, level) {
            return false;
        }
        let (np, n) = (capacity_bps.len(), flows.len());
        // The same flows over the same ports, caps aside.
        let same_flows = self.pending.is_empty() && self.past.flows.len() == n;
        if same_flows && self.caps_unreached(flows) {
            // Every round again, freezing the same flows: last call's rates.
            let past = &mut self.past;
            rates.clear();
            rates.extend(past.flows.iter().map(|pf| match pf.round {
                NONE => 0.0,
                r => past.rounds[r as usize].share,
            }));
            for &(i, _) in &self.recapped {
                past.flows[i as usize].cap_bps = flows[i as usize].cap_bps;
            }
            return true;
        }
        let MaxMin {
            residual,
            count,
            frozen,
            latest,
            saturated,
            freezing,
            caps: cand,
            live: pq,
            past,
            rounds,
            froze,
            sat,
            round_of,
            now_of,
            at_slot,
            pending,
            recapped,
            prior,
            affected,
            watched,
            in_a,
            a_ports,
            ..
        } = self;
        rates.clear();
        rates.resize(n, 0.0);
        residual.clear();
        residual.extend_from_slice(capacity_bps);
        frozen.clear();
        frozen.resize(n, false);
        affected.clear();
        affected.resize(n, false);
        latest.resize(np, 0.0);
        watched.clear();
        rounds.clear();
        froze.clear();
        sat.clear();
        round_of.clear();
        round_of.resize(n, NONE);
        // As slices for the rounds (their lengths are set for the call):
        // the compiler then keeps their addresses out of the loops.
        let (rates, residual, count, frozen, affected, latest, round_of): (
            &mut [f64],
            &mut [f64],
            &mut [u32],
            &mut [bool],
            &mut [bool],
            &mut [f64],
            &mut [u32],
        ) = (rates, residual, count, frozen, affected, latest, round_of);
        let (in_a, prior, now_of, at_slot): (&mut [bool], &[u32], &[u32], &[u32]) =
            (in_a, prior, now_of, at_slot);
        let mark = |p: u32, in_a: &mut [bool], a_ports: &mut Vec<u32>| {
            if !in_a[p as usize] {
                in_a[p as usize] = true;
                a_ports.push(p);
            }
        };
        let affect = |i: u32,
                      affected: &mut [bool],
                      watched: &mut Vec<u32>,
                      in_a: &mut [bool],
                      a_ports: &mut Vec<u32>| {
            affected[i as usize] = true;
            let f = &flows[i as usize];
            if f.cap_bps < f64::INFINITY {
                watched.push(i);
            }
            for &p in f.ports {
                mark(p, in_a, a_ports);
            }
        };
        for &i in pending.iter() {
            affect(i, affected, watched, in_a, a_ports);
        }
        watched.extend(recapped.iter().map(|&(i, _)| i));
        let share_of =
            |residual: &[f64], count: &[u32], p: usize| residual[p].max(0.0) / count[p] as f64;
        // The smaller, as the scan orders shares.
        let lower = |a: f64, b: f64| if b.total_cmp(&a).is_lt() { b } else { a };
        let mut left = n;
        let mut q = 0;
        // The smallest share of the affected ports in use, as of the last
        // pass over them (`a_len` of them): another pass is needed only when
        // a port became affected or a flow crossing one froze since.
        let (mut low_a, mut a_len, mut a_moved) = (f64::INFINITY, 0, true);
        while left > 0 {
            if a_moved || a_ports.len() != a_len {
                // The affected ports in use (kept in the pass that reads
                // them), and the smallest share.
                low_a = f64::INFINITY;
                a_ports.retain(|&p| {
                    let used = count[p as usize] > 0;
                    if used {
                        let k = share_of(residual, count, p as usize);
                        latest[p as usize] = k;
                        low_a = lower(low_a, k);
                    }
                    used
                });
                (a_len, a_moved) = (a_ports.len(), false);
            }
            // The watched caps not frozen, and the smallest of all.
            let mut low = low_a;
            watched.retain(|&i| {
                let unfrozen = !frozen[i as usize];
                if unfrozen {
                    low = lower(low, flows[i as usize].cap_bps);
                }
                unfrozen
            });
            // Round q: its frozen flows and saturated ports in the log.
            let (s, t, fq, sq) = match past.rounds.get(q) {
                Some(r) => {
                    let next = past.rounds.get(q + 1);
                    let fq = r.first as usize..next.map_or(past.froze.len(), |n| n.first as usize);
                    let sq = r.sat as usize..next.map_or(past.sat.len(), |n| n.sat as usize);
                    (r.share, r.share + r.share * 1e-12 + 1e-9, fq, sq)
                }
                None => (f64::INFINITY, f64::INFINITY, 0..0, 0..0),
            };
            // Its saturated ports still unaffected, and their shares.
            let mut u = f64::INFINITY;
            pq.clear();
            for &p in &past.sat[sq] {
                if !in_a[p as usize] && count[p as usize] > 0 {
                    let k = share_of(residual, count, p as usize);
                    latest[p as usize] = k;
                    pq.push(p);
                    u = lower(u, k);
                }
            }
            // Unaffected flows of round q, not frozen yet.
            cand.clear();
            for &j in &past.froze[fq] {
                let i = now_of[j as usize];
                if i != NONE && !frozen[i as usize] && !affected[i as usize] {
                    cand.push(i);
                    if flows[i as usize].cap_bps <= t {
                        u = lower(u, flows[i as usize].cap_bps);
                    }
                }
            }
            let share = lower(low, u);
            if u == f64::INFINITY && low > t && q < past.rounds.len() {
                // Round q is gone: nothing unaffected is left in it.
                for &i in cand.iter() {
                    affect(i, affected, watched, in_a, a_ports);
                }
                q += 1;
                continue;
            }
            if share == f64::INFINITY {
                break; // flows without ports or caps: nothing bounds them
            }
            let tol = share * 1e-12 + 1e-9;
            let again = share.to_bits() == s.to_bits();
            if !again && share + tol > t {
                past.valid = false; // the slots' ports are this call's
                return false;
            }
            saturated.clear();
            for &p in a_ports.iter() {
                if latest[p as usize] <= share + tol {
                    saturated.push(p);
                }
            }
            for &p in pq.iter() {
                if latest[p as usize] <= share + tol {
                    saturated.push(p);
                }
            }
            freezing.clear();
            for &p in saturated.iter() {
                let p = p as usize;
                freezing.extend(past.at_port[p].iter().map(|&s| at_slot[s as usize]));
            }
            for &i in watched.iter() {
                if flows[i as usize].cap_bps <= share + tol {
                    freezing.push(i);
                }
            }
            for &i in cand.iter() {
                if flows[i as usize].cap_bps <= share + tol {
                    freezing.push(i);
                }
            }
            let r = rounds.len() as u32;
            rounds.push(Round {
                level,
                share,
                first: froze.len() as u32,
                sat: sat.len() as u32,
            });
            sat.extend_from_slice(saturated);
            for &i in freezing.iter() {
                if frozen[i as usize] {
                    continue;
                }
                frozen[i as usize] = true;
                rates[i as usize] = share;
                round_of[i as usize] = r;
                froze.push(i);
                left -= 1;
                for &p in flows[i as usize].ports {
                    residual[p as usize] -= share;
                    count[p as usize] -= 1;
                    a_moved |= in_a[p as usize];
                }
                // Frozen as last call (in round q, at its share) or affected.
                let same = again && prior[i as usize] == q as u32;
                if !(same || affected[i as usize]) {
                    affect(i, affected, watched, in_a, a_ports);
                }
            }
            if again {
                for &i in cand.iter() {
                    if !frozen[i as usize] && !affected[i as usize] {
                        affect(i, affected, watched, in_a, a_ports);
                    }
                }
                q += 1;
            }
        }
        if same_flows {
            let past = &mut self.past;
            for (i, pf) in past.flows.iter_mut().enumerate() {
                pf.cap_bps = flows[i].cap_bps;
                pf.round = self.round_of[i];
            }
            std::mem::swap(&mut past.rounds, &mut self.rounds);
            std::mem::swap(&mut past.froze, &mut self.froze);
            std::mem::swap(&mut past.sat, &mut self.sat);
        } else {
            self.keep_log(flows, keys, capacity_bps, true);
        }
        true
    }

    /// Whether no flow whose cap alone changed reaches its cap, old or
    /// new, in a round of last call before it froze (then each round is
    /// the same: its share, from the same port or cap, freezes the same
    /// flows). The same flows as last call (`flows[i]` is its `i`th flow).
    pub(super) fn caps_unreached(&self, flows: &[FlowDemand]) -> bool {
        let past = &self.past;
        self.recapped.iter().all(|&(i, was)| {
            let now = flows[i as usize].cap_bps;
            let last = match past.flows[i as usize].round {
                NONE => past.rounds.len(),
                r => r as usize + 1,
            };
            past.rounds[..last].iter().all(|r| {
                let t = r.share + r.share * 1e-12 + 1e-9;
                was > t && now > t
            })
        })
    }

    /// [`MaxMin::plan_replay`] for [`MaxMin::replay_affected`], in one pass
    /// over the flows: also each unchanged flow's round last call (`prior`),
    /// each port's flows (the log's [`Past::at_port`], changed where flows
    /// came, went or changed ports; a flow keeps its slot while it keeps its
    /// key) and their count (`count`), and marks affected the ports of the
    /// flows gone or changed (`in_a`, `a_ports`). False: a flow not of
    /// `level`, keys out of order or capacities changed (found after the
    /// ports' flows began to change, the log is dropped: the call is
    /// water-filled whole, and its [`MaxMin::keep_log`] has the ports'
    /// flows rebuilt at the next match).
    pub(super) fn match_flows(
        &mut self,
        flows: &[FlowDemand],
        keys: &[u64],
        capacity_bps: &[f64],
        level: u16,
    ) -> bool {
        let (np, n) = (capacity_bps.len(), flows.len());
        let MaxMin {
            count,
            prior,
            in_a,
            a_ports,
            past,
            now_of,
            at_slot,
            slot_now,
            pending,
            recapped,
            ports_kept,
            ..
        } = self;
        if !past.valid || !same_bits(&past.capacity_bps, capacity_bps) {
            return false;
        }
        if !past.indexed {
            past.index_ports(np);
        }
        prior.clear();
        prior.resize(n, NONE);
        in_a.clear();
        in_a.resize(np, false);
        a_ports.clear();
        now_of.clear();
        now_of.resize(past.flows.len(), NONE);
        slot_now.clear();
        slot_now.resize(n, NONE);
        at_slot.resize(past.slots as usize, NONE);
        pending.clear();
        recapped.clear();
        let Past {
            flows: past_flows,
            ports: past_ports,
            at_port,
            free,
            slots,
            valid,
            ..
        } = past;
        let mut j = 0;
        for (i, (f, &key)) in flows.iter().zip(keys).enumerate() {
            if (i > 0 && keys[i - 1] >= key) || f.level() != level {
                *valid = false; // the slots' ports may be this call's
                return false;
            }
            while j < past_flows.len() && past_flows[j].key < key {
                retire(at_port, past_ports, past_flows[j].slot, in_a, a_ports, free); // gone
                j += 1;
            }
            let slot = match past_flows.get(j).filter(|pf| pf.key == key) {
                Some(pf) => {
                    j += 1;
                    let was = &mut past_ports[pf.slot as usize];
                    // Element by element: routes are a few ports long (not
                    // compared when the caller vouches for them).
                    if *ports_kept
                        || (was.len() == f.ports.len()
                            && was.iter().zip(f.ports).all(|(a, b)| a == b))
                    {
                        now_of[j - 1] = i as u32;
                        prior[i] = pf.round;
                        if pf.cap_bps.to_bits() != f.cap_bps.to_bits() {
                            recapped.push((i as u32, pf.cap_bps));
                        }
                    } else {
                        leave(at_port, was, pf.slot, in_a, a_ports); // changed
                        was.clear();
                        was.extend_from_slice(f.ports);
                        join(at_port, f.ports, pf.slot);
                        pending.push(i as u32);
                    }
                    pf.slot
                }
                None => {
                    let slot = free.pop().unwrap_or_else(|| {
                        *slots += 1;
                        at_slot.push(NONE);
                        past_ports.push(Vec::new());
                        *slots - 1
                    });
                    let to = &mut past_ports[slot as usize];
                    to.clear();
                    to.extend_from_slice(f.ports);
                    join(at_port, f.ports, slot);
                    pending.push(i as u32);
                    slot
                }
            };
            at_slot[slot as usize] = i as u32;
            slot_now[i] = slot;
        }
        for pf in &past_flows[j..] {
            retire(at_port, past_ports, pf.slot, in_a, a_ports, free); // gone
        }
        count.clear();
        count.extend(at_port.iter().map(|v| v.len() as u32));
        true
    }

    /// This call's log (`rounds`, `froze`, `sat`, `round_of`), kept for
    /// the next keyed call. `indexed`: the flows' slots are `slot_now`, and
    /// the slots' ports and the ports' flows are kept
    /// ([`MaxMin::match_flows`]); else flow `i` takes slot `i` and its ports
    /// are copied, and the ports' flows are rebuilt when next needed.
    pub(super) fn keep_log(
        &mut self,
        flows: &[FlowDemand],
        keys: &[u64],
        capacity_bps: &[f64],
        indexed: bool,
    ) {
        let past = &mut self.past;
        // After a match ([`MaxMin::match_flows`]) the keys are increasing,
        // the capacities those logged and every flow of the level logged.
        past.valid = indexed || keys.windows(2).all(|w| w[0] < w[1]);
        past.indexed = indexed;
        if !past.valid {
            return;
        }
        if !indexed {
            past.capacity_bps.clear();
            past.capacity_bps.extend_from_slice(capacity_bps);
            past.ports.resize_with(flows.len(), Vec::new);
            for (to, f) in past.ports.iter_mut().zip(flows) {
                to.clear();
                to.extend_from_slice(f.ports);
            }
            past.slots = flows.len() as u32;
            past.level = flows.first().map(|f| f.level());
            if flows.iter().any(|f| past.level != Some(f.level())) {
                past.level = None;
            }
        }
        past.flows.clear();
        for (i, f) in flows.iter().enumerate() {
            past.flows.push(PastFlow {
                key: keys[i],
                level: f.level(),
                cap_bps: f.cap_bps,
                round: self.round_of[i],
                slot: if indexed { self.slot_now[i] } else { i as u32 },
            });
        }
        std::mem::swap(&mut past.rounds, &mut self.rounds);
        std::mem::swap(&mut past.froze, &mut self.froze);
        std::mem::swap(&mut past.sat, &mut self.sat);
    }
}

impl Past {
    /// Each port's flows from the slots' ports, after a log whose flow
    /// `i` took slot `i` (every slot held).
    fn index_ports(&mut self, np: usize) {
        self.at_port.resize_with(np, Vec::new);
        for v in &mut self.at_port {
            v.clear();
        }
        self.free.clear();
        for pf in &self.flows {
            join(&mut self.at_port, &self.ports[pf.slot as usize], pf.slot);
        }
        self.indexed = true;
    }
}

/// Whether `a` and `b` hold the same values bit for bit (every pair
/// compared, without a branch each: capacities are a few hundred).
fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .fold(true, |same, (x, y)| same & (x.to_bits() == y.to_bits()))
}

/// `slot` joins the flows of each of `ports`.
fn join(at_port: &mut [Vec<u32>], ports: &[u32], slot: u32) {
    for &p in ports {
        at_port[p as usize].push(slot);
    }
}

/// A gone flow's `slot` leaves the flows of its ports and is freed.
fn retire(
    at_port: &mut [Vec<u32>],
    past_ports: &[Vec<u32>],
    slot: u32,
    in_a: &mut [bool],
    a_ports: &mut Vec<u32>,
    free: &mut Vec<u32>,
) {
    leave(at_port, &past_ports[slot as usize], slot, in_a, a_ports);
    free.push(slot);
}

/// `slot` leaves the flows of each of `ports`, which become affected.
fn leave(
    at_port: &mut [Vec<u32>],
    ports: &[u32],
    slot: u32,
    in_a: &mut [bool],
    a_ports: &mut Vec<u32>,
) {
    for &p in ports {
        let on = &mut at_port[p as usize];
        let k = on
            .iter()
            .position(|&s| s == slot)
            .expect("a flow's slot at its port");
        on.swap_remove(k);
        if !in_a[p as usize] {
            in_a[p as usize] = true;
            a_ports.push(p);
        }
    }
}

//! Max-min fair rates with strict priority between classes: classes are
//! served from 0 (highest) upwards, each class water-filling what the
//! classes above it left (progressive filling, Bertsekas & Gallager,
//! *Data Networks*, §6.5.2). A flow may also be served ahead of its class
//! (before every flow of its class and of lower ones) and may have a rate
//! cap; a flow without either is allocated exactly as before they existed.

/// A flow as the allocator sees it: its class and the ports it crosses.
pub struct FlowDemand<'a> {
    /// Priority class, 0 highest.
    pub class: u8,
    /// Ports it crosses; it takes its rate on every one of them.
    pub ports: &'a [u32],
    /// Served just before its class (after every higher class), as a flow
    /// that does not yield to its own class would be.
    pub ahead: bool,
    /// Its rate never exceeds this (`f64::INFINITY`: no cap).
    pub cap_bps: f64,
}

impl<'a> FlowDemand<'a> {
    /// A flow of `class` over `ports`, in its class, without a cap.
    pub fn new(class: u8, ports: &'a [u32]) -> FlowDemand<'a> {
        FlowDemand {
            class,
            ports,
            ahead: false,
            cap_bps: f64::INFINITY,
        }
    }

    fn level(&self) -> u16 {
        level(self.class, self.ahead)
    }
}

/// The order in which the allocator serves flows of `class`, `ahead` of it
/// or not: lower levels first.
pub fn level(class: u8, ahead: bool) -> u16 {
    2 * class as u16 + u16::from(!ahead)
}

/// A port's fair share as a heap key, smallest first: the share's bits in
/// an order that sorts like the value (as `f64::total_cmp`), then the port.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Key(std::cmp::Reverse<u128>);

impl Key {
    fn new(share: f64, port: u32) -> Key {
        let b = share.to_bits();
        let o = if b >> 63 == 1 { !b } else { b | 1 << 63 };
        Key(std::cmp::Reverse((o as u128) << 32 | port as u128))
    }
    fn share(&self) -> f64 {
        let o = (self.0 .0 >> 32) as u64;
        f64::from_bits(if o >> 63 == 1 { o & !(1 << 63) } else { !o })
    }
    fn port(&self) -> usize {
        self.0 .0 as u32 as usize
    }
}

/// Returns the rate of every flow in bits per second. `capacity_bps[p]` is
/// the capacity of port `p`. Every flow with at least one port gets a rate;
/// a flow whose ports are all full gets zero. A capped flow freezes at its
/// cap once the water level reaches it, like a flow crossing a port of its
/// own of that capacity.
///
/// Each level (class, and ahead of it or not) is water-filled in rounds:
/// the round's share is the smallest `residual / active flows` over the
/// ports (or an active flow's cap, if smaller); every active flow crossing
/// a port saturated at that share (within a relative 1e-12 plus 1e-9 bit/s)
/// or capped at it freezes at the share, and leaves the ports' residual
/// and counts. Counts are kept as flows freeze, and the ports' shares sit
/// in a heap: a freeze only raises the shares of the ports it leaves
/// (their share was above the round's), so a port is pushed again when its
/// stale entry comes to the top (or at once, should rounding ever lower
/// it). A round thus costs what changed in it, not every active flow.
/// When a level touches few ports ([`SCAN_PORTS`]), a plain scan of the
/// ports still in use replaces the heap: it finds the same share and the
/// same saturated ports each round (the heap's top, once settled, is the
/// smallest share now), so the same rates to the bit, without the heap's
/// stale entries. The scan keeps the smallest share and its port from
/// round to round: a round's one pass drops the saturated ports and finds
/// the smallest of the others, the ports a freeze changed update it, and
/// only when its own port changed is it found again by a full pass (a
/// round whose share is a cap below it needs no pass). [`MaxMin::rates_keyed`]
/// also replays the rounds of the last call that no change touched.
pub fn max_min_rates(flows: &[FlowDemand], capacity_bps: &[f64]) -> Vec<f64> {
    let mut rates = Vec::new();
    MaxMin::default().rates(flows, capacity_bps, &mut rates);
    rates
}

/// A level touching at most this many ports is water-filled by scanning
/// them (below this, a scan costs less than the heap's upkeep; measured
/// in docs/performance.md, "Flow backend against the packet backend").
pub const SCAN_PORTS: usize = 256;

/// Keyed calls with fewer flows than this water-fill them whole: below it,
/// matching the flows to the last call's and keeping the log cost more
/// than the rounds replayed save (instruction counts in
/// docs/performance.md, "Flow backend against the packet backend": 8 flows
/// a call on the default star, 20 on the 30 % leaf-spine, 58 at 60 %).
pub const REPLAY_FLOWS: usize = 16;

/// [`max_min_rates`] with its working buffers kept between calls (a
/// backend reallocates thousands of times over the same ports): the same
/// rounds in the same order, so the same rates to the bit.
pub struct MaxMin {
    /// Levels touching at most this many ports are scanned, not heaped.
    pub scan_ports: usize,
    /// Keyed calls with fewer flows than this are water-filled whole.
    pub replay_flows: usize,
    /// Keyed calls of one level replay by affected ports (else only the
    /// prefix of rounds no change touches).
    pub replay_ports: bool,
    live: Vec<u32>,
    residual: Vec<f64>,
    count: Vec<u32>,
    frozen: Vec<bool>,
    start: Vec<u32>,
    fill: Vec<u32>,
    latest: Vec<f64>,
    list: Vec<u32>,
    dirty: Vec<u32>,
    is_dirty: Vec<bool>,
    touched: Vec<u32>,
    saturated: Vec<u32>,
    freezing: Vec<u32>,
    order: Vec<u32>,
    caps: Vec<u32>,
    heap: Vec<Key>,
    /// The last keyed allocation, for [`MaxMin::rates_keyed`] to replay.
    past: Past,
    /// The log being written: rounds, the flows each froze, each flow's round.
    rounds: Vec<Round>,
    froze: Vec<u32>,
    sat: Vec<u32>,
    round_of: Vec<u32>,
    /// Replay: each past flow's index now ([`NONE`]: gone or changed), and
    /// the flows that are new or changed.
    now_of: Vec<u32>,
    pending: Vec<u32>,
    /// Flows whose cap alone changed, with their past cap.
    recapped: Vec<(u32, f64)>,
    /// Replay by affected ports ([`MaxMin::replay_affected`]): each flow's
    /// round last call, whether it is affected, its cap watched; each port
    /// affected or not, and the affected ones.
    prior: Vec<u32>,
    affected: Vec<bool>,
    watched: Vec<u32>,
    in_a: Vec<bool>,
    a_ports: Vec<u32>,
}

/// No round, or no flow.
const NONE: u32 = u32::MAX;

/// One round of a level's water-filling: its share, and where its frozen
/// flows start in the log's list.
#[derive(Clone, Copy)]
struct Round {
    level: u16,
    share: f64,
    first: u32,
    /// Where the ports it saturated start in the log's list.
    sat: u32,
}

/// One flow of the last keyed allocation.
#[derive(Clone, Copy)]
struct PastFlow {
    key: u64,
    level: u16,
    cap_bps: f64,
    /// Its ports in [`Past::ports`].
    ports: (u32, u32),
    /// The round it froze in ([`NONE`]: never).
    round: u32,
}

/// The last keyed allocation: its capacities, flows, rounds and the flows
/// each round froze (indices into `flows`).
#[derive(Default)]
struct Past {
    valid: bool,
    capacity_bps: Vec<f64>,
    flows: Vec<PastFlow>,
    ports: Vec<u32>,
    rounds: Vec<Round>,
    froze: Vec<u32>,
    sat: Vec<u32>,
    /// The level of every flow, when they were all of one.
    level: Option<u16>,
}

impl Default for MaxMin {
    fn default() -> MaxMin {
        MaxMin {
            scan_ports: SCAN_PORTS,
            replay_flows: REPLAY_FLOWS,
            replay_ports: true,
            live: Vec::new(),
            residual: Vec::new(),
            count: Vec::new(),
            frozen: Vec::new(),
            start: Vec::new(),
            fill: Vec::new(),
            latest: Vec::new(),
            list: Vec::new(),
            dirty: Vec::new(),
            is_dirty: Vec::new(),
            touched: Vec::new(),
            saturated: Vec::new(),
            freezing: Vec::new(),
            order: Vec::new(),
            caps: Vec::new(),
            heap: Vec::new(),
            past: Past::default(),
            rounds: Vec::new(),
            froze: Vec::new(),
            sat: Vec::new(),
            round_of: Vec::new(),
            now_of: Vec::new(),
            pending: Vec::new(),
            recapped: Vec::new(),
            prior: Vec::new(),
            affected: Vec::new(),
            watched: Vec::new(),
            in_a: Vec::new(),
            a_ports: Vec::new(),
        }
    }
}

impl MaxMin {
    /// The rates in a new vector.
    pub fn rates_vec(&mut self, flows: &[FlowDemand], capacity_bps: &[f64]) -> Vec<f64> {
        let mut rates = Vec::new();
        self.rates(flows, capacity_bps, &mut rates);
        rates
    }

    /// Writes the rate of every flow of `flows` to `rates` (as [`max_min_rates`]).
    pub fn rates(&mut self, flows: &[FlowDemand], capacity_bps: &[f64], rates: &mut Vec<f64>) {
        self.past.valid = false;
        self.solve(flows, None, capacity_bps, rates);
    }

    /// [`MaxMin::rates`] for flows named by `keys` (one per flow, strictly
    /// increasing, a flow keeping its key from call to call): the rounds of
    /// the last keyed call that no change touches are replayed, not
    /// searched. A round is replayed while every flow gone or changed since
    /// froze after it, and every flow new or changed would not freeze in it
    /// (each of its ports' shares, counting it, and its cap above the
    /// round's share and tolerance): then the round's share is the same
    /// smallest share, it saturates the same ports and reaches the same caps,
    /// so it freezes the same flows at the same share. The first round that
    /// fails the test, and every later one, is water-filled as in
    /// [`MaxMin::rates`] from the replayed state: the same rounds, the same
    /// rates to the bit. Keys out of order, or capacities changed, replay
    /// nothing. When every flow, now and last call, is of one level (one
    /// class, none ahead of it), the replay goes past the first change:
    /// every later round that no change reaches is kept too, from the ports
    /// the changes reach round by round ([`MaxMin::replay_ports`] off: the
    /// prefix only).
    pub fn rates_keyed(
        &mut self,
        flows: &[FlowDemand],
        keys: &[u64],
        capacity_bps: &[f64],
        rates: &mut Vec<f64>,
    ) {
        assert_eq!(flows.len(), keys.len(), "one key per flow");
        if flows.len() < self.replay_flows {
            self.rates(flows, capacity_bps, rates);
        } else if !(self.replay_ports && self.replay_affected(flows, keys, capacity_bps, rates)) {
            self.solve(flows, Some(keys), capacity_bps, rates);
        }
    }

    /// Matches `flows` to the last keyed call's: the flows new or changed
    /// (`pending`), each unchanged past flow's index now (`now_of`), and
    /// the first round that froze a flow gone or changed (the replay stops
    /// there). `None`: nothing can be replayed.
    fn plan_replay(
        &mut self,
        flows: &[FlowDemand],
        keys: &[u64],
        capacity_bps: &[f64],
    ) -> Option<u32> {
        let past = &self.past;
        let same_capacity = past.capacity_bps.len() == capacity_bps.len()
            && past
                .capacity_bps
                .iter()
                .zip(capacity_bps)
                .all(|(a, b)| a.to_bits() == b.to_bits());
        if !past.valid || !same_capacity {
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
                    let ports = &past.ports[pf.ports.0 as usize..pf.ports.1 as usize];
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
    /// false, having kept no log, and the call is water-filled by
    /// [`MaxMin::solve`].
    fn replay_affected(
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
            start,
            fill,
            list,
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
        // Each port's flows: `fill[p]` of them from `start[p]` in `list`
        // (filled from the end of its range down).
        start.resize(np, 0);
        fill.resize(np, 0);
        let mut off = 0u32;
        for p in 0..np {
            off += count[p];
            start[p] = off;
            fill[p] = count[p];
        }
        list.clear();
        list.resize(off as usize, 0);
        for (i, f) in flows.iter().enumerate() {
            for &p in f.ports {
                let at = &mut start[p as usize];
                *at -= 1;
                list[*at as usize] = i as u32;
            }
        }
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
        while left > 0 {
            a_ports.retain(|&p| count[p as usize] > 0);
            watched.retain(|&i| !frozen[i as usize]);
            let mut low = f64::INFINITY;
            for &p in a_ports.iter() {
                let k = share_of(residual, count, p as usize);
                latest[p as usize] = k;
                low = lower(low, k);
            }
            for &i in watched.iter() {
                low = lower(low, flows[i as usize].cap_bps);
            }
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
                freezing.extend_from_slice(&list[start[p] as usize..(start[p] + fill[p]) as usize]);
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
            self.keep_log(flows, keys, capacity_bps);
        }
        true
    }

    /// Whether no flow whose cap alone changed reaches its cap, old or
    /// new, in a round of last call before it froze (then each round is
    /// the same: its share, from the same port or cap, freezes the same
    /// flows). The same flows as last call (`flows[i]` is its `i`th flow).
    fn caps_unreached(&self, flows: &[FlowDemand]) -> bool {
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
    /// over the flows' ports: also counts each port's flows (`count`), each
    /// unchanged flow's round last call (`prior`), and marks affected the
    /// ports of the flows gone or changed (`in_a`, `a_ports`). False: a
    /// flow not of `level`, keys out of order or capacities changed.
    fn match_flows(
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
            pending,
            recapped,
            ..
        } = self;
        let same_capacity = past.capacity_bps.len() == np
            && past
                .capacity_bps
                .iter()
                .zip(capacity_bps)
                .all(|(a, b)| a.to_bits() == b.to_bits());
        if !past.valid || !same_capacity {
            return false;
        }
        count.clear();
        count.resize(np, 0);
        prior.clear();
        prior.resize(n, NONE);
        in_a.clear();
        in_a.resize(np, false);
        a_ports.clear();
        now_of.clear();
        now_of.resize(past.flows.len(), NONE);
        pending.clear();
        recapped.clear();
        let mut mark_past = |pf: &PastFlow| {
            for &p in &past.ports[pf.ports.0 as usize..pf.ports.1 as usize] {
                if !in_a[p as usize] {
                    in_a[p as usize] = true;
                    a_ports.push(p);
                }
            }
        };
        let mut j = 0;
        for (i, (f, &key)) in flows.iter().zip(keys).enumerate() {
            if (i > 0 && keys[i - 1] >= key) || f.level() != level {
                return false;
            }
            while j < past.flows.len() && past.flows[j].key < key {
                mark_past(&past.flows[j]); // gone
                j += 1;
            }
            let pf = past.flows.get(j).filter(|pf| pf.key == key);
            let was = pf.map_or(&[][..], |pf| {
                &past.ports[pf.ports.0 as usize..pf.ports.1 as usize]
            });
            let mut same = pf.is_some() && was.len() == f.ports.len();
            for (k, &p) in f.ports.iter().enumerate() {
                count[p as usize] += 1;
                same = same && was[k] == p;
            }
            match pf {
                Some(pf) if same => {
                    now_of[j] = i as u32;
                    prior[i] = pf.round;
                    if pf.cap_bps.to_bits() != f.cap_bps.to_bits() {
                        recapped.push((i as u32, pf.cap_bps));
                    }
                }
                Some(pf) => {
                    mark_past(pf); // changed
                    pending.push(i as u32);
                }
                None => pending.push(i as u32),
            }
            if pf.is_some() {
                j += 1;
            }
        }
        for pf in &past.flows[j..] {
            mark_past(pf);
        }
        true
    }

    fn solve(
        &mut self,
        flows: &[FlowDemand],
        keys: Option<&[u64]>,
        capacity_bps: &[f64],
        rates: &mut Vec<f64>,
    ) {
        use std::collections::BinaryHeap;
        let mut replay = keys.and_then(|k| self.plan_replay(flows, k, capacity_bps));
        let np = capacity_bps.len();
        rates.clear();
        rates.resize(flows.len(), 0.0);
        let MaxMin {
            scan_ports,
            replay_flows: _,
            replay_ports: _,
            live,
            residual,
            count,
            frozen,
            start,
            fill,
            latest,
            list,
            dirty,
            is_dirty,
            touched,
            saturated,
            freezing,
            order,
            caps,
            heap: heap_buf,
            past,
            rounds,
            froze,
            sat,
            round_of,
            now_of,
            pending,
            recapped,
            ..
        } = self;
        residual.clear();
        residual.extend_from_slice(capacity_bps);
        count.clear();
        count.resize(np, 0);
        frozen.clear();
        frozen.resize(flows.len(), false);
        start.resize(np, 0);
        fill.resize(np, 0);
        latest.resize(np, 0.0);
        is_dirty.clear();
        is_dirty.resize(np, false);
        dirty.clear();
        // Keyed: this call's rounds are logged for the next one.
        let log = keys.is_some();
        rounds.clear();
        froze.clear();
        sat.clear();
        round_of.clear();
        if log {
            round_of.resize(flows.len(), NONE);
        }
        let share_of =
            |residual: &[f64], count: &[u32], p: usize| residual[p].max(0.0) / count[p] as f64;
        order.clear();
        order.extend(0..flows.len() as u32);
        order.sort_by_key(|&i| flows[i as usize].level());
        let mut q = 0; // the next past round to replay
        for group in order.chunk_by(|&a, &b| flows[a as usize].level() == flows[b as usize].level())
        {
            let at = flows[group[0] as usize].level();
            touched.clear();
            for &i in group {
                for &p in flows[i as usize].ports {
                    if count[p as usize] == 0 {
                        touched.push(p);
                    }
                    count[p as usize] += 1;
                }
            }
            let mut left = group.len();
            if let Some(limit) = replay {
                while q < limit as usize && q < past.rounds.len() && past.rounds[q].level == at {
                    let share = past.rounds[q].share;
                    let tol = share * 1e-12 + 1e-9;
                    let joins = |i: u32| {
                        let f = &flows[i as usize];
                        f.level() == at
                            && (f.cap_bps <= share + tol
                                || f.ports
                                    .iter()
                                    .any(|&p| share_of(residual, count, p as usize) <= share + tol))
                    };
                    // A flow whose cap alone changed: the round is the same
                    // while neither cap is reached in it (it froze at a port).
                    let recap = |&(i, was): &(u32, f64)| {
                        flows[i as usize].level() == at
                            && !frozen[i as usize]
                            && (was <= share + tol || flows[i as usize].cap_bps <= share + tol)
                    };
                    if pending.iter().any(|&i| joins(i)) || recapped.iter().any(recap) {
                        break;
                    }
                    let end = past
                        .rounds
                        .get(q + 1)
                        .map_or(past.froze.len(), |r| r.first as usize);
                    let sat_end = past
                        .rounds
                        .get(q + 1)
                        .map_or(past.sat.len(), |r| r.sat as usize);
                    rounds.push(Round {
                        level: at,
                        share,
                        first: froze.len() as u32,
                        sat: sat.len() as u32,
                    });
                    sat.extend_from_slice(&past.sat[past.rounds[q].sat as usize..sat_end]);
                    for &j in &past.froze[past.rounds[q].first as usize..end] {
                        let i = now_of[j as usize] as usize;
                        frozen[i] = true;
                        rates[i] = share;
                        round_of[i] = (rounds.len() - 1) as u32;
                        froze.push(i as u32);
                        left -= 1;
                        for &p in flows[i].ports {
                            residual[p as usize] -= share;
                            count[p as usize] -= 1;
                        }
                    }
                    q += 1;
                }
                if left > 0 {
                    replay = None; // water-filled from here on
                }
            }
            if left == 0 {
                for &p in touched.iter() {
                    count[p as usize] = 0;
                }
                continue;
            }
            let mut off = 0u32;
            for &p in touched.iter() {
                start[p as usize] = off;
                fill[p as usize] = 0;
                off += count[p as usize];
            }
            list.clear();
            list.resize(off as usize, 0);
            for &i in group {
                if frozen[i as usize] {
                    continue;
                }
                for &p in flows[i as usize].ports {
                    let p = p as usize;
                    list[(start[p] + fill[p]) as usize] = i;
                    fill[p] += 1;
                }
            }
            let scan = touched.len() <= *scan_ports;
            live.clear();
            let mut heap_keys = std::mem::take(heap_buf);
            heap_keys.clear();
            if scan {
                live.extend(touched.iter().copied().filter(|&p| count[p as usize] > 0));
                for &p in live.iter() {
                    latest[p as usize] = share_of(residual, count, p as usize);
                }
            } else {
                heap_keys.extend(
                    touched
                        .iter()
                        .copied()
                        .filter(|&p| count[p as usize] > 0)
                        .map(|p| {
                            let k = share_of(residual, count, p as usize);
                            latest[p as usize] = k;
                            Key::new(k, p)
                        }),
                );
            }
            let mut heap = BinaryHeap::from(heap_keys);
            caps.clear();
            caps.extend(
                group
                    .iter()
                    .copied()
                    .filter(|&i| flows[i as usize].cap_bps < f64::INFINITY && !frozen[i as usize]),
            );
            caps.sort_by(|&a, &b| {
                flows[a as usize]
                    .cap_bps
                    .total_cmp(&flows[b as usize].cap_bps)
            });
            let mut next_cap = 0;
            // Pops the top entry unless it holds its port's share now (then
            // returns it); a port's stale latest entry is replaced by its share.
            let settle_top = |heap: &mut BinaryHeap<Key>,
                              latest: &mut [f64],
                              residual: &[f64],
                              count: &[u32]|
             -> Option<Option<f64>> {
                let k = heap.peek()?;
                let (key, p) = (k.share(), k.port());
                if count[p] == 0 {
                    heap.pop();
                    return Some(None);
                }
                let now = share_of(residual, count, p);
                if now.to_bits() == key.to_bits() {
                    return Some(Some(now));
                }
                heap.pop();
                if key.to_bits() == latest[p].to_bits() {
                    latest[p] = now;
                    heap.push(Key::new(now, p as u32));
                }
                Some(None)
            };
            // Scanning: the smallest share of the ports in use and its port
            // (`low`), kept from round to round while its port is untouched.
            let mut low = (f64::INFINITY, usize::MAX);
            let mut low_known = false;
            while left > 0 {
                let mut share = f64::INFINITY;
                if scan {
                    if !low_known {
                        live.retain(|&p| count[p as usize] > 0);
                        low = (f64::INFINITY, usize::MAX);
                        for &p in live.iter() {
                            let k = latest[p as usize];
                            if k.total_cmp(&low.0).is_lt() {
                                low = (k, p as usize);
                            }
                        }
                        low_known = true;
                    }
                    share = low.0;
                }
                while let Some(top) = settle_top(&mut heap, latest, residual, count) {
                    if let Some(k) = top {
                        share = k;
                        break;
                    }
                }
                while next_cap < caps.len() && frozen[caps[next_cap] as usize] {
                    next_cap += 1;
                }
                if let Some(&i) = caps.get(next_cap) {
                    share = share.min(flows[i as usize].cap_bps);
                }
                if share == f64::INFINITY {
                    break; // flows without ports or caps: nothing bounds them
                }
                let tol = share * 1e-12 + 1e-9;
                // Every port saturated at this share, then the flows crossing them.
                saturated.clear();
                if scan && low.0 <= share + tol {
                    // One pass: the saturated ports leave the ports in use
                    // (every flow crossing them freezes), the smallest share
                    // of the others is kept.
                    low = (f64::INFINITY, usize::MAX);
                    let (count, latest): (&[u32], &[f64]) = (count, latest);
                    live.retain(|&p| {
                        let k = latest[p as usize];
                        if count[p as usize] == 0 {
                            false
                        } else if k <= share + tol {
                            saturated.push(p);
                            false
                        } else {
                            if k.total_cmp(&low.0).is_lt() {
                                low = (k, p as usize);
                            }
                            true
                        }
                    });
                }
                while let Some(top) = settle_top(&mut heap, latest, residual, count) {
                    let Some(k) = top else { continue };
                    if k > share + tol {
                        break;
                    }
                    let p = heap.pop().expect("the top").port() as u32;
                    saturated.push(p);
                }
                freezing.clear();
                for &p in saturated.iter() {
                    let p = p as usize;
                    freezing
                        .extend_from_slice(&list[start[p] as usize..(start[p] + fill[p]) as usize]);
                }
                let mut c = next_cap;
                while c < caps.len() && flows[caps[c] as usize].cap_bps <= share + tol {
                    freezing.push(caps[c]);
                    c += 1;
                }
                if log {
                    rounds.push(Round {
                        level: at,
                        share,
                        first: froze.len() as u32,
                        sat: sat.len() as u32,
                    });
                    sat.extend_from_slice(saturated);
                }
                for &i in freezing.iter() {
                    if frozen[i as usize] {
                        continue;
                    }
                    frozen[i as usize] = true;
                    rates[i as usize] = share;
                    if log {
                        round_of[i as usize] = (rounds.len() - 1) as u32;
                        froze.push(i);
                    }
                    left -= 1;
                    for &p in flows[i as usize].ports {
                        residual[p as usize] -= share;
                        count[p as usize] -= 1;
                        if !is_dirty[p as usize] {
                            is_dirty[p as usize] = true;
                            dirty.push(p);
                        }
                    }
                }
                // Scanning: the shares of the ports left now. Heaped:
                // rounding could lower a share: push such a port at once.
                for &p in dirty.iter() {
                    let p = p as usize;
                    is_dirty[p] = false;
                    if scan && p == low.1 {
                        low_known = false; // the smallest share moved: a full scan
                    }
                    if count[p] > 0 {
                        let now = share_of(residual, count, p);
                        if scan {
                            latest[p] = now;
                            if now.total_cmp(&low.0).is_lt() {
                                low = (now, p);
                            }
                        } else if now < latest[p] {
                            latest[p] = now;
                            heap.push(Key::new(now, p as u32));
                        }
                    }
                }
                dirty.clear();
            }
            for &p in touched.iter() {
                count[p as usize] = 0;
            }
            *heap_buf = heap.into_vec();
        }
        if let Some(keys) = keys {
            self.keep_log(flows, keys, capacity_bps);
        }
    }

    /// This call's log (`rounds`, `froze`, `sat`, `round_of`), kept for
    /// the next keyed call.
    fn keep_log(&mut self, flows: &[FlowDemand], keys: &[u64], capacity_bps: &[f64]) {
        let past = &mut self.past;
        past.valid = keys.windows(2).all(|w| w[0] < w[1]);
        if !past.valid {
            return;
        }
        past.capacity_bps.clear();
        past.capacity_bps.extend_from_slice(capacity_bps);
        past.flows.clear();
        past.ports.clear();
        past.level = flows.first().map(|f| f.level());
        for (i, f) in flows.iter().enumerate() {
            let from = past.ports.len() as u32;
            past.ports.extend_from_slice(f.ports);
            if past.level != Some(f.level()) {
                past.level = None;
            }
            past.flows.push(PastFlow {
                key: keys[i],
                level: f.level(),
                cap_bps: f.cap_bps,
                ports: (from, past.ports.len() as u32),
                round: self.round_of[i],
            });
        }
        std::mem::swap(&mut past.rounds, &mut self.rounds);
        std::mem::swap(&mut past.froze, &mut self.froze);
        std::mem::swap(&mut past.sat, &mut self.sat);
    }
}

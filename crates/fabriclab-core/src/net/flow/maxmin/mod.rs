//! Max-min fair rates with strict priority between classes: classes are
//! served from 0 (highest) upwards, each class water-filling what the
//! classes above it left (progressive filling, Bertsekas & Gallager,
//! *Data Networks*, §6.5.2). A flow may also be served ahead of its class
//! (before every flow of its class and of lower ones) and may have a rate
//! cap; a flow without either is allocated exactly as before they existed.

mod replay;

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
    /// This call's caller vouches that no flow kept its key and changed
    /// its ports since the last keyed call ([`MaxMin::rates_keyed_ports_kept`]).
    ports_kept: bool,
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
    /// Replay by affected ports: each slot's flow now, and each flow's slot.
    at_slot: Vec<u32>,
    slot_now: Vec<u32>,
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
    /// The round it froze in ([`NONE`]: never).
    round: u32,
    /// Its place in [`Past::at_port`] and its ports in [`Past::ports`],
    /// kept while it keeps its key and ports.
    slot: u32,
}

/// The last keyed allocation: its capacities, flows, rounds and the flows
/// each round froze (indices into `flows`).
#[derive(Default)]
struct Past {
    valid: bool,
    capacity_bps: Vec<f64>,
    flows: Vec<PastFlow>,
    /// Each slot's ports.
    ports: Vec<Vec<u32>>,
    rounds: Vec<Round>,
    froze: Vec<u32>,
    sat: Vec<u32>,
    /// The level of every flow, when they were all of one.
    level: Option<u16>,
    /// Each port's flows, by slot, for [`MaxMin::replay_affected`]: kept
    /// from call to call and changed only where flows come, go or change
    /// ports; rebuilt from the slots' ports when `indexed` is false.
    at_port: Vec<Vec<u32>>,
    /// Slots no flow holds.
    free: Vec<u32>,
    /// Slots handed out, free ones included.
    slots: u32,
    indexed: bool,
}

impl Default for MaxMin {
    fn default() -> MaxMin {
        MaxMin {
            scan_ports: SCAN_PORTS,
            replay_flows: REPLAY_FLOWS,
            replay_ports: true,
            ports_kept: false,
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
            at_slot: Vec::new(),
            slot_now: Vec::new(),
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

    /// [`MaxMin::rates_keyed`] for a caller that knows that no flow kept its
    /// key and changed its ports since the last keyed call (a flow's ports
    /// change only with its key, or before a call of `rates_keyed`): a flow
    /// of a key the last call had is then taken to cross the same ports
    /// without comparing them. The same rates to the bit when that holds.
    pub fn rates_keyed_ports_kept(
        &mut self,
        flows: &[FlowDemand],
        keys: &[u64],
        capacity_bps: &[f64],
        rates: &mut Vec<f64>,
    ) {
        self.ports_kept = true;
        self.rates_keyed(flows, keys, capacity_bps, rates);
        self.ports_kept = false;
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
        // As slices for the rounds (their lengths are set for the call):
        // the compiler then keeps their addresses out of the loops.
        let (rates, residual, count, frozen, latest, round_of): (
            &mut [f64],
            &mut [f64],
            &mut [u32],
            &mut [bool],
            &mut [f64],
            &mut [u32],
        ) = (rates, residual, count, frozen, latest, round_of);
        let (start, fill, is_dirty): (&mut [u32], &mut [u32], &mut [bool]) =
            (start, fill, is_dirty);
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
            self.keep_log(flows, keys, capacity_bps, false);
        }
    }
}

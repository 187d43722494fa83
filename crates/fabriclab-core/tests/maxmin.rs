//! Max-min allocations computed by hand.
use fabriclab_core::net::flow::maxmin::{level, max_min_rates, FlowDemand, MaxMin};

fn rates(flows: &[(u8, Vec<u32>)], caps: &[f64]) -> Vec<f64> {
    let d: Vec<FlowDemand> = flows.iter().map(|(c, p)| FlowDemand::new(*c, p)).collect();
    max_min_rates(&d, caps)
}

/// A seeded xorshift64 stream: `rnd(n)` draws from 0..n.
fn xorshift(mut x: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    }
}

/// The same rates, bit for bit.
fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The allocator both ways: scanning the ports in use, and with a heap
/// (`scan_ports` 0).
fn both_ways() -> [(&'static str, MaxMin); 2] {
    let mut heaped = MaxMin::default();
    heaped.scan_ports = 0;
    [("scanned", MaxMin::default()), ("heaped", heaped)]
}

/// Each way's rates for `demands` are `want`, bit for bit.
fn assert_both_ways(
    ways: &mut [(&'static str, MaxMin); 2],
    demands: &[FlowDemand],
    caps: &[f64],
    want: &[f64],
    case: u32,
) {
    let mut out = Vec::new();
    for (way, m) in ways.iter_mut() {
        // Stale values in the buffer: every rate must be written, not left over
        // from the other way's call.
        out.clear();
        out.resize(demands.len(), f64::NAN);
        m.rates(demands, caps, &mut out);
        assert!(
            same_bits(&out, want),
            "case {case}, {way}: {out:?} != {want:?}"
        );
    }
}

fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-6, "{a:?} != {b:?}");
    }
}

#[test]
fn equal_split_on_one_link() {
    close(
        &rates(&[(0, vec![0]), (0, vec![0]), (0, vec![0])], &[9.0]),
        &[3.0, 3.0, 3.0],
    );
}

#[test]
fn classic_two_link_example() {
    // f1 on A (10); f2 on A and B (4); f3 on B. B saturates first at 2 each,
    // then f1 takes what A has left: 10 - 2 = 8.
    close(
        &rates(&[(0, vec![0]), (0, vec![0, 1]), (0, vec![1])], &[10.0, 4.0]),
        &[8.0, 2.0, 2.0],
    );
}

#[test]
fn three_level_water_filling() {
    // Link 0 (cap 12): f0, f1, f2. Link 1 (cap 3): f1. Link 2 (cap 5): f2, f3.
    // f1 limited to 3 by link 1; f2, f3 share link 2 at 2.5; f0 gets 12-3-2.5 = 6.5.
    close(
        &rates(
            &[(0, vec![0]), (0, vec![0, 1]), (0, vec![0, 2]), (0, vec![2])],
            &[12.0, 3.0, 5.0],
        ),
        &[6.5, 3.0, 2.5, 2.5],
    );
}

#[test]
fn strict_priority_between_classes() {
    // High class takes the whole link; the low class gets nothing.
    close(&rates(&[(0, vec![0]), (1, vec![0])], &[10.0]), &[10.0, 0.0]);
    // High flow limited to 3 elsewhere: the low flow gets the remaining 7.
    close(
        &rates(&[(0, vec![0, 1]), (1, vec![0])], &[10.0, 3.0]),
        &[3.0, 7.0],
    );
    // Two low flows share what two high flows leave: high 2 + 2 on link 1 (cap 4)
    // crossing link 0 (cap 10); lows split 10 - 4 = 6 as 3 and 3.
    close(
        &rates(
            &[(0, vec![0, 1]), (0, vec![0, 1]), (2, vec![0]), (2, vec![0])],
            &[10.0, 4.0],
        ),
        &[2.0, 2.0, 3.0, 3.0],
    );
}

#[test]
fn a_cap_freezes_its_flow_and_the_others_take_the_rest() {
    let d = |cap: f64, ports: &'static [u32]| FlowDemand {
        cap_bps: cap,
        ..FlowDemand::new(0, ports)
    };
    // Three flows on one link of 9: one capped at 1, the others split 8.
    close(
        &max_min_rates(
            &[d(1.0, &[0]), d(f64::INFINITY, &[0]), d(f64::INFINITY, &[0])],
            &[9.0],
        ),
        &[1.0, 4.0, 4.0],
    );
    // A cap above the fair share changes nothing.
    close(
        &max_min_rates(&[d(5.0, &[0]), d(f64::INFINITY, &[0])], &[9.0]),
        &[4.5, 4.5],
    );
    // A cap equal to the fair share: both at it.
    close(
        &max_min_rates(&[d(4.5, &[0]), d(f64::INFINITY, &[0])], &[9.0]),
        &[4.5, 4.5],
    );
}

#[test]
fn a_flow_ahead_of_its_class_comes_before_it_but_after_higher_classes() {
    let ahead = |class: u8, ports: &'static [u32], cap: f64| FlowDemand {
        ahead: true,
        cap_bps: cap,
        ..FlowDemand::new(class, ports)
    };
    // Link 0 (10): class 1 ahead, capped at 6, takes 6 before its class-1 peer
    // (4 left) and the class-2 flow (nothing left); a class-0 flow on link 1 only.
    close(
        &max_min_rates(
            &[
                ahead(1, &[0], 6.0),
                FlowDemand::new(1, &[0]),
                FlowDemand::new(2, &[0]),
                FlowDemand::new(0, &[1]),
            ],
            &[10.0, 10.0],
        ),
        &[6.0, 4.0, 0.0, 10.0],
    );
    // A higher class still comes first: class 0 takes link 0 whole.
    close(
        &max_min_rates(
            &[ahead(1, &[0], f64::INFINITY), FlowDemand::new(0, &[0])],
            &[10.0],
        ),
        &[0.0, 10.0],
    );
}

/// Progressive filling as first written: every round recounts every
/// active flow's ports. The allocator must give the same rates, bit for bit.
fn reference(flows: &[FlowDemand], capacity_bps: &[f64]) -> Vec<f64> {
    let mut rates = vec![0.0; flows.len()];
    let mut residual: Vec<f64> = capacity_bps.to_vec();
    let mut count = vec![0u32; capacity_bps.len()];
    let mut frozen = vec![true; flows.len()];
    let mut levels: Vec<u16> = flows.iter().map(|f| level(f.class, f.ahead)).collect();
    levels.sort_unstable();
    levels.dedup();
    let mut touched: Vec<u32> = Vec::new();
    let mut saturated = vec![false; capacity_bps.len()];
    for at in levels {
        let mut active: Vec<usize> = (0..flows.len())
            .filter(|&i| level(flows[i].class, flows[i].ahead) == at)
            .collect();
        for &i in &active {
            frozen[i] = false;
        }
        while !active.is_empty() {
            touched.clear();
            let mut cap = f64::INFINITY;
            for &i in &active {
                cap = cap.min(flows[i].cap_bps);
                for &p in flows[i].ports {
                    if count[p as usize] == 0 {
                        touched.push(p);
                    }
                    count[p as usize] += 1;
                }
            }
            let mut share = f64::INFINITY;
            for &p in &touched {
                share = share.min(residual[p as usize].max(0.0) / count[p as usize] as f64);
            }
            share = share.min(cap);
            // Freeze every flow that crosses a port saturated at this share,
            // or whose cap it reached.
            let tol = share * 1e-12 + 1e-9;
            for &p in &touched {
                saturated[p as usize] =
                    residual[p as usize].max(0.0) / count[p as usize] as f64 <= share + tol;
            }
            for &i in &active {
                if flows[i].cap_bps <= share + tol
                    || flows[i].ports.iter().any(|&p| saturated[p as usize])
                {
                    frozen[i] = true;
                    rates[i] = share;
                    for &p in flows[i].ports {
                        residual[p as usize] -= share;
                    }
                }
            }
            for &p in &touched {
                count[p as usize] = 0;
                saturated[p as usize] = false;
            }
            active.retain(|&i| !frozen[i]);
        }
    }
    rates
}

/// Both ways of finding a round's share (the ports scanned, or heaped), each
/// with its buffers reused from case to case, against plain progressive
/// filling, bit for bit.
#[test]
fn the_allocator_equals_plain_progressive_filling_bit_for_bit() {
    let mut ways = both_ways();
    let mut rnd = xorshift(0x9E37_79B9_7F4A_7C15);
    for case in 0..300 {
        let ports = 2 + rnd(40) as usize;
        let caps: Vec<f64> = (0..ports)
            .map(|_| [10e9, 40e9, 1e9 + rnd(1000) as f64 * 7e6, 0.0][rnd(4) as usize])
            .collect();
        let routes: Vec<Vec<u32>> = (0..1 + rnd(120))
            .map(|_| {
                let mut r: Vec<u32> = (0..1 + rnd(6)).map(|_| rnd(ports as u64) as u32).collect();
                if case % 2 == 0 {
                    r.sort_unstable();
                    r.dedup(); // a port twice counts twice, in both
                }
                r
            })
            .collect();
        let demands: Vec<FlowDemand> = routes
            .iter()
            .map(|r| FlowDemand {
                class: rnd(3) as u8,
                ports: r,
                ahead: rnd(4) == 0,
                cap_bps: if rnd(3) == 0 {
                    1e8 + rnd(100) as f64 * 1e8
                } else {
                    f64::INFINITY
                },
            })
            .collect();
        let (got, want) = (max_min_rates(&demands, &caps), reference(&demands, &caps));
        assert!(same_bits(&got, &want), "case {case}: {got:?} != {want:?}");
        assert_both_ways(&mut ways, &demands, &caps, &want, case);
    }
}

/// Ports that caps empty: most flows capped (a few caps, so several freeze in
/// one round), ports wide enough that caps bind before the ports fill, so a
/// port's last flow often leaves it in a round set by a cap rather than by a
/// saturated port, and the port holding the smallest share leaves the ports
/// in use mid-level. Scanned and heaped, against plain progressive filling,
/// bit for bit.
#[test]
fn ports_emptied_by_caps_mid_level_keep_the_rates_bit_for_bit() {
    let mut ways = both_ways();
    let mut rnd = xorshift(0xD1B5_4A32_D192_ED03);
    for case in 0..400 {
        let ports = 2 + rnd(30) as usize;
        let caps: Vec<f64> = (0..ports)
            .map(|_| [10e9, 40e9, 3e9 + rnd(1000) as f64 * 3e6][rnd(3) as usize])
            .collect();
        let routes: Vec<Vec<u32>> = (0..1 + rnd(60))
            .map(|_| (0..1 + rnd(4)).map(|_| rnd(ports as u64) as u32).collect())
            .collect();
        let demands: Vec<FlowDemand> = routes
            .iter()
            .map(|r| FlowDemand {
                class: rnd(2) as u8,
                ports: r,
                ahead: false,
                cap_bps: if rnd(5) == 0 {
                    f64::INFINITY
                } else {
                    [1e8, 5e8, 2e9][rnd(3) as usize] * (1 + rnd(3)) as f64
                },
            })
            .collect();
        let want = reference(&demands, &caps);
        assert_both_ways(&mut ways, &demands, &caps, &want, case);
    }
}

/// Keyed allocations replay the rounds of the last call that a change does
/// not touch: over random sequences of changes (a flow added, ended, its
/// cap, route or class changed, a capacity changed, nothing changed), both
/// ways (scanned, heaped) give plain progressive filling's rates, bit for
/// bit, at every step.
#[test]
fn keyed_allocations_replaying_past_rounds_equal_plain_progressive_filling() {
    struct F {
        key: u64,
        class: u8,
        ahead: bool,
        ports: Vec<u32>,
        cap: f64,
    }
    let mut rnd = xorshift(0x2545_F491_4F6C_DD1D);
    for case in 0..60 {
        let mut scanned = MaxMin::default();
        let mut heaped = MaxMin::default();
        heaped.scan_ports = 0;
        // Replaying from the first flow on (and, every other case, from
        // the default size on).
        if case % 2 == 0 {
            scanned.replay_flows = 0;
            heaped.replay_flows = 0;
        }
        let mut out = Vec::new();
        let nports = 2 + rnd(30) as usize;
        let mut caps: Vec<f64> = (0..nports)
            .map(|_| [10e9, 40e9, 1e9 + rnd(1000) as f64 * 7e6][rnd(3) as usize])
            .collect();
        let classes = 1 + rnd(3);
        let mut next_key = 0u64;
        let mut flows: Vec<F> = Vec::new();
        for step in 0..200 {
            let new_flow = |rnd: &mut dyn FnMut(u64) -> u64, key: u64| F {
                key,
                class: rnd(classes) as u8,
                ahead: rnd(6) == 0,
                ports: (0..1 + rnd(5)).map(|_| rnd(nports as u64) as u32).collect(),
                cap: if rnd(2) == 0 {
                    1e8 + rnd(100) as f64 * 1e8
                } else {
                    f64::INFINITY
                },
            };
            match rnd(8) {
                0..=2 => {
                    next_key += 1 + rnd(3);
                    flows.push(new_flow(&mut rnd, next_key));
                }
                3 if !flows.is_empty() => {
                    let k = rnd(flows.len() as u64) as usize;
                    flows.remove(k);
                }
                4 if !flows.is_empty() => {
                    let k = rnd(flows.len() as u64) as usize;
                    flows[k].cap = if rnd(3) == 0 {
                        f64::INFINITY
                    } else {
                        1e8 + rnd(100) as f64 * 1e8
                    };
                }
                5 if !flows.is_empty() => {
                    let k = rnd(flows.len() as u64) as usize;
                    let f = new_flow(&mut rnd, flows[k].key);
                    flows[k] = F {
                        cap: flows[k].cap,
                        ..f
                    };
                }
                6 if rnd(4) == 0 => {
                    let p = rnd(nports as u64) as usize;
                    caps[p] = [0.0, 10e9, 25e9][rnd(3) as usize];
                }
                _ => {}
            }
            let demands: Vec<FlowDemand> = flows
                .iter()
                .map(|f| FlowDemand {
                    class: f.class,
                    ports: &f.ports,
                    ahead: f.ahead,
                    cap_bps: f.cap,
                })
                .collect();
            let keys: Vec<u64> = flows.iter().map(|f| f.key).collect();
            let want = reference(&demands, &caps);
            for (way, m) in [("scanned", &mut scanned), ("heaped", &mut heaped)] {
                m.rates_keyed(&demands, &keys, &caps, &mut out);
                assert!(
                    same_bits(&out, &want),
                    "case {case} step {step}, {way}: {out:?} != {want:?}"
                );
            }
        }
    }
}

/// Keyed allocations of one level replay by affected ports: random
/// sequences of small changes (a flow added or ended, its cap changed to
/// one of a few values or taken off, its route changed, nothing) over many
/// flows on ports of a few capacities, so that shares tie to the bit and
/// caps land on shares (or within the tolerance of one), both ways (scanned, heaped) and with the replay by
/// affected ports on and off, give plain progressive filling's rates, bit
/// for bit, at every step.
#[test]
fn keyed_allocations_of_one_level_replaying_by_affected_ports_equal_plain_progressive_filling() {
    struct F {
        key: u64,
        ports: Vec<u32>,
        cap: f64,
    }
    let mut rnd = xorshift(0x6A09_E667_F3BC_C908);
    for case in 0..80 {
        let mut ways: Vec<(&str, MaxMin)> = Vec::new();
        for (name, scan, by_ports) in [
            ("scanned, by ports", true, true),
            ("heaped, by ports", false, true),
            ("scanned, prefix", true, false),
        ] {
            let mut m = MaxMin::default();
            m.replay_flows = 0;
            m.replay_ports = by_ports;
            if !scan {
                m.scan_ports = 0;
            }
            ways.push((name, m));
        }
        let mut out = Vec::new();
        let nports = 4 + rnd(36) as usize;
        let caps: Vec<f64> = (0..nports)
            .map(|_| match rnd(8) {
                0 => 1e9 + rnd(1000) as f64 * 7e6,
                1 => 40e9,
                2 => 25e9,
                // Within the tolerance of 10 Gbit/s, not equal to it.
                3 => 10e9 + (1 + rnd(2)) as f64 * 3e-3,
                _ => 10e9,
            })
            .collect();
        let cap_values = [1e9, 2e9, 2.5e9, 5e9, 10e9 / 3.0, 12e9];
        let mut next_key = 0u64;
        let new_flow = |rnd: &mut dyn FnMut(u64) -> u64, key: u64| F {
            key,
            ports: (0..1 + rnd(4)).map(|_| rnd(nports as u64) as u32).collect(),
            cap: if rnd(3) == 0 {
                cap_values[rnd(cap_values.len() as u64) as usize]
            } else {
                f64::INFINITY
            },
        };
        let mut flows: Vec<F> = Vec::new();
        for _ in 0..rnd(60) {
            next_key += 1;
            flows.push(new_flow(&mut rnd, next_key));
        }
        for step in 0..150 {
            match rnd(10) {
                0 | 1 => {
                    next_key += 1 + rnd(2);
                    flows.push(new_flow(&mut rnd, next_key));
                }
                2 | 3 if !flows.is_empty() => {
                    let k = rnd(flows.len() as u64) as usize;
                    flows.remove(k);
                }
                4..=6 if !flows.is_empty() => {
                    let k = rnd(flows.len() as u64) as usize;
                    flows[k].cap = if rnd(4) == 0 {
                        f64::INFINITY
                    } else {
                        cap_values[rnd(cap_values.len() as u64) as usize]
                    };
                }
                7 if !flows.is_empty() => {
                    let k = rnd(flows.len() as u64) as usize;
                    let f = new_flow(&mut rnd, flows[k].key);
                    flows[k].ports = f.ports;
                }
                _ => {}
            }
            let demands: Vec<FlowDemand> = flows
                .iter()
                .map(|f| FlowDemand {
                    cap_bps: f.cap,
                    ..FlowDemand::new(0, &f.ports)
                })
                .collect();
            let keys: Vec<u64> = flows.iter().map(|f| f.key).collect();
            let want = reference(&demands, &caps);
            for (way, m) in ways.iter_mut() {
                m.rates_keyed(&demands, &keys, &caps, &mut out);
                assert!(
                    same_bits(&out, &want),
                    "case {case} step {step}, {way}: {out:?} != {want:?}"
                );
            }
        }
    }
}

/// The keyed allocator keeps each port's flows from call to call, changed
/// only where flows come, go or change ports (their slots recycled), and
/// rebuilds them after any call it water-fills whole. Random sequences of
/// one-level calls with several changes at once (flows ended and started
/// together, slots freed and reused; routes changed, some with a port
/// twice), broken now and then by a call that cannot replay (a capacity
/// changed, one flow moved to another class, keys out of order, an
/// unkeyed call): every keyed call gives plain progressive filling's
/// rates, bit for bit, scanned and heaped.
#[test]
fn keyed_allocations_keeping_each_ports_flows_equal_plain_progressive_filling() {
    struct F {
        key: u64,
        class: u8,
        ports: Vec<u32>,
        cap: f64,
    }
    let mut rnd = xorshift(0x3C6E_F372_FE94_F82B);
    for case in 0..60 {
        let mut ways: Vec<(&str, MaxMin)> = Vec::new();
        for (name, scan) in [("scanned", true), ("heaped", false)] {
            let mut m = MaxMin::default();
            m.replay_flows = 0;
            if !scan {
                m.scan_ports = 0;
            }
            ways.push((name, m));
        }
        // Told by the caller whether a flow kept its key and changed its
        // ports since the last keyed call (then the match compares them).
        let mut told = MaxMin::default();
        told.replay_flows = 0;
        let mut rerouted = false;
        let mut out = Vec::new();
        let nports = 3 + rnd(24) as usize;
        let mut caps: Vec<f64> = (0..nports)
            .map(|_| [10e9, 10e9, 25e9, 1e9 + rnd(1000) as f64 * 7e6][rnd(4) as usize])
            .collect();
        let mut next_key = 0u64;
        let new_flow = |rnd: &mut dyn FnMut(u64) -> u64, key: u64| F {
            key,
            class: 0,
            ports: (0..1 + rnd(4)).map(|_| rnd(nports as u64) as u32).collect(),
            cap: if rnd(3) == 0 {
                [1e9, 2.5e9, 5e9][rnd(3) as usize]
            } else {
                f64::INFINITY
            },
        };
        let mut flows: Vec<F> = Vec::new();
        for step in 0..120 {
            for _ in 0..1 + rnd(4) {
                match rnd(6) {
                    0 | 1 => {
                        next_key += 1 + rnd(2);
                        flows.push(new_flow(&mut rnd, next_key));
                    }
                    2 | 3 if !flows.is_empty() => {
                        let k = rnd(flows.len() as u64) as usize;
                        flows.remove(k);
                    }
                    4 if !flows.is_empty() => {
                        let k = rnd(flows.len() as u64) as usize;
                        flows[k].ports = new_flow(&mut rnd, 0).ports;
                        rerouted = true;
                    }
                    5 if !flows.is_empty() => {
                        let k = rnd(flows.len() as u64) as usize;
                        flows[k].cap = new_flow(&mut rnd, 0).cap;
                    }
                    _ => {}
                }
            }
            let mut keys: Vec<u64> = flows.iter().map(|f| f.key).collect();
            let mut keyed = true;
            let mut moved = None;
            match rnd(12) {
                0 => caps[rnd(nports as u64) as usize] = [0.0, 10e9, 40e9][rnd(3) as usize],
                1 if !flows.is_empty() => {
                    let k = rnd(flows.len() as u64) as usize;
                    flows[k].class = 1;
                    moved = Some(k);
                }
                2 if keys.len() > 1 => keys.swap(0, 1),
                3 => keyed = false,
                _ => {}
            }
            let demands: Vec<FlowDemand> = flows
                .iter()
                .map(|f| FlowDemand {
                    cap_bps: f.cap,
                    ..FlowDemand::new(f.class, &f.ports)
                })
                .collect();
            let want = reference(&demands, &caps);
            for (way, m) in ways.iter_mut() {
                if keyed {
                    m.rates_keyed(&demands, &keys, &caps, &mut out);
                } else {
                    m.rates(&demands, &caps, &mut out);
                }
                assert!(
                    same_bits(&out, &want),
                    "case {case} step {step}, {way}: {out:?} != {want:?}"
                );
            }
            if !keyed {
                told.rates(&demands, &caps, &mut out);
            } else if std::mem::take(&mut rerouted) {
                told.rates_keyed(&demands, &keys, &caps, &mut out);
            } else {
                told.rates_keyed_ports_kept(&demands, &keys, &caps, &mut out);
            }
            assert!(
                same_bits(&out, &want),
                "case {case} step {step}, told: {out:?} != {want:?}"
            );
            if let Some(k) = moved {
                flows[k].class = 0;
            }
        }
    }
}

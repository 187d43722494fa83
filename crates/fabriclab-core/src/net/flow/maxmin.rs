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

/// Returns the rate of every flow in bits per second. `capacity_bps[p]` is
/// the capacity of port `p`. Every flow with at least one port gets a rate;
/// a flow whose ports are all full gets zero. A capped flow freezes at its
/// cap once the water level reaches it, like a flow crossing a port of its
/// own of that capacity.
pub fn max_min_rates(flows: &[FlowDemand], capacity_bps: &[f64]) -> Vec<f64> {
    let mut rates = vec![0.0; flows.len()];
    let mut residual: Vec<f64> = capacity_bps.to_vec();
    let mut count = vec![0u32; capacity_bps.len()];
    let mut frozen = vec![true; flows.len()];
    let mut levels: Vec<u16> = flows.iter().map(|f| f.level()).collect();
    levels.sort_unstable();
    levels.dedup();
    let mut touched: Vec<u32> = Vec::new();
    let mut saturated = vec![false; capacity_bps.len()];
    for level in levels {
        let mut active: Vec<usize> = (0..flows.len())
            .filter(|&i| flows[i].level() == level)
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

//! Max-min fair rates with strict priority between classes: classes are
//! served from 0 (highest) upwards, each class water-filling what the
//! classes above it left (progressive filling, Bertsekas & Gallager,
//! *Data Networks*, §6.5.2).

/// A flow as the allocator sees it: its class and the ports it crosses.
pub struct FlowDemand<'a> {
    pub class: u8,
    pub ports: &'a [u32],
}

/// Returns the rate of every flow in bits per second. `capacity_bps[p]` is
/// the capacity of port `p`. Every flow with at least one port gets a rate;
/// a flow whose ports are all full gets zero.
pub fn max_min_rates(flows: &[FlowDemand], capacity_bps: &[f64]) -> Vec<f64> {
    let mut rates = vec![0.0; flows.len()];
    let mut residual: Vec<f64> = capacity_bps.to_vec();
    let mut count = vec![0u32; capacity_bps.len()];
    let mut frozen = vec![true; flows.len()];
    let mut classes: Vec<u8> = flows.iter().map(|f| f.class).collect();
    classes.sort_unstable();
    classes.dedup();
    let mut touched: Vec<u32> = Vec::new();
    let mut saturated = vec![false; capacity_bps.len()];
    for class in classes {
        let mut active: Vec<usize> = (0..flows.len())
            .filter(|&i| flows[i].class == class)
            .collect();
        for &i in &active {
            frozen[i] = false;
        }
        while !active.is_empty() {
            touched.clear();
            for &i in &active {
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
            // Freeze every flow that crosses a port saturated at this share.
            let tol = share * 1e-12 + 1e-9;
            for &p in &touched {
                saturated[p as usize] =
                    residual[p as usize].max(0.0) / count[p as usize] as f64 <= share + tol;
            }
            for &i in &active {
                if flows[i].ports.iter().any(|&p| saturated[p as usize]) {
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

//! The flow and link figures of `summary.json`, computed as numpy computes
//! them (its float64 sum and linear percentile), so that the summary does
//! not depend on which side computed it: the mean is numpy's pairwise sum
//! divided by the count (`numpy/_core/src/umath/loops_utils.h.src`,
//! `pairwise_sum`: blocks of at most 128 summed with eight accumulators,
//! halves summed recursively above that), and a percentile is numpy's
//! default "linear" method (Hyndman and Fan's definition 7: the value at
//! rank (n - 1) q between order statistics, interpolated as numpy's `_lerp`
//! does, from the upper neighbour when the fraction is at least one half).

use fabriclab_core::results::{FlowColumns, LinkColumns};

/// FCT statistics of the finished flows of one selection.
#[derive(Debug, Clone, PartialEq)]
pub struct FctStats {
    /// Flows in the selection, finished or not.
    pub flows: u64,
    pub finished: u64,
    /// `None` when no flow of the selection finished.
    pub figures: Option<FctFigures>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FctFigures {
    pub fct_mean_ps: f64,
    pub fct_p50_ps: f64,
    pub fct_p99_ps: f64,
    pub fct_p999_ps: f64,
    pub slowdown_mean: f64,
    pub slowdown_p99: f64,
}

/// numpy's pairwise float64 sum (the order of additions decides the last bits).
pub fn pairwise_sum(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        let mut res = 0.0;
        for &x in a {
            res += x;
        }
        res
    } else if n <= 128 {
        let mut r = [a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]];
        let whole = n - n % 8;
        let mut i = 8;
        while i < whole {
            for (j, acc) in r.iter_mut().enumerate() {
                *acc += a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &x in &a[whole..] {
            res += x;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise_sum(&a[..n2]) + pairwise_sum(&a[n2..])
    }
}

/// numpy's `mean` of float64 values (NaN for none).
pub fn mean(a: &[f64]) -> f64 {
    // numpy adds its identity first: 0.0 + the pairwise sum.
    (0.0 + pairwise_sum(a)) / a.len() as f64
}

/// numpy's `percentile(a, q)` ("linear") of values already sorted ascending; `q` in percent.
pub fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    assert!(n > 0, "percentile of no values");
    let v = (n - 1) as f64 * (q / 100.0);
    if v >= (n - 1) as f64 {
        return sorted[n - 1];
    }
    if v < 0.0 {
        return sorted[0];
    }
    let lo = v.floor();
    let gamma = v - lo;
    let (a, b) = (sorted[lo as usize], sorted[lo as usize + 1]);
    let diff = b - a;
    if gamma >= 0.5 {
        b - diff * (1.0 - gamma)
    } else {
        a + diff * gamma
    }
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// Statistics of flows given their FCTs (NaN where unfinished) and slowdowns.
pub fn fct_stats(fct_ps: &[f64], slowdown: &[f64]) -> FctStats {
    assert_eq!(fct_ps.len(), slowdown.len(), "one slowdown per FCT");
    let (fct, slow): (Vec<f64>, Vec<f64>) = fct_ps
        .iter()
        .zip(slowdown)
        .filter(|(f, _)| !f.is_nan())
        .map(|(&f, &s)| (f, s))
        .unzip();
    let finished = fct.len() as u64;
    let figures = (!fct.is_empty()).then(|| {
        let (fct_mean_ps, slowdown_mean) = (mean(&fct), mean(&slow));
        let (fct, slow) = (sorted(fct), sorted(slow));
        FctFigures {
            fct_mean_ps,
            fct_p50_ps: percentile_sorted(&fct, 50.0),
            fct_p99_ps: percentile_sorted(&fct, 99.0),
            fct_p999_ps: percentile_sorted(&fct, 99.9),
            slowdown_mean,
            slowdown_p99: percentile_sorted(&slow, 99.0),
        }
    });
    FctStats {
        flows: fct_ps.len() as u64,
        finished,
        figures,
    }
}

/// A finished flow's FCT; unfinished flows have none.
pub fn fct_of(start_ps: u64, end_ps: Option<u64>) -> Option<u64> {
    end_ps.map(|e| e - start_ps)
}

/// FCT over the ideal FCT (an ideal of 0 counts as 1 ps).
pub fn slowdown_of(fct_ps: u64, ideal_fct_ps: u64) -> f64 {
    fct_ps as f64 / ideal_fct_ps.max(1) as f64
}

/// The flow part of the summary.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSummary {
    pub all: FctStats,
    /// Flows under `small_max_bytes`, from it to `large_min_bytes`, above it.
    pub small: FctStats,
    pub medium: FctStats,
    pub large: FctStats,
    /// Per traffic class, by class.
    pub by_class: Vec<(u8, FctStats)>,
    pub retransmits: u64,
}

pub fn flow_summary(c: &FlowColumns, small_max_bytes: u64, large_min_bytes: u64) -> FlowSummary {
    let n = c.flow_id.len();
    let mut fct = Vec::with_capacity(n);
    let mut slow = Vec::with_capacity(n);
    for i in 0..n {
        match fct_of(c.start_ps[i], c.end_ps[i]) {
            Some(f) => {
                fct.push(f as f64);
                slow.push(slowdown_of(f, c.ideal_fct_ps[i]));
            }
            None => {
                fct.push(f64::NAN);
                slow.push(f64::NAN);
            }
        }
    }
    let select = |keep: &dyn Fn(usize) -> bool| {
        let (f, s): (Vec<f64>, Vec<f64>) = (0..n)
            .filter(|&i| keep(i))
            .map(|i| (fct[i], slow[i]))
            .unzip();
        fct_stats(&f, &s)
    };
    let size = &c.size_bytes;
    let mut classes = c.class.clone();
    classes.sort_unstable();
    classes.dedup();
    FlowSummary {
        all: fct_stats(&fct, &slow),
        small: select(&|i| size[i] < small_max_bytes),
        medium: select(&|i| size[i] >= small_max_bytes && size[i] <= large_min_bytes),
        large: select(&|i| size[i] > large_min_bytes),
        by_class: classes
            .into_iter()
            .map(|k| (k, select(&|i| c.class[i] == k)))
            .collect(),
        retransmits: c.retransmits.iter().fold(0u64, |a, &r| a.wrapping_add(r)),
    }
}

/// A link's utilization over `duration_ps`: bytes · 8 / (rate · duration),
/// with numpy's order of operations; 0 for a run of no duration.
pub fn utilization(bytes: u64, rate_bps: u64, duration_ps: u64) -> f64 {
    if duration_ps == 0 {
        return 0.0;
    }
    bytes as f64 * 8.0 / (rate_bps as f64 * duration_ps as f64 / 1e12)
}

/// The link part of the summary.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSummary {
    pub max_utilization: f64,
    pub mean_utilization: f64,
    pub drops: u64,
    pub ecn_marks: u64,
    pub max_queue_bytes: u64,
}

pub fn link_summary(c: &LinkColumns, duration_ps: u64) -> LinkSummary {
    if c.link_id.is_empty() {
        return LinkSummary {
            max_utilization: 0.0,
            mean_utilization: 0.0,
            drops: 0,
            ecn_marks: 0,
            max_queue_bytes: 0,
        };
    }
    let util: Vec<f64> = c
        .bytes
        .iter()
        .zip(&c.rate_bps)
        .map(|(&b, &r)| utilization(b, r, duration_ps))
        .collect();
    // numpy's nanmax and nanmean: NaN (a link of rate 0) left out.
    let known: Vec<f64> = util
        .iter()
        .map(|&u| if u.is_nan() { 0.0 } else { u })
        .collect();
    let count = util.iter().filter(|u| !u.is_nan()).count();
    let sum = |v: &[u64]| v.iter().fold(0u64, |a, &x| a.wrapping_add(x));
    LinkSummary {
        max_utilization: util
            .iter()
            .copied()
            .filter(|u| !u.is_nan())
            .fold(f64::NAN, f64::max),
        mean_utilization: (0.0 + pairwise_sum(&known)) / count as f64,
        drops: sum(&c.drops),
        ecn_marks: sum(&c.ecn_marks),
        max_queue_bytes: c.max_queue_bytes.iter().copied().max().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_hand_sized_sample() {
        let v = [10.0, 20.0, 30.0, 40.0];
        // rank (n - 1) q: 1.5 -> halfway between 20 and 30.
        assert_eq!(percentile_sorted(&v, 50.0), 25.0);
        // 2.97 -> the fraction 0.97 is at least one half: from the upper neighbour, 40 - 10 * (1 - 0.97).
        assert_eq!(
            percentile_sorted(&v, 99.0),
            40.0 - 10.0 * (1.0 - (3.0 * 0.99 - 2.0))
        );
        assert_eq!(percentile_sorted(&v, 100.0), 40.0);
        assert_eq!(percentile_sorted(&v, 0.0), 10.0);
        assert_eq!(percentile_sorted(&[7.0], 99.9), 7.0);
    }

    #[test]
    fn pairwise_sum_adds_in_numpys_order() {
        // 2^53: the next doubles are 2 apart, and x + 1 rounds back to x (to even).
        let big = 2f64.powi(53);
        // Below 8 values: left to right, so each 1 is lost on its own.
        assert_eq!(pairwise_sum(&[big, 1.0, 1.0]), big);
        // 16 values: eight accumulators take a[0..8], then add a[8..16]:
        // r0 = big + 1 (lost), r1..r7 = 2, summed as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)).
        let mut v = vec![1.0; 16];
        v[0] = big;
        assert_eq!(pairwise_sum(&v), big + 14.0);
        // Left to right would lose every one.
        assert_eq!(v.iter().fold(0.0, |a, &x| a + x), big);
    }

    #[test]
    fn unfinished_flows_are_left_out() {
        let s = fct_stats(&[f64::NAN, 4.0, 2.0], &[f64::NAN, 2.0, 1.0]);
        assert_eq!((s.flows, s.finished), (3, 2));
        let f = s.figures.unwrap();
        assert_eq!(
            (f.fct_mean_ps, f.fct_p50_ps, f.slowdown_mean),
            (3.0, 3.0, 1.5)
        );
        assert_eq!(fct_stats(&[f64::NAN], &[f64::NAN]).figures, None);
    }

    #[test]
    fn buckets_split_at_the_thresholds() {
        let c = FlowColumns {
            flow_id: vec![0, 1, 2, 3],
            src: vec![0; 4],
            dst: vec![1; 4],
            size_bytes: vec![99, 100, 1000, 1001],
            class: vec![1, 0, 1, 0],
            start_ps: vec![0, 10, 20, 30],
            end_ps: vec![Some(5), Some(30), None, Some(130)],
            ideal_fct_ps: vec![5, 10, 1, 0],
            retransmits: vec![1, 2, 3, 4],
            tag: vec![String::new(); 4],
        };
        let s = flow_summary(&c, 100, 1000);
        assert_eq!((s.small.flows, s.medium.flows, s.large.flows), (1, 2, 1));
        assert_eq!(s.medium.finished, 1);
        assert_eq!(s.large.figures.as_ref().unwrap().slowdown_mean, 100.0); // ideal 0 counts as 1 ps
        assert_eq!(
            s.by_class
                .iter()
                .map(|(k, st)| (*k, st.flows))
                .collect::<Vec<_>>(),
            vec![(0, 2), (1, 2)]
        );
        assert_eq!(s.retransmits, 10);
        assert_eq!(s.all.figures.unwrap().fct_p50_ps, 20.0); // 5, 20, 100
    }

    #[test]
    fn link_figures() {
        let c = LinkColumns {
            link_id: vec![0, 1],
            from: vec!["a".into(), "b".into()],
            to: vec!["b".into(), "a".into()],
            rate_bps: vec![8_000_000_000, 8_000_000_000],
            bytes: vec![1000, 250],
            packets: vec![1, 1],
            drops: vec![2, 3],
            ecn_marks: vec![0, 5],
            max_queue_bytes: vec![7, 9],
            mean_queue_bytes: vec![0.0, 0.0],
            pause_frames_sent: vec![0, 0],
            paused_ps: vec![0, 0],
        };
        // 1 us at 8 Gbit/s carries 1000 bytes.
        let s = link_summary(&c, 1_000_000);
        assert_eq!((s.max_utilization, s.mean_utilization), (1.0, 0.625));
        assert_eq!((s.drops, s.ecn_marks, s.max_queue_bytes), (5, 5, 9));
        assert_eq!(link_summary(&c, 0).max_utilization, 0.0);
        // A link of rate 0 has utilization 0/0 = NaN, left out of both (numpy's nanmax, nanmean).
        let mut z = c.clone();
        z.link_id.push(2);
        z.rate_bps.push(0);
        z.bytes.push(0);
        let s = link_summary(&z, 1_000_000);
        assert!(utilization(0, 0, 1_000_000).is_nan());
        assert_eq!((s.max_utilization, s.mean_utilization), (1.0, 0.625));
        z.rate_bps = vec![0; 3];
        z.bytes = vec![0; 3];
        let s = link_summary(&z, 1_000_000);
        assert!(s.max_utilization.is_nan() && s.mean_utilization.is_nan());
    }
}

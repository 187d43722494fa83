//! Traffic sources: Poisson background flows drawn from an empirical
//! flow-size CDF, and explicit flow lists. Each source keeps one pending
//! timer: the next arrival.

use super::{list_schema, section, AppKind, BuildEnv};
use crate::engine::{Api, App, Message};
use crate::fabric::topology::mix64;
use crate::time::PS_PER_S;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

/// Piecewise-linear empirical CDF over flow sizes in bytes.
#[derive(Debug, Clone)]
pub struct Cdf {
    xs: Vec<f64>,
    ps: Vec<f64>,
}

impl Cdf {
    /// Points `(size_bytes, probability)`: sizes and probabilities
    /// non-decreasing, sizes positive, probabilities in [0, 1], the last one 1.
    pub fn new(points: &[(f64, f64)]) -> Result<Cdf, String> {
        if points.len() < 2 {
            return Err("cdf: needs at least two points".into());
        }
        for (i, w) in points.windows(2).enumerate() {
            if w[1].0 < w[0].0 {
                return Err(format!(
                    "cdf: sizes must be non-decreasing (point {} after point {i})",
                    i + 1
                ));
            }
            if w[1].1 < w[0].1 {
                return Err(format!(
                    "cdf: probabilities must be non-decreasing (point {} after point {i})",
                    i + 1
                ));
            }
        }
        if points
            .iter()
            .any(|p| p.0.is_nan() || p.0 <= 0.0 || !(0.0..=1.0).contains(&p.1))
        {
            return Err("cdf: sizes must be positive and probabilities within [0, 1]".into());
        }
        if (points.last().unwrap().1 - 1.0).abs() > 1e-9 {
            return Err("cdf: the last probability must be 1".into());
        }
        Ok(Cdf {
            xs: points.iter().map(|p| p.0).collect(),
            ps: points.iter().map(|p| p.1).collect(),
        })
    }

    /// Inverse transform with linear interpolation between points; the
    /// probability of the first point is a point mass at its size.
    pub fn quantile(&self, u: f64) -> f64 {
        if u <= self.ps[0] {
            return self.xs[0];
        }
        let i = self.ps.partition_point(|&p| p < u).min(self.ps.len() - 1);
        let (p0, p1, x0, x1) = (self.ps[i - 1], self.ps[i], self.xs[i - 1], self.xs[i]);
        if p1 <= p0 {
            return x1;
        }
        x0 + (u - p0) / (p1 - p0) * (x1 - x0)
    }

    /// The distribution's mean: the first point's mass plus the midpoints of
    /// the linear pieces weighted by their probability.
    pub fn mean(&self) -> f64 {
        let mut m = self.ps[0] * self.xs[0];
        for i in 1..self.xs.len() {
            m += (self.ps[i] - self.ps[i - 1]) * (self.xs[i] + self.xs[i - 1]) / 2.0;
        }
        m
    }

    pub fn sample_bytes(&self, rng: &mut impl Rng) -> u64 {
        (self.quantile(rng.gen::<f64>()).round() as u64).max(1)
    }
}

/// Poisson arrivals of flows with sizes from a CDF, between random distinct
/// hosts of a set, at a rate that offers `load` of the set's host link rate:
/// `lambda = load * sum(host rates) / (8 * mean size)`.
pub struct PoissonTraffic {
    rng: ChaCha8Rng,
    cdf: Cdf,
    mean_gap_ps: f64,
    hosts: Vec<u32>,
    start_ps: u64,
    end_ps: u64,
    class: u8,
    tag: String,
    /// Messages sent so far: the next message's tag.
    sent: u64,
}

impl PoissonTraffic {
    pub fn new(
        seed: u64,
        cdf: Cdf,
        load: f64,
        hosts: Vec<u32>,
        host_rate_sum_bps: f64,
        start_ps: u64,
        duration_ps: u64,
        class: u8,
        tag: String,
    ) -> PoissonTraffic {
        let flows_per_s = load * host_rate_sum_bps / (8.0 * cdf.mean());
        PoissonTraffic {
            rng: ChaCha8Rng::seed_from_u64(seed),
            cdf,
            mean_gap_ps: PS_PER_S as f64 / flows_per_s,
            hosts,
            start_ps,
            end_ps: start_ps.saturating_add(duration_ps),
            class,
            tag,
            sent: 0,
        }
    }

    fn gap_ps(&mut self) -> u64 {
        let u: f64 = self.rng.gen();
        (-(1.0 - u).ln() * self.mean_gap_ps).round() as u64
    }

    fn schedule_next(&mut self, api: &mut Api, from_ps: u64) {
        let t = from_ps.saturating_add(self.gap_ps());
        if t < self.end_ps {
            api.schedule(t, 0);
        }
    }
}

impl App for PoissonTraffic {
    fn start(&mut self, api: &mut Api) {
        let s = self.start_ps;
        self.schedule_next(api, s);
    }

    fn on_timer(&mut self, api: &mut Api, _token: u64) {
        let n = self.hosts.len();
        let a = self.rng.gen_range(0..n);
        let mut b = self.rng.gen_range(0..n - 1);
        if b >= a {
            b += 1;
        }
        let size = self.cdf.sample_bytes(&mut self.rng);
        let m = Message {
            src: self.hosts[a],
            dst: self.hosts[b],
            size_bytes: size,
            class: self.class,
            tag: self.sent,
            ..Default::default()
        };
        self.sent += 1;
        if let Err(e) = api.send(&m) {
            api.fail(format!("traffic '{}': {e}", self.tag));
        }
        let now = api.now();
        self.schedule_next(api, now);
    }

    fn tag(&self) -> &str {
        &self.tag
    }
}

/// Explicit flows, started at their given times in list order.
pub struct FlowList {
    flows: Vec<(u64, Message)>,
    next: usize,
}

impl FlowList {
    pub fn new(mut flows: Vec<(u64, Message)>) -> FlowList {
        flows.sort_by_key(|f| f.0); // stable: equal start times keep list order
        FlowList { flows, next: 0 }
    }
}

impl App for FlowList {
    fn start(&mut self, api: &mut Api) {
        if let Some(f) = self.flows.first() {
            api.schedule(f.0, 0);
        }
    }

    fn on_timer(&mut self, api: &mut Api, _token: u64) {
        while self.next < self.flows.len() && self.flows[self.next].0 <= api.now() {
            let i = self.next;
            self.next += 1;
            if let Err(e) = api.send(&self.flows[i].1) {
                api.fail(format!("flows: {e}"));
            }
        }
        if let Some(f) = self.flows.get(self.next) {
            api.schedule(f.0, 0);
        }
    }

    fn tag(&self) -> &str {
        "flows"
    }
}

/// Poisson background flows sized to a target load.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoissonSpec {
    /// Offered load as a fraction of the summed host link rate of `hosts`.
    pub load: f64,
    /// Empirical CDF of flow sizes: points `(size_bytes, cumulative probability)`.
    pub cdf: Vec<(f64, f64)>,
    pub start_ps: u64,
    pub duration_ps: u64,
    /// Host indices (order of hosts in the node list) that send and receive.
    pub hosts: Vec<u32>,
    pub class: u8,
    pub tag: String,
}

/// One explicit flow (message).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    pub size_bytes: u64,
    pub start_ps: u64,
    pub class: u8,
    /// Explicit path as node indices from the source host to the destination host.
    #[serde(default)]
    pub path: Option<Vec<u32>>,
}

/// `[[traffic]]`: Poisson background flows.
pub const POISSON: AppKind = AppKind {
    key: "traffic",
    build: build_poisson,
    schema: list_schema::<PoissonSpec>,
};
/// `flows`: explicit flows, one app for all of them.
pub const FLOWS: AppKind = AppKind {
    key: "flows",
    build: build_flows,
    schema: list_schema::<FlowSpec>,
};

fn build_poisson(v: &serde_json::Value, env: &BuildEnv) -> Result<Vec<Box<dyn App>>, String> {
    let specs: Vec<PoissonSpec> = section("traffic", v)?;
    let nh = env.topo.num_hosts() as u32;
    let mut apps: Vec<Box<dyn App>> = Vec::new();
    for (i, tr) in specs.into_iter().enumerate() {
        let cdf = Cdf::new(&tr.cdf).map_err(|e| format!("traffic[{i}].{e}"))?;
        // The scenario layer checks the user's range (0, 1]; a rate of zero or less would never advance time.
        if tr.load.is_nan() || tr.load <= 0.0 {
            return Err(format!(
                "traffic[{i}].load: must be positive, got {}",
                tr.load
            ));
        }
        if tr.hosts.len() < 2 {
            return Err(format!("traffic[{i}].hosts: needs at least two hosts"));
        }
        if let Some(h) = tr.hosts.iter().find(|&&h| h >= nh) {
            return Err(format!(
                "traffic[{i}].hosts: host index {h} out of range (0..{nh})"
            ));
        }
        let rate: f64 = tr
            .hosts
            .iter()
            .map(|&h| env.topo.host_rate_bps(h) as f64)
            .sum();
        let seed = mix64(env.seed ^ mix64(0x0074_7261_6666_6963 + i as u64));
        apps.push(Box::new(PoissonTraffic::new(
            seed,
            cdf,
            tr.load,
            tr.hosts,
            rate,
            tr.start_ps,
            tr.duration_ps,
            tr.class,
            tr.tag,
        )));
    }
    Ok(apps)
}

fn build_flows(v: &serde_json::Value, env: &BuildEnv) -> Result<Vec<Box<dyn App>>, String> {
    let specs: Vec<FlowSpec> = section("flows", v)?;
    if specs.is_empty() {
        return Ok(Vec::new());
    }
    let nh = env.topo.num_hosts() as u32;
    let mut list = Vec::with_capacity(specs.len());
    for (i, f) in specs.into_iter().enumerate() {
        for (end, h) in [("src", f.src), ("dst", f.dst)] {
            if h >= nh {
                return Err(format!(
                    "flows[{i}].{end}: host index {h} out of range (the topology has hosts 0..{})",
                    nh - 1
                ));
            }
        }
        if f.src == f.dst {
            return Err(format!("flows[{i}]: src and dst must differ"));
        }
        if f.size_bytes == 0 {
            return Err(format!("flows[{i}].size_bytes: must be positive"));
        }
        if let Some(p) = &f.path {
            env.topo
                .explicit_route(p, f.src, f.dst)
                .map_err(|e| format!("flows[{i}].{e}"))?;
        }
        let m = Message {
            src: f.src,
            dst: f.dst,
            size_bytes: f.size_bytes,
            class: f.class,
            tag: i as u64,
            path: f.path,
            ..Default::default()
        };
        list.push((f.start_ps, m));
    }
    Ok(vec![Box::new(FlowList::new(list))])
}

//! Building a training job from its spec: the checks, the tensor fusions,
//! the allreduce engine, the compute prefix sums and the workers' state.

use super::allreduce::Engine;
use super::plan::PlanEngine;
use super::{JobSpec, LayerSpec, Phase, SendCounts, TrainingJob, Worker, WorkerFaultKind};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;

impl TrainingJob {
    pub fn new(mut spec: JobSpec, num_hosts: u32) -> Result<TrainingJob, String> {
        validate(&spec, num_hosts)?;
        let fusions = Fusions::of(&spec.layers, spec.fusion_bytes);
        let rng = ChaCha8Rng::seed_from_u64(spec.seed);
        let engine = match (spec.allreduce_plan.take(), spec.aggregation) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "job '{}': allreduce_plan and aggregation exclude each other",
                    spec.name
                ))
            }
            (None, None) => Engine::Ring,
            (Some(p), None) => Engine::Plan(Box::new(PlanEngine::new(
                p,
                &spec.name,
                spec.workers.len(),
            )?)),
            (None, Some(j)) => Engine::Aggregate(j),
        };
        let fwd_prefix = prefix_sums(&spec, |l| l.fwd_ps);
        let bwd_prefix = prefix_sums(&spec, |l| l.bwd_ps);
        let nf = fusions.layers.len();
        let issued = vec![vec![false; nf]; spec.iterations as usize];
        let mut halt_ps = vec![u64::MAX; spec.workers.len()];
        let mut slow_from = vec![Vec::new(); spec.workers.len()];
        for f in &spec.faults {
            match f.kind {
                WorkerFaultKind::Halt => {
                    halt_ps[f.worker as usize] = halt_ps[f.worker as usize].min(f.at_ps)
                }
                WorkerFaultKind::Slow => slow_from[f.worker as usize].push((f.at_ps, f.factor)),
            }
        }
        let workers = (0..spec.workers.len())
            .map(|_| new_worker(spec.layers.len(), spec.iterations as usize, nf as u32))
            .collect();
        Ok(TrainingJob {
            spec,
            fusion_of: fusions.of_layer,
            fusion_layers: fusions.layers,
            fusion_bytes: fusions.bytes,
            fusion_min_layer: fusions.min_layer,
            fwd_prefix,
            bwd_prefix,
            issued,
            workers,
            ready_count: HashMap::new(),
            queue: Vec::new(),
            enqueue_seq: 0,
            engine,
            active: HashMap::new(),
            next_ar: 0,
            msgs: HashMap::new(),
            check_gen: 0,
            urgent_ps_per_byte: None,
            rng,
            timeline: Vec::new(),
            end_ps: None,
            sends: SendCounts::default(),
            halt_ps,
            slow_from,
            joined: HashMap::new(),
            ccl: Default::default(),
        })
    }
}

/// What a job needs before anything is derived from it (the plan's own
/// checks are [`PlanEngine::new`]'s).
fn validate(spec: &JobSpec, num_hosts: u32) -> Result<(), String> {
    let n = spec.workers.len();
    let name = &spec.name;
    if n == 0 {
        return Err(format!("job '{name}': needs at least one worker"));
    }
    if let Some(h) = spec.workers.iter().find(|&&h| h >= num_hosts) {
        return Err(format!(
            "job '{name}': worker host {h} out of range (0..{num_hosts})"
        ));
    }
    if spec.layers.is_empty() {
        return Err(format!("job '{name}': needs at least one layer"));
    }
    if spec.slowdown.len() != n || spec.slowdown.iter().any(|&s| s.is_nan() || s <= 0.0) {
        return Err(format!(
            "job '{name}': slowdown needs one positive factor per worker"
        ));
    }
    if spec.max_inflight == 0 || spec.reduce_bps == 0 || spec.fusion_bytes == 0 {
        return Err(format!(
            "job '{name}': max_inflight, reduce_bps and fusion_bytes must be positive"
        ));
    }
    for f in &spec.faults {
        if f.worker as usize >= n || f.factor.is_nan() || f.factor <= 0.0 {
            return Err(format!(
                "job '{name}': a fault needs a worker position 0..{n} and a positive factor"
            ));
        }
    }
    if spec
        .checkpoint
        .as_ref()
        .is_some_and(|c| c.every_iterations == 0)
    {
        return Err(format!(
            "job '{name}': checkpoint every_iterations must be at least 1"
        ));
    }
    if let Some(lc) = &spec.layer_class {
        if lc.len() != spec.layers.len() {
            return Err(format!(
                "job '{name}': layer_class needs one class per layer"
            ));
        }
    }
    Ok(())
}

/// Horovod's tensor fusion: layers in backward order, a fusion closed
/// before it would exceed `fusion_bytes`, a layer never split.
struct Fusions {
    /// Per layer: its fusion.
    of_layer: Vec<u32>,
    /// Per fusion: its layers (backward order), bytes and lowest layer.
    layers: Vec<Vec<u32>>,
    bytes: Vec<u64>,
    min_layer: Vec<u32>,
}

impl Fusions {
    fn of(layers: &[LayerSpec], fusion_bytes: u64) -> Fusions {
        let nl = layers.len();
        let mut of_layer = vec![0u32; nl];
        let mut fl: Vec<Vec<u32>> = Vec::new();
        let mut bytes: Vec<u64> = Vec::new();
        for i in (0..nl).rev() {
            let b = layers[i].param_bytes;
            let fits = bytes.last().is_some_and(|&f| f + b <= fusion_bytes);
            if !fits {
                fl.push(Vec::new());
                bytes.push(0);
            }
            let f = fl.len() - 1;
            fl[f].push(i as u32);
            bytes[f] += b;
            of_layer[i] = f as u32;
        }
        let min_layer = fl.iter().map(|l| *l.iter().min().unwrap()).collect();
        Fusions {
            of_layer,
            layers: fl,
            bytes,
            min_layer,
        }
    }
}

/// Per worker: the nominal compute of layers 0..i (`f` of each layer), for
/// i = 0..=L, scaled by the worker's slowdown.
fn prefix_sums(spec: &JobSpec, f: impl Fn(&LayerSpec) -> u64) -> Vec<Vec<u64>> {
    let sums: Vec<u64> = std::iter::once(0)
        .chain(spec.layers.iter().scan(0u64, |acc, l| {
            *acc += f(l);
            Some(*acc)
        }))
        .collect();
    let scale = |s: f64| {
        sums.iter()
            .map(|&x| (x as f64 * s).round() as u64)
            .collect::<Vec<u64>>()
    };
    spec.slowdown.iter().map(|&s| scale(s)).collect()
}

/// A worker before its first forward step.
fn new_worker(layers: usize, iterations: usize, fusions: u32) -> Worker {
    Worker {
        iter: 0,
        phase: Phase::Fwd,
        layer: 0,
        busy: false,
        params_iter: vec![0; layers],
        pending_fusions: vec![fusions; iterations],
        compute_start: 0,
        iter_end: vec![None; iterations],
        iter_start: vec![0; iterations],
        bwd_done: vec![false; iterations],
        bwd_end: vec![0; iterations],
        checkpoint_wake: false,
    }
}

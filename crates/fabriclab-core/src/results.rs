//! Column-oriented results of a simulation, ready to become Arrow tables.

use crate::sim::Simulation;

#[derive(Debug, Default, Clone)]
pub struct FlowColumns {
    pub flow_id: Vec<u32>,
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
    pub size_bytes: Vec<u64>,
    pub class: Vec<u8>,
    pub start_ps: Vec<u64>,
    /// `None` for messages unfinished when the run stopped.
    pub end_ps: Vec<Option<u64>>,
    pub ideal_fct_ps: Vec<u64>,
    pub retransmits: Vec<u64>,
    pub tag: Vec<String>,
}

#[derive(Debug, Default, Clone)]
pub struct LinkColumns {
    pub link_id: Vec<u32>,
    pub from: Vec<String>,
    pub to: Vec<String>,
    pub rate_bps: Vec<u64>,
    pub bytes: Vec<u64>,
    pub packets: Vec<u64>,
    pub drops: Vec<u64>,
    pub ecn_marks: Vec<u64>,
    pub max_queue_bytes: Vec<u64>,
    pub mean_queue_bytes: Vec<f64>,
}

pub fn flow_columns(sim: &Simulation) -> FlowColumns {
    let mut c = FlowColumns::default();
    for (i, m) in sim.messages().iter().enumerate() {
        c.flow_id.push(i as u32);
        c.src.push(m.src);
        c.dst.push(m.dst);
        c.size_bytes.push(m.size_bytes);
        c.class.push(m.class);
        c.start_ps.push(m.start_ps);
        c.end_ps.push(m.end_ps);
        c.ideal_fct_ps.push(m.ideal_fct_ps);
        c.retransmits.push(m.retransmits);
        c.tag.push(sim.app_tag(m.app).to_string());
    }
    c
}

pub fn link_columns(sim: &Simulation) -> LinkColumns {
    let mut c = LinkColumns::default();
    let now = sim.last_active_ps();
    let names = &sim.topology().names;
    for (i, s) in sim.link_stats().into_iter().enumerate() {
        c.link_id.push(i as u32);
        c.from.push(names[s.from as usize].clone());
        c.to.push(names[s.to as usize].clone());
        c.rate_bps.push(s.rate_bps);
        c.bytes.push(s.bytes);
        c.packets.push(s.packets);
        c.drops.push(s.drops);
        c.ecn_marks.push(s.ecn_marks);
        c.max_queue_bytes.push(s.max_queue_bytes);
        c.mean_queue_bytes.push(if now > 0 {
            s.queue_area as f64 / now as f64
        } else {
            0.0
        });
    }
    c
}

/// One row per step of every collective.
#[derive(Debug, Default, Clone)]
pub struct StepColumns {
    pub collective: Vec<String>,
    pub rank: Vec<u32>,
    pub step: Vec<u32>,
    pub op: Vec<String>,
    pub peer: Vec<u32>,
    pub bytes: Vec<u64>,
    pub start_ps: Vec<u64>,
    pub end_ps: Vec<u64>,
}

/// Collective name, start and end (None when it did not finish).
pub fn collective_summary(sim: &Simulation) -> Vec<(String, u64, Option<u64>)> {
    sim.apps()
        .filter_map(|a| {
            a.as_any()
                .downcast_ref::<crate::collective::CollectiveApp>()
        })
        .map(|c| (c.name().to_string(), c.start_ps(), c.end_ps()))
        .collect()
}

pub fn step_columns(sim: &Simulation) -> StepColumns {
    let mut c = StepColumns::default();
    for app in sim.apps().filter_map(|a| {
        a.as_any()
            .downcast_ref::<crate::collective::CollectiveApp>()
    }) {
        for (r, (times, steps)) in app.step_times().iter().zip(app.steps()).enumerate() {
            for (i, (t, s)) in times.iter().zip(steps).enumerate() {
                c.collective.push(app.name().to_string());
                c.rank.push(r as u32);
                c.step.push(i as u32);
                c.op.push(if s.op == fabriclab_plan::Op::Send {
                    "send".into()
                } else {
                    "recv".into()
                });
                c.peer.push(s.peer);
                c.bytes.push(s.bytes);
                c.start_ps.push(t.start_ps);
                c.end_ps.push(t.end_ps);
            }
        }
    }
    c
}

/// Every job's timeline: one row per compute step and per worker's allreduce.
#[derive(Debug, Default, Clone)]
pub struct TimelineColumns {
    pub job: Vec<String>,
    pub worker: Vec<u32>,
    pub kind: Vec<String>,
    pub index: Vec<u32>,
    pub iteration: Vec<u32>,
    pub start_ps: Vec<u64>,
    pub end_ps: Vec<u64>,
}

pub fn timeline_columns(sim: &Simulation) -> TimelineColumns {
    let mut c = TimelineColumns::default();
    for job in sim
        .apps()
        .filter_map(|a| a.as_any().downcast_ref::<crate::job::TrainingJob>())
    {
        for r in job.timeline() {
            c.job.push(job.name().to_string());
            c.worker.push(r.worker);
            c.kind
                .push(["forward", "backward", "allreduce"][r.kind as usize].to_string());
            c.index.push(r.index);
            c.iteration.push(r.iteration);
            c.start_ps.push(r.start_ps);
            c.end_ps.push(r.end_ps);
        }
    }
    c
}

/// Per job, worker and iteration: start and end (None when unfinished).
pub fn job_iterations(sim: &Simulation) -> Vec<(String, u32, u32, u64, Option<u64>)> {
    let mut out = Vec::new();
    for job in sim
        .apps()
        .filter_map(|a| a.as_any().downcast_ref::<crate::job::TrainingJob>())
    {
        for (w, its) in job.iterations().into_iter().enumerate() {
            for (i, (s, e)) in its.into_iter().enumerate() {
                out.push((job.name().to_string(), w as u32, i as u32, s, e));
            }
        }
    }
    out
}

/// Per job: every fusion's (index, lowest layer, bytes).
pub fn job_fusions(sim: &Simulation) -> Vec<(String, u32, u32, u64)> {
    let mut out = Vec::new();
    for job in sim
        .apps()
        .filter_map(|a| a.as_any().downcast_ref::<crate::job::TrainingJob>())
    {
        for (f, (low, bytes)) in job.fusions().into_iter().enumerate() {
            out.push((job.name().to_string(), f as u32, low, bytes));
        }
    }
    out
}

/// Per job: ring messages and bytes sent; at the urgent class from the
/// start; raised to it in flight.
pub fn job_sends(sim: &Simulation) -> Vec<(String, [u64; 6])> {
    sim.apps()
        .filter_map(|a| a.as_any().downcast_ref::<crate::job::TrainingJob>())
        .map(|job| {
            let c = job.send_counts();
            let counts = [
                c.messages,
                c.bytes,
                c.urgent_messages,
                c.urgent_bytes,
                c.raised_messages,
                c.raised_bytes,
            ];
            (job.name().to_string(), counts)
        })
        .collect()
}

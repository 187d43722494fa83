//! A training job's result tables (every job's rows concatenated by name).

use super::TrainingJob;
use crate::engine::{Column, Table};

pub(super) fn tables(job: &TrainingJob) -> Vec<Table> {
    let name = job.name().to_string();
    let its = job.iterations();
    let mut it = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (w, per) in its.into_iter().enumerate() {
        for (i, (s, e)) in per.into_iter().enumerate() {
            it.0.push(w as u32);
            it.1.push(i as u32);
            it.2.push(s);
            it.3.push(e);
        }
    }
    let n_it = it.0.len();
    let fus = job.fusions();
    let c = job.send_counts();
    let tl = job.timeline();
    vec![
        Table::new("job_iterations")
            .col("job", Column::Str(vec![name.clone(); n_it]))
            .col("worker", Column::U32(it.0))
            .col("iteration", Column::U32(it.1))
            .col("start_ps", Column::U64(it.2))
            .col("end_ps", Column::OptU64(it.3)),
        Table::new("job_fusions")
            .col("job", Column::Str(vec![name.clone(); fus.len()]))
            .col("fusion", Column::U32((0..fus.len() as u32).collect()))
            .col(
                "lowest_layer",
                Column::U32(fus.iter().map(|f| f.0).collect()),
            )
            .col("bytes", Column::U64(fus.iter().map(|f| f.1).collect())),
        Table::new("job_sends")
            .col("job", Column::Str(vec![name.clone()]))
            .col("messages", Column::U64(vec![c.messages]))
            .col("bytes", Column::U64(vec![c.bytes]))
            .col("urgent_messages", Column::U64(vec![c.urgent_messages]))
            .col("urgent_bytes", Column::U64(vec![c.urgent_bytes]))
            .col("raised_messages", Column::U64(vec![c.raised_messages]))
            .col("raised_bytes", Column::U64(vec![c.raised_bytes])),
        job.ccl_table(),
        Table::new("timeline")
            .col("job", Column::Str(vec![name; tl.len()]))
            .col("worker", Column::U32(tl.iter().map(|r| r.worker).collect()))
            .col(
                "kind",
                Column::Str(
                    tl.iter()
                        .map(|r| {
                            ["forward", "backward", "allreduce", "checkpoint"][r.kind as usize]
                                .to_string()
                        })
                        .collect(),
                ),
            )
            .col("index", Column::U32(tl.iter().map(|r| r.index).collect()))
            .col(
                "iteration",
                Column::U32(tl.iter().map(|r| r.iteration).collect()),
            )
            .col(
                "start_ps",
                Column::U64(tl.iter().map(|r| r.start_ps).collect()),
            )
            .col("end_ps", Column::U64(tl.iter().map(|r| r.end_ps).collect())),
    ]
}

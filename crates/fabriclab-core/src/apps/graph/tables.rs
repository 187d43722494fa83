//! A graph job's result tables: `graph_iterations` (per rank and
//! iteration), `graph_timeline` (per node run), `graph_groups` (its
//! communicator groups) and `graph_ccl` (per collective message as one
//! member saw it, in the shape of the data-parallel jobs' `job_ccl` plus
//! the op's collective and group).

use super::GraphJob;
use crate::apps::ccl::{self, message_columns, CclRow};
use crate::engine::{Column, Table};
use std::collections::HashMap;

/// The shared rows, a row's rank and peer being members of its group.
#[derive(Default)]
pub(super) struct Ccl {
    pub msgs: ccl::Ccl,
    /// Per op: its plan (for the collective's name).
    pub plan_of: HashMap<u32, u32>,
}

impl Ccl {
    pub fn row(
        &mut self,
        op: u32,
        group: u32,
        member: u32,
        step: u32,
        send: bool,
        peer: u32,
    ) -> &mut CclRow {
        let r = self.msgs.row(op, member, step, send, peer);
        r.group = group;
        r
    }
}

pub(super) fn tables(j: &GraphJob) -> Vec<Table> {
    let s = &j.spec;
    let (mut worker, mut iter, mut start, mut end) = (vec![], vec![], vec![], vec![]);
    for (r, st) in j.ranks.iter().enumerate() {
        for (i, (&a, &b)) in st.iter_start.iter().zip(&st.iter_end).enumerate() {
            worker.push(r as u32);
            iter.push(i as u32);
            start.push(a);
            end.push(b);
        }
    }
    let its = Table::new("graph_iterations")
        .col("job", Column::Str(vec![s.name.clone(); worker.len()]))
        .col("worker", Column::U32(worker))
        .col("iteration", Column::U32(iter))
        .col("start_ps", Column::U64(start))
        .col("end_ps", Column::OptU64(end));
    let tl = &j.timeline;
    let timeline = Table::new("graph_timeline")
        .col("job", Column::Str(vec![s.name.clone(); tl.len()]))
        .col("worker", Column::U32(tl.iter().map(|x| x.rank).collect()))
        .col(
            "kind",
            Column::Str(
                tl.iter()
                    .map(|x| s.labels[x.label as usize].clone())
                    .collect(),
            ),
        )
        .col("index", Column::U32(tl.iter().map(|x| x.index).collect()))
        .col(
            "iteration",
            Column::U32(tl.iter().map(|x| x.iteration).collect()),
        )
        .col(
            "start_ps",
            Column::U64(tl.iter().map(|x| x.start_ps).collect()),
        )
        .col("end_ps", Column::U64(tl.iter().map(|x| x.end_ps).collect()));
    let g = &s.groups;
    let groups = Table::new("graph_groups")
        .col("job", Column::Str(vec![s.name.clone(); g.len()]))
        .col("group", Column::U32((0..g.len() as u32).collect()))
        .col(
            "label",
            Column::Str(
                g.iter()
                    .map(|x| s.labels[x.label as usize].clone())
                    .collect(),
            ),
        )
        .col(
            "ranks",
            Column::Str(
                g.iter()
                    .map(|x| {
                        x.ranks
                            .iter()
                            .map(|r| r.to_string())
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect(),
            ),
        );
    let r: Vec<&CclRow> = j.ccl.msgs.rows.iter().collect();
    let t = Table::new("graph_ccl")
        .col("job", Column::Str(vec![s.name.clone(); r.len()]))
        .col("op", Column::U32(r.iter().map(|x| x.op).collect()))
        .col("group", Column::U32(r.iter().map(|x| x.group).collect()))
        .col(
            "collective",
            Column::Str(
                r.iter()
                    .map(|x| s.plans[j.ccl.plan_of[&x.op] as usize].op.clone())
                    .collect(),
            ),
        )
        .col(
            "algorithm",
            Column::Str(
                r.iter()
                    .map(|x| s.plans[j.ccl.plan_of[&x.op] as usize].algorithm.clone())
                    .collect(),
            ),
        );
    let ccl = message_columns(
        t,
        &r,
        |x, m| g[x.group as usize].ranks[m as usize],
        |k| s.ranks[k as usize].host,
    );
    vec![its, timeline, groups, ccl]
}

//! Collective telemetry shared by the apps that run collectives inside a
//! job (the data-parallel training jobs, `job/telemetry.rs`, and the
//! dependency-graph jobs, `graph/tables.rs`): one row per message as one
//! rank saw it, its send or its receive, in the shape of the `ccl.parquet`
//! rows (docs/telemetry.md) with times in picoseconds. This module is the
//! one writer of those rows' columns; each app adds its own leading ones
//! (job name, op, group, collective, algorithm).

use crate::engine::{Column, Table};
use std::collections::HashMap;

/// One message as one rank saw it. `rank` and `peer` are the app's own
/// numbering (a job's worker, a group's member).
#[derive(Debug, Clone, Default)]
pub struct CclRow {
    pub op: u32,
    /// The communicator group (0 where the app has one).
    pub group: u32,
    pub rank: u32,
    pub peer: u32,
    pub step: u32,
    pub send: bool,
    pub bytes: u64,
    pub reduce: bool,
    pub post_ps: Option<u64>,
    /// Send: its message left; receive: its message arrived.
    pub start_ps: Option<u64>,
    /// Send: its message arrived; receive: reduced or copied.
    pub end_ps: Option<u64>,
}

/// Rows in the order they were first touched (deterministic), indexed by
/// (op, rank, step, send).
#[derive(Default)]
pub struct Ccl {
    pub rows: Vec<CclRow>,
    index: HashMap<(u32, u32, u32, bool), usize>,
}

impl Ccl {
    /// The row of `rank`'s step `step` of op `op` (created on first use).
    pub fn row(&mut self, op: u32, rank: u32, step: u32, send: bool, peer: u32) -> &mut CclRow {
        let n = self.rows.len();
        let k = *self.index.entry((op, rank, step, send)).or_insert(n);
        if k == n {
            self.rows.push(CclRow {
                op,
                rank,
                peer,
                step,
                send,
                ..Default::default()
            });
        }
        &mut self.rows[k]
    }

    /// Sets the post time unless it is set already.
    pub fn post(&mut self, op: u32, rank: u32, step: u32, send: bool, peer: u32, t: u64) {
        self.row(op, rank, step, send, peer)
            .post_ps
            .get_or_insert(t);
    }
}

/// `t` with the message columns of `rows` appended: rank, host, peer, step,
/// kind, bytes, reduce, post_ps, start_ps, end_ps. `rank` maps a row's rank
/// or peer (the app's numbering) to the job's rank, `host` a job rank to
/// its host.
pub fn message_columns(
    t: Table,
    rows: &[&CclRow],
    rank: impl Fn(&CclRow, u32) -> u32,
    host: impl Fn(u32) -> u32,
) -> Table {
    let col = |f: &dyn Fn(&CclRow) -> u32| Column::U32(rows.iter().map(|x| f(x)).collect());
    let opt =
        |f: &dyn Fn(&CclRow) -> Option<u64>| Column::OptU64(rows.iter().map(|x| f(x)).collect());
    t.col("rank", col(&|x| rank(x, x.rank)))
        .col("host", col(&|x| host(rank(x, x.rank))))
        .col("peer", col(&|x| rank(x, x.peer)))
        .col("step", col(&|x| x.step))
        .col(
            "kind",
            Column::Str(
                rows.iter()
                    .map(|x| if x.send { "send" } else { "recv" }.to_string())
                    .collect(),
            ),
        )
        .col("bytes", Column::U64(rows.iter().map(|x| x.bytes).collect()))
        .col("reduce", col(&|x| x.reduce as u32))
        .col("post_ps", opt(&|x| x.post_ps))
        .col("start_ps", opt(&|x| x.start_ps))
        .col("end_ps", opt(&|x| x.end_ps))
}

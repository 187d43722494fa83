//! The `aggregation_workers` result table, one schema for both backends
//! (Python reads it the same way whichever produced it).

use crate::engine::{Column, Table};

/// One aggregation worker's counts (per host and job).
#[derive(Debug, Clone, Default)]
pub struct WorkerCounts {
    pub host: String,
    pub job: u16,
    pub messages: u64,
    pub packets_sent: u64,
    pub results: u64,
    pub marked_results: u64,
    pub given_up: u64,
    pub skipped: u64,
    pub peak_window_packets: u64,
}

pub fn workers_table(rows: &[WorkerCounts]) -> Table {
    let u64s = |f: fn(&WorkerCounts) -> u64| Column::U64(rows.iter().map(f).collect());
    Table::new("aggregation_workers")
        .col(
            "host",
            Column::Str(rows.iter().map(|r| r.host.clone()).collect()),
        )
        .col(
            "job",
            Column::U32(rows.iter().map(|r| r.job as u32).collect()),
        )
        .col("messages", u64s(|r| r.messages))
        .col("packets_sent", u64s(|r| r.packets_sent))
        .col("results", u64s(|r| r.results))
        .col("marked_results", u64s(|r| r.marked_results))
        .col("given_up", u64s(|r| r.given_up))
        .col("skipped", u64s(|r| r.skipped))
        .col("peak_window_packets", u64s(|r| r.peak_window_packets))
}

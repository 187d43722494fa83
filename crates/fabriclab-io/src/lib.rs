//! Results of a run that leave the core as files: its tables (flows, links,
//! messages, queue samples, per-class bytes) as Arrow record batches
//! encoded as Parquet ([`tables`]), and the flow and link figures of
//! `summary.json` ([`stats`]). A plain `fabriclab run`
//! writes these bytes as they are, so it needs neither numpy nor pyarrow
//! (issue 13: 0.08-0.09 s of a 0.6 s process). Kept out of the core crate so
//! that the core's own tests do not build Arrow.

pub mod stats;
pub mod tables;

pub use arrow_array::RecordBatch;

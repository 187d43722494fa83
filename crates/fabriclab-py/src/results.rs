//! The run's flows and links files and summary figures (fabriclab-io) for
//! Python: Parquet as bytes, statistics as dicts with the keys of
//! `summary.json`.

use fabriclab_core::results::{FlowColumns, LinkColumns};
use fabriclab_io::stats::{self, FctStats, FlowSummary, LinkSummary};
use fabriclab_io::tables::{flows_batch, links_batch, parquet_bytes};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

pub fn flows_parquet(c: &FlowColumns) -> Result<Vec<u8>, String> {
    parquet_bytes(&flows_batch(c).map_err(|e| e.to_string())?)
}

pub fn links_parquet(c: &LinkColumns, duration_ps: u64) -> Result<Vec<u8>, String> {
    parquet_bytes(&links_batch(c, duration_ps).map_err(|e| e.to_string())?)
}

/// A core table encoded by `batch` as Parquet bytes.
pub fn table_parquet(
    t: &fabriclab_core::engine::Table,
    batch: impl Fn(&fabriclab_core::engine::Table) -> Result<fabriclab_io::RecordBatch, String>,
) -> Result<Vec<u8>, String> {
    parquet_bytes(&batch(t)?)
}

fn stats_dict<'py>(py: Python<'py>, s: &FctStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("flows", s.flows)?;
    d.set_item("finished", s.finished)?;
    if let Some(f) = &s.figures {
        d.set_item("fct_mean_ps", f.fct_mean_ps)?;
        d.set_item("fct_p50_ps", f.fct_p50_ps)?;
        d.set_item("fct_p99_ps", f.fct_p99_ps)?;
        d.set_item("fct_p999_ps", f.fct_p999_ps)?;
        d.set_item("slowdown_mean", f.slowdown_mean)?;
        d.set_item("slowdown_p99", f.slowdown_p99)?;
    }
    Ok(d)
}

pub fn flow_summary_dict<'py>(py: Python<'py>, s: &FlowSummary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("flows_total", s.all.flows)?;
    d.set_item("flows_finished", s.all.finished)?;
    d.set_item("retransmits", s.retransmits)?;
    let fct = PyDict::new(py);
    for (name, st) in [
        ("all", &s.all),
        ("small", &s.small),
        ("medium", &s.medium),
        ("large", &s.large),
    ] {
        fct.set_item(name, stats_dict(py, st)?)?;
    }
    d.set_item("fct", fct)?;
    let by_class = PyDict::new(py);
    for (k, st) in &s.by_class {
        by_class.set_item(k.to_string(), stats_dict(py, st)?)?;
    }
    d.set_item("fct_by_class", by_class)?;
    Ok(d)
}

pub fn link_summary_dict<'py>(py: Python<'py>, s: &LinkSummary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("max_utilization", s.max_utilization)?;
    d.set_item("mean_utilization", s.mean_utilization)?;
    d.set_item("drops", s.drops)?;
    d.set_item("ecn_marks", s.ecn_marks)?;
    d.set_item("max_queue_bytes", s.max_queue_bytes)?;
    Ok(d)
}

/// FCT statistics of flows given their FCTs (NaN where unfinished) and
/// slowdowns: the summary's figures, for tables read back (reports).
#[pyfunction]
pub fn fct_stats<'py>(
    py: Python<'py>,
    fct_ps: Vec<f64>,
    slowdown: Vec<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    if fct_ps.len() != slowdown.len() {
        return Err(PyValueError::new_err("fct_stats: one slowdown per FCT"));
    }
    stats_dict(py, &stats::fct_stats(&fct_ps, &slowdown))
}

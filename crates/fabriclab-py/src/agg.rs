//! Binding of fabriclab-agg: the aggregation packet's one definition for
//! Python (`agg_encode`, `agg_decode`), the software aggregator
//! (`agg_serve`), its load generator (`agg_load`) and the gradient values
//! of functional simulations (`agg_worker_values`). Bad input raises
//! ValueError naming the argument.

use fabriclab_agg::udp::{load_worker, serve, AggJob, AggStats};
use fabriclab_agg::wire::{decode_packet, encode_packet, Header};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn addr(field: &str, a: &str) -> PyResult<SocketAddr> {
    a.parse().map_err(|e| {
        PyValueError::new_err(format!("{field}: {a:?} is not an IP address and port: {e}"))
    })
}

fn secs(field: &str, s: f64) -> PyResult<Duration> {
    if !(s.is_finite() && s > 0.0 && s < 1e9) {
        return Err(PyValueError::new_err(format!(
            "{field}: must be a positive number of seconds, got {s}"
        )));
    }
    Ok(Duration::from_secs_f64(s))
}

fn os(e: std::io::Error) -> PyErr {
    PyOSError::new_err(e.to_string())
}

/// The float32 values (little-endian bytes) worker `worker` (a host index)
/// contributes in packet `packet` of its `message`-th contribution to
/// aggregation job `job` in a functional run with scenario seed `seed`.
#[pyfunction]
fn agg_worker_values<'py>(
    py: Python<'py>,
    seed: u64,
    job: u16,
    worker: u32,
    message: u64,
    packet: u64,
    count: u32,
) -> Bound<'py, PyBytes> {
    let v = fabriclab_agg::values::worker_vector(seed, job, worker, message, packet, count);
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    PyBytes::new(py, &bytes)
}

/// A packet's bytes: `header` a dict of the figure-4 fields, `vector` float32 bytes (little-endian).
#[pyfunction]
fn agg_encode<'py>(
    py: Python<'py>,
    header: &Bound<'py, PyDict>,
    vector: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    let get = |k: &str| -> PyResult<Option<Bound<'py, PyAny>>> { header.get_item(k) };
    macro_rules! field {
        ($k:literal, $t:ty, $d:expr) => {
            match get($k)? {
                Some(v) => v.extract::<$t>().map_err(|_| {
                    PyValueError::new_err(format!(
                        "header.{}: out of range for {}",
                        $k,
                        stringify!($t)
                    ))
                })?,
                None => $d,
            }
        };
    }
    if !vector.len().is_multiple_of(4) || vector.len() / 4 > u16::MAX as usize {
        return Err(PyValueError::new_err(format!(
            "vector: {} bytes is not a whole number of at most 65535 float32s",
            vector.len()
        )));
    }
    let v: Vec<f32> = vector
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let h = Header {
        job: field!("job", u16, 0),
        tree: field!("tree", u8, 0),
        vid: field!("vid", u32, 0),
        fin: field!("fin", bool, false),
        result: field!("result", bool, false),
        ecn: field!("ecn", u8, 0),
        cwnd_cap: field!("cwnd_cap", u16, u16::MAX),
        count: v.len() as u16,
        workers: field!("workers", u16, 1),
    };
    if h.ecn > 3 {
        return Err(PyValueError::new_err(format!(
            "header.ecn: an ECN codepoint is 0..3, got {}",
            h.ecn
        )));
    }
    let mut out = Vec::new();
    encode_packet(&h, &v, &mut out);
    Ok(PyBytes::new(py, &out))
}

/// (header dict, float32 bytes) of a packet.
#[pyfunction]
fn agg_decode<'py>(
    py: Python<'py>,
    packet: &[u8],
) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyBytes>)> {
    let (h, v) =
        decode_packet(packet).map_err(|e| PyValueError::new_err(format!("packet: {e}")))?;
    let d = PyDict::new(py);
    d.set_item("job", h.job)?;
    d.set_item("tree", h.tree)?;
    d.set_item("vid", h.vid)?;
    d.set_item("fin", h.fin)?;
    d.set_item("result", h.result)?;
    d.set_item("ecn", h.ecn)?;
    d.set_item("cwnd_cap", h.cwnd_cap)?;
    d.set_item("count", h.count)?;
    d.set_item("workers", h.workers)?;
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    Ok((d, PyBytes::new(py, &bytes)))
}

fn stats_dict<'py>(py: Python<'py>, st: &AggStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("packets_in", st.packets_in)?;
    d.set_item("packets_out", st.packets_out)?;
    d.set_item("gradient_bytes_in", st.gradient_bytes_in)?;
    d.set_item("malformed", st.malformed)?;
    d.set_item("busy_s", st.busy.as_secs_f64())?;
    let c = &st.counters;
    for (k, v) in [
        ("received", c.received),
        ("aggregated", c.aggregated),
        ("skipped", c.skipped),
        ("stale", c.stale),
        ("overflow", c.overflow),
        ("unknown", c.unknown),
        ("results_sent", c.results_sent),
    ] {
        d.set_item(k, v)?;
    }
    Ok(d)
}

/// Runs the aggregator at `bind` for `jobs` [(job, trees, [worker "ip:port", ...])] until
/// `idle_s` pass without a packet (from the start, too); returns its counts.
#[pyfunction]
#[pyo3(signature = (bind, jobs, memory_bytes=64 << 20, idle_s=2.0))]
fn agg_serve<'py>(
    py: Python<'py>,
    bind: &str,
    jobs: Vec<(u16, u8, Vec<String>)>,
    memory_bytes: u64,
    idle_s: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let bind = addr("bind", bind)?;
    let idle = secs("idle_s", idle_s)?;
    if memory_bytes == 0 {
        return Err(PyValueError::new_err(
            "memory_bytes: the accelerator needs a buffer (64 MB in the paper), got 0",
        ));
    }
    let mut js = Vec::new();
    for (i, (job, trees, workers)) in jobs.into_iter().enumerate() {
        if trees == 0 {
            return Err(PyValueError::new_err(format!(
                "jobs[{i}].trees: a job needs at least one tree"
            )));
        }
        if workers.is_empty() {
            return Err(PyValueError::new_err(format!(
                "jobs[{i}].workers: a job needs at least one worker"
            )));
        }
        let workers = workers
            .iter()
            .enumerate()
            .map(|(k, w)| addr(&format!("jobs[{i}].workers[{k}]"), w))
            .collect::<PyResult<_>>()?;
        js.push(AggJob {
            job,
            trees,
            workers,
        });
    }
    let sock = UdpSocket::bind(bind).map_err(os)?;
    let stop = AtomicBool::new(false);
    let st = py
        .detach(|| serve(&sock, &js, memory_bytes, idle, &stop))
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidInput => PyValueError::new_err(e.to_string()),
            _ => os(e),
        })?;
    stats_dict(py, &st)
}

/// One load-generating worker (see fabriclab_agg::udp::load_worker); returns its counts.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (aggregator, bind, job, rank, workers, trees, packets, count, window, timeout_s=5.0))]
fn agg_load<'py>(
    py: Python<'py>,
    aggregator: &str,
    bind: &str,
    job: u16,
    rank: usize,
    workers: usize,
    trees: u8,
    packets: u64,
    count: u16,
    window: u32,
    timeout_s: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let agg = addr("aggregator", aggregator)?;
    let bind = addr("bind", bind)?;
    let timeout = secs("timeout_s", timeout_s)?;
    if window == 0 || trees == 0 || rank >= workers {
        return Err(PyValueError::new_err(
            "window and trees must be positive and rank below workers",
        ));
    }
    let sock = UdpSocket::bind(bind).map_err(os)?;
    let st = py
        .detach(|| {
            load_worker(
                &sock, agg, job, rank, workers, trees, packets, count, window, timeout,
            )
        })
        .map_err(os)?;
    let d = PyDict::new(py);
    d.set_item("packets", st.packets)?;
    d.set_item("results", st.results)?;
    d.set_item("wrong", st.wrong)?;
    d.set_item("timeouts", st.timeouts)?;
    d.set_item("elapsed_s", st.elapsed.as_secs_f64())?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(agg_encode, m)?)?;
    m.add_function(wrap_pyfunction!(agg_decode, m)?)?;
    m.add_function(wrap_pyfunction!(agg_serve, m)?)?;
    m.add_function(wrap_pyfunction!(agg_load, m)?)?;
    m.add_function(wrap_pyfunction!(agg_worker_values, m)?)?;
    Ok(())
}

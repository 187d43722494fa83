//! Binding of fabriclab-runtime: `fabriclab._core.RtCommunicator`, one
//! rank's communicator. Errors become `RtError(kind, peer, message)`;
//! `fabriclab.runtime` turns them into its own exception classes.

use fabriclab_runtime::clock::{EmulatedClock, RocketClock};
use fabriclab_runtime::{Communicator, Config, DType, Fault, Prepared, RtError as CoreError};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::{Arc, Mutex};
use std::time::Duration;

create_exception!(
    _core,
    RtError,
    PyException,
    "A runtime failure: args are (kind, peer or None, message)."
);

fn err(e: CoreError) -> PyErr {
    RtError::new_err((e.kind_name(), e.peer, e.message))
}

fn input(m: String) -> PyErr {
    RtError::new_err(("input", None::<u32>, m))
}

/// How many prepared plans a communicator keeps (keyed by their JSON text).
const PLAN_CACHE: usize = 16;

#[pyclass(name = "RtCommunicator")]
pub struct RtCommunicator {
    comm: Mutex<Option<Communicator>>,
    plans: Mutex<Vec<(String, Arc<Prepared>)>>,
    rank: u32,
    world_size: u32,
}

fn secs(field: &str, s: f64) -> PyResult<Duration> {
    if !(s.is_finite() && s > 0.0 && s < 1e9) {
        return Err(input(format!(
            "{field}: must be a positive number of seconds, got {s}"
        )));
    }
    Ok(Duration::from_secs_f64(s))
}

/// Packet Rocket's clock from the options; the emulated clock's epoch
/// defaults to the correction table's `clock_epoch_ns`, else to now (the
/// clock agent's default: its start).
fn rocket_clock(
    rank: u32,
    world_size: u32,
    mode: Option<&str>,
    emulated: (i64, f64, Option<i64>),
    correction: Option<&str>,
) -> PyResult<RocketClock> {
    RocketClock::from_options(rank, world_size, mode, emulated, correction).map_err(input)
}

/// Rank `rank`'s Packet Rocket reading (ns) at true time `true_ns`
/// (CLOCK_REALTIME) under the given options: what the runtime's stamps read.
/// A correction table corrects to rank 0's clock, so its residual error is
/// this minus rank 0's reading at the same `true_ns` (rocket_table's
/// `residual_ns`); minus `true_ns` only when rank 0 has no emulated error.
#[pyfunction]
#[pyo3(signature = (rank, world_size, true_ns, packet_rocket_clock=None, clock_offset_ns=0, clock_drift_ppm=0.0,
    clock_epoch_ns=None, packet_rocket_correction=None))]
#[allow(clippy::too_many_arguments)]
pub fn rocket_clock_reading(
    rank: u32,
    world_size: u32,
    true_ns: u64,
    packet_rocket_clock: Option<&str>,
    clock_offset_ns: i64,
    clock_drift_ppm: f64,
    clock_epoch_ns: Option<i64>,
    packet_rocket_correction: Option<&str>,
) -> PyResult<u64> {
    let c = rocket_clock(
        rank,
        world_size,
        packet_rocket_clock,
        (clock_offset_ns, clock_drift_ppm, clock_epoch_ns),
        packet_rocket_correction,
    )?;
    Ok(c.reading_ns(true_ns))
}

/// The emulated clocks' epoch (ns) a rank of a `world_size` job resolves
/// from its options: `clock_epoch_ns` if given (refused if the table says
/// another), else the correction table's `clock_epoch_ns`, else now. The
/// table is read and checked as a rank reads it.
#[pyfunction]
#[pyo3(signature = (world_size, clock_epoch_ns=None, packet_rocket_correction=None))]
pub fn rocket_clock_epoch(
    world_size: u32,
    clock_epoch_ns: Option<i64>,
    packet_rocket_correction: Option<&str>,
) -> PyResult<i64> {
    let c = rocket_clock(
        0,
        world_size,
        Some("host"),
        (0, 0.0, clock_epoch_ns),
        packet_rocket_correction,
    )?;
    Ok(c.emulated.epoch_ns)
}

/// An emulated host clock's reading (ns) at true time `true_ns`: the one
/// implementation, used by the runtime's Packet Rocket and by the clock
/// agent's stamps (python/fabriclab/observe/clock/agent.py).
#[pyfunction]
pub fn emulated_clock_ns(true_ns: i64, offset_ns: i64, drift_ppm: f64, epoch_ns: i64) -> i64 {
    EmulatedClock {
        offset_ns,
        drift_ppm,
        epoch_ns,
    }
    .read_ns(true_ns)
}

#[pymethods]
impl RtCommunicator {
    #[new]
    #[pyo3(signature = (rank, world_size, master_addr, master_port, token, bind_addr=None, streams=1,
        timeout_s=5.0, connect_timeout_s=60.0, checksum=false, telemetry=false, fault=None, late_timeout_s=600.0,
        packet_rocket_threshold_us=None, packet_rocket_clock=None, clock_offset_ns=0, clock_drift_ppm=0.0,
        clock_epoch_ns=None, packet_rocket_correction=None, packet_rocket_correction_reload_ms=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        rank: u32,
        world_size: u32,
        master_addr: &str,
        master_port: u16,
        token: &str,
        bind_addr: Option<&str>,
        streams: u32,
        timeout_s: f64,
        connect_timeout_s: f64,
        checksum: bool,
        telemetry: bool,
        fault: Option<(String, u32, u32)>,
        late_timeout_s: f64,
        packet_rocket_threshold_us: Option<f64>,
        packet_rocket_clock: Option<&str>,
        clock_offset_ns: i64,
        clock_drift_ppm: f64,
        clock_epoch_ns: Option<i64>,
        packet_rocket_correction: Option<&str>,
        packet_rocket_correction_reload_ms: Option<f64>,
    ) -> PyResult<Self> {
        let mut c = Config::new(rank, world_size, master_addr, master_port, token);
        c.bind_addr = bind_addr
            .map(|a| {
                a.parse()
                    .map_err(|e| input(format!("bind_addr: {a:?} is not an IP address: {e}")))
            })
            .transpose()?;
        c.streams = streams;
        c.timeout = secs("timeout_s", timeout_s)?;
        c.late_timeout = secs("late_timeout_s", late_timeout_s)?;
        c.connect_timeout = secs("connect_timeout_s", connect_timeout_s)?;
        c.checksum = checksum;
        c.telemetry = telemetry;
        c.packet_rocket_threshold = match packet_rocket_threshold_us {
            None => None,
            Some(t) if t.is_finite() && (0.0..1e9).contains(&t) => {
                Some(Duration::from_nanos((t * 1e3).round() as u64))
            }
            Some(t) => {
                return Err(input(format!(
                    "packet_rocket_threshold_us: must be a number of microseconds >= 0, got {t}"
                )))
            }
        };
        // the table's mtime before it is read: a refit landing in between is taken at the first check (B6)
        let table_mtime = packet_rocket_correction.and_then(fabriclab_runtime::clock::table_mtime);
        c.rocket_clock = rocket_clock(
            rank,
            world_size,
            packet_rocket_clock,
            (clock_offset_ns, clock_drift_ppm, clock_epoch_ns),
            packet_rocket_correction,
        )?;
        if let Some(ms) = packet_rocket_correction_reload_ms {
            // 0 would stat() the file at every stamp and echo: at least 1 ms
            if !(ms.is_finite() && (1.0..1e9).contains(&ms)) {
                return Err(input(format!(
                    "packet_rocket_correction_reload_ms: must be a number of milliseconds within 1 and 1e9 \
                     (below 1e9), got {ms}"
                )));
            }
            c.rocket_clock = c
                .rocket_clock
                .with_reload_since(
                    packet_rocket_correction.unwrap_or_default(),
                    world_size,
                    Duration::from_secs_f64(ms / 1e3),
                    table_mtime,
                )
                .map_err(input)?;
        }
        c.fault = match fault {
            None => None,
            Some((k, peer, seq)) if k == "corrupt" => Some(Fault::Corrupt { peer, seq }),
            Some((k, peer, seq)) if k == "truncate" => Some(Fault::Truncate { peer, seq }),
            Some((k, _, _)) => {
                return Err(input(format!("fault: {k:?} is not corrupt or truncate")))
            }
        };
        let comm = py.detach(|| Communicator::new(c)).map_err(err)?;
        Ok(RtCommunicator {
            comm: Mutex::new(Some(comm)),
            plans: Mutex::new(Vec::new()),
            rank,
            world_size,
        })
    }

    #[getter]
    fn rank(&self) -> u32 {
        self.rank
    }
    #[getter]
    fn world_size(&self) -> u32 {
        self.world_size
    }

    /// Runs this rank's part of the plan in place on `nbytes` at address
    /// `ptr` (a C-contiguous, writable array the caller keeps alive), with
    /// the GIL released. Returns the op id.
    fn run(
        &self,
        py: Python<'_>,
        plan_json: &str,
        ptr: usize,
        nbytes: usize,
        dtype: &str,
    ) -> PyResult<u64> {
        let dt = DType::parse(dtype).map_err(input)?;
        let prepared = {
            let mut plans = self.plans.lock().unwrap();
            match plans.iter().position(|(t, _)| t == plan_json) {
                Some(i) => plans[i].1.clone(),
                None => {
                    let p = Arc::new(Prepared::new(plan_json, self.rank).map_err(err)?);
                    if plans.len() >= PLAN_CACHE {
                        plans.remove(0);
                    }
                    plans.push((plan_json.to_string(), p.clone()));
                    p
                }
            }
        };
        if ptr == 0 && nbytes > 0 {
            return Err(input("buffer: null pointer".into()));
        }
        // The communicator's lock is taken without the GIL: a thread waiting for
        // it while holding the GIL would keep the running thread from returning.
        let ran = py.detach(|| {
            let mut guard = self.comm.lock().unwrap();
            guard.as_mut().map(|comm| {
                // SAFETY: the Python caller passes a live, writable, contiguous
                // array of nbytes and holds a reference to it during the call.
                let buf = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, nbytes) };
                comm.run(&prepared, buf, dt)
            })
        });
        ran.ok_or_else(|| input("communicator: closed".into()))?
            .map_err(err)
    }

    /// Telemetry since the last call, as columns (lists) by name.
    fn take_telemetry<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let recs = py.detach(|| match self.comm.lock().unwrap().as_mut() {
            Some(c) => c.take_telemetry(),
            None => Vec::new(),
        });
        let d = PyDict::new(py);
        macro_rules! col {
            ($name:expr, $f:expr) => {
                d.set_item($name, recs.iter().map($f).collect::<Vec<_>>())?
            };
        }
        col!("op_id", |r| r.op_id);
        col!("rank", |r| r.rank);
        col!("peer", |r| r.peer);
        col!("step", |r| r.step);
        col!("kind", |r| if r.is_send { "send" } else { "recv" });
        col!("seq", |r| r.seq);
        col!("offset_bytes", |r| r.offset_bytes);
        col!("bytes", |r| r.bytes);
        col!("stream", |r| r.stream);
        col!("reduce", |r| r.reduce);
        col!("post_mono_ns", |r| r.post.mono_ns);
        col!("start_mono_ns", |r| r.start.mono_ns);
        col!("end_mono_ns", |r| r.end.mono_ns);
        col!("post_real_ns", |r| r.post.real_ns);
        col!("start_real_ns", |r| r.start.real_ns);
        col!("end_real_ns", |r| r.end.real_ns);
        col!("wait_ns", |r| r.wait_ns);
        Ok(d)
    }

    /// Packet Rocket's counters summed over this rank's connections since
    /// it joined, or None when it is off.
    fn rocket_stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let st = py.detach(|| {
            self.comm
                .lock()
                .unwrap()
                .as_ref()
                .and_then(|c| c.rocket_stats())
        });
        let Some(st) = st else { return Ok(None) };
        let d = PyDict::new(py);
        d.set_item("echoes", st.echoes)?;
        d.set_item("pauses", st.pauses)?;
        d.set_item("paused_ns", st.paused_ns)?;
        d.set_item("held_ns", st.held_ns)?;
        Ok(Some(d))
    }

    /// Closes every connection (also done when the object is collected).
    fn close(&self, py: Python<'_>) {
        py.detach(|| drop(self.comm.lock().unwrap().take()));
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RtCommunicator>()?;
    m.add_function(wrap_pyfunction!(rocket_clock_reading, m)?)?;
    m.add_function(wrap_pyfunction!(emulated_clock_ns, m)?)?;
    m.add_function(wrap_pyfunction!(rocket_clock_epoch, m)?)?;
    m.add("RtError", m.py().get_type::<RtError>())?;
    Ok(())
}

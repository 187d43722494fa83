//! Thin PyO3 binding of fabriclab-core: the module `fabriclab._core`.
//! Errors of the scenario become `ValueError`. A panic inside the core (a
//! bug) is caught at this boundary with `catch_unwind` and raised as
//! `CorePanic` (a `RuntimeError`) carrying the panic message and location;
//! its default report on stderr is suppressed, and the simulator that
//! panicked refuses further calls.

mod agg;
mod results;
mod runtime;

use fabriclab_core::apps::traffic::Cdf;
use fabriclab_core::engine::{Column, Simulation, Table};
use fabriclab_core::results::{
    class_table, flow_columns, link_columns, message_table, queue_table,
};
use fabriclab_io::stats::{flow_summary, link_summary};
use fabriclab_io::tables::{classes_batch, messages_batch, queues_batch};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use rand::SeedableRng;
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

create_exception!(
    _core,
    CorePanic,
    PyRuntimeError,
    "The simulation core panicked: a bug, not bad input."
);

thread_local! {
    /// Set while this thread runs core code under [`guarded`].
    static IN_CORE: Cell<bool> = const { Cell::new(false) };
    /// The last panic's message and location on this thread.
    static PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Chains a panic hook that records panics raised inside [`guarded`] instead
/// of printing them; other panics (other Rust extensions) go to the previous hook.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_CORE.with(Cell::get) {
                PANIC.with(|p| *p.borrow_mut() = Some(info.to_string()));
            } else {
                prev(info);
            }
        }));
    });
}

/// Runs core code, turning a panic into `CorePanic`.
fn guarded<T>(f: impl FnOnce() -> T) -> PyResult<T> {
    let was = IN_CORE.with(|c| c.replace(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    IN_CORE.with(|c| c.set(was));
    r.map_err(|_| {
        let msg = PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| "unknown panic".into());
        CorePanic::new_err(format!("the simulation core panicked: {msg}"))
    })
}

/// A simulation built from a resolved scenario (JSON).
#[pyclass(module = "fabriclab._core")]
struct Simulator {
    sim: Simulation,
    /// Set once the core panicked: its state can no longer be trusted.
    poisoned: bool,
}

impl Simulator {
    /// Runs `f` on the simulation unless an earlier call panicked.
    fn with<T>(&mut self, f: impl FnOnce(&mut Simulation) -> T) -> PyResult<T> {
        if self.poisoned {
            return Err(CorePanic::new_err(
                "the simulation core panicked earlier; this simulator cannot be used",
            ));
        }
        let sim = &mut self.sim;
        let r = guarded(|| f(sim));
        self.poisoned = r.is_err();
        r
    }
}

#[pymethods]
impl Simulator {
    #[new]
    fn new(spec_json: &str) -> PyResult<Self> {
        let sim = guarded(|| fabriclab_core::build_from_json(spec_json))?
            .map_err(PyValueError::new_err)?;
        Ok(Simulator {
            sim,
            poisoned: false,
        })
    }

    /// The node ids of the path ECMP gives a message from host `src` to host
    /// `dst` (host indices) with this source port, over the links up now;
    /// None when there is none.
    fn ecmp_path(&mut self, src: u32, dst: u32, src_port: u16) -> PyResult<Option<Vec<u32>>> {
        self.with(|sim| sim.ecmp_path(src, dst, src_port))
    }

    /// Runs all events up to `until_ps` with the GIL released; returns whether events remain.
    fn run_until(&mut self, py: Python<'_>, until_ps: u64) -> PyResult<bool> {
        py.detach(|| self.with(|sim| sim.run_until(until_ps)))?
            .map_err(PyValueError::new_err)
    }

    #[getter]
    fn now_ps(&self) -> u64 {
        self.sim.now_ps()
    }

    /// Time of the last effective event (the end of simulated activity).
    #[getter]
    fn last_active_ps(&self) -> u64 {
        self.sim.last_active_ps()
    }

    #[getter]
    fn events(&self) -> u64 {
        self.sim.events()
    }

    /// Packets and connections (packet backend) or flows (flow backend) still in the network.
    #[getter]
    fn in_flight(&self) -> usize {
        self.sim.in_flight()
    }

    /// `flows.parquet`'s bytes (docs/scenario.md, "Outputs").
    fn flows_parquet<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = guarded(|| results::flows_parquet(&flow_columns(&self.sim)))?;
        Ok(PyBytes::new(py, &bytes.map_err(PyRuntimeError::new_err)?))
    }

    /// `links.parquet`'s bytes, utilization over the run's active time.
    fn links_parquet<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let last = self.sim.last_active_ps();
        let bytes = guarded(|| results::links_parquet(&link_columns(&self.sim), last))?;
        Ok(PyBytes::new(py, &bytes.map_err(PyRuntimeError::new_err)?))
    }

    /// `flows.parquet`'s bytes and the flow figures of `summary.json`
    /// (flows_total, flows_finished, retransmits, fct {all, small, medium,
    /// large}, fct_by_class), from one reading of the flows.
    fn flow_results<'py>(
        &self,
        py: Python<'py>,
        small_max_bytes: u64,
        large_min_bytes: u64,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyDict>)> {
        let (bytes, s) = guarded(|| {
            let c = flow_columns(&self.sim);
            (
                results::flows_parquet(&c),
                flow_summary(&c, small_max_bytes, large_min_bytes),
            )
        })?;
        let bytes = PyBytes::new(py, &bytes.map_err(PyRuntimeError::new_err)?);
        Ok((bytes, results::flow_summary_dict(py, &s)?))
    }

    /// `links.parquet`'s bytes and the link figures of `summary.json`
    /// (utilization over the run's active time), from one reading of the links.
    fn link_results<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyDict>)> {
        let last = self.sim.last_active_ps();
        let (bytes, s) = guarded(|| {
            let c = link_columns(&self.sim);
            (results::links_parquet(&c, last), link_summary(&c, last))
        })?;
        let bytes = PyBytes::new(py, &bytes.map_err(PyRuntimeError::new_err)?);
        Ok((bytes, results::link_summary_dict(py, &s)?))
    }

    /// Every app's result tables: {table name: {column: list}} (tables of
    /// one name from several apps concatenated).
    fn app_tables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let tables = guarded(|| self.sim.app_tables())?;
        let d = PyDict::new(py);
        for t in tables {
            d.set_item(t.name.clone(), table_dict(py, t)?)?;
        }
        Ok(d)
    }

    /// Every message (app, tag, hosts, size, class, start, first byte, end,
    /// retransmits, path) as a dict of columns.
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t = guarded(|| message_table(&self.sim))?;
        table_dict(py, t)
    }

    /// `messages.parquet`'s bytes.
    fn messages_parquet<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = guarded(|| results::table_parquet(&message_table(&self.sim), messages_batch))?;
        Ok(PyBytes::new(py, &bytes.map_err(PyRuntimeError::new_err)?))
    }

    /// `queues.parquet`'s bytes (the queue samples).
    fn queues_parquet<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = guarded(|| results::table_parquet(&queue_table(&self.sim), queues_batch))?;
        Ok(PyBytes::new(py, &bytes.map_err(PyRuntimeError::new_err)?))
    }

    /// `classes.parquet`'s bytes (per port and class transmitted bytes).
    fn classes_parquet<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = guarded(|| results::table_parquet(&class_table(&self.sim), classes_batch))?;
        Ok(PyBytes::new(py, &bytes.map_err(PyRuntimeError::new_err)?))
    }

    /// Rows of queue samples taken.
    #[getter]
    fn queue_rows(&self) -> usize {
        self.sim.samples().rows.len()
    }

    /// The hosts' names, in host-index order (the topology's node names).
    #[getter]
    fn host_names(&self) -> Vec<String> {
        let t = self.sim.topology();
        t.hosts.iter().map(|&n| t.names[n as usize].clone()).collect()
    }

    /// Host `hosts[i]`'s clock at true time `times_ps[i]`, in ns rounded
    /// down (None where the time is None); None when hosts have no clocks.
    fn host_clock_ns(
        &mut self,
        hosts: Vec<u32>,
        times_ps: Vec<Option<u64>>,
    ) -> PyResult<Option<Vec<Option<i64>>>> {
        let n = self.sim.topology().num_hosts() as u32;
        if hosts.len() != times_ps.len() || hosts.iter().any(|&h| h >= n) {
            return Err(PyValueError::new_err(format!(
                "hosts and times_ps: equally long, hosts within 0..{n}"
            )));
        }
        self.with(|sim| {
            let read = |sim: &mut Simulation, h: u32, t: Option<u64>| {
                t.and_then(|t| sim.host_clock_ps(h, t))
                    .map(|ps| ps.div_euclid(1000))
            };
            sim.host_clock_ps(0, 0).map(|_| {
                hosts
                    .iter()
                    .zip(&times_ps)
                    .map(|(&h, &t)| read(sim, h, t))
                    .collect()
            })
        })
    }

    /// Samples every port's bands every `every_ps` while the network is busy,
    /// at most `max_rows` rows (call before the first `run_until`).
    fn sample_queues(&mut self, every_ps: u64, max_rows: usize) -> PyResult<()> {
        if every_ps == 0 {
            return Err(PyValueError::new_err("sampling interval must be positive"));
        }
        if self.sim.now_ps() > 0 || self.sim.events() > 0 {
            return Err(PyValueError::new_err(
                "sampling must be set before the run starts",
            ));
        }
        self.with(|sim| sim.sample_queues(every_ps, max_rows))
    }

    /// When queue sampling stopped at its row budget (None: it did not).
    #[getter]
    fn queue_sampling_stopped_ps(&self) -> Option<u64> {
        self.sim.samples().stopped_at_ps
    }

    /// Per directed link counters as a dict of columns.
    fn links<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = guarded(|| link_columns(&self.sim))?;
        let d = PyDict::new(py);
        d.set_item("link_id", c.link_id)?;
        d.set_item("src_node", c.from)?;
        d.set_item("dst_node", c.to)?;
        d.set_item("rate_bps", c.rate_bps)?;
        d.set_item("bytes", c.bytes)?;
        d.set_item("packets", c.packets)?;
        d.set_item("drops", c.drops)?;
        d.set_item("ecn_marks", c.ecn_marks)?;
        d.set_item("max_queue_bytes", c.max_queue_bytes)?;
        d.set_item("mean_queue_bytes", c.mean_queue_bytes)?;
        d.set_item("pause_frames_sent", c.pause_frames_sent)?;
        d.set_item("paused_ps", c.paused_ps)?;
        Ok(d)
    }
}

/// A core table as a dict of Python lists (None for missing values).
fn table_dict<'py>(py: Python<'py>, t: Table) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, col) in t.columns {
        match col {
            Column::U32(v) => d.set_item(name, v)?,
            Column::U64(v) => d.set_item(name, v)?,
            Column::I64(v) => d.set_item(name, v)?,
            Column::OptU64(v) => d.set_item(name, v)?,
            Column::F64(v) => d.set_item(name, v)?,
            Column::Str(v) => d.set_item(name, v)?,
        }
    }
    Ok(d)
}

/// Draws `n` flow sizes from a CDF with the core's sampler (for tests and plots).
#[pyfunction]
fn sample_cdf(points: Vec<(f64, f64)>, n: usize, seed: u64) -> PyResult<Vec<u64>> {
    let cdf = Cdf::new(&points).map_err(PyValueError::new_err)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    Ok((0..n).map(|_| cdf.sample_bytes(&mut rng)).collect())
}

/// Reads a plan document (format v1) with the reader the simulator and the
/// runtime share, checks its structure, and returns it as normalised JSON.
#[pyfunction]
fn read_plan(text: &str) -> PyResult<String> {
    let p = fabriclab_core::plan::Plan::read_checked(text).map_err(PyValueError::new_err)?;
    serde_json::to_string(&p).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The mean of a CDF as the core computes it.
#[pyfunction]
fn cdf_mean(points: Vec<(f64, f64)>) -> PyResult<f64> {
    Ok(Cdf::new(&points).map_err(PyValueError::new_err)?.mean())
}

/// The JSON Schema of the resolved scenario the core reads (from its serde types), as a JSON string.
#[pyfunction]
fn core_schema() -> String {
    fabriclab_core::scenario::core_schema().to_string()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    install_panic_hook();
    m.add("CorePanic", m.py().get_type::<CorePanic>())?;
    m.add_class::<Simulator>()?;
    m.add_function(wrap_pyfunction!(sample_cdf, m)?)?;
    m.add_function(wrap_pyfunction!(cdf_mean, m)?)?;
    m.add_function(wrap_pyfunction!(read_plan, m)?)?;
    m.add_function(wrap_pyfunction!(core_schema, m)?)?;
    m.add_function(wrap_pyfunction!(results::fct_stats, m)?)?;
    runtime::register(m)?;
    agg::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

//! Thin PyO3 binding of fabriclab-core: the module `fabriclab._core`.
//! Panics inside the core surface as Python exceptions (PyO3 catches them at
//! the boundary); errors of the scenario become `ValueError`.

use fabriclab_core::results::{
    collective_summary, flow_columns, job_fusions, job_iterations, job_sends, link_columns,
    step_columns, timeline_columns,
};
use fabriclab_core::sim::Simulation;
use fabriclab_core::traffic::Cdf;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rand::SeedableRng;

/// A simulation built from a resolved scenario (JSON).
#[pyclass(module = "fabriclab._core")]
struct Simulator {
    sim: Simulation,
}

#[pymethods]
impl Simulator {
    #[new]
    fn new(spec_json: &str) -> PyResult<Self> {
        let sim = fabriclab_core::build_from_json(spec_json).map_err(PyValueError::new_err)?;
        Ok(Simulator { sim })
    }

    /// Runs all events up to `until_ps` with the GIL released; returns whether events remain.
    fn run_until(&mut self, py: Python<'_>, until_ps: u64) -> PyResult<bool> {
        let sim = &mut self.sim;
        py.detach(|| sim.run_until(until_ps))
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

    /// Flow records as a dict of columns.
    fn flows<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = flow_columns(&self.sim);
        let d = PyDict::new(py);
        d.set_item("flow_id", c.flow_id)?;
        d.set_item("src", c.src)?;
        d.set_item("dst", c.dst)?;
        d.set_item("size_bytes", c.size_bytes)?;
        d.set_item("class", c.class)?;
        d.set_item("start_ps", c.start_ps)?;
        d.set_item("end_ps", c.end_ps)?;
        d.set_item("ideal_fct_ps", c.ideal_fct_ps)?;
        d.set_item("retransmits", c.retransmits)?;
        d.set_item("tag", c.tag)?;
        Ok(d)
    }

    /// Collectives: list of (name, start_ps, end_ps or None).
    fn collectives(&self) -> Vec<(String, u64, Option<u64>)> {
        collective_summary(&self.sim)
    }

    /// Every collective step with its start and end times, as a dict of columns.
    fn steps<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = step_columns(&self.sim);
        let d = PyDict::new(py);
        d.set_item("collective", c.collective)?;
        d.set_item("rank", c.rank)?;
        d.set_item("step", c.step)?;
        d.set_item("op", c.op)?;
        d.set_item("peer", c.peer)?;
        d.set_item("bytes", c.bytes)?;
        d.set_item("start_ps", c.start_ps)?;
        d.set_item("end_ps", c.end_ps)?;
        Ok(d)
    }

    /// Training jobs' iterations: list of (job, worker, iteration, start_ps, end_ps or None).
    fn job_iterations(&self) -> Vec<(String, u32, u32, u64, Option<u64>)> {
        job_iterations(&self.sim)
    }

    /// Training jobs' fusions: list of (job, fusion, lowest layer, bytes).
    fn job_fusions(&self) -> Vec<(String, u32, u32, u64)> {
        job_fusions(&self.sim)
    }

    /// Training jobs' ring messages: list of (job, [messages, bytes, urgent
    /// messages, urgent bytes, raised messages, raised bytes]).
    fn job_sends(&self) -> Vec<(String, [u64; 6])> {
        job_sends(&self.sim)
    }

    /// Training jobs' timelines as a dict of columns.
    fn timeline<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = timeline_columns(&self.sim);
        let d = PyDict::new(py);
        d.set_item("job", c.job)?;
        d.set_item("worker", c.worker)?;
        d.set_item("kind", c.kind)?;
        d.set_item("index", c.index)?;
        d.set_item("iteration", c.iteration)?;
        d.set_item("start_ps", c.start_ps)?;
        d.set_item("end_ps", c.end_ps)?;
        Ok(d)
    }

    /// Per directed link counters as a dict of columns.
    fn links<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = link_columns(&self.sim);
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
        Ok(d)
    }
}

/// Draws `n` flow sizes from a CDF with the core's sampler (for tests and plots).
#[pyfunction]
fn sample_cdf(points: Vec<(f64, f64)>, n: usize, seed: u64) -> PyResult<Vec<u64>> {
    let cdf = Cdf::new(&points).map_err(PyValueError::new_err)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    Ok((0..n).map(|_| cdf.sample_bytes(&mut rng)).collect())
}

/// The mean of a CDF as the core computes it.
#[pyfunction]
fn cdf_mean(points: Vec<(f64, f64)>) -> PyResult<f64> {
    Ok(Cdf::new(&points).map_err(PyValueError::new_err)?.mean())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Simulator>()?;
    m.add_function(wrap_pyfunction!(sample_cdf, m)?)?;
    m.add_function(wrap_pyfunction!(cdf_mean, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

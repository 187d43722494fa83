//! Runs one resolved scenario (the core's JSON, as `fabriclab` hands it to
//! the core) to the end, several times, and prints each run's events and
//! wall time: the packet backend's hot path without Python around it, for
//! `perf record` and for before/after comparisons of two builds.
//!
//!     python benches/core_json.py benches/star8_dctcp.toml > /tmp/star8.json
//!     cargo bench -p fabriclab-core --bench run_spec -- /tmp/star8.json 5
//!
//! Each run also prints its CPU time (`cpu_s`, this thread's time on a
//! CPU from /proc/thread-self/schedstat, 0 where there is none), which a
//! loaded machine inflates less than wall time.
//!
//! A benchmark, not a test: nothing is asserted.

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let path = args.first().expect("usage: run_spec SCENARIO.json [RUNS]");
    let runs: usize = args.get(1).map_or(1, |r| r.parse().expect("RUNS: a count"));
    let json = std::fs::read_to_string(path).expect("readable scenario JSON");
    for _ in 0..runs {
        let mut sim = fabriclab_core::build_from_json(&json).expect("a valid scenario");
        let (t0, c0) = (Instant::now(), cpu_ns());
        let more = sim.run_until(u64::MAX).expect("the run succeeds");
        let wall = t0.elapsed().as_secs_f64();
        let cpu = (cpu_ns() - c0) as f64 / 1e9;
        println!(
            "events {} end_ps {} wall_s {:.4} cpu_s {:.4} events_per_s {:.2}M{}",
            sim.events(),
            sim.last_active_ps(),
            wall,
            cpu,
            sim.events() as f64 / wall / 1e6,
            if more { " (events left)" } else { "" }
        );
    }
}

/// Nanoseconds this thread has spent on a CPU (Linux), or 0.
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

//! A training job's checkpoints (`JobSpec::checkpoint`): before every
//! iteration i > 0 with i % every == 0 each worker waits for the end of
//! iteration i - 1 at itself and pauses `pause_ps`. On the fluid flow
//! backend a run is invariant under shifting every send in time, so a
//! pause shifts everything after it by exactly the pause: the end of
//! iteration k moves by pause x floor(k / every) (the checkpoints before
//! it), and a run of T iterations has floor((T - 1) / every) of them.

use fabriclab_core::build_from_json;
use fabriclab_core::engine::{Column, Table};
use serde_json::{json, Value};

const MS: u64 = 1_000_000_000;
const WORKERS: usize = 3;

fn scenario(job: Value) -> String {
    let mut nodes: Vec<Value> = (0..WORKERS)
        .map(|i| json!({"name": format!("h{i}"), "kind": "host"}))
        .collect();
    nodes.push(json!({"name": "s0", "kind": "switch"}));
    let links: Vec<Value> = (0..WORKERS)
        .map(
            |i| json!({"a": i, "b": WORKERS, "rate_bps": 10_000_000_000u64, "delay_ps": 1_000_000}),
        )
        .collect();
    json!({
        "seed": 1, "backend": "flow", "flow_model": "fluid",
        "topology": {"nodes": nodes, "links": links},
        "queue": {"discipline": "fifo", "bands": 3, "priomap": [0,1,2,2,2,2,2,2], "limit_bytes": null,
                  "limit_packets": null, "ecn_threshold_bytes": null, "ecn_threshold_packets": null},
        "transport": {"cc": "newreno", "mss_bytes": 1460, "init_cwnd_packets": 10, "min_rto_ps": MS,
                      "initial_rto_ps": MS, "max_rto_ps": 1000 * MS, "dupack_threshold": 3,
                      "dctcp_g": 0.0625, "dctcp_initial_alpha": 1.0, "tsq_limit_bytes": 131072},
        "routing": {"ecmp_hash_seed": 0},
        "jobs": [job],
    })
    .to_string()
}

/// Two layers of 1 MB (two fusions), 1 ms of compute each way per layer, no jitter.
fn job(iterations: u32, checkpoint: Option<(u32, u64)>, faults: Value) -> Value {
    let layer = json!({"param_bytes": 1_000_000, "fwd_ps": MS, "bwd_ps": MS});
    let mut j = json!({
        "name": "j", "workers": [0, 1, 2], "layers": [layer, layer], "iterations": iterations,
        "fusion_bytes": 1_000_000, "barrier": true, "priority_queue": false, "max_inflight": 1, "class": 0,
        "start_ps": 0, "slowdown": [1.0, 1.0, 1.0], "jitter": 0.0, "seed": 3,
        "reduce_bps": 2_400_000_000_000u64, "send_overhead_ps": 0, "faults": faults,
    });
    if let Some((every, pause)) = checkpoint {
        j["checkpoint"] = json!({"every_iterations": every, "pause_ps": pause});
    }
    j
}

fn table<'a>(tables: &'a [Table], name: &str) -> &'a Table {
    tables.iter().find(|t| t.name == name).unwrap()
}
fn col<'a>(t: &'a Table, name: &str) -> &'a Column {
    &t.columns.iter().find(|(n, _)| n == name).unwrap().1
}

struct Run {
    /// [worker][iteration] -> (start, end)
    iterations: Vec<Vec<(u64, Option<u64>)>>,
    /// (worker, iteration, start, end) of every checkpoint row of the timeline.
    checkpoints: Vec<(u32, u32, u64, u64)>,
}

fn run(job: Value) -> Run {
    let mut sim = build_from_json(&scenario(job)).unwrap();
    sim.run_until(u64::MAX).unwrap();
    let tables = sim.app_tables();
    let it = table(&tables, "job_iterations");
    let (Column::U32(w), Column::U64(s), Column::OptU64(e)) =
        (col(it, "worker"), col(it, "start_ps"), col(it, "end_ps"))
    else {
        panic!("job_iterations columns")
    };
    let mut iterations = vec![Vec::new(); WORKERS];
    for i in 0..w.len() {
        iterations[w[i] as usize].push((s[i], e[i]));
    }
    let tl = table(&tables, "timeline");
    let (Column::Str(kind), Column::U32(w), Column::U32(iter), Column::U64(s), Column::U64(e)) = (
        col(tl, "kind"),
        col(tl, "worker"),
        col(tl, "iteration"),
        col(tl, "start_ps"),
        col(tl, "end_ps"),
    ) else {
        panic!("timeline columns")
    };
    let checkpoints = (0..kind.len())
        .filter(|&i| kind[i] == "checkpoint")
        .map(|i| (w[i], iter[i], s[i], e[i]))
        .collect();
    Run {
        iterations,
        checkpoints,
    }
}

#[test]
fn a_pause_shifts_every_later_iteration_by_exactly_the_pause() {
    let (t, every, pause) = (7, 3, 5 * MS);
    let plain = run(job(t, None, json!([])));
    let ck = run(job(t, Some((every, pause)), json!([])));
    assert!(plain.checkpoints.is_empty());
    for w in 0..WORKERS {
        for k in 0..t as usize {
            let shift = pause * (k as u64 / every as u64);
            let (s0, e0) = plain.iterations[w][k];
            let (s1, e1) = ck.iterations[w][k];
            assert_eq!(e1.unwrap(), e0.unwrap() + shift, "worker {w} iteration {k}");
            assert_eq!(s1, s0 + shift, "worker {w} iteration {k}");
        }
    }
    // floor((7 - 1) / 3) = 2 checkpoints per worker, after iterations 2 and 5,
    // from the end of that iteration at the worker to the pause's end, which
    // is when its next iteration starts.
    assert_eq!(ck.checkpoints.len(), 2 * WORKERS);
    for &(w, i, s, e) in &ck.checkpoints {
        assert!(i == 2 || i == 5, "checkpoint after iteration {i}");
        assert_eq!(s, ck.iterations[w as usize][i as usize].1.unwrap());
        assert_eq!(e, s + pause);
        assert_eq!(ck.iterations[w as usize][i as usize + 1].0, e);
    }
}

#[test]
fn no_checkpoint_follows_the_last_iteration() {
    // T = 6, every 3: only before iteration 3 (floor(5 / 3) = 1).
    let ck = run(job(6, Some((3, MS)), json!([])));
    assert_eq!(ck.checkpoints.len(), WORKERS);
    assert!(ck.checkpoints.iter().all(|c| c.1 == 2));
}

#[test]
fn a_worker_halting_during_its_pause_leaves_no_checkpoint() {
    let pause = 5 * MS;
    let plain = run(job(3, None, json!([])));
    // Worker 1 halts 1 ms into its pause after iteration 0 (every iteration checkpoints).
    let halt = plain.iterations[1][0].1.unwrap() + MS;
    let ck = run(job(
        3,
        Some((1, pause)),
        json!([{"worker": 1, "at_ps": halt, "kind": "halt", "factor": 1.0}]),
    ));
    let mut saved: Vec<u32> = ck
        .checkpoints
        .iter()
        .filter(|c| c.1 == 0)
        .map(|c| c.0)
        .collect();
    saved.sort_unstable();
    assert_eq!(
        saved,
        vec![0, 2],
        "workers 0 and 2 saved iteration 0; worker 1 halted first"
    );
    assert!(ck.iterations[1][1].1.is_none());
}

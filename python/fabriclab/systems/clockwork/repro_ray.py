"""``fabriclab reproduce clockwork-ray``: the Clockwork talk's Ray figure
(seed 000; issue 27; docs/clockwork-control.md, "Reproducing the talk").

The talk: Ray's collective library (``ray.util.collective``, NCCL backend)
on 16 GCP VMs x 2 V100 (one head and 15 workers); 2 clusters of each type,
the all-reduce task (28 iterations) 3 times on each; against a
cloud-assigned cluster, a Clockwork-chosen one cuts the median time by
7.9 %, chosen + Packet Rocket by 26 %.

What the library does (Ray's documentation, "Ray Collective Communication
Lib" and its API pages): a driver declares a list of actors as a collective
group (``create_collective_group``, backend NCCL); each actor then calls
``col.allreduce(tensor, group_name)``, which runs one NCCL all-reduce over
the group's communicator. With one GPU per actor, the 32 GPUs form one
32-rank NCCL all-reduce, the same collective nccl-tests times. So an
iteration here is :mod:`repro_nccl`'s task (NVLink stages in closed form,
two TCP rings between the VMs, CUBIC), and Ray adds per iteration:

- the driver's calls: one actor-method call per actor, submitted
  asynchronously, and a ``ray.get`` on all of them, so the iterations do
  not overlap (a barrier per iteration). Its cost, ``RAY_OVERHEAD_PS``, is
  from Ray's own release microbenchmark (``microbenchmark.json``, quoted in
  ray-project/ray PR #51427): about 8,000 asynchronous actor calls/s
  (0.125 ms each, 32 of them: 4 ms) plus one synchronous round trip at
  about 2,000 calls/s (0.5 ms): 4.5 ms. That is a single-node driver
  figure; the talk's cluster is not measured (*unverified* for it).
- The tensor: the talk gives no size; ``SIZE_BYTES`` (4 MiB at rates
  scaled by 1/10, i.e. 40 MiB at GCP's rates) is our choice.

Each run is 28 iterations, started ``GAP_MS`` apart under the same
neighbours' traffic; its time is the sum of the 28 iterations' all-reduce
times plus 28 x the overhead (the idle time between iterations is the
overhead's place; the network does not see the tenant then)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ...util.parallel import map_runs
from . import repro_nccl as nc

MS = 10**9
ITERATIONS = 28
CLOUDS = 2
RUNS = 3
QUICK_CLOUDS = 1
QUICK_RUNS = 1
QUICK_ITERATIONS = 4
SIZE_BYTES = 4 << 20
GAP_MS = 45
RAY_OVERHEAD_PS = 32 * 125 * 10**6 + 500 * 10**6
TALK = {"chosen_change_pct": -7.9, "chosen_rocket_change_pct": -26.0}


def run_times(iteration_ms: list[float], iterations: int, overhead_ps: int = RAY_OVERHEAD_PS) -> list[float]:
    """Runs of ``iterations`` consecutive iterations: each run's time is its
    iterations' all-reduce times plus ``iterations`` overheads (ms)."""
    if len(iteration_ms) % iterations:
        raise ValueError(f"{len(iteration_ms)} iterations do not make whole runs of {iterations}")
    a = np.asarray(iteration_ms, dtype=float).reshape(-1, iterations)
    return [float(x) for x in a.sum(axis=1) + iterations * overhead_ps / MS]


def one_cloud(args) -> dict:
    seed, runs, iterations, rocket = args
    t0 = time.perf_counter()
    cl = nc.clusters(seed)
    r = dict(cl)
    keys = [("assigned", "assigned", False), ("chosen", "chosen", False)]
    if rocket:
        keys.append(("chosen_rocket", "chosen", True))
    for key, hosts, rk in keys:
        t = nc.tasks(seed, cl[hosts], cl["pool"], "allreduce", runs * iterations, SIZE_BYTES, GAP_MS, rocket=rk)
        r[f"{key}_runs"] = {**t, "iteration_ms": t["ms"], "ms": run_times(t["ms"], iterations)}
    r["wall_s"] = round(time.perf_counter() - t0, 1)
    return r


def run(out_dir: Path, quick: bool = False, workers: int = 1, first_seed: int = 0) -> dict:
    import json

    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    n, runs, iters = (QUICK_CLOUDS, QUICK_RUNS, QUICK_ITERATIONS) if quick else (CLOUDS, RUNS, ITERATIONS)
    rocket = nc.rocket_available()
    per_cloud = map_runs(one_cloud, [(first_seed + i, runs, iters, rocket) for i in range(n)], workers)
    s = nc.summarise(per_cloud, [], rocket, SIZE_BYTES)
    s.pop("rocket_alone", None)
    s["talk"] = TALK
    s["clouds"], s["runs_per_cluster"], s["iterations"] = n, runs, iters
    s["overhead_ms_per_iteration"] = RAY_OVERHEAD_PS / MS
    s["wall_s"] = round(time.perf_counter() - t0, 1)
    (out_dir / "clockwork_ray_runs.json").write_text(json.dumps(per_cloud, default=float, indent=1) + "\n")
    print(table(s))
    return s


def table(s: dict) -> str:
    talk = {"assigned": "", "chosen": "-7.9 %", "chosen_rocket": "-26 %"}
    lines = [f"clockwork-ray: {s['clouds']} clouds x {s['runs_per_cluster']} runs of {s['iterations']} all-reduce "
             f"iterations ({s['size_bytes'] >> 20} MiB, {s['overhead_ms_per_iteration']} ms of Ray per iteration)",
             "configuration      median ms   IQR ms   min-max ms     change   talk"]
    return "\n".join(lines + nc.config_rows(s, talk))

"""Training jobs (``[[jobs]]``): layer-wise compute and fused gradients,
an allreduce per fusion (the built-in ring, a planner's plan, a plan file,
or in-network aggregation), slack-aware classes, faults and checkpoints;
after the run, ``jobs.parquet``, ``timeline.parquet``, the jobs' rows of
``ccl.parquet`` and their summary."""

from __future__ import annotations

import math

from ...scenario.aggregation import AGGREGATION_ALLREDUCE
from ...scenario.base import ScenarioError
from ...scenario.model import JOB_ALLREDUCE, MAX_PLAN_CHUNKS
from ...scenario.recovery import spare_hosts
from ..app import App, Collected, Resolving
from ..limits import BYTES_PER_FLOW, BYTES_PER_TIMELINE_ROW, EVENTS_PER_LAYER_PASS
from .collectives import read_plan_file


class Jobs(App):
    name = "jobs"
    tables = ("jobs", "timeline", "ccl")

    def active(self, s) -> bool:
        return bool(s.jobs)

    def resolve(self, r: Resolving) -> None:
        s = r.scenario
        jobs = [job_core(s, i, j, r.topology) for i, j in enumerate(s.jobs)]
        if s.recovery is not None:
            spare_hosts(s, r.topology, jobs[0]["workers"])  # refuses a pool that cannot be had
        r.spec["jobs"] = jobs

    def estimate(self, s, est, hosts: int, rate_bps: float) -> None:
        for i, j in enumerate(s.jobs):
            workers = hosts if j.workers == "all" else len(j.workers)
            layers, _, fusions = _job_size(s, i, j)
            rows = workers * j.iterations * (2 * layers + fusions)
            messages = j.iterations * fusions * workers * 2 * max(workers - 1, 1)
            # Blame the count furthest above its default (5 iterations, 100 layers).
            field_name = f"jobs[{i}].layers" if layers / 100 > j.iterations / 5 else f"jobs[{i}].iterations"
            est.add(field_name, rows * BYTES_PER_TIMELINE_ROW + messages * BYTES_PER_FLOW,
                    f"{j.iterations:,} iterations of {workers} workers x {layers:,} layers: about {est.count(rows)} "
                    f"timeline rows and {est.count(messages)} messages")

    def events(self, s, t, est) -> None:
        for i, j in enumerate(s.jobs):
            _job_events(s, i, j, t, est)

    def collect(self, c: Collected) -> None:
        tables = c.core_tables
        jobs_arrow, timeline_arrow, job_summary = _jobs(tables)
        if job_summary:
            c.summary["jobs"] = job_summary
            fus = tables["job_fusions"]
            for name, f, low, nbytes in zip(fus["job"], fus["fusion"], fus["lowest_layer"], fus["bytes"]):
                job_summary[name].setdefault("fusions", []).append({"fusion": f, "lowest_layer": low, "bytes": nbytes})
            sends = tables["job_sends"]
            keys = ("ring_messages", "ring_bytes", "urgent_messages", "urgent_bytes", "raised_messages", "raised_bytes")
            cols = ("messages", "bytes", "urgent_messages", "urgent_bytes", "raised_messages", "raised_bytes")
            for i, name in enumerate(sends["job"]):
                job_summary[name].update({k: sends[c_][i] for k, c_ in zip(keys, cols)})
            _gradient_slack(job_summary, timeline_arrow.to_pandas())
            c.tables["jobs"], c.tables["timeline"] = jobs_arrow, timeline_arrow
        _job_telemetry(c)


def _job_size(s, i: int, j) -> tuple[int, int, int]:
    """Job ``i``'s layers, model bytes and fusions, for the estimates: a
    built-in profile counted, not built (a billion layers must not be made
    to be refused), any other built."""
    from ...scenario.profiles import BUILTIN, ProfileError, build_profile, builtin_size

    if j.profile in BUILTIN:
        layers, model = builtin_size(j.profile, j.layers, j.model_bytes)
    else:
        try:
            rows = build_profile(j.profile, j.compute_ps, j.model_bytes, j.layers, base_dir=s._base_dir)
        except ProfileError as e:
            raise ScenarioError(f"jobs[{i}].{e}") from None
        layers, model = len(rows), sum(x["param_bytes"] for x in rows)
    return layers, model, min(layers, math.ceil(model / j.fusion_bytes) + 1)


def _job_events(s, i, j, t, est) -> None:
    """A job's allreduces (as its planner sends them) and its compute events."""
    nh = len(t.hosts)
    workers = list(range(nh)) if j.workers == "all" else [w for w in j.workers if 0 <= w < nh]
    n = len(workers)
    layers, model, fusions = _job_size(s, i, j)
    est.add(f"jobs[{i}]", 2 * layers * n * j.iterations * EVENTS_PER_LAYER_PASS)
    if n < 2:
        return
    hops = est.hops
    ring = [(workers[k], workers[(k + 1) % n]) for k in range(n)]
    plan = None if j.allreduce in AGGREGATION_ALLREDUCE else _job_plan(s, i, j, n)
    if j.allreduce in AGGREGATION_ALLREDUCE:
        # Up to the aggregating switches and back: the model once each way per worker.
        nbytes, messages, mean_hops = 2 * model * n, 2 * fusions * n, hops.mean(workers)
    elif plan is None:  # the built-in ring: 2 (n - 1) steps of model / n bytes per worker
        nbytes, messages = 2 * (n - 1) * model, 2 * (n - 1) * n * fusions
        mean_hops = hops.weighted([(a, b, 1) for a, b in ring])
    else:  # a plan built for plan["size_bytes"], scaled to each fusion
        sends = [(workers[r], workers[st["peer"]], st["bytes"]) for r, steps in enumerate(plan["steps"])
                 for st in steps if st["op"] == "send"]
        sent = max(sum(b for _, _, b in sends), 1)
        nbytes, messages = sent * model / plan["size_bytes"], len(sends) * fusions
        mean_hops = hops.weighted(sends)
    est.load(f"jobs[{i}]", nbytes * j.iterations, messages * j.iterations, mean_hops)


def job_core(s, i: int, j, t) -> dict:
    """Job ``i`` of scenario ``s`` as the core reads it (its profile built,
    hosts resolved) on the built topology ``t``."""
    from ...scenario.profiles import ProfileError, build_profile

    nh = len(t.hosts)
    workers = list(range(nh)) if j.workers == "all" else list(j.workers)
    bad = [w for w in workers if not 0 <= w < nh]
    if bad:
        raise ScenarioError(f"jobs[{i}].workers: host index {bad[0]} out of range (the topology has hosts 0..{nh - 1})")
    if len(set(workers)) != len(workers) or not workers:
        raise ScenarioError(f"jobs[{i}].workers: needs distinct hosts")
    try:
        layers = build_profile(j.profile, j.compute_ps, j.model_bytes, j.layers, base_dir=s._base_dir)
    except ProfileError as e:
        raise ScenarioError(f"jobs[{i}].{e}") from None
    slowdown = [1.0] * len(workers)
    for k, v in j.slowdown.items():
        if not k.isdigit() or int(k) >= len(workers) or not v > 0:
            raise ScenarioError(f"jobs[{i}].slowdown: keys are worker positions 0..{len(workers) - 1}, "
                                f"values positive factors; got {k!r} = {v!r}")
        slowdown[int(k)] = v
    if j.layer_class is not None and len(j.layer_class) != len(layers):
        raise ScenarioError(f"jobs[{i}].layer_class: needs one class per layer ({len(layers)})")
    return {
        "name": j.name, "workers": workers, "layers": layers, "iterations": j.iterations,
        "fusion_bytes": j.fusion_bytes, "barrier": j.barrier, "priority_queue": j.queue == "priority",
        "max_inflight": j.max_inflight, "class": j.class_, "layer_class": j.layer_class, "start_ps": j.start_ps,
        "slowdown": slowdown, "jitter": j.jitter, "seed": (s.seed * 1_000_003 + i) % 2**64,
        "reduce_bps": j.reduce_bps, "send_overhead_ps": j.send_overhead_ps,
        "persistent_connections": j.persistent_connections,
        "allreduce_plan": _job_plan(s, i, j, len(workers)),
        "aggregation": None,  # its job id in the aggregation section, set by the aggregation app
        "end_run": j.end_run,
        "checkpoint": None if j.checkpoint_iterations is None else {
            "every_iterations": j.checkpoint_iterations, "pause_ps": j.checkpoint_ps or 0},
        "faults": [],  # the scenario's [[faults]] on this job's ranks, set by the faults app
        "slack_aware": None if not j.slack_aware else {
            "urgent_class": j.urgent_class, "factor": j.slack_factor, "lag_rounds": j.slack_lag_rounds,
            # The slowest worker link: rounds are paced by it.
            "rate_bps": min(t.host_rate_bps(w) for w in workers),
        },
    }


def _job_plan(s, i: int, j, n: int) -> dict | None:
    """The job's allreduce plan (None: the built-in ring): a planner by
    name, built for ``fusion_bytes`` and scaled to each fusion by the
    core, or a plan JSON file (verified; ranks = workers)."""
    from ...collectives.direct import direct_allreduce
    from ...collectives.halving_doubling import halving_doubling_allreduce
    from ...collectives.rings import ring_allreduce
    from ...collectives.trees import double_binary_tree_allreduce

    name, chunk, size = j.allreduce, j.allreduce_chunk_bytes, j.fusion_bytes
    if name == "ring" or name in AGGREGATION_ALLREDUCE:
        return None
    if chunk is not None and -(-size // chunk) > MAX_PLAN_CHUNKS:
        raise ScenarioError(f"jobs[{i}].allreduce_chunk_bytes: {chunk} bytes cuts fusion_bytes ({size}) into more "
                            f"than {MAX_PLAN_CHUNKS:,} chunks; give at least {-(-size // MAX_PLAN_CHUNKS)} bytes")
    if n < 2:
        return None
    builders = {
        "ring-plan": lambda: ring_allreduce(n, size, chunk_bytes=chunk),
        "tree": lambda: double_binary_tree_allreduce(n, size, chunk),
        "halving-doubling": lambda: halving_doubling_allreduce(n, size),
        "direct": lambda: direct_allreduce(n, size, chunk),
    }
    if name in builders:
        p = builders[name]()
    else:
        path = s._resolve_path(name)
        if not path.exists():
            raise ScenarioError(f"jobs[{i}].allreduce: {name!r} is neither a planner ({', '.join(JOB_ALLREDUCE)}), "
                                f"an in-network aggregation ({', '.join(AGGREGATION_ALLREDUCE)}) "
                                f"nor a plan JSON file")
        p = read_plan_file(path, f"jobs[{i}].allreduce")
        if p.collective != "allreduce" or p.nranks != n:
            raise ScenarioError(f"jobs[{i}].allreduce: {path}: needs an allreduce plan over {n} ranks (the job's "
                                f"workers), got {p.collective} over {p.nranks}")
    # Every field explicit; a job's plan is scaled per fusion, so pinned paths are not used.
    steps = [[{"op": st.op, "peer": st.peer, "offset": st.offset, "bytes": st.bytes, "reduce": st.reduce,
               "deps": list(st.deps), "path": None} for st in r] for r in p.ranks]
    return {"size_bytes": p.size_bytes, "steps": steps}


def _job_telemetry(c: Collected) -> None:
    """The jobs' allreduces, after the collectives' rows of ccl.parquet (docs/telemetry.md)."""
    jc = c.core_tables.get("job_ccl")
    if not jc or not jc["job"]:
        return
    import pyarrow as pa

    from ...collectives.ccl import from_jobs

    # The jobs' ops are numbered after the collectives', which come first in ccl.parquet.
    co = c.core_tables.get("collectives")
    first = len(c.scenario.collectives) if co and co["collective"] else 0
    algorithms = {j.name: str(j.allreduce) for j in c.scenario.jobs}
    rows = from_jobs(jc, algorithms, first, c.host_clock, c.host_names or None)
    ccl = c.tables.get("ccl")
    c.tables["ccl"] = rows if ccl is None else pa.concat_tables([ccl, rows])


def _gradient_slack(jobs: dict, tl) -> None:
    """Per layer: the time between its reduced gradient arriving at a worker
    and that worker's next forward pass using it (iterations after the
    first), in the summary as mean over workers and iterations."""
    import numpy as np

    for name, j in jobs.items():
        fus = sorted(j.get("fusions", []), key=lambda x: x["fusion"])
        t = tl[tl.job == name]
        fwd = t[(t.kind == "forward") & (t.iteration > 0)]
        if not fus or fwd.empty:
            continue
        nl = int(t[t.kind == "forward"]["index"].max()) + 1
        # Fusions are contiguous layer ranges, built from the last layer down.
        layer_fusion = np.empty(nl, dtype=np.int64)
        top = nl
        for x in fus:
            layer_fusion[x["lowest_layer"]:top] = x["fusion"]
            top = x["lowest_layer"]
        ar = t[t.kind == "allreduce"].set_index(["worker", "index", "iteration"])["end_ps"]
        keys = list(zip(fwd.worker, layer_fusion[fwd["index"].to_numpy()], fwd.iteration - 1))
        arrived = ar.reindex(keys).to_numpy(dtype=float)
        slack = fwd.start_ps.to_numpy(dtype=float) - arrived
        per_layer = [float(np.nanmean(slack[fwd["index"].to_numpy() == i])) for i in range(nl)]
        j["gradient_slack_ps"] = {"mean": float(np.nanmean(slack)), "min": float(np.nanmin(slack)),
                                  "per_layer_mean": per_layer}


def _jobs(tables: dict):
    """Tables of the training jobs' iterations and timelines, and their summary.
    A worker's iteration ends when its backward pass is done and it holds
    every reduced gradient; iteration time = end - previous end (the first
    from the job's start)."""
    it = tables.get("job_iterations")
    if not it or not it["job"]:
        return None, None, {}
    import numpy as np
    import pyarrow as pa

    rows = zip(it["job"], it["worker"], it["iteration"], it["start_ps"], it["end_ps"])
    prev: dict = {}
    cols = {k: [] for k in ("job", "worker", "iteration", "start_ps", "end_ps", "iteration_time_ps")}
    for job, w, it, start, end in rows:
        base = prev.get((job, w), start if it == 0 else None)
        cols["job"].append(job)
        cols["worker"].append(w)
        cols["iteration"].append(it)
        cols["start_ps"].append(start)
        cols["end_ps"].append(end)
        cols["iteration_time_ps"].append(None if end is None or base is None else end - base)
        prev[(job, w)] = end
    jobs = pa.table({
        "job": pa.array(cols["job"], pa.string()), "worker": pa.array(cols["worker"], pa.uint32()),
        "iteration": pa.array(cols["iteration"], pa.uint32()), "start_ps": pa.array(cols["start_ps"], pa.uint64()),
        "end_ps": pa.array(cols["end_ps"], pa.uint64()),
        "iteration_time_ps": pa.array(cols["iteration_time_ps"], pa.uint64()),
    })
    tl = tables["timeline"]
    timeline = pa.table({
        "job": pa.array(tl["job"], pa.string()), "worker": pa.array(tl["worker"], pa.uint32()),
        "kind": pa.array(tl["kind"], pa.string()), "index": pa.array(tl["index"], pa.uint32()),
        "iteration": pa.array(tl["iteration"], pa.uint32()), "start_ps": pa.array(tl["start_ps"], pa.uint64()),
        "end_ps": pa.array(tl["end_ps"], pa.uint64()),
    })
    summary = {}
    df = jobs.to_pandas()
    for name, g in df.groupby("job"):
        # Per iteration, the slowest worker's end; the first iteration is warm-up.
        ends = g.groupby("iteration")["end_ps"].max()
        times = np.diff(np.concatenate([[g["start_ps"].min()], ends.to_numpy(dtype=float)]))
        steady = times[1:] if len(times) > 1 else times
        summary[name] = {
            "iterations": int(len(ends)), "finished": bool(g["end_ps"].notna().all()),
            "iteration_times_ps": [float(x) for x in times],
            "mean_iteration_time_ps": float(np.mean(steady)) if len(steady) else None,
        }
    return jobs, timeline, summary


JOBS = Jobs()

"""Running a scenario: ``simulate(scenario) -> Results``."""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING

from . import __version__
from ._core import Simulator
from .limits import checked_topology, queue_row_budget
from .scenario import Scenario, ScenarioError

if TYPE_CHECKING:
    from .c4.recovery import RecoveryResults
    from .results import Results

# Progress is reported after each slice of simulated time; the core runs a
# slice with the GIL released.
SLICES = 200
PROGRESS_AFTER_S = 1.0


def build_simulator(scenario: Scenario, memory_limit: int | str | None = None, topology_data=None) -> Simulator:
    """The core's simulator for ``scenario``, after refusing one that would
    not fit in memory (``memory_limit``: bytes, a size string, 'off', or
    None for FABRICLAB_MEMORY_LIMIT or else the memory available).
    ``topology_data``: the scenario's topology if already built."""
    return resolve_and_build(scenario, memory_limit, topology_data)[0]


def resolve_and_build(scenario: Scenario, memory_limit: int | str | None = None, topology_data=None):
    """The scenario resolved once for a run: the memory estimate, then the
    topology (built once: the estimate's if it had to build it), then the
    core's JSON, then the simulator. Returns (simulator, topology)."""
    est, t = checked_topology(scenario, memory_limit, topology_data)
    try:
        sim = Simulator(json.dumps(scenario.to_core(t)))
        if scenario.outputs.queues_every_ps is not None:
            sim.sample_queues(scenario.outputs.queues_every_ps, queue_row_budget(est, memory_limit))
        return sim, t
    except ValueError as e:
        # The core numbers explicit flows in one list; name them as the user wrote them.
        msg = re.sub(r"^flows\[(\d+)\]", lambda m: scenario.flow_label(int(m.group(1))), str(e))
        raise ScenarioError(msg) from None


U64_MAX = 2**64 - 1


def simulate(scenario: Scenario, progress: bool = False,
             memory_limit: int | str | None = None) -> Results | RecoveryResults:
    """Runs a scenario to the end (all flows finished, or ``stop_ps``).
    ``memory_limit`` as for :func:`build_simulator`. A scenario with a
    ``[recovery]`` section runs as ``fabriclab run`` runs it: segment by
    segment, with detection, isolation and restarts, returning
    :class:`fabriclab.c4.recovery.RecoveryResults` (docs/c4-recovery.md)."""
    if scenario.recovery is not None:
        from .c4.recovery import simulate as simulate_recovery

        return simulate_recovery(scenario, memory_limit=memory_limit)
    sim, topology = resolve_and_build(scenario, memory_limit)
    if progress:
        _announce(scenario, topology)
    _prefetch_results(scenario)
    target = scenario.arrivals_end_ps()
    stop = scenario.stop_ps
    step = max(target // SLICES, 1_000_000_000)  # at least 1 ms of simulated time
    wall0 = time.perf_counter()
    bar = None
    task = None
    try:
        more = True
        t = 0
        while more:
            t = min(t + step, U64_MAX)
            if stop is not None:
                t = min(t, stop)
            try:
                more = sim.run_until(t)
            except ValueError as e:
                raise ScenarioError(str(e)) from None
            if t >= target:
                # Draining past the last arrival (a slow link may take simulated
                # days): widen the slices so Python's loop never dominates.
                step = min(step * 2, U64_MAX)
            if stop is not None and t >= stop:
                break
            if progress and bar is None and time.perf_counter() - wall0 > PROGRESS_AFTER_S:
                bar, task = _start_bar(target)
            if bar is not None:
                now = sim.now_ps
                desc = "simulating" if now < target else f"draining ({sim.in_flight} in flight)"
                bar.update(task, completed=min(now, target), description=desc,
                           sim=f"{now / 1e9:,.1f} / {target / 1e9:,.1f} ms simulated")
    finally:
        if bar is not None:
            bar.stop()
    wall = time.perf_counter() - wall0
    return collect_results(scenario, sim, wall)


def _prefetch_results(scenario: Scenario) -> None:
    """Imports numpy and pyarrow on a thread while the core simulates with
    the GIL released, when the run will build tables with them (jobs,
    collectives, faults): about a fifth of a short run's process time,
    overlapped (issue 13). The core's own tables (flows, links, messages,
    queue samples) come from it as Parquet bytes and need neither.
    `collect_results`'s own import waits for it, or repeats it and raises if
    it failed."""
    if not (scenario.jobs or scenario.collectives or scenario.faults):
        return
    import threading

    def load():
        try:
            import numpy  # noqa: F401
            import pyarrow  # noqa: F401
        except Exception:  # noqa: BLE001 - collect_results's import reports it
            pass

    threading.Thread(target=load, name="fabriclab-prefetch", daemon=True).start()


def _announce(scenario: Scenario, topology) -> None:
    """Before a run with progress: its expected events and run time
    (limits.estimate_time; a long run is announced, never refused), and the
    settings its backend does not read (Scenario.ignored_settings), on stderr."""
    import sys

    from .limits import estimate_text

    print(f"estimate: {estimate_text(scenario, topology)}", file=sys.stderr)
    for note in scenario.ignored_settings():
        print(f"note: ignored: {note}", file=sys.stderr)


def _start_bar(target_ps: int):
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    # Elapsed and remaining wall time; the remaining from the pace of simulated time so far (the
    # bar's units), so a run whose traffic thins out or grows is re-estimated as it goes.
    bar = Progress(
        TextColumn("{task.description}"), BarColumn(),
        TextColumn("{task.fields[sim]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
        transient=True,
    )
    bar.start()
    task = bar.add_task("simulating", total=max(target_ps, 1), sim="")
    return bar, task


def collect_results(scenario: Scenario, sim: Simulator, wall_s: float) -> Results:
    """The results of ``sim``, a finished simulation of ``scenario`` that
    took ``wall_s`` of wall time: its tables and summary (also used by the
    C4 recovery runner, which stitches segments of one job together)."""
    # flows.parquet, links.parquet and their summary figures come from the
    # core (fabriclab-io): a run without other tables imports neither numpy
    # nor pyarrow (issue 13).
    from .results import LARGE_MIN_BYTES, SMALL_MAX_BYTES, Results

    flows_parquet, flow_figures = sim.flow_results(SMALL_MAX_BYTES, LARGE_MIN_BYTES)
    links_parquet, link_figures = sim.link_results()
    summary = {
        "fabriclab_version": __version__,
        "scenario": scenario.name,
        "seed": scenario.seed,
        "backend": scenario.backend,
        "sim_time_ps": int(sim.last_active_ps),
        "events": int(sim.events),
        "flows_total": flow_figures["flows_total"],
        "flows_finished": flow_figures["flows_finished"],
        "in_flight_at_end": int(sim.in_flight),
        "retransmits": flow_figures["retransmits"],
        "fct": flow_figures["fct"],
        "fct_by_class": flow_figures["fct_by_class"],
        "links": link_figures,
        # Wall-clock figures vary run to run; everything above is deterministic.
        "performance": {"wall_time_s": wall_s, "events_per_s": sim.events / wall_s if wall_s > 0 else 0.0},
    }
    ignored = scenario.ignored_settings()
    if ignored:  # settings given that the backend does not read (Scenario.ignored_settings)
        summary["ignored"] = ignored
    tables = sim.app_tables()
    logic = tables.get("switch_logic")
    if logic:
        summary["switch_logic"] = {}
        for node, counter, value in zip(logic["node"], logic["counter"], logic["value"]):
            summary["switch_logic"].setdefault(node, {})[counter] = value
    aggregation_arrow = accelerators_arrow = aggregation_values_arrow = None
    if "aggregation_workers" in tables:
        import pyarrow as pa

        aggregation_arrow = pa.table(tables["aggregation_workers"])
        if "aggregation_values" in tables:
            v = tables["aggregation_values"]
            aggregation_values_arrow = pa.table({
                "host": v["host"], "job": pa.array(v["job"], pa.uint32()),
                "message": pa.array(v["message"], pa.uint64()), "packet": pa.array(v["packet"], pa.uint64()),
                "index": pa.array(v["index"], pa.uint32()), "value": pa.array(v["value"], pa.float32())})
        series = tables.get("switch_logic_series")
        if series:
            keep = [i for i, k in enumerate(series["series"]) if k == "agg_used_bytes"]
            accelerators_arrow = pa.table({"node": [series["node"][i] for i in keep],
                                           "time_ps": pa.array([series["time_ps"][i] for i in keep], pa.uint64()),
                                           "used_bytes": pa.array([series["value"][i] for i in keep], pa.uint64())})
        w = tables["aggregation_workers"]
        summary["aggregation"] = {k: int(sum(w[k])) for k in
                                  ("messages", "packets_sent", "results", "marked_results", "given_up", "skipped")}
    jobs_arrow, timeline_arrow, job_summary = _jobs(tables)
    if job_summary:
        summary["jobs"] = job_summary
        fus = tables["job_fusions"]
        for name, f, low, nbytes in zip(fus["job"], fus["fusion"], fus["lowest_layer"], fus["bytes"]):
            summary["jobs"][name].setdefault("fusions", []).append({"fusion": f, "lowest_layer": low, "bytes": nbytes})
        sends = tables["job_sends"]
        keys = ("ring_messages", "ring_bytes", "urgent_messages", "urgent_bytes", "raised_messages", "raised_bytes")
        cols = ("messages", "bytes", "urgent_messages", "urgent_bytes", "raised_messages", "raised_bytes")
        for i, name in enumerate(sends["job"]):
            summary["jobs"][name].update({k: sends[c][i] for k, c in zip(keys, cols)})
        _gradient_slack(summary["jobs"], timeline_arrow.to_pandas())
    steps_arrow, ccl_arrow, coll_summary = _collectives(tables)
    ccl_arrow = _job_telemetry(tables, scenario, ccl_arrow)
    if coll_summary:
        summary["collectives"] = coll_summary
    out = scenario.outputs
    messages = sim.messages_parquet() if out.messages else None
    queues = classes = None
    if out.queues_every_ps is not None:
        queues, classes = sim.queues_parquet(), sim.classes_parquet()
        summary["queue_samples"] = {"rows": sim.queue_rows, "stopped_at_ps": sim.queue_sampling_stopped_ps}
    resolved = scenario.resolved_dict()
    return Results(flows_parquet=flows_parquet, links_parquet=links_parquet, summary=summary,
                   resolved=resolved,
                   jobs_arrow=jobs_arrow, timeline_arrow=timeline_arrow, messages_parquet=messages,
                   queues_parquet=queues, classes_parquet=classes,
                   steps_arrow=steps_arrow, ccl_arrow=ccl_arrow, aggregation_arrow=aggregation_arrow,
                   faults_arrow=_faults(scenario),
                   accelerators_arrow=accelerators_arrow, aggregation_values_arrow=aggregation_values_arrow)


def _collectives(tables: dict):
    """The steps of every collective (steps.parquet), its messages in the
    telemetry schema (ccl.parquet, shared with the runtime) and, per
    collective, its start, end and duration (None while unfinished) for the summary."""
    co = tables.get("collectives")
    if not co or not co["collective"]:
        return None, None, {}
    import pyarrow as pa

    from .ccl import from_simulation

    summary = {}
    for name, start, end in zip(co["collective"], co["start_ps"], co["end_ps"]):
        summary[name] = {"start_ps": start, "end_ps": end, "duration_ps": None if end is None else end - start}
    st = tables["steps"]
    steps = pa.table({
        "collective": pa.array(st["collective"], pa.string()), "rank": pa.array(st["rank"], pa.uint32()),
        "step": pa.array(st["step"], pa.uint32()), "op": pa.array(st["op"], pa.string()),
        "peer": pa.array(st["peer"], pa.uint32()), "bytes": pa.array(st["bytes"], pa.uint64()),
        "start_ps": pa.array(st["start_ps"], pa.uint64()), "end_ps": pa.array(st["end_ps"], pa.uint64()),
    })
    return steps, from_simulation(co, st), summary


def _faults(scenario):
    """The ground truth of the scenario's faults (faults.parquet), if it has any."""
    from .c4.faults import ground_truth

    return ground_truth(scenario) if scenario.faults else None


def _job_telemetry(tables: dict, scenario, ccl_arrow):
    """The jobs' allreduces appended to the collectives' ccl rows (docs/telemetry.md)."""
    jc = tables.get("job_ccl")
    if not jc or not jc["job"]:
        return ccl_arrow
    import pyarrow as pa

    from .ccl import from_jobs

    first = 0 if ccl_arrow is None else len(scenario.collectives)
    algorithms = {j.name: str(j.allreduce) for j in scenario.jobs}
    rows = from_jobs(jc, algorithms, first)
    return rows if ccl_arrow is None else pa.concat_tables([ccl_arrow, rows])


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

"""The engine's Python side: a scenario resolved into the core's spec, the
core's simulator built and run slice by slice (with a progress bar), and
its tables collected into :class:`~fabriclab.sim.results.Results`.

It names no app: the apps it is given (``fabriclab.sim.apps.APPS``, passed
in by ``fabriclab.sim.pipeline``) resolve their sections and collect their
tables."""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING

from .._core import Simulator
from .._version import __version__
from ..scenario.base import ScenarioError
from ..scenario.fabric import fabric_core
from .app import Collected, Resolving
from .limits import checked_topology, queue_row_budget

if TYPE_CHECKING:
    from ..scenario.model import Scenario
    from ..scenario.topology import TopologyData
    from .app import App
    from .results import Results

# Progress is reported after each slice of simulated time; the core runs a
# slice with the GIL released.
SLICES = 200
PROGRESS_AFTER_S = 1.0


def core_spec(scenario: Scenario, apps: tuple[App, ...], topology_data: TopologyData | None = None) -> dict:
    """The resolved scenario as the core reads it (every value explicit):
    the apps' sections and the fabric's, on the scenario's topology or
    ``topology_data`` (GPU servers built in code)."""
    t = topology_data if topology_data is not None else scenario.build_topology()
    names = {n["name"]: i for i, n in enumerate(t.nodes)}
    r = Resolving(scenario, t, names)
    r.spec.update({"seed": scenario.seed, "backend": scenario.backend, "flow_model": scenario.flow_model,
                   "topology": t.to_core(), "stop_ps": scenario.stop_ps})
    for app in apps:
        if not app.after_fabric:
            app.resolve(r)
    r.spec.update(fabric_core(scenario, t, names))
    for app in apps:
        if app.after_fabric:
            app.resolve(r)
    return r.spec


def resolve_and_build(scenario: Scenario, apps: tuple[App, ...], memory_limit: int | str | None = None,
                      topology_data=None):
    """The scenario resolved once for a run: the memory estimate, then the
    topology (built once: the estimate's if it had to build it), then the
    core's spec, then the simulator. Returns (simulator, topology)."""
    est, t = checked_topology(scenario, memory_limit, topology_data, apps)
    try:
        sim = Simulator(json.dumps(core_spec(scenario, apps, t)))
        if scenario.outputs.queues_every_ps is not None:
            sim.sample_queues(scenario.outputs.queues_every_ps, queue_row_budget(est, memory_limit))
        return sim, t
    except ValueError as e:
        # The core numbers explicit flows in one list; name them as the user wrote them.
        msg = re.sub(r"^flows\[(\d+)\]", lambda m: scenario.flow_label(int(m.group(1))), str(e))
        raise ScenarioError(msg) from None


U64_MAX = 2**64 - 1


def run(scenario: Scenario, sim: Simulator, apps: tuple[App, ...], progress: bool = False,
        topology: TopologyData | None = None) -> Results:
    """Runs a built simulation of ``scenario`` to the end (all flows
    finished, or ``stop_ps``) and collects its results. With ``progress``,
    the run's expected time is announced first (on ``topology``, the one it
    was built on) and a bar shows its progress after a second."""
    if progress:
        _announce(scenario, topology, apps)
    _prefetch_results(scenario, apps)
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
    return collect_results(scenario, sim, wall, apps)


def _prefetch_results(scenario: Scenario, apps: tuple[App, ...]) -> None:
    """Imports numpy and pyarrow on a thread while the core simulates with
    the GIL released, when the run will build tables with them (jobs,
    collectives, faults): about a fifth of a short run's process time,
    overlapped (issue 13). The core's own tables (flows, links, messages,
    queue samples) come from it as Parquet bytes and need neither.
    `collect_results`'s own import waits for it, or repeats it and raises if
    it failed."""
    if not any(app.tables and app.active(scenario) for app in apps):
        return
    import threading

    def load():
        try:
            import numpy  # noqa: F401
            import pyarrow  # noqa: F401
        except Exception:  # noqa: BLE001 - collect_results's import reports it
            pass

    threading.Thread(target=load, name="fabriclab-prefetch", daemon=True).start()


def _announce(scenario: Scenario, topology, apps: tuple[App, ...]) -> None:
    """Before a run with progress: its expected events and run time
    (limits.estimate_time; a long run is announced, never refused), and the
    settings its backend does not read (Scenario.ignored_settings), on stderr."""
    import sys

    from .limits import estimate_text

    print(f"estimate: {estimate_text(scenario, topology, apps)}", file=sys.stderr)
    for note in scenario.ignored_settings():
        print(f"note: ignored: {note}", file=sys.stderr)


def _start_bar(target_ps: int):
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

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


def rocket_summary(table: dict) -> dict:
    """Packet Rocket's pauses over the finished connections: totals, and the
    per-flow paused time's largest value."""
    pauses, paused = table["pauses"], table["paused_ps"]
    return {"connections": len(pauses), "flows_paused": sum(1 for p in pauses if p > 0),
            "pauses": int(sum(pauses)), "paused_ps": int(sum(paused)),
            "max_paused_ps_per_flow": int(max(paused, default=0))}


def collect_results(scenario: Scenario, sim: Simulator, wall_s: float, apps: tuple[App, ...]) -> Results:
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
    fwd = tables.get("node_forwarding")
    if fwd:  # switches with a forwarding capacity ([[node_overrides]], [cloud] hypervisor_pps)
        keys = ("forwarded_packets", "dropped_packets", "max_queue_packets", "held_packets")
        summary["node_forwarding"] = {node: {k: int(fwd[k][i]) for k in keys} for i, node in enumerate(fwd["node"])}
    rocket = tables.get("packet_rocket")
    if rocket is not None:  # Packet Rocket's holds (transport.packet_rocket_threshold_ps)
        summary["packet_rocket"] = rocket_summary(rocket)
    host_clock = sim.host_clock_ns if sim.host_clock_ns([], []) is not None else None
    collected = Collected(scenario, tables, host_clock=host_clock, host_names=sim.host_names, apps=tuple(apps))
    for app in apps:
        app.collect(collected)
    summary.update(collected.summary)
    out = scenario.outputs
    messages = sim.messages_parquet() if out.messages else None
    queues = classes = None
    if out.queues_every_ps is not None:
        queues, classes = sim.queues_parquet(), sim.classes_parquet()
        summary["queue_samples"] = {"rows": sim.queue_rows, "stopped_at_ps": sim.queue_sampling_stopped_ps}
    return Results(flows_parquet=flows_parquet, links_parquet=links_parquet, summary=summary,
                   resolved=scenario.resolved_dict(), messages_parquet=messages,
                   queues_parquet=queues, classes_parquet=classes, tables=collected.tables,
                   table_names=tuple(dict.fromkeys(n for app in apps for n in app.tables)))

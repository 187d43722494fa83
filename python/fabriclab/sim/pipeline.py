"""The one resolve pipeline: a scenario resolved through every registered
app (``fabriclab.sim.apps.APPS``), estimated, built, run and collected by
the engine. Everything that runs a plain scenario goes through here; the
C4 recovery runner drives it segment by segment (``fabriclab.api``)."""

from __future__ import annotations

from ..scenario.base import ScenarioError
from . import engine, limits
from .apps import APPS


def core_spec(scenario, topology_data=None) -> dict:
    """The resolved scenario as the core reads it (every value explicit);
    ``topology_data`` replaces the scenario's own topology (GPU servers
    built in code)."""
    return engine.core_spec(scenario, APPS, topology_data)


def estimate(scenario, topology_data=None):
    """The memory a run of ``scenario`` needs, by cause (:class:`fabriclab.sim.limits.Estimate`)."""
    return limits.estimate(scenario, topology_data, APPS)


def estimate_text(scenario, topology) -> str:
    """The run's expected events and run time, one line (never refuses)."""
    return limits.estimate_text(scenario, topology, APPS)


def checked_topology(scenario, memory_limit=None, topology_data=None):
    """The memory check, then the scenario's topology: ``(estimate, topology)``."""
    return limits.checked_topology(scenario, memory_limit, topology_data, APPS)


def resolve_and_build(scenario, memory_limit=None, topology_data=None):
    """The scenario resolved and its simulator built: ``(simulator, topology)``."""
    return engine.resolve_and_build(scenario, APPS, memory_limit, topology_data)


def build_simulator(scenario, memory_limit=None, topology_data=None):
    """The core's simulator for ``scenario``, after refusing one that would
    not fit in memory (``memory_limit``: bytes, a size string, 'off', or
    None for FABRICLAB_MEMORY_LIMIT or else the memory available)."""
    return resolve_and_build(scenario, memory_limit, topology_data)[0]


def simulate(scenario, progress: bool = False, memory_limit=None):
    """Runs a scenario without ``[recovery]`` to the end (all flows
    finished, or ``stop_ps``). A scenario with ``[recovery]`` is refused:
    :func:`fabriclab.simulate` runs it segment by segment."""
    if scenario.recovery is not None:
        raise ScenarioError("recovery: this runs a scenario as one plain simulation; one with [recovery] runs "
                            "through fabriclab.simulate (detection, isolation and restarts, docs/c4-recovery.md)")
    sim, topology = resolve_and_build(scenario, memory_limit)
    return engine.run(scenario, sim, APPS, progress, topology)


def collect_results(scenario, sim, wall_s: float):
    """The results of a finished simulation of ``scenario``."""
    return engine.collect_results(scenario, sim, wall_s, APPS)

"""What an app contributes to a run: its scenario section resolved for the
core, its share of the memory estimate, and its result tables.

The scenario is plain validated data (``fabriclab.scenario``); the fabric
sections are resolved by the scenario's own ``fabric_core``. Each app adds
what is its own to the core's spec, in the order of the registry
(``fabriclab.sim.apps.APPS``; those with ``after_fabric`` once the fabric
is resolved), and after the run turns the core's app tables into Arrow
tables and summary figures. The core's own registry of app kinds
(``crates/fabriclab-core/src/apps/mod.rs``) reads the same sections."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Resolving:
    """The state one scenario's resolution passes from app to app: the
    built topology, its node names (name -> index) and the core spec being
    filled in (``spec["jobs"]`` is read by the apps after ``jobs``)."""

    scenario: object
    topology: object
    names: dict[str, int]
    spec: dict = field(default_factory=dict)


@dataclass
class Collected:
    """What the apps make of a finished run: Arrow tables by file name
    (``<name>.parquet``) and summary sections by key. ``host_clock(hosts,
    times_ps)`` reads hosts' clocks (ns, rounded down; None for a None time)
    when the scenario gives them (``[clocks]``), else it is None. ``host_names``:
    the hosts' names by host index (the topology's node names)."""

    scenario: object
    core_tables: dict
    tables: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    host_clock: object = None
    host_names: list = field(default_factory=list)
    # What apps sharing one core table compute once for all (the graph job's, fabriclab.sim.apps.graph).
    shared: dict = field(default_factory=dict)
    # The apps collecting this run, the registry's (fabriclab.sim.apps.APPS) as the pipeline hands them to the
    # engine: apps sharing a core table find each other here, never by the classes that happen to exist.
    apps: tuple = ()


class App:
    """One kind of app. Every hook is optional: the defaults add nothing."""

    name = ""
    # Resolved after the fabric sections (it writes onto them: link events, the
    # aggregation section), else before them, in the registry's order.
    after_fabric = False
    # The files (<name>.parquet) its collect may add, as Arrow tables (the
    # engine then loads pyarrow early); Results answers res.<name> for each.
    tables: tuple[str, ...] = ()

    def active(self, s) -> bool:
        """Whether scenario ``s`` uses this app at all."""
        return False

    def resolve(self, r: Resolving) -> None:
        """Adds this app's part of the core's spec to ``r.spec``."""

    def estimate(self, s, est, hosts: int, rate_bps: float) -> None:
        """Adds this app's memory to ``est`` (:class:`fabriclab.sim.limits.Estimate`)."""

    def events(self, s, t, est) -> None:
        """Adds the events this app's traffic is expected to cost on the built
        topology ``t`` to ``est`` (:class:`fabriclab.sim.limits.TimeEstimate`)."""

    def collect(self, c: Collected) -> None:
        """Adds this app's tables and summary figures from the core's tables."""

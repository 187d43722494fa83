"""Running plans in the simulator and nccl-tests' figures of merit."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..scenario.model import COLLECTIVE_REDUCE_BPS, COLLECTIVE_SEND_OVERHEAD_PS, CollectiveConfig, Scenario, ScenarioError
from ..scenario.topology import TopologyData
from ..sim.pipeline import core_spec
from .plan import Plan

# The defaults of [[collectives]] (their sources are in scenario.py).
DEFAULT_REDUCE_BPS = COLLECTIVE_REDUCE_BPS
DEFAULT_SEND_OVERHEAD_PS = COLLECTIVE_SEND_OVERHEAD_PS

BUSBW_FACTOR = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


@dataclass
class PlanRun:
    time_ps: int
    steps: pd.DataFrame
    links: pd.DataFrame
    flows: pd.DataFrame


def run_plan(plan: Plan, topo: TopologyData, rank_hosts: list[int], backend: str = "flow",
             reduce_bps: int = DEFAULT_REDUCE_BPS, send_overhead_ps: int = DEFAULT_SEND_OVERHEAD_PS,
             scenario: dict | None = None, persistent_connections: bool = False) -> PlanRun:
    """Runs one collective alone on ``topo`` and returns its completion time
    (last step's end minus start) with per-step times. ``persistent_connections``:
    messages of a rank pair continue one TCP connection (packet backend)."""
    from .._core import Simulator

    base = Scenario.from_dict({"backend": backend, **(scenario or {})})
    base.collectives.append(CollectiveConfig.of_plan(plan, rank_hosts, reduce_bps=reduce_bps,
                                                     send_overhead_ps=send_overhead_ps,
                                                     persistent_connections=persistent_connections))
    try:
        core = core_spec(base, topology_data=topo)
    except ScenarioError as e:
        # One collective, built in code: name the plan as before.
        raise ScenarioError(str(e).removeprefix("collectives[0].")) from None
    import json

    try:
        sim = Simulator(json.dumps(core))
        sim.run_until(2**63)
    except ValueError as e:
        raise ScenarioError(str(e)) from None
    tables = sim.app_tables()
    (start,), (end,) = tables["collectives"]["start_ps"], tables["collectives"]["end_ps"]
    if end is None:
        raise ScenarioError("plan: the collective did not finish (a deadlock the verifier should have caught)")
    from ..sim.results import read_parquet_bytes

    return PlanRun(end - start, pd.DataFrame(tables["steps"]), read_parquet_bytes(sim.links_parquet()).to_pandas(),
                   read_parquet_bytes(sim.flows_parquet()).to_pandas())


def bus_bandwidth(op: str, nranks: int, size_bytes: int, time_ps: int) -> tuple[float, float]:
    """nccl-tests' algorithm bandwidth S/t and bus bandwidth algbw * factor(op, n), in bytes per second."""
    algbw = size_bytes / (time_ps / 1e12)
    return algbw, algbw * BUSBW_FACTOR[op](nranks)

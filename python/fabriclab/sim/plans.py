"""Plans run in the simulator: one collective alone on a topology, and
``auto``, which simulates every candidate algorithm and chunk size."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..collectives.algos import Allocation, PlanningError, candidates, make_plan
from ..collectives.plan import Plan
from ..scenario.model import (
    COLLECTIVE_REDUCE_BPS,
    COLLECTIVE_SEND_OVERHEAD_PS,
    CollectiveConfig,
    Scenario,
    ScenarioError,
)
from ..scenario.topology import TopologyData
from .pipeline import core_spec

# The defaults of [[collectives]] (their sources are in scenario/workloads.py).
DEFAULT_REDUCE_BPS = COLLECTIVE_REDUCE_BPS
DEFAULT_SEND_OVERHEAD_PS = COLLECTIVE_SEND_OVERHEAD_PS
# The flow backend's model of a plan's messages (issue 29). A plan's messages are
# GPU peer copies over NVLink, PCIe or NVSwitch and, between servers, RDMA
# (NCCL's InfiniBand / RoCE transport): none of them has a congestion window,
# each sends at its rate from the first byte (RDMA's rate control, DCQCN, starts
# at line rate: Zhu et al., SIGCOMM'15, §3). So "fluid" (max-min rates plus the
# path's latency), not "tcp", whose slow-start rounds model a TCP socket. Pass
# flow_model="tcp" for collectives over TCP sockets (NCCL_NET=Socket, Gloo).
PLAN_FLOW_MODEL = "fluid"

@dataclass
class PlanRun:
    time_ps: int
    steps: pd.DataFrame
    links: pd.DataFrame
    flows: pd.DataFrame


def run_plan(plan: Plan, topo: TopologyData, rank_hosts: list[int], backend: str = "flow",
             reduce_bps: int = DEFAULT_REDUCE_BPS, send_overhead_ps: int = DEFAULT_SEND_OVERHEAD_PS,
             scenario: dict | None = None, persistent_connections: bool = False,
             flow_model: str = PLAN_FLOW_MODEL) -> PlanRun:
    """Runs one collective alone on ``topo`` and returns its completion time
    (last step's end minus start) with per-step times. ``persistent_connections``:
    messages of a rank pair continue one TCP connection (packet backend).
    ``flow_model``: the flow backend's model ("fluid" or "tcp", see
    ``PLAN_FLOW_MODEL``); a ``flow_model`` in ``scenario`` wins."""
    from .._core import Simulator

    spec = {"backend": backend}
    if backend == "flow":
        spec["flow_model"] = flow_model
    base = Scenario.from_dict({**spec, **(scenario or {})})
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
    from .results import read_parquet_bytes

    return PlanRun(end - start, pd.DataFrame(tables["steps"]), read_parquet_bytes(sim.links_parquet()).to_pandas(),
                   read_parquet_bytes(sim.flows_parquet()).to_pandas())


CHUNK_CHOICES = (None, 64 * 1024, 256 * 1024, 1 << 20, 4 << 20)


def choose_plan(op: str, alloc: Allocation, size_bytes: int, root: int = 0, backend: str = "flow",
                chunk_choices=CHUNK_CHOICES, **run_kw):
    """``auto``: simulates every candidate algorithm and chunk size on the
    flow backend and returns (best plan, table of (algo, chunk, time_ps))."""
    table = []
    best = None
    for algo in candidates(op, alloc):
        for ch in chunk_choices:
            if ch is not None and ch >= size_bytes:
                continue
            try:
                plan = make_plan(algo, op, alloc, size_bytes, ch, root)
            except (PlanningError, ValueError):
                continue
            t = run_plan(plan, alloc.topo, alloc.rank_hosts, backend=backend, **run_kw).time_ps
            table.append((algo, ch, t))
            if best is None or t < best[0]:
                best = (t, plan)
            if algo in ("halving-doubling",):
                break  # not chunked
    return best[1], table

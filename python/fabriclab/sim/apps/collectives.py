"""Collectives (``[[collectives]]``): a verified plan (a planner's, a plan
file's, or one built in code) run once by the core's collective app, on its
hosts, optionally over queue pairs; after the run, ``steps.parquet``, the
collectives' rows of ``ccl.parquet`` and their summary."""

from __future__ import annotations

from pathlib import Path

from ...collectives import plan as plan_mod
from ...collectives.verify import PlanError, verify
from ...errors import InputError
from ...scenario.base import ScenarioError
from ...scenario.model import COLLECTIVE_REDUCE_BPS, COLLECTIVE_SEND_OVERHEAD_PS
from ...util.inputs import read_text
from ..app import App, Collected, Resolving


def read_plan_file(path: Path, field_name: str):
    """A plan-format-v1 JSON file, read and verified; errors name the field."""
    text = read_text(path, field_name, "plan JSON file")
    try:
        p = plan_mod.Plan.from_json(text)
        verify(p)
    except (ValueError, KeyError, TypeError, PlanError) as e:
        raise ScenarioError(f"{field_name}: {path}: {e}") from None
    return p


class Collectives(App):
    name = "collectives"
    tables = ("steps", "ccl")

    def active(self, s) -> bool:
        return bool(s.collectives)

    def resolve(self, r: Resolving) -> None:
        s = r.scenario
        r.spec["collectives"] = [_collective_core(s, i, c, r.topology) for i, c in enumerate(s.collectives)]

    def events(self, s, t, est) -> None:
        for i, c in enumerate(s.collectives):
            p, where = _collective_plan(s, i, c, len(t.hosts))
            sends = [(where[r], where[st.peer], st.bytes) for r, steps in enumerate(p.ranks) for st in steps
                     if st.op == "send" and st.peer < len(where)]
            if sends:
                est.load(f"collectives[{i}]", sum(b for _, _, b in sends), len(sends), est.hops.weighted(sends))

    def collect(self, c: Collected) -> None:
        groups = {x.name: x.group for x in c.scenario.collectives if x.group is not None}
        steps, ccl, summary = _tables(c.core_tables, c.host_clock, c.host_names, groups)
        if summary:
            c.summary["collectives"] = summary
        if steps is not None:
            c.tables["steps"] = steps
            # The collectives' rows come first in ccl.parquet, before the jobs' (docs/telemetry.md).
            jobs_rows = c.tables.get("ccl")
            if jobs_rows is None:
                c.tables["ccl"] = ccl
            else:
                import pyarrow as pa

                c.tables["ccl"] = pa.concat_tables([ccl, jobs_rows])


def collective_spec(plan, topo, rank_hosts: list[int], name: str = "collective",
                    start_ps: int = 0, traffic_class: int = 0, reduce_bps: int = COLLECTIVE_REDUCE_BPS,
                    send_overhead_ps: int = COLLECTIVE_SEND_OVERHEAD_PS, persistent_connections: bool = False,
                    qps: list[dict] | None = None, balance: str = "split", qp_depth: int = 1) -> dict:
    """The core's description of a collective (every field explicit): the
    plan's steps with node names of pinned paths turned into node indices."""
    index = {n["name"]: i for i, n in enumerate(topo.nodes)}
    steps = []
    for r, rs in enumerate(plan.ranks):
        out = []
        for s in rs:
            d = {"op": s.op, "peer": s.peer, "offset": s.offset, "bytes": s.bytes, "reduce": s.reduce,
                 "deps": list(s.deps), "path": None}
            if s.path is not None:
                try:
                    d["path"] = [index[x] if isinstance(x, str) else x for x in s.path]
                except KeyError as e:
                    raise ScenarioError(f"plan: rank {r}: unknown node {e.args[0]!r} in a path") from None
            out.append(d)
        steps.append(out)
    return {"name": name, "rank_hosts": list(rank_hosts), "steps": steps, "start_ps": start_ps,
            "class": traffic_class, "reduce_bps": reduce_bps, "send_overhead_ps": send_overhead_ps,
            "persistent_connections": persistent_connections, "op": plan.collective, "algorithm": plan.algorithm,
            "qps": list(qps or []), "balance": balance, "qp_depth": qp_depth}


def _collective_core(s, i: int, c, t) -> dict:
    p, hosts = _collective_plan(s, i, c, len(t.hosts))
    _check_qps(i, c, p.nranks)
    try:
        return collective_spec(p, t, hosts, name=c.name, start_ps=c.start_ps, traffic_class=c.class_,
                               reduce_bps=c.reduce_bps, send_overhead_ps=c.send_overhead_ps,
                               persistent_connections=c.persistent_connections,
                               qps=[q.model_dump() for q in c.qps], balance=c.balance, qp_depth=c.qp_depth)
    except ScenarioError as e:
        raise ScenarioError(f"collectives[{i}].{e}") from None


def _check_qps(i: int, c, n: int) -> None:
    """Collective ``i``'s queue-pair groups against its ``n`` ranks. The core
    checks these too, but names the collective and counts ranks as a
    half-open range."""
    pairs = {}
    for k, q in enumerate(c.qps):
        where = f"collectives[{i}].qps[{k}]"
        for key in ("rank", "peer"):
            if getattr(q, key) >= n:
                raise ScenarioError(f"{where}.{key}: rank {getattr(q, key)} out of range (the collective has "
                                    f"{n} ranks: 0..{n - 1})")
        if q.rank == q.peer:
            raise ScenarioError(f"{where}.peer: {q.peer} is the group's own rank; give another rank of 0..{n - 1}")
        if (q.rank, q.peer) in pairs:
            raise ScenarioError(f"{where}: rank {q.rank} to peer {q.peer} is already "
                                f"collectives[{i}].qps[{pairs[q.rank, q.peer]}]; list each pair once")
        pairs[q.rank, q.peer] = k
        for m, r in enumerate(q.repaths):
            if r.qp >= len(q.src_ports):
                raise ScenarioError(f"{where}.repaths[{m}].qp: QP {r.qp} out of range (the group has "
                                    f"{len(q.src_ports)} QPs, one per src_ports entry: 0..{len(q.src_ports) - 1})")


def _collective_plan(s, i: int, c, nh: int):
    """The collective's plan and its hosts (rank -> host index)."""
    where = f"collectives[{i}]"
    if c._plan_object is not None:
        p = c._plan_object
    elif c.planner is not None:
        from ...collectives.alltoall import direct_alltoall
        from ...collectives.direct import direct_allreduce
        from ...collectives.halving_doubling import halving_doubling_allreduce
        from ...collectives.rings import (
            ring_allgather,
            ring_allreduce,
            ring_reduce_scatter,
        )
        from ...collectives.trees import double_binary_tree_allreduce

        n = c.ranks or (len(c.hosts) if c.hosts is not None else nh)
        if n > nh:
            raise ScenarioError(f"{where}.ranks: {n} ranks need {n} hosts; the topology has {nh}")
        size, chunk = c.size_bytes, c.chunk_bytes
        build = {
            ("ring", "allreduce"): lambda: ring_allreduce(n, size, chunk_bytes=chunk),
            ("ring", "reduce_scatter"): lambda: ring_reduce_scatter(n, size, chunk_bytes=chunk),
            ("ring", "allgather"): lambda: ring_allgather(n, size, chunk_bytes=chunk),
            ("tree", "allreduce"): lambda: double_binary_tree_allreduce(n, size, chunk),
            ("halving-doubling", "allreduce"): lambda: halving_doubling_allreduce(n, size),
            ("direct", "allreduce"): lambda: direct_allreduce(n, size, chunk),
            ("direct", "alltoall"): lambda: direct_alltoall(n, size, chunk),
        }[(c.planner, c.op or "allreduce")]
        try:
            p = build()
        except InputError as e:  # names its field (size_bytes)
            raise ScenarioError(f"{where}.{e}") from None
        except ValueError as e:
            raise ScenarioError(f"{where}.planner: {e}") from None
    else:
        path = s._resolve_path(c.plan)
        p = read_plan_file(path, f"{where}.plan")
    hosts = list(c.hosts) if c.hosts is not None else list(range(p.nranks))
    if len(hosts) != p.nranks:
        raise ScenarioError(f"{where}.hosts: the plan has {p.nranks} ranks but hosts lists {len(hosts)}")
    bad = [h for h in hosts if h >= nh]
    if bad:
        raise ScenarioError(f"{where}.hosts: host index {bad[0]} out of range (the topology has hosts 0..{nh - 1})")
    return p, hosts


def _tables(tables: dict, host_clock=None, host_names=None, groups=None):
    """The steps of every collective (steps.parquet), its messages in the
    telemetry schema (ccl.parquet, shared with the runtime) and, per
    collective, its start, end and duration (None while unfinished) for the summary."""
    co = tables.get("collectives")
    if not co or not co["collective"]:
        return None, None, {}
    import pyarrow as pa

    from ...collectives.ccl import from_simulation

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
    return steps, from_simulation(co, st, host_clock, host_names or None, groups), summary


COLLECTIVES = Collectives()

"""The core's dependency-graph job (``graph_jobs``,
crates/fabriclab-core/src/apps/graph/) as the apps that lower onto it build
it (LLM jobs, ``fabriclab.sim.apps.llm``; jobs replayed from traces,
``fabriclab.sim.apps.trace``), and its tables after the run: rows of
``jobs.parquet``, ``timeline.parquet``, ``ccl.parquet`` and
``groups.parquet``, and each job's summary in its app's section."""

from __future__ import annotations

from ..app import App, Collected, Resolving


def plan_steps(p) -> list[list[dict]]:
    """A collective plan's steps per rank, as a graph job's plan holds them (any pinned path dropped)."""
    return [[{"op": st.op, "peer": st.peer, "offset": st.offset, "bytes": st.bytes, "reduce": st.reduce,
              "deps": list(st.deps), "path": None} for st in r] for r in p.ranks]


def _builder(op: str):
    """fabriclab's planner of ``op`` (a collective of the plan format) over n ranks and b bytes."""
    from ...collectives.alltoall import direct_alltoall
    from ...collectives.rings import (
        chain_broadcast,
        chain_reduce,
        ring_allgather,
        ring_allreduce,
        ring_reduce_scatter,
    )

    return {"allreduce": ring_allreduce, "allgather": ring_allgather, "reduce_scatter": ring_reduce_scatter,
            "alltoall": direct_alltoall, "broadcast": lambda n, b: chain_broadcast(n, b, 0),
            "reduce": lambda n, b: chain_reduce(n, b, 0)}[op]


def rank_slowdowns(field: str, slowdown: dict, n: int) -> list[float]:
    """Each of ``n`` ranks' compute slowdown factor (1: as recorded) from a job's ``slowdown`` table
    (rank -> positive factor), its keys and values checked."""
    from ...scenario.base import ScenarioError

    slow = [1.0] * n
    for k, v in slowdown.items():
        if not k.isdigit() or int(k) >= n or not v > 0:
            raise ScenarioError(f"{field}.slowdown: keys are ranks 0..{n - 1}, values positive factors; "
                                f"got {k!r} = {v!r}")
        slow[int(k)] = float(v)
    return slow


def intern(items: list, x) -> int:
    """``x``'s index in ``items``, appended first if absent."""
    if x not in items:
        items.append(x)
    return items.index(x)


class GraphBuild:
    """One graph job's interned labels (timeline kinds, group labels) and collective plans: a plan per
    (op, group size), scaled by the core to each node's bytes."""

    def __init__(self):
        self.labels: list[str] = []
        self.plans: list[dict] = []
        self.plan_of: dict = {}

    def label(self, name: str) -> int:
        return intern(self.labels, name)

    def plan(self, op: str, n: int, channels: int = 1, adjust=None) -> int:
        """The plan of ``op`` over ``n`` ranks, a ring collective on ``channels`` rings (NCCL's rail rings,
        ``block_rings``); ``adjust(steps)`` may reshape its steps when first built."""
        key = (op, n, channels)
        if key not in self.plan_of:
            if channels > 1:
                from ...collectives.rings import block_rings

                p = _builder(op)(n, n * 1024 * channels, rings=block_rings(n, channels))
            else:
                p = _builder(op)(n, n * 1024)
            steps = plan_steps(p)
            if adjust is not None:
                adjust(steps)
            self.plan_of[key] = len(self.plans)
            self.plans.append({"op": op, "algorithm": p.algorithm or "ring", "size_bytes": p.size_bytes,
                               "steps": steps})
        return self.plan_of[key]

    def job(self, j, ranks: list[dict], groups: list[dict], programs: list[list[dict]], qps=()) -> dict:
        """The core's graph job of scenario job ``j`` (its timing and telemetry options) with these ranks,
        ``qps`` the rank pairs on given queue pairs (none: each message whole on the default port)."""
        return {"name": j.name, "start_ps": j.start_ps, "iterations": j.iterations, "class": j.class_,
                "reduce_bps": j.reduce_bps, "send_overhead_ps": j.send_overhead_ps,
                "persistent_connections": j.persistent_connections, "ranks": ranks, "groups": groups,
                "programs": programs, "plans": self.plans, "labels": self.labels, "end_run": j.end_run,
                "telemetry": j.telemetry, "qps": list(qps)}


class GraphApp(App):
    """An app whose jobs run as graph jobs. The graph's tables are collected once for all of them (by
    whichever collects first); each then files its own jobs' summaries under ``section``."""

    tables = ("jobs", "timeline", "ccl", "groups")
    section = ""
    # Groups named by their label and their index among the job's groups of that label ("tp0", "dp1"), or by
    # their label alone (a trace's process group names).
    numbered_groups = True

    def jobs(self, s) -> list:
        """The scenario's jobs of this app."""
        return []

    def active(self, s) -> bool:
        return bool(self.jobs(s))

    def add(self, r: Resolving, jobs: list[dict]) -> None:
        r.spec.setdefault("graph_jobs", []).extend(jobs)

    def collect(self, c: Collected) -> None:
        if not self.active(c.scenario):
            return
        summary = _collect(c)
        part = {j.name: summary[j.name] for j in self.jobs(c.scenario) if j.name in summary}
        if part:
            c.summary[self.section] = part


def _collect(c: Collected) -> dict:
    """The graph job's tables into ``c.tables`` (once), and every job's summary by name."""
    if "graph_summary" in c.shared:
        return c.shared["graph_summary"]
    c.shared["graph_summary"] = {}
    it = c.core_tables.get("graph_iterations")
    if not it or not it["job"]:
        return {}
    import pyarrow as pa

    from .jobs import _jobs

    jobs, timeline, summary = _jobs({"job_iterations": it, "timeline": c.core_tables["graph_timeline"]})
    _compute_share(summary, timeline.to_pandas())
    c.shared["graph_summary"] = summary
    for name, t in (("jobs", jobs), ("timeline", timeline)):
        c.tables[name] = t if name not in c.tables else pa.concat_tables([c.tables[name], t])
    g = c.core_tables["graph_groups"]
    # The graph apps are the registered ones collecting this run (c.apps), not every GraphApp subclass defined.
    by_label = {j.name for app in c.apps if isinstance(app, GraphApp) and not app.numbered_groups
                for j in app.jobs(c.scenario)}
    names = _group_names(g, by_label)
    c.tables["groups"] = pa.table({"job": pa.array(g["job"], pa.string()), "group": pa.array(g["group"], pa.uint32()),
                                   "label": pa.array(g["label"], pa.string()),
                                   "name": pa.array(names, pa.string()),
                                   "ranks": pa.array(g["ranks"], pa.string())})
    _telemetry(c, names)
    return summary


def _compute_share(summary: dict, tl) -> None:
    """Per job: the share of the iteration each rank spends computing (an LLM job's forward and backward
    nodes, a traced job's compute nodes), and
    its complement, the time waiting (pipeline bubble and exposed communication)."""
    for name, j in summary.items():
        t = tl[(tl.job == name)]
        times = j["iteration_times_ps"]
        comp = t[t.kind.isin(("forward", "backward", "compute"))]
        if not times or comp.empty:
            continue
        busy = (comp.end_ps - comp.start_ps).groupby([comp.worker, comp.iteration]).sum()
        total = sum(times)
        per_rank = busy.groupby(level=0).sum() / total
        j["compute_fraction"] = {"mean": float(per_rank.mean()), "min": float(per_rank.min()),
                                 "max": float(per_rank.max())}
        j["idle_fraction_mean"] = 1 - float(per_rank.mean())


def _group_names(g: dict, by_label: set) -> list[str]:
    """Each group's name within its job: its label alone for the jobs in ``by_label``; else its label and
    its index among the job's groups of that label, in the order the groups are listed ("tp0", "tp1",
    "dp0", ...)."""
    seen: dict = {}
    names = []
    for job, label in zip(g["job"], g["label"]):
        k = seen.get((job, label), 0)
        seen[(job, label)] = k + 1
        names.append(label if job in by_label else f"{label}{k}")
    return names


def _telemetry(c: Collected, names: list[str]) -> None:
    """The jobs' collective messages as ccl.parquet rows, after the others."""
    gc = c.core_tables.get("graph_ccl")
    if not gc or not gc["job"]:
        return
    import pyarrow as pa
    import pyarrow.compute as pc

    from ...collectives.ccl import from_jobs

    ccl = c.tables.get("ccl")
    first = 0 if ccl is None or ccl.num_rows == 0 else int(pc.max(ccl["op_id"]).as_py()) + 1
    # Each row's communicator group by its name (groups.parquet: "tp0", "dp3", a trace's pg_name, ...), so
    # ccl.parquet and C4D see which group an op belongs to.
    g = c.core_tables["graph_groups"]
    label = {(job, gid): name for job, gid, name in zip(g["job"], g["group"], names)}
    named = {k: v for k, v in gc.items() if k != "collective"}
    named["group"] = [label[(job, gid)] for job, gid in zip(gc["job"], gc["group"])]
    rows = from_jobs(named, {}, first, c.host_clock, c.host_names or None)
    rows = rows.set_column(rows.schema.get_field_index("collective"), "collective",
                           pa.array(gc["collective"], rows.schema.field("collective").type))
    c.tables["ccl"] = rows if ccl is None else pa.concat_tables([ccl, rows])

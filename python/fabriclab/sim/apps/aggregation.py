"""In-network aggregation (PANAMA, SwitchML): the jobs whose allreduce
aggregates in the network, given their trees by PANAMA's controller
(section 4.1), and after the run ``aggregation.parquet``,
``accelerators.parquet`` and ``aggregation_values.parquet``.

The controller: for each aggregating job, one tree per
root switch (by default every switch of the lowest tier that reaches all
the job's workers: their ToR if they share one, section 3, otherwise each
aggregation switch of their pod, or each spine or core), its switches'
children and parents, and the core's aggregation section. A tree is the breadth-first tree from its root
down to the job's workers: every switch's parent is its lowest-numbered
neighbour one hop closer to the root, so workers reach it by shortest paths
and the tree is the same every run."""

from __future__ import annotations

from collections import deque

from ...scenario.aggregation import (
    AGGREGATION_ALLREDUCE,
    AggregationConfig,
    JobAggregationConfig,
)
from ...scenario.base import ScenarioError
from ..app import App, Collected, Resolving


def _neighbours(t) -> list[list[int]]:
    nb: list[list[int]] = [[] for _ in t.nodes]
    for lk in t.links:
        nb[lk["a"]].append(lk["b"])
        nb[lk["b"]].append(lk["a"])
    return [sorted(set(n)) for n in nb]


def _switch_distances(t, nb, source: int) -> list[int | None]:
    """Hops from ``source`` over switches (hosts end paths, never relay)."""
    dist: list[int | None] = [None] * len(t.nodes)
    dist[source] = 0
    q = deque([source])
    while q:
        u = q.popleft()
        if t.nodes[u]["kind"] == "host" and u != source:
            continue
        for v in nb[u]:
            if dist[v] is None:
                dist[v] = dist[u] + 1
                q.append(v)
    return dist


def top_tier(t) -> list[int]:
    """Switches farthest from their nearest host (spines, cores; a star's switch)."""
    nb = _neighbours(t)
    hosts = t.hosts
    height: dict[int, int] = {}
    for s, n in enumerate(t.nodes):
        if n["kind"] != "switch":
            continue
        d = _switch_distances(t, nb, s)
        reach = [d[h] for h in hosts if d[h] is not None]
        if reach:
            height[s] = min(reach)
    if not height:
        return []
    top = max(height.values())
    return [s for s in sorted(height) if height[s] == top]


def default_roots(t, workers: list[int]) -> list[int]:
    """The switches closest to all of ``workers`` (node indices): those whose
    farthest worker is nearest, over switches. A job inside one rack gets
    its ToR; one inside a fat-tree pod, that pod's aggregation switches;
    others the spines or cores."""
    nb = _neighbours(t)
    best, roots = None, []
    for s, n in enumerate(t.nodes):
        if n["kind"] != "switch":
            continue
        d = _switch_distances(t, nb, s)
        if any(d[w] is None for w in workers):
            continue
        far = max(d[w] for w in workers)
        if best is None or far < best:
            best, roots = far, [s]
        elif far == best:
            roots.append(s)
    return roots


def build_tree(t, workers: list[int], root: int, where: str) -> list[dict]:
    """The switches of the tree rooted at ``root`` reaching ``workers`` (node
    indices): each with its children (node, workers below) and parent."""
    nb = _neighbours(t)
    dist = _switch_distances(t, nb, root)
    names = [n["name"] for n in t.nodes]
    parent: dict[int, int] = {}

    def up(v: int) -> int:
        if t.nodes[v]["kind"] == "host":
            # A worker sends on its first port (the core's uplink): its parent is that switch.
            return uplink[v]
        return min(u for u in nb[v] if dist[u] == dist[v] - 1 and t.nodes[u]["kind"] == "switch")

    uplink = {}
    for lk in t.links:
        for a, b in ((lk["a"], lk["b"]), (lk["b"], lk["a"])):
            if t.nodes[a]["kind"] == "host" and a not in uplink:
                uplink[a] = b

    for w in workers:
        if dist[w] is None or w not in uplink or dist[uplink[w]] is None:
            raise ScenarioError(f"{where}: worker {names[w]!r} cannot reach the tree's root {names[root]!r}")
        v = w
        while v != root and v not in parent:
            parent[v] = up(v)
            v = parent[v]
    def depth(v: int) -> int:
        n = 0
        while v != root:
            v, n = parent[v], n + 1
        return n

    below: dict[int, int] = {w: 1 for w in workers}
    # Deepest first, so a switch's count is complete before its parent adds it.
    for v in sorted(parent, key=lambda v: -depth(v)):
        if t.nodes[v]["kind"] == "switch":
            below.setdefault(v, 0)
        below[parent[v]] = below.get(parent[v], 0) + below[v]
    switches = sorted({root} | {v for v in parent if t.nodes[v]["kind"] == "switch"})
    return [{"node": s, "parent": parent.get(s),
             "children": [[c, below[c]] for c in sorted(v for v in parent if parent[v] == s)]}
            for s in switches]


def roots_of(t, choice, workers: list[int], where: str) -> list[int]:
    top = default_roots(t, workers)
    names = {n["name"]: i for i, n in enumerate(t.nodes)}
    if choice == "all":
        return top
    if isinstance(choice, int):
        if choice > len(top):
            raise ScenarioError(f"{where}: {choice} trees asked; the job's workers have {len(top)} nearest common "
                                f"switches ({', '.join(t.nodes[s]['name'] for s in top)}), one tree each")
        return top[:choice]
    if not choice:
        raise ScenarioError(f"{where}: a job needs at least one tree; give \"all\", a count or root switch names")
    roots = []
    for name in choice:
        if name not in names or t.nodes[names[name]]["kind"] != "switch":
            raise ScenarioError(f"{where}: {name!r} is not a switch of the topology")
        if names[name] in roots:
            raise ScenarioError(f"{where}: root {name!r} listed twice")
        roots.append(names[name])
    return roots


def aggregation_core(agg: AggregationConfig | None, jobs, t) -> dict | None:
    """The core's aggregation section for ``jobs`` (``(index, JobConfig,
    worker host indices)`` of the jobs that aggregate), or None without any."""
    if not jobs:
        return None
    agg = agg or AggregationConfig()
    out = []
    for k, (i, j, workers) in enumerate(jobs):
        where = f"jobs[{i}].aggregation.trees"
        ja = j.aggregation or JobAggregationConfig()
        kind, fraction = AGGREGATION_ALLREDUCE[j.allreduce]
        if ja.sync_fraction is not None:
            fraction = ja.sync_fraction
        nodes = [t.hosts[w] for w in workers]
        roots = roots_of(t, ja.trees, nodes, where)
        if len(roots) > 256:
            raise ScenarioError(f"{where}: {len(roots)} trees; a job has at most 256 (the header's TID is 8 bits)")
        window = ({"kind": "panama", "initial_packets": ja.window_packets, "g": ja.g,
                   "initial_alpha": ja.initial_alpha} if kind == "panama" else
                  {"kind": "fixed", "packets": ja.window_packets, "cap": ja.window_cap})
        out.append({"job": k, "workers": workers, "class": j.class_, "sync_fraction": fraction,
                    "window": window, "timeout_ps": agg.timeout_ps,
                    "trees": [{"tree": n, "switches": build_tree(t, nodes, r, where)} for n, r in enumerate(roots)]})
    return {"memory_bytes": agg.memory_bytes, "vector_bytes": agg.vector_bytes, "functional": agg.functional,
            "jobs": out}


class Aggregation(App):
    name = "aggregation"
    after_fabric = True
    tables = ("aggregation", "accelerators", "aggregation_values")

    def active(self, s) -> bool:
        return any(j.allreduce in AGGREGATION_ALLREDUCE for j in s.jobs)

    def resolve(self, r: Resolving) -> None:
        s, jobs = r.scenario, r.spec["jobs"]
        aggregating = [(i, j, jobs[i]["workers"]) for i, j in enumerate(s.jobs) if j.allreduce in AGGREGATION_ALLREDUCE]
        for k, (i, _, _) in enumerate(aggregating):
            jobs[i]["aggregation"] = k
        r.spec["aggregation"] = aggregation_core(s.aggregation, aggregating, r.topology)

    def collect(self, c: Collected) -> None:
        tables = c.core_tables
        if "aggregation_workers" not in tables:
            return
        import pyarrow as pa

        c.tables["aggregation"] = pa.table(tables["aggregation_workers"])
        if "aggregation_values" in tables:
            v = tables["aggregation_values"]
            c.tables["aggregation_values"] = pa.table({
                "host": v["host"], "job": pa.array(v["job"], pa.uint32()),
                "message": pa.array(v["message"], pa.uint64()), "packet": pa.array(v["packet"], pa.uint64()),
                "index": pa.array(v["index"], pa.uint32()), "value": pa.array(v["value"], pa.float32())})
        series = tables.get("switch_logic_series")
        if series:
            keep = [i for i, k in enumerate(series["series"]) if k == "agg_used_bytes"]
            c.tables["accelerators"] = pa.table({
                "node": [series["node"][i] for i in keep],
                "time_ps": pa.array([series["time_ps"][i] for i in keep], pa.uint64()),
                "used_bytes": pa.array([series["value"][i] for i in keep], pa.uint64())})
        w = tables["aggregation_workers"]
        c.summary["aggregation"] = {k: int(sum(w[k])) for k in
                                    ("messages", "packets_sent", "results", "marked_results", "given_up", "skipped")}


AGGREGATION = Aggregation()

"""Blink's TreeGen: pack spanning arborescences at the maximum total rate,
then keep as few trees as possible at that rate.

Packing: a linear program over trees, max sum(x_T) subject to, for every
directed link e, sum(x_T : e in T) <= capacity(e), solved by column
generation: HiGHS solves the program over the trees found so far; its dual
prices y_e define the cheapest tree to add, a minimum spanning arborescence
under weights y_e (Edmonds' algorithm, networkx); the program is optimal when
no tree costs less than 1. By Edmonds' branching theorem the optimum equals
min over v of the max flow from the root to v, which the tests check.

Fewer trees: the optimal basic solution already uses at most as many trees as
there are tight links; then, greedily, each tree (smallest rate first) is
dropped when the program over the remaining trees still reaches the optimal
rate (Blink uses an ILP; this greedy is documented in docs/plans.md).

Shared resources: by default every directed link is its own resource (its
``capacity``). A graph may instead name shared resources, as the runtime's
NIC model does (collectives/nicgraph.py): ``g.graph["resources"]`` maps a
resource to its capacity (bit/s) and every edge's ``uses`` lists the
resources it consumes (e.g. the sender's uplink and the receiver's
downlink). The program then has a row per resource, a tree consumes its
rate once per tree edge using that resource, and column generation prices
an edge as the sum of its resources' dual prices (the weight of the
minimum arborescence stays additive over edges). With ``both_directions``
a tree edge u -> v is also used v -> u (the reduce half), so it consumes
the resources of both edges. Edges' ``capacity`` is then not a constraint
(the integral packings, which need one resource per link, are skipped).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
from scipy.optimize import linprog

TOL = 1e-9
INTEGRAL_KEEP = 0.8


@dataclass
class Packing:
    root: int
    rate_bps: float
    trees: list[dict]  # parent maps
    rates_bps: list[float]


# HiGHS's mixed-integer searches stop after a number of branch-and-bound nodes,
# not after a wall time: every rank of a runtime communicator plans the same
# trees on its own, and a time limit would make the plan depend on the machine's
# load (tests/test_treegen.py checks the limit is not a clock). The programs here
# are solved at the root node (1 node) in every case of the test suite.
# scipy's milp empties the options dict it is given: pass a copy.
MILP_OPTIONS = {"node_limit": 20_000}


def _tree_edges(parent: dict) -> list[tuple[int, int]]:
    return [(p, v) for v, p in parent.items() if p is not None]


def _resource(e, both: bool):
    """The capacity a tree edge consumes: its directed link, or with
    ``both`` (allreduce: reduce up, broadcast down the same tree) the pair
    of directions, which must then share one direction's capacity."""
    return (min(e), max(e)) if both else e


def _uses_fn(g: nx.DiGraph, both: bool):
    """e -> the resources tree edge e consumes: its link (``_resource``), or
    with named resources the edge's ``uses`` (and its reverse's, with ``both``)."""
    if g.graph.get("resources") is None:
        return lambda e: (_resource(e, both),)
    if both:
        return lambda e: tuple(g.edges[e]["uses"]) + tuple(g.edges[e[1], e[0]]["uses"])
    return lambda e: tuple(g.edges[e]["uses"])


def _check_resources(g: nx.DiGraph, both: bool) -> None:
    res = g.graph["resources"]
    if not isinstance(res, dict):
        raise ValueError(f"graph resources: must map resources to capacities, got {type(res).__name__}")
    for r, c in res.items():
        if not c > 0 or c == float("inf"):
            raise ValueError(f"graph resources: capacity of {r!r} must be finite and > 0, got {c!r}")
    for e in g.edges:
        uses = g.edges[e].get("uses")
        if not uses or any(r not in res for r in uses):
            raise ValueError(f"edge {e}: 'uses' must list resources of the graph, got {uses!r}")
        if both and not g.has_edge(e[1], e[0]):
            raise ValueError(f"edge {e}: used both ways, but the graph has no edge {e[1], e[0]}")


def _matrix(trees, edges, uses):
    idx = {e: i for i, e in enumerate(edges)}
    a = np.zeros((len(edges), len(trees)))
    for j, t in enumerate(trees):
        for e in _tree_edges(t):
            for r in uses(e):
                a[idx[r], j] += 1.0
    return a


def _solve(trees, edges, cap, uses):
    """The packing program over ``trees``; ``edges`` are the resources (rows)."""
    a = _matrix(trees, edges, uses)
    res = linprog(-np.ones(len(trees)), A_ub=a, b_ub=cap, bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"tree packing LP failed: {res.message}")
    return res.x, -res.fun, -res.ineqlin.marginals


def _arborescence(g: nx.DiGraph, root: int, weight: dict) -> dict | None:
    h = nx.DiGraph()
    h.add_nodes_from(g.nodes)
    for u, v in g.edges:
        if v != root:
            h.add_edge(u, v, w=weight[(u, v)])
    try:
        arb = nx.minimum_spanning_arborescence(h, attr="w", preserve_attrs=False)
    except nx.NetworkXException:
        return None
    parent = {root: None}
    for u, v in arb.edges:
        parent[v] = u
    return parent if len(parent) == g.number_of_nodes() else None


def pack_trees(g: nx.DiGraph, root: int, minimize_trees: bool = True, both_directions: bool = False) -> Packing:
    """Maximum-rate packing of spanning arborescences of ``g`` rooted at
    ``root``; ``g`` has a ``capacity`` (bits per second) on every edge.

    When every capacity is a whole multiple of the smallest (NVLink fabrics:
    one or two links of one rate), the packing is made of whole trees of one
    unit of rate each (an integer program, feasible by Edmonds' theorem),
    which gives few trees; otherwise the fractional column generation.

    With ``both_directions`` every tree is used both ways (allreduce reduces
    up and broadcasts down the same tree), so a tree edge consumes capacity
    of both directions of its link: the packing is then of undirected
    spanning trees (links must have equal capacity both ways).

    A graph with named shared resources (``g.graph["resources"]``, edges'
    ``uses``; module docstring) is packed against those instead."""
    if g.number_of_nodes() == 1:
        return Packing(root, float("inf"), [{root: None}], [float("inf")])
    both = both_directions
    named = g.graph.get("resources")
    if minimize_trees and not both and named is None:
        p = _integral_packing(g, root)
        if p is not None:
            return p
    uses = _uses_fn(g, both)
    if named is not None:
        _check_resources(g, both)
        edges = sorted(named)
        scale = max(named.values(), default=1.0)
        cap = np.array([named[r] / scale for r in edges])
    else:
        edges = sorted({_resource(e, True) for e in g.edges}) if both else sorted(g.edges)
        scale = max(g.edges[e]["capacity"] for e in g.edges)
        cap = np.array([g.edges[e]["capacity"] / scale for e in edges])
    first = _arborescence(g, root, {e: 1.0 for e in g.edges})
    if first is None:
        raise ValueError("no spanning tree: some allocated GPU cannot be reached from the root over these links")
    trees = [first]
    seen = {tuple(sorted(first.items(), key=lambda kv: kv[0]))}
    for _ in range(10_000):
        x, val, y = _solve(trees, edges, cap, uses)
        price = {e: max(float(y[i]), 0.0) for i, e in enumerate(edges)}
        t = _arborescence(g, root, {e: sum(price[r] for r in uses(e)) for e in g.edges})
        cost = sum(price[r] for e in _tree_edges(t) for r in uses(e))
        key = tuple(sorted(t.items(), key=lambda kv: kv[0]))
        if cost >= 1 - TOL or key in seen:
            break
        trees.append(t)
        seen.add(key)
    x, best, _ = _solve(trees, edges, cap, uses)
    if minimize_trees and both and named is None:
        # Whole trees of one link's rate each, when they keep at least
        # INTEGRAL_KEEP of the fractional optimum (far fewer trees pipeline
        # better than many thin ones).
        unit = min(g.edges[e]["capacity"] for e in g.edges)
        k = int(best * scale / unit + 1e-9)
        if k >= 1 and k * unit >= INTEGRAL_KEEP * best * scale:
            p = _integral_packing(g, root, both=True, k=k)
            if p is not None:
                return p
    keep = [j for j in range(len(trees)) if x[j] > TOL]
    trees = [trees[j] for j in keep]
    if minimize_trees and len(trees) > 1:
        trees = _fewest_trees(trees, edges, cap, best, uses)
    if minimize_trees and len(trees) > 1:
        x, _, _ = _solve(trees, edges, cap, uses)
        keep = list(range(len(trees)))
        order = sorted(range(len(trees)), key=lambda j: x[keep[j]])
        alive = list(range(len(trees)))
        for j in order:
            trial = [k for k in alive if k != j]
            if not trial:
                continue
            _, val, _ = _solve([trees[k] for k in trial], edges, cap, uses)
            if val >= best * (1 - 1e-9):
                alive = trial
        trees = [trees[k] for k in alive]
    x, best, _ = _solve(trees, edges, cap, uses)
    pairs = [(t, r * scale) for t, r in zip(trees, x) if r > TOL]
    return Packing(root, best * scale, [t for t, _ in pairs], [r for _, r in pairs])


def resource_loads(g: nx.DiGraph, p: Packing, both_directions: bool = False) -> dict:
    """Resource -> (load, capacity) in bit/s of a packing on ``g``: the sum
    over trees of rate x the number of the tree's edges using the resource."""
    uses = _uses_fn(g, both_directions)
    named = g.graph.get("resources")
    out: dict = {}
    for t, rate in zip(p.trees, p.rates_bps):
        for e in _tree_edges(t):
            for r in uses(e):
                if r not in out:
                    out[r] = [0.0, named[r] if named is not None else g.edges[e]["capacity"]]
                out[r][0] += rate
    return {r: (v[0], v[1]) for r, v in out.items()}


def _fewest_trees(trees, edges, cap, best, uses):
    """Among the candidate trees, the fewest that still reach the optimal
    rate: a mixed-integer program (HiGHS): min sum z_T with x_T <= best * z_T,
    link capacities, and sum x_T >= best."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    m = len(trees)
    a = np.hstack([_matrix(trees, edges, uses), np.zeros((len(edges), m))])
    cons = [LinearConstraint(a, -np.inf, cap)]
    total = np.concatenate([np.ones(m), np.zeros(m)])
    cons.append(LinearConstraint(total[None, :], best * (1 - 1e-7), np.inf))
    link = np.hstack([np.eye(m), -best * np.eye(m)])
    cons.append(LinearConstraint(link, -np.inf, 0))
    c = np.concatenate([np.zeros(m), np.ones(m)])
    integrality = np.concatenate([np.zeros(m), np.ones(m)])
    res = milp(c, constraints=cons, integrality=integrality, bounds=Bounds(0, np.concatenate([np.full(m, np.inf), np.ones(m)])),
               options=dict(MILP_OPTIONS))
    if res.x is None:
        return trees
    chosen = [trees[j] for j in range(m) if res.x[m + j] > 0.5]
    if not chosen:
        return trees
    _, val, _ = _solve(chosen, edges, cap, uses)
    return chosen if val >= best * (1 - 1e-7) else trees


def _integral_packing(g: nx.DiGraph, root: int, both: bool = False, k: int | None = None) -> Packing | None:
    """k edge-disjoint arborescences of the multigraph with c_e/unit parallel
    links, k = Edmonds' bound / unit: binary edge choices per tree, one
    incoming edge per non-root node, a single-commodity flow from the root
    for connectivity, link multiplicities as capacities (HiGHS MILP)."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    edges = [e for e in sorted(g.edges) if e[1] != root]
    caps = [g.edges[e]["capacity"] for e in edges]
    unit = min(caps)
    mult = [c / unit for c in caps]
    if any(abs(m - round(m)) > 1e-9 for m in mult):
        return None
    if k is None:
        bound = edmonds_bound(g, root)
        k = round(bound / unit)
        if k < 1 or abs(k * unit - bound) > 1e-6 * bound:
            return None
    bound = k * unit
    nodes = sorted(g.nodes)
    n, m = len(nodes), len(edges)
    nv = 2 * k * m  # y then f for each tree
    yi = lambda t, j: t * m + j  # noqa: E731
    fi = lambda t, j: k * m + t * m + j  # noqa: E731
    rows, lo, hi = [], [], []

    def row(coefs, a, b):
        r = np.zeros(nv)
        for i, c in coefs:
            r[i] += c
        rows.append(r)
        lo.append(a)
        hi.append(b)

    for t in range(k):
        for v in nodes:
            if v == root:
                continue
            into = [j for j, e in enumerate(edges) if e[1] == v]
            out = [j for j, e in enumerate(edges) if e[0] == v]
            row([(yi(t, j), 1.0) for j in into], 1, 1)
            row([(fi(t, j), 1.0) for j in into] + [(fi(t, j), -1.0) for j in out], 1, 1)
        for j in range(m):
            row([(fi(t, j), 1.0), (yi(t, j), -(n - 1))], -np.inf, 0)
    if both:  # a link's two directions share one direction's capacity
        pairs: dict = {}
        for j, e in enumerate(edges):
            pairs.setdefault(_resource(e, True), []).append(j)
        for js in pairs.values():
            row([(yi(t, j), 1.0) for t in range(k) for j in js], -np.inf, round(mult[js[0]]))
    else:
        for j in range(m):
            row([(yi(t, j), 1.0) for t in range(k)], -np.inf, round(mult[j]))
    integrality = np.concatenate([np.ones(k * m), np.zeros(k * m)])
    ub = np.concatenate([np.ones(k * m), np.full(k * m, n - 1.0)])
    res = milp(np.zeros(nv), constraints=[LinearConstraint(np.array(rows), lo, hi)], integrality=integrality,
               bounds=Bounds(0, ub), options=dict(MILP_OPTIONS))
    if res.x is None:
        return None
    merged: dict[tuple, float] = {}
    for t in range(k):
        parent = {root: None}
        for j, (u, v) in enumerate(edges):
            if res.x[yi(t, j)] > 0.5:
                parent[v] = u
        key = tuple(sorted(parent.items(), key=lambda kv: kv[0]))
        merged[key] = merged.get(key, 0.0) + unit
    trees = [dict(key) for key in merged]
    return Packing(root, bound, trees, list(merged.values()))


def edmonds_bound(g: nx.DiGraph, root: int) -> float:
    """min over v != root of the max flow from root to v."""
    return min(nx.maximum_flow_value(g, root, v, capacity="capacity") for v in g.nodes if v != root)


def depth(parent: dict) -> int:
    best = 0
    for v in parent:
        d = 0
        while parent[v] is not None:
            v = parent[v]
            d += 1
        best = max(best, d)
    return best


def best_root_packing(g: nx.DiGraph, roots=None, both_directions: bool = False) -> Packing:
    """The root with the highest packing rate: Edmonds' bound (max flows)
    ranks every candidate root cheaply, then the lowest-numbered best root
    is packed."""
    best = None
    for r in roots if roots is not None else sorted(g.nodes):
        if g.number_of_nodes() > 1 and any(not nx.has_path(g, r, v) for v in g.nodes):
            continue
        b = edmonds_bound(g, r) if g.number_of_nodes() > 1 else float("inf")
        if best is None or b > best[0] * (1 + 1e-9):
            best = (b, r)
    if best is None:
        raise ValueError("no spanning tree from any root: the allocation's links are disconnected")
    return pack_trees(g, best[1], both_directions=both_directions)

"""Topology-aware planning: from an allocation of GPUs and a collective to a
plan, by algorithm name (ring, tree, trees, halving-doubling, direct,
hierarchical, hybrid, auto)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError
from ..scenario.gpus import GpuTopology, nvlink_graph, pcie_path
from . import rings as R
from .alltoall import direct_alltoall, hierarchical_alltoall
from .compose import embed, merge_disjoint
from .direct import direct_allreduce
from .halving_doubling import halving_doubling_allreduce
from .plan import Plan, weighted_split
from .treegen import MILP_OPTIONS, best_root_packing, pack_trees
from .trees import double_binary_tree_allreduce, tree_collective

ALGOS = ("ring", "tree", "trees", "halving-doubling", "direct", "hierarchical", "hybrid", "auto")
OPS = ("allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "alltoall")


class PlanningError(InputError):
    pass


@dataclass
class Allocation:
    """The GPUs of a job (global GPU ids, one rank each, in rank order)."""

    topo: GpuTopology
    gpus: list[int]
    _pcie: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        n = len(self.topo.gpus)
        bad = [g for g in self.gpus if not 0 <= g < n]
        if bad:
            raise PlanningError(f"--gpus: unknown GPU id {bad[0]} (this topology has GPUs 0..{n - 1})")
        if len(set(self.gpus)) != len(self.gpus):
            raise PlanningError("--gpus: a GPU is listed twice")
        if len(self.gpus) < 2:
            raise PlanningError("--gpus: a collective needs at least two GPUs")
        self._check_connected()

    def _check_connected(self):
        """Every allocated GPU must reach every other one (GPUs do not forward)."""
        import networkx as nx

        g = nx.Graph()
        hosts = set(self.topo.hosts)
        for lk in self.topo.links:
            g.add_edge(lk["a"], lk["b"])
        first = self.topo.gpus[self.gpus[0]]
        for gpu in self.gpus[1:]:
            node = self.topo.gpus[gpu]
            sub = g.subgraph([v for v in g if v not in hosts or v in (first, node)])
            if first not in sub or node not in sub or not nx.has_path(sub, first, node):
                raise PlanningError(f"--gpus: GPU {gpu} cannot reach GPU {self.gpus[0]} in this topology "
                                    f"(a disconnected allocation)")

    @property
    def n(self) -> int:
        return len(self.gpus)

    @property
    def rank_hosts(self) -> list[int]:
        return [self.topo.host_index(g) for g in self.gpus]

    def server_of(self, g: int) -> int:
        return next(s for s, ids in enumerate(self.topo.servers) if g in ids)

    def by_server(self) -> list[list[int]]:
        """Ranks grouped by server, servers in order."""
        groups: dict[int, list[int]] = {}
        for r, g in enumerate(self.gpus):
            groups.setdefault(self.server_of(g), []).append(r)
        return [groups[s] for s in sorted(groups)]

    def nvlink(self, ranks=None):
        ranks = list(range(self.n)) if ranks is None else ranks
        return nvlink_graph(self.topo, [self.gpus[r] for r in ranks])

    def pcie_paths(self) -> dict:
        """Pinned PCIe paths between every pair of ranks on one server."""
        if not self._pcie:
            for a in range(self.n):
                for b in range(self.n):
                    if a != b and self.server_of(self.gpus[a]) == self.server_of(self.gpus[b]):
                        self._pcie[(a, b)] = pcie_path(self.topo, self.gpus[a], self.gpus[b])
        return self._pcie

    @property
    def has_nvswitch(self) -> bool:
        return any("nvswitch" in n["name"] for n in self.topo.nodes)

    def nvswitch_paths(self) -> dict | None:
        """Pinned paths through the NVSwitch between ranks of one server (hop
        counts alone would also pick the equally short PCIe switch path)."""
        if not self.has_nvswitch:
            return None
        names = {i: n["name"] for i, n in enumerate(self.topo.nodes)}
        out = {}
        for a in range(self.n):
            for b in range(self.n):
                sa, sb = self.server_of(self.gpus[a]), self.server_of(self.gpus[b])
                if a != b and sa == sb:
                    ga, gb = names[self.topo.gpus[self.gpus[a]]], names[self.topo.gpus[self.gpus[b]]]
                    prefix = ga[: ga.index("gpu")]
                    out[(a, b)] = [ga, f"{prefix}nvswitch", gb]
        return out

    def nvlink_order(self) -> list[int]:
        """A rank order visiting each server's ranks along NVLink where a
        Hamiltonian path exists (rank order otherwise), servers one after another."""
        order = []
        for ranks in self.by_server():
            g = self.nvlink(ranks)
            k = len(ranks)
            best = None
            for start in range(k):
                path, seen = [start], {start}

                def dfs():
                    if len(path) == k:
                        return True
                    for v in sorted(g.successors(path[-1])):
                        if v not in seen:
                            path.append(v)
                            seen.add(v)
                            if dfs():
                                return True
                            path.pop()
                            seen.discard(v)
                    return False

                if dfs():
                    best = list(path)
                    break
            order += [ranks[i] for i in best] if best else ranks
        return order


def nvlink_rings(alloc: Allocation, ranks=None, max_rings: int = 16) -> list[list[int]]:
    """The most directed Hamiltonian cycles over NVLink among ``ranks`` that
    the links can carry at once, each using one link's worth of every edge it
    crosses (a doubled link carries two), as NCCL builds one ring per
    channel: all cycles are enumerated (small graphs) and a HiGHS integer
    program picks the largest set within the link multiplicities."""
    ranks = list(range(alloc.n)) if ranks is None else ranks
    g = alloc.nvlink(ranks)
    n = len(ranks)
    if n == 1:
        return [[ranks[0]]]
    unit = min((d["capacity"] for _, _, d in g.edges(data=True)), default=None)
    if unit is None:
        return []
    mult = {(u, v): round(d["capacity"] / unit) for u, v, d in g.edges(data=True)}
    cycles = []
    path, seen = [0], {0}

    def dfs():
        if len(cycles) >= 20000:
            return
        if len(path) == n:
            if (path[-1], 0) in mult:
                cycles.append(list(path))
            return
        for v in sorted(g.successors(path[-1])):
            if v not in seen:
                path.append(v)
                seen.add(v)
                dfs()
                path.pop()
                seen.discard(v)

    dfs()
    if not cycles:
        return []
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp

    edges = sorted(mult)
    idx = {e: i for i, e in enumerate(edges)}
    a = np.zeros((len(edges), len(cycles)))
    for j, c in enumerate(cycles):
        for e in zip(c, c[1:] + c[:1]):
            a[idx[e], j] += 1
    cap = np.array([mult[e] for e in edges], dtype=float)
    cons = [LinearConstraint(a, -np.inf, cap), LinearConstraint(np.ones((1, len(cycles))), 0, max_rings)]
    res = milp(-np.ones(len(cycles)), constraints=cons, integrality=np.ones(len(cycles)),
               bounds=Bounds(0, np.minimum(cap.min(), max_rings)), options=dict(MILP_OPTIONS))
    if res.x is None:
        return [[ranks[i] for i in cycles[0]]]
    out = []
    for j, c in enumerate(cycles):
        for _ in range(int(round(res.x[j]))):
            out.append([ranks[i] for i in c])
    return out


def _ring_plan(op, alloc: Allocation, size, chunk, root):
    rings = [] if alloc.has_nvswitch else nvlink_rings(alloc)
    paths = alloc.nvswitch_paths()
    if not rings:
        if alloc.has_nvswitch or len(alloc.by_server()) > 1:
            rings = [alloc.nvlink_order()]
        else:
            # NCCL falls back to PCIe when NVLink has no ring; GPU-id order keeps
            # GPUs that share a PCIe switch next to each other.
            rings = [sorted(range(alloc.n), key=lambda r: alloc.gpus[r])]
            paths = alloc.pcie_paths()
    if op == "allreduce":
        return R.ring_allreduce(alloc.n, size, rings, chunk, paths)
    if op == "reduce_scatter":
        return R.ring_reduce_scatter(alloc.n, size, rings[0], chunk, paths)
    if op == "allgather":
        return R.ring_allgather(alloc.n, size, rings[0], chunk, paths)
    # Broadcast and reduce: each ring becomes a chain from (to) the root, data split across rings.
    p = Plan.empty(op, alloc.n, size, root=root, algorithm="ring")
    for ring, (o, b) in zip(rings, weighted_split(0, size, [1] * len(rings))):
        if b == 0:
            continue
        k = ring.index(root)
        order = ring[k:] + ring[:k]
        sub = (R.chain_broadcast(alloc.n, b, root, order, chunk, paths) if op == "broadcast"
               else R.chain_reduce(alloc.n, b, root, order[1:] + order[:1], chunk, paths))
        merge_disjoint(p, sub, o)
    p.meta.update({"rings": rings, "chunk_bytes": chunk})
    return p


def _trees_plan(op, alloc: Allocation, size, chunk, root):
    if op not in ("allreduce", "broadcast", "reduce"):
        raise PlanningError(f"--algo trees: supports allreduce, broadcast and reduce, not {op}")
    if alloc.has_nvswitch:
        if op == "allreduce":  # one-hop trees (Blink on DGX-2)
            p = direct_allreduce(alloc.n, size, chunk, alloc.nvswitch_paths())
            p.algorithm = "trees"
            return p
        star = {r: (None if r == root else root) for r in range(alloc.n)}
        return tree_collective(op, alloc.n, size, [star], [1.0], chunk, alloc.nvswitch_paths(), "trees")
    g = alloc.nvlink()
    try:
        packing = pack_trees(g, root) if op != "allreduce" else best_root_packing(g, both_directions=True)
    except ValueError:
        packing = None
    paths = None
    if packing is None:
        # NVLink does not connect the allocation: over PCIe, Blink is no better
        # than NCCL's PCIe ring, so use that ring (chains for broadcast/reduce).
        p = _ring_plan(op, alloc, size, chunk, root)
        p.algorithm = "trees"
        p.meta["fallback"] = "pcie ring: NVLink does not connect the allocation"
        return p
    return tree_collective(op, alloc.n, size, packing.trees, packing.rates_bps, chunk, paths, "trees") | _meta(
        packing)


def _meta(packing):
    class _M:
        def __ror__(self, plan):
            plan.meta.update({"packing_rate_bps": packing.rate_bps, "root": packing.root,
                              "tree_rates_bps": packing.rates_bps})
            return plan

    return _M()


def hybrid_split(total_bytes: int, pcie_bps: float, nvlink_bps: float, switch_latency_ps: int = 0) -> int:
    """Bytes sent over PCIe so that PCIe and NVLink finish together, with the
    PCIe side paying the link-switch latency T_dpa (Blink talk, backup slide):
    D_pcie = D*B_p/(B_p+B_n) - T_dpa*B_p*B_n/(B_p+B_n), bandwidths in bytes/s."""
    bp, bn = pcie_bps / 8, nvlink_bps / 8
    d = total_bytes * bp / (bp + bn) - (switch_latency_ps / 1e12) * bp * bn / (bp + bn)
    return max(0, min(total_bytes, int(d)))


def _hybrid_plan(op, alloc: Allocation, size, chunk, root, switch_latency_ps=0):
    if op not in ("allreduce", "broadcast"):
        raise PlanningError("--algo hybrid: supports allreduce and broadcast")
    nv = _trees_plan(op, alloc, 1, None, root)  # for the NVLink rate
    nv_rate = nv.meta.get("packing_rate_bps")
    if not nv_rate:
        raise PlanningError("--algo hybrid: the allocation has no NVLink spanning tree")
    from ..scenario.gpus import PCIE3_X16_BPS

    d_pcie = hybrid_split(size, PCIE3_X16_BPS, nv_rate, switch_latency_ps)
    d_nv = size - d_pcie
    p = Plan.empty(op, alloc.n, size, root=root, algorithm="hybrid")
    if d_nv:
        merge_disjoint(p, _trees_plan(op, alloc, d_nv, chunk, root), 0)
    if d_pcie:
        paths = alloc.pcie_paths()
        if op == "allreduce":
            sub = R.ring_allreduce(alloc.n, d_pcie, None, chunk, paths)
        else:
            sub = R.chain_broadcast(alloc.n, d_pcie, root, None, chunk, paths)
        merge_disjoint(p, sub, d_nv)
    p.meta.update({"pcie_bytes": d_pcie, "nvlink_bytes": d_nv})
    return p


def _local_trees(alloc: Allocation, ranks: list[int], root: int):
    """Trees rooted at ``root`` among ``ranks`` (local indices) over NVLink,
    or one star over PCIe when NVLink does not connect them."""
    if len(ranks) == 1:
        return [{0: None}], [1.0], None
    g = alloc.nvlink(ranks)
    try:
        p = pack_trees(g, ranks.index(root))
        return p.trees, p.rates_bps, None
    except ValueError:
        r0 = ranks.index(root)
        return [{i: None if i == r0 else r0 for i in range(len(ranks))}], [1.0], "pcie"


def _local_phase(plan, alloc, op, groups, roots, offset, nbytes, chunk, after) -> dict[int, list[int]]:
    """Reduce to (or broadcast from) each server's root of a partition, over
    NVLink trees or a PCIe star; returns the sink steps per rank."""
    pcie = alloc.pcie_paths()
    sinks: dict[int, list[int]] = {}
    for g, rt in zip(groups, roots):
        if len(g) == 1:
            continue
        trees, w, via = _local_trees(alloc, g, rt)
        sub = tree_collective(op, len(g), nbytes, trees, w, chunk, None, "local")
        path_of = (lambda a, c: pcie[(a, c)]) if via else None
        sinks.update(embed(plan, sub, g, offset, {r: after.get(r, []) for r in g}, path_of))
    return sinks


def _hierarchical_plan(op, alloc: Allocation, size, chunk, root):
    """Blink's three-phase allreduce across servers: every partition of the
    data has a root on every server; (1) reduce each partition to its local
    root, (2) allreduce each partition among its roots across servers, (3)
    broadcast each partition from its local root."""
    if op != "allreduce":
        raise PlanningError("--algo hierarchical: supports allreduce")
    groups = alloc.by_server()
    parts = max(len(g) for g in groups)
    plan = Plan.empty("allreduce", alloc.n, size, algorithm="hierarchical")
    for p_idx, (o, b) in enumerate(weighted_split(0, size, [1] * parts)):
        if b == 0:
            continue
        roots = [g[p_idx % len(g)] for g in groups]
        after = _local_phase(plan, alloc, "reduce", groups, roots, o, b, chunk, {})  # phase 1
        if len(roots) > 1:  # phase 2
            sub = R.ring_allreduce(len(roots), b, None, chunk)
            after.update(embed(plan, sub, roots, o, after))
        _local_phase(plan, alloc, "broadcast", groups, roots, o, b, chunk, after)  # phase 3
    plan.meta.update({"partitions": parts, "chunk_bytes": chunk})
    return plan


def _alltoall_plan(algo: str, alloc: Allocation, size_bytes: int, chunk_bytes: int | None) -> Plan:
    if algo not in ("direct", "hierarchical"):
        raise PlanningError(f"--algo {algo}: alltoall is planned by direct or hierarchical")
    paths = alloc.nvswitch_paths()
    if algo == "direct":
        return direct_alltoall(alloc.n, size_bytes, chunk_bytes, paths)
    return hierarchical_alltoall(alloc.by_server(), size_bytes, chunk_bytes, paths)


def make_plan(algo: str, op: str, alloc: Allocation, size_bytes: int, chunk_bytes: int | None = None,
              root: int = 0) -> Plan:
    """A plan for ``op`` over the allocation with the named algorithm."""
    if op not in OPS:
        raise PlanningError(f"--op: unknown collective {op!r} (known: {', '.join(OPS)})")
    if algo not in ALGOS:
        raise PlanningError(f"--algo: unknown algorithm {algo!r} (known: {', '.join(ALGOS)})")
    if size_bytes < 1:
        raise PlanningError("size: must be at least 1 byte")
    if not 0 <= root < alloc.n:
        raise PlanningError(f"--root: must be a rank within 0..{alloc.n - 1}")
    if op == "alltoall":
        return _alltoall_plan(algo, alloc, size_bytes, chunk_bytes)
    if algo == "ring":
        return _ring_plan(op, alloc, size_bytes, chunk_bytes, root)
    if algo == "trees":
        return _trees_plan(op, alloc, size_bytes, chunk_bytes, root)
    if algo == "hybrid":
        return _hybrid_plan(op, alloc, size_bytes, chunk_bytes, root)
    if algo == "hierarchical":
        return _hierarchical_plan(op, alloc, size_bytes, chunk_bytes, root)
    if op != "allreduce":
        raise PlanningError(f"--algo {algo}: supports allreduce only")
    paths = alloc.nvswitch_paths()
    if algo == "tree":
        return double_binary_tree_allreduce(alloc.n, size_bytes, chunk_bytes, paths)
    if algo == "halving-doubling":
        return halving_doubling_allreduce(alloc.n, size_bytes, paths)
    if algo == "direct":
        return direct_allreduce(alloc.n, size_bytes, chunk_bytes, paths)
    raise PlanningError("--algo auto: use choose_plan()")


def candidates(op: str, alloc: Allocation) -> list[str]:
    if op == "alltoall":
        return ["direct"] + (["hierarchical"] if len(alloc.by_server()) > 1 else [])
    out = ["ring"]
    if op in ("allreduce", "broadcast", "reduce"):
        out.append("trees")
    if op == "allreduce":
        out += ["tree", "halving-doubling", "direct"]
        if len(alloc.by_server()) > 1:
            out.append("hierarchical")
    return out


"""TreeGen's packing rate equals Edmonds' bound: the minimum over v of the
max flow from the root to v, computed independently with networkx."""

import time

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriclab.collectives.algos import Allocation, make_plan, nvlink_rings
from fabriclab.collectives.treegen import pack_trees
from fabriclab.collectives.verify import verify
from fabriclab.scenario.gpus import NVLINK1_BPS, NVLINK2_BPS, NVSWITCH_BPS, gpu_server, nvlink_graph


def min_max_flow(g, root):
    return min(nx.maximum_flow_value(g, root, v, capacity="capacity") for v in g.nodes if v != root)


def check_packing(g, root):
    p = pack_trees(g, root)
    assert p.rate_bps == pytest.approx(min_max_flow(g, root), rel=1e-6)
    # The trees are spanning arborescences and respect every link's capacity.
    load = {}
    for t, r in zip(p.trees, p.rates_bps):
        assert set(t) == set(g.nodes) and t[root] is None
        for v, u in t.items():
            if u is not None:
                assert g.has_edge(u, v)
                load[(u, v)] = load.get((u, v), 0) + r
        g2 = nx.DiGraph([(u, v) for v, u in t.items() if u is not None])
        assert nx.is_arborescence(g2)
    for e, x in load.items():
        assert x <= g.edges[e]["capacity"] * (1 + 1e-9)
    return p


@pytest.mark.parametrize("kind, per_gpu", [("dgx1p", 4 * NVLINK1_BPS), ("dgx1v", 6 * NVLINK2_BPS)])
def test_dgx1_packing_reaches_edmonds_bound(kind, per_gpu):
    g = nvlink_graph(gpu_server(kind), list(range(8)))
    for root in range(8):
        p = check_packing(g, root)
        # Every GPU's NVLinks are all usable: the bound is a GPU's total NVLink rate.
        assert p.rate_bps == pytest.approx(per_gpu)


def test_dgx2_switch_graph_packing():
    g = nx.DiGraph()
    for i in range(16):
        g.add_edge(i, 16, capacity=NVSWITCH_BPS)
        g.add_edge(16, i, capacity=NVSWITCH_BPS)
    p = check_packing(g, 0)
    assert p.rate_bps == pytest.approx(NVSWITCH_BPS)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 9), st.floats(0.2, 0.9), st.randoms(use_true_random=False))
def test_random_graphs(n, density, rnd):
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for a in range(n):
        for b in range(n):
            if a != b and rnd.random() < density:
                g.add_edge(a, b, capacity=rnd.choice([1, 2, 3, 5]) * 10**9 * rnd.choice([1, 1.5]))
    if not all(nx.has_path(g, 0, v) for v in g.nodes):
        return
    check_packing(g, 0)


def test_fragmented_allocations_plan_fast_and_verify():
    t = gpu_server("dgx1v")
    t0 = time.perf_counter()
    for gpus in ([0, 1, 2, 4], [1, 2, 5, 6, 7], list(range(8))):
        a = Allocation(t, gpus)
        for op in ("broadcast", "allreduce"):
            verify(make_plan("trees", op, a, 4096, 512))
    assert time.perf_counter() - t0 < 10


def test_dgx1v_has_six_nvlink_rings_and_dgx1p_four():
    # Each GPU has 6 (V100) or 4 (P100) NVLink units out; a ring uses one per GPU.
    assert len(nvlink_rings(Allocation(gpu_server("dgx1v"), list(range(8))))) == 6
    assert len(nvlink_rings(Allocation(gpu_server("dgx1p"), list(range(8))))) == 4


def test_integer_programs_are_bounded_by_nodes_not_by_a_clock(monkeypatch):
    """Every rank of a runtime communicator plans its trees on its own from the same
    measurements: the plan must not depend on how loaded each machine is, so no
    HiGHS search may stop on a wall-time limit (a loaded machine then got other trees)."""
    import scipy.optimize

    seen = []
    real = scipy.optimize.milp

    def spy(*args, **kwargs):
        seen.append(dict(kwargs.get("options") or {}))  # milp empties the dict it is given
        return real(*args, **kwargs)

    monkeypatch.setattr(scipy.optimize, "milp", spy)
    nvlink_rings(Allocation(gpu_server("dgx1v"), list(range(8))))
    pack_trees(nvlink_graph(gpu_server("dgx1v"), list(range(8))), 0)
    make_plan("trees", "allreduce", Allocation(gpu_server("dgx1p"), list(range(8))), 1 << 20)
    assert len(seen) >= 3
    for options in seen:
        assert "time_limit" not in options and options.get("node_limit", 0) > 0

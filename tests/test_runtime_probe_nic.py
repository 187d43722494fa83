"""The probe's NIC model (collectives/nicgraph.py): a tree edge i -> j uses
i's uplink U_i = max_j bw(i, j) and j's downlink D_j = max_i bw(i, j); a
pair more than 10 % below both keeps its own capacity. Every expected rate
below is worked out by hand (cuts and explicit packings) in the comments;
the random test checks every returned packing against the resource
constraints computed here, independently of the program, and its rate
against the full program over all spanning trees (n <= 4: all enumerated)."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from fabriclab.collectives.plan import Plan
from fabriclab.collectives.verify import verify
from fabriclab.runtime.errors import RuntimeInputError
from fabriclab.runtime.probe import Measurements, pack, plan_from_probe, probe_graph
from fabriclab.runtime.probe_cmd import packing_text

F, S = 188.3e6, 47.1e6  # the box: 200 and 50 Mbit/s of wire, payload x 1448/1538


def meas(bw):
    n = len(bw)
    return Measurements(n, bw, [[0.0 if i == j else 1e-4 for j in range(n)] for i in range(n)], 4 << 20, 10)


def uniform(n, c):
    return meas([[0.0 if i == j else c for j in range(n)] for i in range(n)])


def slow_host(fast, slow):
    """Hosts 0..2 at ``fast`` between them, every pair with host 3 at ``slow`` both ways."""
    return meas([[0.0 if i == j else (slow if 3 in (i, j) else fast) for j in range(4)] for i in range(4)])


# ---------------------------------------------------------------- independent checks
def transfers(op, tree):
    """(sender, receiver) of every transfer of a tree: a broadcast sends parent -> child, a reduce
    child -> parent, an allreduce both."""
    for c, p in tree.items():
        if p is None:
            continue
        if op in ("broadcast", "allreduce"):
            yield p, c
        if op in ("reduce", "allreduce"):
            yield c, p


def resources(bw):
    """The model's resources by its documented rule, computed here: name -> capacity, and
    (sender, receiver) -> the names a transfer uses."""
    n = len(bw)
    up = [max(bw[i][j] for j in range(n) if j != i) for i in range(n)]
    down = [max(bw[i][j] for i in range(n) if i != j) for j in range(n)]
    cap, uses = {}, {}
    for i in range(n):
        for j in range(n):
            if i != j and bw[i][j] > 0:
                cap[("up", i)], cap[("down", j)] = up[i], down[j]
                uses[i, j] = [("up", i), ("down", j)]
                if bw[i][j] < 0.9 * min(up[i], down[j]):
                    cap[("pair", i, j)] = bw[i][j]
                    uses[i, j].append(("pair", i, j))
    return cap, uses


def loads(bw, op, trees, rates):
    cap, uses = resources(bw)
    load = dict.fromkeys(cap, 0.0)
    for t, x in zip(trees, rates):
        for s, r in transfers(op, t):
            for name in uses[s, r]:
                load[name] += x
    return load, cap


def check_feasible(bw, op, p):
    n = len(bw)
    assert p.rate_bps == pytest.approx(sum(p.rates_bps), rel=1e-9)
    for t in p.trees:
        assert set(t) == set(range(n)) and t[p.root] is None
        for v in t:  # every node reaches the root: a spanning arborescence
            seen = set()
            while t[v] is not None:
                assert v not in seen
                seen.add(v)
                v = t[v]
        assert all(bw[s][r] > 0 for s, r in transfers(op, t))
    load, cap = loads(bw, op, p.trees, p.rates_bps)
    for name, x in load.items():
        assert x <= cap[name] * (1 + 1e-7), (name, x, cap[name])


def all_trees(n, root, ok):
    """Every spanning arborescence rooted at ``root`` whose parent -> child edges satisfy ``ok``."""
    others = [v for v in range(n) if v != root]
    for parents in itertools.product(range(n), repeat=len(others)):
        t = {root: None, **dict(zip(others, parents))}
        if any(p == v or not ok(p, v) for v, p in t.items() if p is not None):
            continue
        acyclic = True
        for v in others:
            seen = set()
            while t[v] is not None and acyclic:
                acyclic = v not in seen
                seen.add(v)
                v = t[v]
        if acyclic:
            yield t


def best_rate(bw, op, root):
    """The full program: max sum x_T over every spanning tree, subject to the resources above."""
    n = len(bw)
    ok = {"broadcast": lambda p, c: bw[p][c] > 0, "reduce": lambda p, c: bw[c][p] > 0,
          "allreduce": lambda p, c: bw[p][c] > 0 and bw[c][p] > 0}[op]
    trees = list(all_trees(n, root, ok))
    cap, uses = resources(bw)
    names = sorted(cap)
    a = [[sum(uses[s, r].count(name) for s, r in transfers(op, t)) for t in trees] for name in names]
    res = linprog([-1.0] * len(trees), A_ub=a, b_ub=[cap[k] / 1e6 for k in names], bounds=(0, None), method="highs")
    assert res.status == 0
    return -res.fun * 1e6


# ---------------------------------------------------------------- (a) equal NICs
def test_star_broadcast_is_bounded_by_the_roots_uplink():
    # Every tree gives the root at least one child, so the trees' rates add up on the root's uplink:
    # total <= C. The chain 0 -> 1 -> 2 -> 3 at C reaches it (each NIC sends or receives once).
    # The pair model: max flow 0 -> v = C direct + C via each other host = 3C, three times the NIC.
    c = 100e6
    p = pack(uniform(4, c), "broadcast", 0, "nic")
    assert p.rate_bps == pytest.approx(c, rel=1e-6)
    check_feasible(uniform(4, c).bw_bps, "broadcast", p)
    assert pack(uniform(4, c), "broadcast", 0, "pairs").rate_bps == pytest.approx(3 * c, rel=1e-6)


# ---------------------------------------------------------------- (b) the box's slow host
def test_slow_host_broadcast_is_bounded_by_its_downlink():
    # U_0..2 = D_0..2 = F, U_3 = D_3 = S (row and column maxima); no pair is below both of its NICs.
    # Every tree delivers to host 3 over exactly one edge p -> 3, which uses down 3: total <= S.
    # The root's uplink allows F >= S. One tree reaches S: the star 0 -> 1, 2, 3 sends 3 S = 141.3 <= F
    # out of host 0 (any spanning tree does: a node has at most 3 children, 3 S <= F, and host 3 with
    # children sends them its S). So the rate is exactly S, with one tree; the pair model said 3 S.
    m = slow_host(F, S)
    p = pack(m, "broadcast", 0, "nic")
    assert p.rate_bps == pytest.approx(S, rel=1e-6)
    assert len(p.trees) == 1
    check_feasible(m.bw_bps, "broadcast", p)
    assert pack(m, "broadcast", 0, "pairs").rate_bps == pytest.approx(3 * S, rel=1e-6)
    # Reduce into 0: host 3 sends once per tree on its uplink S; the star into 0 receives 3 S <= F.
    # Broadcast from 3: the root's uplink S bounds it; 3 -> 0 -> 1, 2 reaches it (0 sends 2 S <= F).
    assert pack(m, "reduce", 0, "nic").rate_bps == pytest.approx(S, rel=1e-6)
    assert pack(m, "broadcast", 3, "nic").rate_bps == pytest.approx(S, rel=1e-6)


def test_pairs_within_the_slack_are_explained_by_the_nics():
    # test_runtime_probe's matrix: p -> 3 at 46, 47, 48 Mbit/s, fast pairs 188 + 0.3 (i + j).
    # D_3 = 48; 46 and 47 are within 10 % of it, so no pair keeps its own capacity, and the bound
    # is D_3 = 48 with one tree (U_0 = 188.6 >= 3 x 48). With path_slack 0, the pairs 0 -> 3 (46)
    # and 1 -> 3 (47) are below both NICs and keep their capacity: the rate is still D_3 = 48, but
    # the trees entering 3 from 0 carry at most 46 in all, from 1 at most 47. (One tree entering
    # from 2 would do; TreeGen keeps the fewest among the trees column generation produced, which
    # need not include it.)
    slow = {0: 46e6, 1: 47e6, 2: 48e6}
    bw = [[0.0 if i == j else (slow[min(i, j)] if 3 in (i, j) else 188e6 + 0.3e6 * (i + j)) for j in range(4)]
          for i in range(4)]
    from fabriclab.collectives.treegen import pack_trees

    p = pack(meas(bw), "broadcast", 0, "nic")
    assert p.rate_bps == pytest.approx(48e6, rel=1e-6) and len(p.trees) == 1
    strict = pack_trees(probe_graph(meas(bw), "broadcast", "nic", path_slack=0.0), 0)
    assert strict.rate_bps == pytest.approx(48e6, rel=1e-6)
    via = {q: sum(x for t, x in zip(strict.trees, strict.rates_bps) if t[3] == q) for q in range(3)}
    assert via[0] <= 46e6 * (1 + 1e-9) and via[1] <= 47e6 * (1 + 1e-9)


def test_path_limited_pairs_keep_their_capacity():
    # Two leaves: {0, 1} and {2, 3}, NICs of 100, pairs across the leaves measured at 20 (a spine
    # link, 80 % below both NICs: path-limited, each keeps a capacity of 20). Every tree crosses
    # from {0, 1} to {2, 3} at least once, over the pairs 0->2, 0->3, 1->2, 1->3: total <= 80.
    # 80 is reached by four trees at 20 each: {0->2, 2->3, 2->1}, {0->3, 3->2, 3->1},
    # {0->1, 1->2, 2->3}, {0->1, 1->3, 3->2} (host 0 sends 80 <= 100, every host receives 80,
    # every crossing pair carries 20). NICs alone would allow 100 (the chain 0 -> 1 -> 2 -> 3).
    bw = [[0.0 if i == j else (100e6 if (i < 2) == (j < 2) else 20e6) for j in range(4)] for i in range(4)]
    p = pack(meas(bw), "broadcast", 0, "nic")
    assert p.rate_bps == pytest.approx(80e6, rel=1e-6)
    check_feasible(bw, "broadcast", p)
    from fabriclab.collectives.treegen import pack_trees

    no_paths = probe_graph(meas(bw), "broadcast", "nic")
    no_paths.graph["resources"] = {r: c for r, c in no_paths.graph["resources"].items() if not r.startswith("pair")}
    for e in no_paths.edges:
        no_paths.edges[e]["uses"] = tuple(r for r in no_paths.edges[e]["uses"] if not r.startswith("pair"))
    assert pack_trees(no_paths, 0).rate_bps == pytest.approx(100e6, rel=1e-6)


# ---------------------------------------------------------------- (c) allreduce
def test_allreduce_equal_nics():
    # Used both ways, a tree edge {u, v} sends once from each end and receives once at each end,
    # so a tree at rate x loads host v's uplink and downlink with deg(v) x. Summing over hosts:
    # sum_T x_T 2 (n - 1) <= n C, total <= n C / (2 (n - 1)) = 2C/3 for n = 4 (ring allreduce's
    # algorithm bandwidth). Reached by the paths 0-1-2-3 and 1-3-0-2 at C/3 each (every host has
    # degree 1 + 2 = 3 in all), or by Blink's four one-hop stars at C/6 each (DGX-2). One tree
    # cannot: a tree on 4 nodes has a node of degree >= 2, so x <= C/2 < 2C/3.
    # The pair model (each direction of each pair C, shared by both halves): K4's 6 pairs hold two
    # spanning trees of 3 edges: 2C.
    c = 90e6
    p = pack(uniform(4, c), "allreduce", 0, "nic")
    assert p.rate_bps == pytest.approx(2 * c / 3, rel=1e-6)
    assert len(p.trees) >= 2
    check_feasible(uniform(4, c).bw_bps, "allreduce", p)
    assert pack(uniform(4, c), "allreduce", 0, "pairs").rate_bps == pytest.approx(2 * c, rel=1e-6)


def test_allreduce_slow_host_and_degree_sum_bounds():
    # Slow host: deg(3) >= 1 in every tree, so total <= S; the star at 0 (3 a leaf) at S loads host 0
    # with 3 S <= F. The degree-sum bound (3F + S)/6 = 102 is looser. Rate S.
    m = slow_host(F, S)
    p = pack(m, "allreduce", 0, "nic")
    assert p.rate_bps == pytest.approx(S, rel=1e-6)
    check_feasible(m.bw_bps, "allreduce", p)
    # Host 3 at 150: now the degree sum binds: total <= (3F + 150)/6 = 119.15 < 150. Reached by the
    # Hamiltonian paths, symmetrized over hosts 0..2: with total X, a share a of paths with 3 inside
    # (degree 2) and 1 - a with 3 at an end: host 3 carries X (1 + a) = 150, each fast host
    # X (5 - a)/3 = F, so X = (3F + 150)/6 and a = 150/X - 1 = 0.259, within [0, 1].
    m = slow_host(F, 150e6)
    p = pack(m, "allreduce", 0, "nic")
    assert p.rate_bps == pytest.approx((3 * F + 150e6) / 6, rel=1e-6)
    check_feasible(m.bw_bps, "allreduce", p)


# ---------------------------------------------------------------- (e) random matrices
@settings(max_examples=150, deadline=None)
@given(st.integers(2, 4), st.sampled_from(["broadcast", "reduce", "allreduce"]), st.data())
def test_random_matrices_respect_every_resource(n, op, data):
    rate = st.one_of(st.just(0.0), st.floats(1.0, 200.0))
    bw = [[0.0 if i == j else data.draw(rate) * 1e6 for j in range(n)] for i in range(n)]
    root = data.draw(st.integers(0, n - 1))
    try:
        p = pack(meas(bw), op, root, "nic")
    except RuntimeInputError:
        assume(False)
    check_feasible(bw, op, p)
    assert p.rate_bps == pytest.approx(best_rate(bw, op, p.root), rel=1e-6)


# ---------------------------------------------------------------- plans, text, errors
def test_plans_verify_and_name_the_model():
    for op in ("broadcast", "reduce", "allreduce"):
        text, p = plan_from_probe(slow_host(F, S), op, 1 << 16, 4, 0, 64 << 10)
        d = json.loads(text)
        assert d["meta"]["graph_model"] == "nic"
        verify(Plan.from_dict(d))


def test_summary_shows_rates_totals_and_the_nic_load():
    # Pair-model trees on the slow-host matrix: 3 trees at S, all entering host 3: its downlink
    # would carry 3 S = 141.3 of its 47.1 (300 %), so those trees carry at most S in all.
    from fabriclab.runtime.probe import nic_loads

    m = slow_host(F, S)
    res = {"measurements": m.to_dict(), "packings": {}, "allreduce_bytes": 4 << 20, "allreduce_s": 0.75,
           "allreduce_wrong": 0}
    for model in ("pairs", "nic"):
        res["model"] = model
        for op in ("broadcast", "allreduce"):
            p = pack(m, op, 0, model)
            res["packings"][op] = {"root": p.root, "rate_bps": p.rate_bps, "rates_bps": p.rates_bps,
                                   "trees": [{str(k): v for k, v in t.items()} for t in p.trees],
                                   "nic_loads": {r: list(v) for r, v in nic_loads(m, op, p).items()}}
        text = packing_text(res)
        assert "# NIC estimates (Mbit/s), host: uplink/downlink  0: 188.3/188.3" in text and "3: 47.1/47.1" in text
        if model == "pairs":
            assert "# TreeGen, broadcast: root 0, 3 tree(s), total 141.3 Mbit/s, pairs model" in text
            assert "busiest under the NIC model: down 3, 141.3 of 47.1 Mbit/s (300%): these trees carry at most " \
                   "47.1 Mbit/s in all" in text
        else:
            assert "# TreeGen, broadcast: root 0, 1 tree(s), total 47.1 Mbit/s, nic model" in text
            assert "(100%)\n" in text and "carry at most" not in text
    # 4 MiB at 47.1 Mbit/s: 8 x 4194304 / 47.1e6 = 712.4 ms
    assert "(the packing rate predicts 712.4 ms)" in text


def test_bad_model_and_slack_name_the_field():
    with pytest.raises(RuntimeInputError, match="^model: must be 'nic' .* or 'pairs' .*, got 'nics'"):
        plan_from_probe(uniform(3, 1e6), "broadcast", 100, model="nics")
    with pytest.raises(RuntimeInputError, match=r"^path_slack: must be a number within \[0, 1\), got 1.5"):
        probe_graph(uniform(3, 1e6), path_slack=1.5)

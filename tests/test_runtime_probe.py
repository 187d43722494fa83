"""Blink at run time, planning side (no network): TreeGen on a measured
matrix of a 4-host star where host 3's link is slower, with the pair model
(every pair its measured rate at once; the NIC model, the default, is in
test_runtime_probe_nic.py). Expected trees by hand (cuts), not from the
program: see docs/runtime.md, "Blink at run time"."""

from __future__ import annotations

import json

import pytest

from fabriclab.collectives.verify import verify
from fabriclab.collectives.plan import Plan
from fabriclab.runtime.errors import RuntimeInputError
from fabriclab.runtime.probe import Measurements, bulk_plan, ping_plan, plan_from_probe, probe_graph

M = 1e6
# measured-looking numbers: fast pairs ~188 Mbit/s, pairs with host 3 ~47 (not exact multiples of each other)
SLOW_IN = {0: 46e6, 1: 47e6, 2: 48e6}  # p -> 3 and 3 -> p


def matrix():
    bw = [[0.0] * 4 for _ in range(4)]
    for i in range(4):
        for j in range(4):
            if i != j:
                bw[i][j] = SLOW_IN[min(i, j)] if 3 in (i, j) else 188e6 + 0.3e6 * (i + j)
    return Measurements(4, bw, [[0.0 if i == j else 1e-4 for j in range(4)] for i in range(4)], 4 << 20, 10)


def test_graph_has_an_edge_per_ordered_pair():
    g = probe_graph(matrix())
    assert g.number_of_edges() == 12 and g.edges[0, 3]["capacity"] == 46e6


def test_broadcast_trees_share_host_3s_edges():
    # Edmonds: maxflow(0, 3) = the cut into 3 = 46 + 47 + 48 = 141 Mbit/s (other hosts: >= 188 + 2 x 46).
    # Every tree enters 3 by one edge p -> 3, and those edges carry at most their capacity in all: the
    # three edges are needed, so at least 3 trees, one per parent of 3, each at that edge's rate.
    text, p = plan_from_probe(matrix(), "broadcast", 1 << 20, 4, 0, 256 << 10, model="pairs")
    assert p.rate_bps == pytest.approx(141e6, rel=1e-6)
    assert len(p.trees) == 3
    assert sorted(t[3] for t in p.trees) == [0, 1, 2]
    assert sorted(p.rates_bps) == pytest.approx([46e6, 47e6, 48e6], rel=1e-6)
    for t, r in zip(p.trees, p.rates_bps):
        assert r == pytest.approx(SLOW_IN[t[3]], rel=1e-6)
    verify(Plan.from_dict(json.loads(text)))


def test_allreduce_trees_keep_host_3_a_leaf():
    # Undirected packing (trees used both ways): the cut around 3 holds 141 Mbit/s and every spanning
    # tree crosses it, so the rate is at most 141; a tree with two edges at 3 would spend more of that
    # cut than its rate, so at 141 every tree has host 3 as a leaf, one tree per neighbour of 3.
    text, p = plan_from_probe(matrix(), "allreduce", 1 << 20, 4, 0, 256 << 10, model="pairs")
    assert p.rate_bps == pytest.approx(141e6, rel=1e-6)
    assert len(p.trees) == 3
    for t in p.trees:
        assert sum(1 for v, u in t.items() if u == 3) + (t[3] is not None) == 1  # degree 1 at host 3
    verify(Plan.from_dict(json.loads(text)))


def test_probe_plans_are_well_formed():
    for text in (ping_plan(4, 1, 3, 64), bulk_plan(4, 1, 3, 3 << 20)):
        d = json.loads(text)
        assert d["ranks"][0] == [] and d["ranks"][2] == []
        assert sum(s["bytes"] for s in d["ranks"][1] if s["op"] == "send") == (8 if "recv" in d["ranks"][1][1]["op"] else 3 << 20)


@pytest.mark.parametrize("bad, field", [({"n": 0}, "n"), ({"n": 2, "bw_bps": [[0, 1]], "rtt_s": [[0, 0], [0, 0]]}, "bw_bps"),
                                        ({"n": 2, "bw_bps": [[0, -1], [1, 0]], "rtt_s": [[0, 0], [0, 0]]}, r"bw_bps\[0\]\[1\]")])
def test_bad_measurements_name_the_field(bad, field):
    with pytest.raises(RuntimeInputError, match=f"^{field}:"):
        Measurements.from_dict(bad)


def test_bad_op_and_root():
    with pytest.raises(RuntimeInputError, match="^op:"):
        plan_from_probe(matrix(), "allgather", 100)
    with pytest.raises(RuntimeInputError, match="^root:"):
        plan_from_probe(matrix(), "broadcast", 100, root=4)


class ScriptedComm:
    """Rank 0 of 2 on a fake clock: each ping op takes 1 ms, the bulk ops take the scripted times."""

    world_size, rank = 2, 0

    def __init__(self, clock, bulk_s):
        self.clock, self.bulk_s = clock, list(bulk_s)

    def run_plan(self, text, buf):
        d = json.loads(text)
        ping = d["ranks"][d["root"]][0]["bytes"] == 8  # the sender's first step: 8 bytes (ping) or a 1 MiB piece
        self.clock[0] += 1e-3 if ping else self.bulk_s.pop(0)

    def barrier(self):
        pass

    def allreduce(self, a):
        pass


def test_bandwidth_is_the_fastest_of_the_repeats(monkeypatch):
    import fabriclab.runtime.probe as probe

    clock = [0.0]
    monkeypatch.setattr(probe.time, "perf_counter", lambda: clock[0])
    nbytes = 1 << 20
    # pair 0 -> 1: three transfers of 0.5, 0.101, 0.3 s; pair 1 -> 0 is rank 1's row (not ours)
    m = probe.measure(ScriptedComm(clock, [0.5, 0.101, 0.3, 0.2, 0.2, 0.2]), nbytes, pings=3, repeats=3)
    assert m.repeats == 3 and m.rtt_s[0][1] == pytest.approx(1e-3)
    assert m.bw_bps[0][1] == pytest.approx(8 * nbytes / (0.101 - 1e-3))
    with pytest.raises(RuntimeInputError, match=r"^repeats: must be an integer within 1\.\.100, got 0"):
        probe.measure(ScriptedComm(clock, []), nbytes, repeats=0)
    assert Measurements.from_dict({"n": 1, "bw_bps": [[0]], "rtt_s": [[0]]}).repeats == 1  # files from before repeats

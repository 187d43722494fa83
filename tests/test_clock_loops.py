"""The robust network effect's loop check (observe/clock/network.py, docs/clockwork.md "Under heavy load"):
edges tilted by standing queues, found because their loops do not close. Every expectation is derived
here by hand from the clocks, delays and queueing the test chose (noise-free hand-built probes)."""

import numpy as np
import pytest

from fabriclab.observe.clock import estimate as est
from fabriclab.observe.clock import probes as pr

from test_clock_estimate import Builder, _complete, offsets

D = 300_000          # ns, the base one-way delay every way
P = 10_000_000       # ns between an edge's pairs
K = 10               # pairs per edge and direction
L_S = (K - 1) * P / 1e9  # s from an edge's first pair to its last, on a's clock (no drift)


def _tilted(b, x, y, t, k, q_ns, tight_up_first):
    """Pair k of a tilted edge (x, y): x->y leaves at t, y->x arrives at x at t (both probes of a pair wait
    alike, so every pair is pure). One way only the first pair is unqueued and the other way only the
    last (``tight_up_first``; else the mirror image); the others wait q_ns."""
    up_queued = (k > 0) if tight_up_first else (k < K - 1)
    down_queued = (k < K - 1) if tight_up_first else (k > 0)
    b.pair(x, y, t, D + q_ns * up_queued)
    d = D + q_ns * down_queued
    b.pair(y, x, t - d, d)


def test_edges_tilted_by_standing_queues_are_left_out_by_the_loop_check(tmp_path):
    # Five hosts, every pair probed, no drift. Edges a-b and b-c see standing queues (Q1 = 10 us, Q2 = 6 us):
    # on a-b the a->b (upper) bounds are tight only at the first pair, the b->a (lower) ones only at the last.
    # With x0, x1 the first and last pairs' times (x1 - x0 = L) and u the line's offset at the middle less the
    # truth, the binding constraints are B - u - s x0 >= m (tight upper), B + Q + u + s x0 >= m (queued
    # lower), B + u + s x1 >= m (tight lower), B + Q - u - s x1 >= m (queued upper): summing them in pairs,
    # m <= B + s L / 2 and m <= B + Q - s L / 2, so the widest margin tilts the line by s = Q / L. b-c is the
    # mirror image: s = -Q2 / L. Least squares on K_5 moves the hosts by eps / 5 (e_b - e_a) per edge error
    # eps, so against a: b by (2 Q1 + Q2) / (5 L), c by (Q1 - Q2) / (5 L), d and e by Q1 / (5 L). b's four
    # edges are half wrong (and disagree), so reweighting cannot tell them; every triangle through a-b or b-c
    # misses closing, every other edge closes b-d-e or a-c-d exactly: left out, the truth is recovered.
    q1, q2 = 10_000, 6_000
    truth = {"a": 0, "b": 5_000, "c": -7_000, "d": 11_000, "e": 3_000}
    b = Builder(truth)
    for k in range(K):
        for i, (x, y) in enumerate(_complete("abcde")):
            t = 100_000_000 + k * P + i * 500_000
            if (x, y) == ("a", "b"):
                _tilted(b, x, y, t, k, q1, tight_up_first=True)
            elif (x, y) == ("b", "c"):
                _tilted(b, x, y, t, k, q2, tight_up_first=False)
            else:
                back = b.pair(x, y, t, D)
                b.pair(y, x, back + 200_000, D)
    p = pr.read(b.write(tmp_path / "p.parquet"))
    e = est.estimate(p, ["huygens"], pure_bound_ns=100).edges.to_pandas().set_index(["a", "b"])
    assert e.loc[("a", "b"), "drift_ppm"] == pytest.approx(q1 / L_S / 1e3, rel=1e-9)
    assert e.loc[("b", "c"), "drift_ppm"] == pytest.approx(-q2 / L_S / 1e3, rel=1e-9)
    _, plain = offsets(est.estimate(p, ["huygens"], pure_bound_ns=100), "huygens")
    want = {"a": 0, "b": (2 * q1 + q2) / (5 * L_S) / 1e3, "c": (q1 - q2) / (5 * L_S) / 1e3,
            "d": q1 / (5 * L_S) / 1e3, "e": q1 / (5 * L_S) / 1e3}
    assert plain == pytest.approx(want, rel=1e-3)
    r = est.estimate(p, ["huygens"], pure_bound_ns=100, robust=True, loop_check=True)
    off, drift = offsets(r, "huygens")
    assert off == pytest.approx(truth, abs=1e-3)
    assert drift == pytest.approx({h: 0.0 for h in truth}, abs=1e-6)
    # Off by default: the reweighting alone follows b's two wrong edges (half of its four), so b's drift
    # stays off by more than the loops' 1 ppm (the case the check exists for).
    _, drift0 = offsets(est.estimate(p, ["huygens"], pure_bound_ns=100, robust=True), "huygens")
    assert abs(drift0["b"]) > 1.0
    with pytest.raises(est.EstimateInputError, match="--loop-check: needs --robust"):
        est.estimate(p, ["huygens"], pure_bound_ns=100, loop_check=True)
    # Agreeing with the truth: every edge but a-b and b-c (a 3, b 2, c 3, d 4, e 4 of 4 each).
    assert r.clocks.column("agreeing_edges").to_pylist() == [3, 2, 3, 4, 4]
    assert est.unconfirmed_hosts(r.clocks) == []
    miss = r.edges.to_pandas().set_index(["a", "b"])["loop_misclosure_ns"]
    assert miss.drop([("a", "b"), ("b", "c")]).max() == pytest.approx(0.0, abs=1e-3)
    # a-b's best triangle is a-b-c: the two tilts partly cancel, (Q1 - Q2) / L over half the span at least.
    assert miss[("a", "b")] >= (q1 - q2) / 2 - 1e-3 and miss[("b", "c")] >= (q1 - q2) / 2 - 1e-3


def test_a_host_whose_every_loop_misses_is_linked_by_its_best_pinned_edge_and_named(tmp_path):
    # a, b, c probe each other; d probes b and c only. b-d is exact; c-d's pairs all wait 4,000 ns more
    # d->c (constant: its line sits Q / 2 = 2,000 ns above c-d's offset, its drift exact) and keep pure pairs
    # only in 20 ms of the window (the rest impure: first probe stamped 500 ns late). Triangle b-c-d is d's
    # only loop and misses by 2,000 ns (> 2 x 100 ns): both of d's edges fail the check, ties in misclosure.
    # b-d's pure pairs span 90 ms, c-d's 20 ms: the drifts within a floor f of the best margin form an
    # interval of width 4 f / span (the margin falls by |s| x span / 2 from each end), narrower for b-d,
    # which links d again: exact, and d, whose estimate only b-d agrees with, is named unconfirmed.
    truth = {"a": 0, "b": 5_000, "c": -7_000, "d": 11_000}
    b = Builder(truth)
    pairs = [("a", "b"), ("a", "c"), ("b", "c"), ("b", "d"), ("c", "d")]
    for k in range(K):
        for i, (x, y) in enumerate(pairs):
            t = 100_000_000 + k * P + i * 500_000
            cd = (x, y) == ("c", "d")
            shift = 500 if cd and k not in (4, 5, 6) else 0
            back = b.pair(x, y, t, D, rx0_shift_ns=shift)
            b.pair(y, x, back + 200_000, D + 4_000 * cd, rx0_shift_ns=shift)
    p = pr.read(b.write(tmp_path / "p.parquet"))
    r = est.estimate(p, ["huygens"], pure_bound_ns=100, robust=True, loop_check=True)
    off, _ = offsets(r, "huygens")
    assert off == pytest.approx(truth, abs=1e-3)
    # Against the truth c-d's line is 2,000 ns off: a, b, c keep their other edges, d only b-d (unconfirmed).
    agree = dict(zip(r.clocks.column("host").to_pylist(), r.clocks.column("agreeing_edges").to_pylist()))
    assert agree == {"a": 2, "b": 3, "c": 2, "d": 1}
    assert est.unconfirmed_hosts(r.clocks) == ["d"]
    miss = r.edges.to_pandas().set_index(["a", "b"])["loop_misclosure_ns"]
    assert miss[("b", "d")] == pytest.approx(2_000, abs=1e-3) and miss[("c", "d")] == pytest.approx(2_000, abs=1e-3)
    assert miss[("a", "b")] == pytest.approx(0, abs=1e-3)
    # Without the robust network effect nothing is checked: the column is null.
    plain = est.estimate(p, ["huygens"], pure_bound_ns=100)
    assert plain.clocks.column("agreeing_edges").null_count == 4
    assert np.isnan(plain.edges.column("loop_misclosure_ns").to_numpy()).all()


def test_where_a_wrong_edge_lies_in_no_triangle_the_reweighting_start_is_kept(tmp_path):
    # Six hosts, a the reference. a-e and b-c carry a constant queue of 4,000 ns one way (lines 2,000 ns off,
    # drifts exact); the other nine edges are exact. a-e lies in no triangle (a's neighbours d, e, f; e's a, b,
    # c): the loop check keeps it unchecked, and leaves out b-c and e's other edges e-b, e-c (their only
    # triangle is b-c-e), so from that start e follows a-e: 2,000 ns off. Reweighting over every edge finds
    # the truth: every cut of the graph is crossed by fewer wrong edges than right ones ({e}: 1 of 3, {b, e}:
    # 2 of 5, {c, e}: 2 of 5, ...). The truth agrees with 9 of the 11 edges, the other start's solution with 8
    # (e-b, e-c and b-c disagree): the truth is kept. The loop check alone gave e 2,000 ns off.
    truth = {"a": 0, "b": 5_000, "c": -7_000, "d": 11_000, "e": 3_000, "f": -2_000}
    b = Builder(truth)
    pairs = [("a", "d"), ("a", "e"), ("a", "f"), ("d", "f"), ("b", "d"), ("c", "d"), ("b", "f"), ("c", "f"),
             ("b", "c"), ("b", "e"), ("c", "e")]
    for k in range(K):
        for i, (x, y) in enumerate(pairs):
            t = 100_000_000 + k * P + i * 500_000
            back = b.pair(x, y, t, D)
            b.pair(y, x, back + 200_000, D + 4_000 * ((x, y) in (("a", "e"), ("b", "c"))))
    p = pr.read(b.write(tmp_path / "p.parquet"))
    r = est.estimate(p, ["huygens"], pure_bound_ns=100, robust=True, loop_check=True)
    off, drift = offsets(r, "huygens")
    assert off == pytest.approx(truth, abs=1e-3)
    assert drift == pytest.approx({h: 0.0 for h in truth}, abs=1e-6)
    miss = r.edges.to_pandas().set_index(["a", "b"])["loop_misclosure_ns"]
    assert np.isinf(miss[("a", "e")])
    assert miss[("b", "c")] == pytest.approx(2_000, abs=1e-3) and miss[("b", "e")] == pytest.approx(2_000, abs=1e-3)
    assert miss[("a", "d")] == pytest.approx(0, abs=1e-3)
    agree = dict(zip(r.clocks.column("host").to_pylist(), r.clocks.column("agreeing_edges").to_pylist()))
    assert agree == {"a": 2, "b": 3, "c": 3, "d": 4, "e": 2, "f": 4}

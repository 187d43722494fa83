"""The clock estimator (observe/clock): every expectation is derived here, by hand or in closed form,
from the clocks and delays the test itself chose; none is copied from the program's output."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fabriclab.observe.clock import estimate as est
from fabriclab.observe.clock import probes as pr
from fabriclab.observe.clock import synthetic

from conftest import run_cli


class Builder:
    """Hand-built probe records from linear clocks: host h reads t * (1 + drift_ppm[h] * 1e-6) +
    offset_ns[h] at true time t (ns). Every stamp is computed here in exact integer ns."""

    def __init__(self, offset_ns, drift_ppm=None):
        self.offset = dict(offset_ns)
        self.drift = dict(drift_ppm or {h: 0 for h in offset_ns})
        self.rows = []
        self.next_pair = {h: 0 for h in offset_ns}

    def read(self, h, t):
        v = t + self.offset[h] + self.drift[h] * t / 1_000_000
        assert v == int(v), "choose times and drifts that give whole ns"
        return int(v)

    def pair(self, src, dst, t, delay_ns, spacing_ns=100_000, delay1_ns=None, rx0_shift_ns=0, truth=True):
        """A coded pair src -> dst sent at true t and t + spacing; returns the second probe's arrival."""
        pid = self.next_pair[src]
        self.next_pair[src] += 1
        d1 = delay_ns if delay1_ns is None else delay1_ns
        for seq, (tx, d) in enumerate(((t, delay_ns), (t + spacing_ns, d1))):
            rx = self.read(dst, tx + d) + (rx0_shift_ns if seq == 0 else 0)
            self.rows.append((src, dst, pid, seq, self.read(src, tx), rx, tx * 1000 if truth else None,
                              (tx + d) * 1000 if truth else None))
        return t + spacing_ns + d1

    def write(self, path):
        cols = list(zip(*self.rows))
        pr.write(pr.table(*cols[:6], true_tx_ps=None if cols[6][0] is None else cols[6],
                          true_rx_ps=None if cols[7][0] is None else cols[7]), path)
        return path

    def truth(self, ref, host, mid_ns):
        """Host's offset against ref when ref's clock reads mid_ns, and its drift against ref (ppm)."""
        rr, rh = self.drift[ref] * 1e-6, self.drift[host] * 1e-6
        t = (mid_ns - self.offset[ref]) / (1 + rr)
        return t * (1 + rh) + self.offset[host] - mid_ns, (rh - rr) / (1 + rr) * 1e6


def mesh(b: Builder, edges, start_ns, count, period_ns, delay_ns, turnaround_ns=200_000):
    """Each edge's first host sends a coded pair every period, echoed by the second."""
    for k in range(count):
        for i, (x, y) in enumerate(edges):
            t = start_ns + k * period_ns + i * 1_000_000
            back = b.pair(x, y, t, delay_ns)
            b.pair(y, x, back + turnaround_ns, delay_ns)


def offsets(r, method):
    t = r.clocks.filter(pa.compute.equal(r.clocks.column("method"), method))
    return dict(zip(t.column("host").to_pylist(), t.column("offset_ns").to_pylist())), \
        dict(zip(t.column("host").to_pylist(), t.column("drift_ppm").to_pylist()))


# ---------------------------------------------------------------- exact recovery

def test_noise_free_synthetic_probes_give_the_offsets_exactly(tmp_path):
    # No drift, no queueing, no stamp noise, whole-ns offsets, symmetric delays: every stamp is exact, a
    # constant offset is the truth at any instant, and every method's symmetric assumption holds.
    off = [0, 12_345, -67_890, 250_001, -3, 99_999, -150_000, 7]
    t, _ = synthetic.generate(hosts=8, peers=3, duration_s=4, rate_hz=50, seed=3, offset_ns=off,
                              drift_ppm=[0.0] * 8, stamps="none", queue_prob=0.0)
    pr.write(t, tmp_path / "p.parquet")
    p = pr.read(tmp_path / "p.parquet")
    r = est.estimate(p, est.METHODS)
    c = r.clocks
    assert c.num_rows == 4 * 2 * 8  # methods x windows x hosts
    want = {h: off[i] - off[0] for i, h in enumerate(p.hosts)}
    for m, h, o, d in zip(*(c.column(x).to_pylist() for x in ("method", "host", "offset_ns", "drift_ppm"))):
        assert o == pytest.approx(want[h], abs=1e-6), (m, h)
        assert d == pytest.approx(0.0, abs=1e-9), (m, h)


def test_drifting_clocks_are_recovered_exactly_on_a_graph_with_loops(tmp_path):
    # Huygens' bounds: a->b probes give rx - tx = line(x) + d(1 + r_b) above b's offset line and b->a probes
    # tx - rx = line(x) - d(1 + r_b) below it, both on a's clock x: the max-margin line is the true one.
    b = Builder({"a": 1_000, "b": -52_000, "c": 310_000, "d": 4_400},
                {"a": 10, "b": -20, "c": 30, "d": 0})
    # Times on a 100 us grid and drifts in tens of ppm make every stamp a whole ns.
    mesh(b, [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "a")], 100_000_000, 190, 10_000_000,
         delay_ns=300_000)
    p = pr.read(b.write(tmp_path / "p.parquet"))
    r = est.estimate(p, ["huygens", "huygens-no-ne"], window_s=2.0)
    # One window (span < 2 s). Its middle is the middle of the probes' span on the reference's clock
    # (send stamps moved by coarse offsets, good to about a delay), not a half window (1 s) from its start.
    assert set(r.clocks.column("window").to_pylist()) == {0}
    mid = r.clocks.column("window_mid_ns")[0].as_py()
    a_sends = [tx for tx, s in zip(p.tx0_ns, p.src) if p.hosts[s] == "a"]
    assert abs(mid - (min(a_sends) + max(a_sends)) / 2) < 2 * 300_000
    for m in ("huygens", "huygens-no-ne"):
        o, d = offsets(r, m)
        for h in "abcd":
            want_o, want_d = b.truth("a", h, mid)
            assert o[h] == pytest.approx(want_o, abs=1e-6), (m, h)
            assert d[h] == pytest.approx(want_d, abs=1e-9), (m, h)
    # The score's truth, from the rows' true times, is the same closed form; the error is zero.
    h = r.clocks.filter(pa.compute.equal(r.clocks.column("method"), "huygens"))
    for host, true, err in zip(*(h.column(x).to_pylist() for x in ("host", "true_offset_ns", "error_ns"))):
        assert true == pytest.approx(b.truth("a", host, mid)[0], abs=1e-5), host
        assert err == pytest.approx(0.0, abs=1e-5), host
    assert [s["max_abs_error_ns"] < 1e-5 for s in r.score] == [True, True]
    # No noise: the loops close, so the residual uncertainty is zero.
    u = r.clocks.filter(pa.compute.equal(r.clocks.column("method"), "huygens")).column("offset_uncertainty_ns")
    assert max(u.to_pylist()) == pytest.approx(0.0, abs=1e-6)


def test_clocks_hours_apart_share_the_reference_s_windows(tmp_path):
    # b's clock is 1,000 s ahead of a's (never synchronised) and c's 1 h behind: windows stay those of
    # a's clock and the fit is exact as before (the same closed form), to float64's precision there.
    b = Builder({"a": 0, "b": 1_000_000_000_000, "c": -3_600_000_000_000}, {"a": 0, "b": 20, "c": -10})
    mesh(b, [("a", "b"), ("b", "c"), ("c", "a")], 100_000_000, 390, 10_000_000, delay_ns=300_000)
    p = pr.read(b.write(tmp_path / "p.parquet"))
    r = est.estimate(p, ["huygens", "ntp"], window_s=2.0)
    start = int(p.tx0_ns[p.src == 0].min())   # a's earliest send: a is the reference and starts first
    assert sorted(set(r.clocks.column("window").to_pylist())) == [0, 1]
    end = int(p.tx0_ns[p.src == 0].max())
    for k in (0, 1):
        t = r.clocks.filter(pa.compute.equal(r.clocks.column("window"), k))
        mid = t.column("window_mid_ns")[0].as_py()
        if k == 0:   # a whole window: a half window from its start
            assert mid == start + 1_000_000_000
        else:        # the last absorbs the remainder: the middle of [its start, the last send] (a's sends, to a delay)
            assert abs(mid - (start + 2_000_000_000 + end) / 2) < 2 * 300_000
        for m, h, o, d in zip(*(t.column(x).to_pylist() for x in ("method", "host", "offset_ns", "drift_ppm"))):
            want_o, want_d = b.truth("a", h, mid)
            assert o == pytest.approx(want_o, abs=1e-2), (m, k, h)  # float64 steps are 2e-4 ns near 1e12 ns
            assert d == pytest.approx(want_d, abs=1e-6), (m, k, h)


def test_the_score_reads_a_wandering_clock_at_the_instant_itself(tmp_path):
    # Drifts wander (0.5 ppm per square root of a second: steps of 0.05 ppm every 10 ms). The truth is the
    # generator's own clock at the instant the reference reads each window's middle, found here by fixed
    # point. Over the +-50 ms the score fits, the wander bends a clock by a few ns at most (0.1 ppm over
    # 50 ms is 5 ns, and a line through it halves that), plus 0.5 ns of rounding to whole ns; a line over
    # the whole 2 s window would miss by 100s of ns.
    # Software stamps (µs noise, heavy tail) move the instants the clocks are read, which the true times
    # are (the schema's meaning), so they leave the truth exact.
    t, clk = synthetic.generate(hosts=8, peers=3, duration_s=6, seed=4, drift_walk_ppm=0.5, stamps="software",
                                stamp_noise_ns=1000.0, queue_prob=0.0)
    pr.write(t, tmp_path / "p.parquet")
    r = est.estimate(pr.read(tmp_path / "p.parquet"), ["huygens"], pure_bound_ns=2000)
    idx = {h: i for i, h in enumerate(clk.hosts)}
    for k, mid, h, true in zip(*(r.clocks.column(x).to_pylist()
                                 for x in ("window", "window_mid_ns", "host", "true_offset_ns"))):
        at = float(mid)
        for _ in range(10):
            at = mid - (clk.read(np.array([0]), np.array([at]))[0] - at)
        want = clk.read(np.array([idx[h]]), np.array([at]))[0] - mid
        assert true == pytest.approx(want, abs=10.0), (k, h)


# ---------------------------------------------------------------- the network effect by hand

def _triangle():
    # Hosts A, B, C; edges (a < b): A-B, A-C, B-C. The pairwise estimates A->B 20, B->C -15, C->A 5
    # become theta_B - theta_A = 20, theta_C - theta_B = -15 and theta_C - theta_A = -5.
    e = est.Edges(np.array([0, 0, 1], dtype=np.int32), np.array([1, 2, 2], dtype=np.int32), np.zeros(0), np.zeros(0))
    fit = est.EdgeFit(np.array([20.0, -5.0, -15.0]), np.zeros(3), np.zeros(3), np.zeros((3, 4)), np.zeros(3))
    return e, fit


def test_huygens_triangle_loop_surplus_is_split_evenly():
    e, fit = _triangle()
    # Around A->B->C->A: 20 - 15 + 5 = 10 too much; least squares takes 10/3 off each edge:
    # A->B 20 - 10/3 = 16.67, B->C -15 - 10/3 = -18.33, C->A 5 - 10/3 = 1.67.
    theta, _, u, _ = est.network_effect(est.Graph(3, e, 0), fit)
    assert theta[0] == 0.0
    assert theta[1] == pytest.approx(50 / 3, abs=1e-12)
    assert theta[2] - theta[1] == pytest.approx(-55 / 3, abs=1e-12)
    assert theta[0] - theta[2] == pytest.approx(5 / 3, abs=1e-12)
    assert round(theta[1], 2) == 16.67
    # Uncertainty: residuals 10/3 on 3 edges with 3 - 2 = 1 degree of freedom, sigma^2 = 100/3; the reduced
    # Laplacian [[2, -1], [-1, 2]] has inverse diagonal 2/3, so sd = sqrt(100/3 * 2/3) = sqrt(200)/3.
    assert u[1] == pytest.approx(np.sqrt(200) / 3, rel=1e-12)
    assert u[2] == pytest.approx(np.sqrt(200) / 3, rel=1e-12)
    # The ensemble mean as reference: the same differences, shifted to mean zero ((0 + 50/3 - 5/3) / 3 = 5).
    theta_m, _, _, _ = est.network_effect(est.Graph(3, e, None), fit)
    assert theta_m == pytest.approx([-5, 50 / 3 - 5, -5 / 3 - 5], abs=1e-12)
    # Without the network effect, B and C come straight from A's edges: 20 and -5.
    theta_t, _, _, _ = est.along_tree(3, e, fit, 0, np.ones(3), add_linear=True)
    assert theta_t == pytest.approx([0, 20, -5], abs=1e-12)


# ---------------------------------------------------------------- step 2 against an LP solver

def test_max_margin_matches_highs_linear_programme():
    from scipy.optimize import linprog

    rng = np.random.default_rng(7)
    rows = []
    for overlap in (False, True):
        for _ in range(20):
            n_u, n_l = rng.integers(2, 30, 2)
            ux, lx = rng.uniform(-1, 1, n_u), rng.uniform(-1, 1, n_l)
            theta, delta = rng.uniform(-1e4, 1e4), rng.uniform(-3e4, 3e4)
            gap = -300.0 if overlap else 50.0
            uy = theta + delta * ux + gap + rng.exponential(200, n_u)
            ly = theta + delta * lx - gap - rng.exponential(200, n_l)
            rows.append((ux, uy, lx, ly))
    w = max(max(len(r[0]), len(r[2])) for r in rows)
    pad = lambda a, fill: np.concatenate([a, np.full(w - len(a), fill)])
    UX = np.array([pad(r[0], 0.0) for r in rows])
    UY = np.array([pad(r[1], np.inf) for r in rows])
    LX = np.array([pad(r[2], 0.0) for r in rows])
    LY = np.array([pad(r[3], -np.inf) for r in rows])
    theta, delta, margin, at_limit = est.max_margin(UX, UY, LX, LY)
    assert not at_limit.any()
    for i, (ux, uy, lx, ly) in enumerate(rows):
        # max m s.t. theta + delta x_u + m <= y_u and -(theta + delta x_l) + m <= -y_l; variables (theta, delta, m).
        a = np.vstack([np.column_stack([np.ones_like(ux), ux, np.ones_like(ux)]),
                       np.column_stack([-np.ones_like(lx), -lx, np.ones_like(lx)])])
        lp = linprog([0, 0, -1], A_ub=a, b_ub=np.concatenate([uy, -ly]), bounds=[(None, None)] * 3, method="highs")
        assert lp.status == 0
        assert margin[i] == pytest.approx(lp.x[2], abs=1e-6)
        # The line itself where the optimum is unique (a vertex): the margin binds it.
        assert np.min(uy - theta[i] - delta[i] * ux) == pytest.approx(margin[i], abs=1e-6)
        assert np.min(theta[i] + delta[i] * lx - ly) == pytest.approx(margin[i], abs=1e-6)
    assert (margin[:20] > 0).all() and (margin[20:] < 0).all()


# ---------------------------------------------------------------- step 1: the filter

def test_filter_keeps_pairs_within_the_bound_and_rejects_the_others():
    # Send spacing 10,000 ns; receive spacings 10,000 / 10,050 / 10,100 (|diff| 0, 50, 100: pure at 100 ns)
    # and 10,150 / 9,899 / 12,000 (|diff| 150, 101, 2000: impure).
    rx_spacing = np.array([10_000, 10_050, 10_100, 10_150, 9_899, 12_000])
    n = len(rx_spacing)
    p = pr.Probes(hosts=["a", "b"], src=np.zeros(n, np.int32), dst=np.ones(n, np.int32),
                  tx0_ns=np.full(n, 1_000), tx1_ns=np.full(n, 11_000), rx0_ns=np.full(n, 5_000),
                  rx1_ns=5_000 + rx_spacing)
    assert est.pure(p, 100.0).tolist() == [True, True, True, False, False, False]
    assert est.pure(p, 0.0).tolist() == [True, False, False, False, False, False]


def test_an_impure_pair_that_would_move_the_fit_is_dropped(tmp_path):
    # a and b differ by 5,000 ns, delays 300 us both ways: the fit is exact. One extra a->b pair has its
    # first probe stamped 500 ns early at b (spacing off by 500 ns): kept, it would be the tightest upper
    # bound and pull the line down by 250 ns.
    b = Builder({"a": 0, "b": 5_000})
    mesh(b, [("a", "b")], 100_000_000, 150, 10_000_000, delay_ns=300_000)
    b.pair("a", "b", 800_000_000 + 500_000, 300_000, rx0_shift_ns=-500)
    p = pr.read(b.write(tmp_path / "p.parquet"))
    o, _ = offsets(est.estimate(p, ["huygens"], pure_bound_ns=100), "huygens")
    assert o["b"] == pytest.approx(5_000, abs=1e-6)
    o_loose, _ = offsets(est.estimate(p, ["huygens"], pure_bound_ns=1_000), "huygens")
    assert o_loose["b"] != pytest.approx(5_000, abs=1.0)


# ---------------------------------------------------------------- the NTP baseline

def test_ntp_is_off_by_half_the_path_asymmetry(tmp_path):
    # b's clock is 1,000 ns ahead, no drift. a->b takes 3,000 ns and b->a 1,000 ns. An exchange a->b->a has
    # t2 - t1 = 1,000 + 3,000 and t3 - t4 = 1,000 - 1,000, so ((t2 - t1) + (t3 - t4)) / 2 = 2,000
    # = 1,000 + (3,000 - 1,000) / 2: off by exactly half the asymmetry (PTP's exchange is the same).
    b = Builder({"a": 0, "b": 1_000})
    for k in range(150):
        t = 100_000_000 + k * 10_000_000
        back = b.pair("a", "b", t, 3_000, spacing_ns=10_000)
        b.pair("b", "a", back + 5_000, 1_000, spacing_ns=10_000)
    p = pr.read(b.write(tmp_path / "p.parquet"))
    r = est.estimate(p, ["ntp", "ptp"])
    for m in ("ntp", "ptp"):
        o, d = offsets(r, m)
        assert o["b"] == pytest.approx(2_000, abs=1e-9), m
        assert o["b"] - 1_000 == pytest.approx((3_000 - 1_000) / 2, abs=1e-9)
        assert d["b"] == pytest.approx(0.0, abs=1e-9)


def test_the_estimate_is_deterministic(tmp_path):
    t, _ = synthetic.generate(hosts=6, peers=2, duration_s=2, seed=11)
    path = tmp_path / "p.parquet"
    pr.write(t, path)
    a = est.estimate(pr.read(path), est.METHODS)
    b = est.estimate(pr.read(path), est.METHODS)
    def ipc(t):  # bytes, so that NaN (no loops to measure a rate's spread) compares equal to itself
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as w:
            w.write_table(t)
        return sink.getvalue().to_pybytes()

    assert ipc(a.clocks) == ipc(b.clocks) and ipc(a.edges) == ipc(b.edges)


# ---------------------------------------------------------------- the reader

def test_reader_pairs_the_same_probes_whatever_the_row_order(tmp_path):
    t, _ = synthetic.generate(hosts=5, peers=2, duration_s=1, seed=2)
    pr.write(t, tmp_path / "sorted.parquet")
    pr.write(t.take(np.random.default_rng(0).permutation(t.num_rows)), tmp_path / "shuffled.parquet")

    def pairs(p):
        return sorted(zip(p.src.tolist(), p.dst.tolist(), p.tx0_ns.tolist(), p.tx1_ns.tolist(), p.rx0_ns.tolist(),
                          p.rx1_ns.tolist()))

    a, b = pr.read(tmp_path / "sorted.parquet"), pr.read(tmp_path / "shuffled.parquet")
    assert len(a.src) == t.num_rows // 2
    assert pairs(a) == pairs(b)
    assert all(x[2] < x[3] for x in pairs(a))   # seq 0 is sent before seq 1 in the generator


@pytest.mark.parametrize("seqs, dsts, words", [
    ([0, 0], ["b", "b"], "has seq 0 twice"),
    ([1, 0], ["b", "c"], "goes to two hosts (c and b)"),
])
def test_reader_refuses_a_malformed_pair(tmp_path, seqs, dsts, words):
    path = tmp_path / "p.parquet"
    pr.write(pr.table(["a", "a"], dsts, [7, 7], seqs, [10, 20], [30, 40]), path)
    with pytest.raises(pr.ProbeFileError, match="pair 7 from a"):
        try:
            pr.read(path)
        except pr.ProbeFileError as e:
            assert words in str(e)
            raise


# ---------------------------------------------------------------- bad input through the real CLI

def _good(tmp_path, **kw):
    t, _ = synthetic.generate(hosts=4, peers=2, duration_s=2, seed=5, **kw)
    return t


def _bad_cli(tmp_path, table, *extra):
    path = tmp_path / "probes.parquet"
    pq.write_table(table, str(path))
    r = run_cli("clock", "estimate", str(path), "--out", str(tmp_path / "c.parquet"), *extra)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    return r.stderr


def test_cli_refuses_a_probe_file_with_a_missing_column(tmp_path):
    msg = _bad_cli(tmp_path, _good(tmp_path).drop_columns(["rx_ns"]))
    assert "lacks the column(s) rx_ns" in msg


def test_cli_refuses_a_column_of_the_wrong_type(tmp_path):
    t = _good(tmp_path)
    t = t.set_column(t.schema.get_field_index("tx_ns"), "tx_ns", t.column("tx_ns").cast(pa.float64()))
    msg = _bad_cli(tmp_path, t)
    assert "column tx_ns has type double" in msg and "int64" in msg


def test_cli_refuses_a_seq_other_than_0_or_1(tmp_path):
    t = _good(tmp_path)
    seq = t.column("seq").to_numpy().copy()
    seq[3] = 2
    msg = _bad_cli(tmp_path, t.set_column(3, "seq", pa.array(seq, pa.uint8())))
    assert "column seq is 2 at row 3" in msg and "0 or 1" in msg


def test_cli_refuses_a_pair_with_one_probe_only(tmp_path):
    t = _good(tmp_path)
    rows = np.arange(t.num_rows) != 5
    src, pair = t.column("src").to_pylist()[5], t.column("pair").to_pylist()[5]
    msg = _bad_cli(tmp_path, t.filter(pa.array(rows)))
    assert f"pair {pair} from {src} has one probe only" in msg


def test_cli_names_the_edge_and_window_with_too_few_pure_pairs(tmp_path):
    # Delays 300 us both ways; every a-c pair's second probe is 1 us late (impure at the 100 ns bound).
    b = Builder({"a": 0, "b": 0, "c": 0})
    for k in range(150):
        t = 100_000_000 + k * 10_000_000
        b.pair("b", "a", b.pair("a", "b", t, 300_000) + 5_000, 300_000)
        b.pair("c", "a", b.pair("a", "c", t + 1_000_000, 300_000, delay1_ns=301_000) + 5_000, 300_000)
    msg = _bad_cli(tmp_path, pq.read_table(b.write(tmp_path / "x.parquet")))
    assert "edge a-c in window 0" in msg and "0 pure pair(s) a->c" in msg and "at least two" in msg


def test_cli_names_a_host_cut_off_from_the_probe_graph(tmp_path):
    b = Builder({"a": 0, "b": 0, "c": 0, "d": 0})
    mesh(b, [("a", "b"), ("c", "d")], 100_000_000, 100, 10_000_000, delay_ns=300_000)
    msg = _bad_cli(tmp_path, pq.read_table(b.write(tmp_path / "x.parquet")))
    assert "not connected: host c" in msg and "to a" in msg


def test_cli_refuses_probes_whose_true_times_imply_a_drift_beyond_1000_ppm(tmp_path):
    # b's clock runs 1,500 ppm fast: its stamps against the true times say so.
    b = Builder({"a": 0, "b": 0}, {"a": 0, "b": 1500})
    mesh(b, [("a", "b")], 100_000_000, 100, 10_000_000, delay_ns=300_000)
    msg = _bad_cli(tmp_path, pq.read_table(b.write(tmp_path / "x.parquet")))
    assert "host b's stamps drift 1500 ppm" in msg and "±1000 ppm" in msg


def test_cli_refuses_a_generator_drift_beyond_1000_ppm(tmp_path):
    r = run_cli("clock", "synth", "--out", str(tmp_path / "p.parquet"), "--drift-spread-ppm", "1500")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--drift-spread-ppm" in r.stderr and "1000" in r.stderr


def test_cli_refuses_more_peers_than_other_hosts(tmp_path):
    r = run_cli("clock", "synth", "--out", str(tmp_path / "p.parquet"), "--hosts", "4", "--peers", "4")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--peers: 4 is more than the 3 other hosts" in r.stderr


def test_cli_estimates_and_scores_synthetic_probes(tmp_path):
    # NIC stamps (20 ns noise): Huygens lands within tens of ns; NTP and PTP carry the queueing.
    assert run_cli("clock", "synth", "--out", str(tmp_path / "p.parquet"), "--hosts", "8", "--peers", "3",
                   "--duration-s", "4").returncode == 0
    r = run_cli("clock", "estimate", str(tmp_path / "p.parquet"), "--out", str(tmp_path / "c.parquet"),
                "--method", "all")
    assert r.returncode == 0, r.stderr
    score = (tmp_path / "c.score.csv").read_text().splitlines()
    assert score[0] == "method,samples,p50_abs_error_ns,p99_abs_error_ns,max_abs_error_ns"
    by = {line.split(",")[0]: [float(x) for x in line.split(",")[1:]] for line in score[1:]}
    assert set(by) == set(est.METHODS)
    assert by["huygens"][0] == 7 * 2   # 7 hosts besides the reference, 2 windows
    assert by["huygens"][2] < 100
    clocks = pq.read_table(tmp_path / "c.parquet")
    assert clocks.num_rows == 8 * 2 * 4
    edges = pq.read_table(tmp_path / "c.edges.parquet")
    assert {"a", "b", "offset_ns", "drift_ppm", "spread_ns", "pure_ab", "pure_ba"} <= set(edges.column_names)


def test_cli_refuses_a_file_that_is_not_parquet(tmp_path):
    path = tmp_path / "probes.parquet"
    path.write_bytes(b"src,dst\nh0,h1\n")
    r = run_cli("clock", "estimate", str(path), "--out", str(tmp_path / "c.parquet"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "not a readable Parquet file" in r.stderr
    assert not (tmp_path / "c.parquet").exists()


# ---------------------------------------------------------------- heavy load: short edges, a wrong edge

def _complete(names):
    return [(x, y) for i, x in enumerate(names) for y in names[i + 1:]]


def test_drop_short_edges_leaves_an_edge_out_and_the_loops_carry_it(tmp_path):
    # Four hosts, every pair probed; a-b's probes b->a all impure (first probe stamped 500 ns late at a),
    # so a-b holds no pure pair b->a. Refused by default (naming the edge); with drop_short_edges the
    # edge is left out and b is reached through c and d: still exact (no noise, symmetric delays).
    b = Builder({"a": 0, "b": 5_000, "c": -7_000, "d": 11_000})
    for k in range(100):
        for i, (x, y) in enumerate(_complete("abcd")):
            t = 100_000_000 + k * 10_000_000 + i * 1_000_000
            back = b.pair(x, y, t, 300_000)
            b.pair(y, x, back + 200_000, 300_000, rx0_shift_ns=500 if (x, y) == ("a", "b") else 0)
    p = pr.read(b.write(tmp_path / "p.parquet"))
    with pytest.raises(est.EstimateInputError, match="edge a-b in window 0"):
        est.estimate(p, ["huygens"])
    r = est.estimate(p, ["huygens", "huygens-no-ne"], drop_short_edges=True)
    for m in ("huygens", "huygens-no-ne"):
        o, _ = offsets(r, m)
        assert o == pytest.approx({"a": 0, "b": 5_000, "c": -7_000, "d": 11_000}, abs=1e-6), m
    e = r.edges.to_pandas().set_index(["a", "b"])
    assert np.isnan(e.loc[("a", "b"), "offset_ns"]) and e.loc[("a", "b"), "pure_ba"] == 0
    # Cut a host off entirely: refused, naming it.
    b2 = Builder({"a": 0, "b": 5_000, "c": -7_000})
    for k in range(100):
        for i, (x, y) in enumerate(_complete("abc")):
            t = 100_000_000 + k * 10_000_000 + i * 1_000_000
            back = b2.pair(x, y, t, 300_000)
            b2.pair(y, x, back + 200_000, 300_000, rx0_shift_ns=500 if "c" in (x, y) else 0)
    p2 = pr.read(b2.write(tmp_path / "p2.parquet"))
    with pytest.raises(est.EstimateInputError, match="left out.*host c"):
        est.estimate(p2, ["huygens"], drop_short_edges=True)


def test_drop_short_edges_leaves_out_an_edge_whose_drift_is_unbounded(tmp_path):
    # Four hosts, every pair probed. Edge a-b keeps pure pairs both ways, but a->b's only in the window's
    # second half and b->a's only in its first half (the others' first probe stamped 500 ns late). An upper
    # bound that lies only to the right of every lower bound does not bound the slope: tilting the line down
    # widens the margin without end, so the fit runs to its +-2,000 ppm limit. Refused by default (naming the
    # edge and the drift limit); with drop_short_edges the edge is left out and the loops give the truth.
    truth = {"a": 0, "b": 5_000, "c": -7_000, "d": 11_000}
    b = Builder(truth)
    for k in range(100):
        for i, (x, y) in enumerate(_complete("abcd")):
            t = 100_000_000 + k * 10_000_000 + i * 1_000_000
            ab = (x, y) == ("a", "b")
            back = b.pair(x, y, t, 300_000, rx0_shift_ns=500 if ab and k < 50 else 0)
            b.pair(y, x, back + 200_000, 300_000, rx0_shift_ns=500 if ab and k >= 50 else 0)
    p = pr.read(b.write(tmp_path / "p.parquet"))
    with pytest.raises(est.EstimateInputError, match="edge a-b in window 0: the probes imply a drift"):
        est.estimate(p, ["huygens"])
    r = est.estimate(p, ["huygens", "huygens-no-ne"], drop_short_edges=True)
    for m in ("huygens", "huygens-no-ne"):
        o, _ = offsets(r, m)
        assert o == pytest.approx(truth, abs=1e-6), m
    e = r.edges.to_pandas().set_index(["a", "b"])
    e = e[e["method"] == "huygens"]
    assert np.isnan(e.loc[("a", "b"), "offset_ns"]) and e.loc[("a", "b"), "pure_ab"] == 50


def test_robust_network_effect_ignores_one_queued_edge(tmp_path):
    # Five hosts, every pair probed, no noise, 300 us each way; but every pair a->b waits 4,000 ns more in
    # a queue, both probes alike (pure). Edge a-b's max-margin line then sits 2,000 ns (half the asymmetry)
    # above b - a; every other edge is exact. Least squares on the complete graph K_5 (L+ = I / 5 on
    # mean-zero potentials) spreads the 2,000 as theta = 2,000 / 5 x (e_b - e_a): against a, b is off by
    # 800 ns and c, d, e by 400. Least absolute deviations (one wrong edge of four at every host) and then
    # the biweight leave a-b out: every host within a few ns (the floor of the weights, pure_bound_ns / 2 =
    # 5 ns, lets a-b keep a weight of at most 5 / 2,000 of the others' in the first stage only).
    true = {"a": 0, "b": 5_000, "c": -7_000, "d": 11_000, "e": 3_000}
    b = Builder(true)
    for k in range(100):
        for i, (x, y) in enumerate(_complete("abcde")):
            t = 100_000_000 + k * 10_000_000 + i * 1_000_000
            back = b.pair(x, y, t, 304_000 if (x, y) == ("a", "b") else 300_000)
            b.pair(y, x, back + 200_000, 300_000)
    p = pr.read(b.write(tmp_path / "p.parquet"))
    e = est.estimate(p, ["huygens"], pure_bound_ns=10).edges.to_pandas().set_index(["a", "b"])
    assert e.loc[("a", "b"), "offset_ns"] == pytest.approx(5_000 + 2_000, abs=1e-6)
    plain, _ = offsets(est.estimate(p, ["huygens"], pure_bound_ns=10), "huygens")
    want_plain = {"a": 0, "b": 5_800, "c": -7_000 + 400, "d": 11_000 + 400, "e": 3_000 + 400}
    assert plain == pytest.approx(want_plain, abs=1e-6)
    robust, _ = offsets(est.estimate(p, ["huygens"], pure_bound_ns=10, robust=True), "huygens")
    assert robust == pytest.approx(true, abs=3.0)

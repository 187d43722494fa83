"""Clock offsets and drifts from probe records: Huygens' three steps and three
baselines (docs/clockwork.md, "The estimator").

Per window (``window_s`` of the reference's clock, 2 s by default) and per
probed pair of hosts (an *edge* (a, b), a before b in sorted order):

1. Coded-probe filter: a pair is pure when its receive spacing differs from
   its send spacing by at most ``pure_bound_ns``; the first probe of each pure
   pair is kept.
2. Fit: on a's clock x (seconds from the window's middle), a pure probe a->b
   gives an upper bound ``rx - tx`` on b's offset relative to a, one b->a a
   lower bound ``tx - rx``. The line offset + drift * x with the largest
   vertical margin between the two point sets is found exactly (``max_margin``).
3. Network effect: the edges' estimates, read at the instant the reference's
   clock shows the window's middle, are made consistent around every loop by
   least squares over the probe graph (a reduced graph-Laplacian solve), for
   offsets and for drifts.

Baselines from the same records: ``huygens-no-ne`` (step 3 replaced by
adding the edges' estimates along a breadth-first tree from the reference),
``ntp`` (min-RTT exchanges, symmetric paths) and ``ptp`` (every two-step
exchange, symmetric paths, averaged by a least-squares line).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pyarrow as pa

from ...errors import InputError
from .network import LOOP_TOLERANCE_BOUNDS, Graph, agreeing, closures, network_effect, robust_graph
from .network import loop_check as loop_check_edges
from .probes import Probes

METHODS = ("huygens", "huygens-no-ne", "ntp", "ptp")
DEFAULT_WINDOW_S = 2.0
# A pure pair's spacings agree within this. Below one 1500-byte frame's serialisation at
# 100 Gbit/s (120 ns), so a pair of which one probe waited behind a full frame that the other
# did not is dropped; several times the tens of ns of NIC timestamp noise, so pure pairs pass.
DEFAULT_PURE_BOUND_NS = 100.0
MAX_DRIFT_PPM = 1000.0
# The fit searches relative drifts within ±2 x MAX_DRIFT_PPM (two clocks within ±1,000 ppm each).
_FIT_LIMIT_NS_PER_S = 2 * MAX_DRIFT_PPM * 1e3


class EstimateInputError(InputError):
    """Probe records the estimator cannot use (too few pure pairs, a cut-off host, ...)."""


@dataclass
class Windows:
    start_ns: int      # the first window's start on the reference's clock
    length_ns: int
    count: int
    of_pair: np.ndarray  # window index of each coded pair
    end_ns: int        # the last pair's time: the last window ends here, not at start + count * length

    def mid_ns(self, k) -> np.ndarray:
        """The middle of window k's span. The last window absorbs the remainder (half to one and a half
        windows; a single window is the whole span), so its middle is halfway between its start and ``end_ns``: placing it a half window
        from its start reported a short last window's estimate at its edge, and a single window longer
        than the file far outside the probes (an extrapolation that multiplied the drift's error)."""
        k = np.asarray(k, dtype=np.float64)
        last_start = self.start_ns + (self.count - 1) * self.length_ns
        return np.where(k < self.count - 1, self.start_ns + (k + 0.5) * self.length_ns,
                        (last_start + self.end_ns) / 2.0)

    def span_ns(self, k: int) -> int:
        return self.length_ns if k < self.count - 1 else self.end_ns - (self.start_ns + k * self.length_ns)


def windows(p: Probes, window_s: float, coarse_ns: np.ndarray) -> Windows:
    """Windows of the reference's clock. A pair belongs to the window holding its seq-0 send stamp moved
    to the reference's clock by the sender's coarse offset (``coarse_offsets``: within a delay plus the
    drift over the file, far less than a window; the linear fit covers a probe just across a boundary as
    well). The span from the first to the last such time is cut into round(span / window) windows (at
    least one); the last absorbs the remainder, so it holds between half and one and a half windows (a
    single window: the whole span, however short)."""
    if not window_s > 0 or not np.isfinite(window_s):
        raise EstimateInputError(f"--window-s: must be a positive number of seconds, got {window_s}")
    w = round(window_s * 1e9)
    t = p.tx0_ns - np.rint(coarse_ns[p.src]).astype(np.int64)
    t0 = int(t.min())
    span = int(t.max()) - t0
    count = max(1, int(np.floor(span / w + 0.5)))
    k = np.minimum((t - t0) // w, count - 1).astype(np.int64)
    return Windows(t0, w, count, k, t0 + span)


def coarse_offsets(p: Probes, e: Edges, reference: Optional[int]) -> np.ndarray:
    """Every host's offset against the reference to within a delay or so: per edge, the middle of the
    tightest bounds over the whole file (least rx - tx a->b, greatest tx - rx b->a; no drift), added
    along a breadth-first tree. Used to place windows on the reference's clock and to centre the fits,
    so that hosts hours apart (no NTP yet) are handled as well as hosts µs apart."""
    y = np.where(e.forward, p.rx0_ns - p.tx0_ns, p.tx0_ns - p.rx0_ns).astype(np.float64)
    up = np.full(e.count, np.inf)
    lo = np.full(e.count, -np.inf)
    np.minimum.at(up, e.of_pair[e.forward], y[e.forward])
    np.maximum.at(lo, e.of_pair[~e.forward], y[~e.forward])
    mid = np.where(np.isfinite(up) & np.isfinite(lo), (up + lo) / 2, np.where(np.isfinite(up), up, lo))
    zero = np.zeros(e.count)
    fit = EdgeFit(mid, zero, zero, np.zeros((e.count, 4), dtype=np.int64), zero)
    return along_tree(len(p.hosts), e, fit, reference, zero, add_linear=True)[0]


@dataclass
class Edges:
    a: np.ndarray      # int32 host index, a < b
    b: np.ndarray
    of_pair: np.ndarray  # edge index of each pair
    forward: np.ndarray  # the pair goes a -> b

    @property
    def count(self) -> int:
        return len(self.a)


def edges(p: Probes) -> Edges:
    n = len(p.hosts)
    a = np.minimum(p.src, p.dst).astype(np.int64)
    b = np.maximum(p.src, p.dst).astype(np.int64)
    key = a * n + b
    if n * n <= 50_000_000:  # a table of every possible pair: no sort
        seen = np.zeros(n * n, dtype=bool)
        seen[key] = True
        keys = np.flatnonzero(seen)
        ids = np.cumsum(seen) - 1
        inv = ids[key]
    else:
        keys, inv = np.unique(key, return_inverse=True)
    return Edges((keys // n).astype(np.int32), (keys % n).astype(np.int32), inv, p.src == a)


def _kept(e: Edges, fit: "EdgeFit", keep: np.ndarray) -> tuple[Edges, "EdgeFit"]:
    """The edges ``keep`` selects, with their fits (the pairs' edge indices are not carried)."""
    sub = Edges(e.a[keep], e.b[keep], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))
    return sub, EdgeFit(fit.theta_ns[keep], fit.delta_ns_per_s[keep], fit.spread_ns[keep], fit.counts[keep],
                        fit.origin_ns[keep], None if fit.drift_range is None else fit.drift_range[keep])


def check_connected(hosts: Sequence[str], e: Edges, reference: int, where: str = "") -> None:
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(hosts)
    g = coo_matrix((np.ones(e.count), (e.a, e.b)), shape=(n, n))
    _, label = connected_components(g, directed=False)
    cut = np.flatnonzero(label != label[reference])
    if cut.size:
        raise EstimateInputError(
            f"probes: the probe graph{where} is not connected: host {hosts[cut[0]]} ({cut.size} host(s) in all) has no "
            f"path of probed pairs to {hosts[reference]}; every host must be linked to the reference by probes")


def check_true_drift(p: Probes) -> None:
    """Where probes carry true times: each host's clock rate against true time (a least-squares slope
    over its stamps of seq-0 probes) must be within ±MAX_DRIFT_PPM."""
    if not p.has_truth:
        return
    n = len(p.hosts)
    h = np.concatenate([p.src, p.dst])
    t = np.concatenate([p.true_tx0_ps, p.true_rx0_ps]) / 1000.0
    c = np.concatenate([p.tx0_ns, p.rx0_ns]) - t
    _, b = _lines(h, t - t.mean(), c, n)
    bad = np.flatnonzero(np.abs(b) * 1e6 > MAX_DRIFT_PPM)
    if bad.size:
        i = bad[0]
        raise EstimateInputError(f"probes: host {p.hosts[i]}'s stamps drift {b[i] * 1e6:.6g} ppm against the true "
                                 f"times (true_tx_ps, true_rx_ps); allowed: within ±{MAX_DRIFT_PPM:g} ppm")


def _lines(group: np.ndarray, t: np.ndarray, c: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group, the least-squares line c = a + b * (t - mean t): returns (value at t = 0, slope)."""
    cnt = np.bincount(group, minlength=n).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tm = np.bincount(group, t, n) / cnt
        cm = np.bincount(group, c, n) / cnt
        dt = t - tm[group]
        sxx = np.bincount(group, dt * dt, n)
        slope = np.where(sxx > 0, np.bincount(group, dt * (c - cm[group]), n) / np.where(sxx > 0, sxx, 1), 0.0)
    return cm - slope * tm, slope


# ---------------------------------------------------------------- step 1: the filter

def pure(p: Probes, bound_ns: float) -> np.ndarray:
    """The pairs whose receive spacing is within ``bound_ns`` of their send spacing."""
    if not bound_ns >= 0:
        raise EstimateInputError(f"--pure-bound-ns: must be zero or more ns, got {bound_ns}")
    return np.abs((p.rx1_ns - p.rx0_ns) - (p.tx1_ns - p.tx0_ns)) <= bound_ns


# ---------------------------------------------------------------- step 2: the fit

def max_margin(ux: np.ndarray, uy: np.ndarray, lx: np.ndarray, ly: np.ndarray, limit: float = _FIT_LIMIT_NS_PER_S):
    """Per row, the line y = theta + delta * x with the largest margin m such that every upper point
    (ux, uy) lies at least m above it and every lower point (lx, ly) at least m below (padding: uy = +inf,
    ly = -inf). Returns (theta, delta, margin, at_limit). When the sets overlap m is negative and the line
    is the one whose largest violation is least (the same linear programme's optimum).

    The margin is (f(delta) - g(delta)) / 2 with f = min(uy - delta ux) concave and g = max(ly - delta lx)
    convex, so it is concave and piecewise linear in delta. It is maximised exactly by Kelley's cutting
    planes in one dimension: keep a bracket whose ends have supergradients of opposite signs, evaluate at
    the crossing of the two ends' tangents, and stop when the function reaches the tangents there (that
    point is then a maximiser); each step that does not stop finds a linear piece not seen before, so it
    ends after finitely many. Rows are
    solved together, vectorised. ``at_limit``: the best delta lies at or beyond ±limit."""
    def evaluate(rows, d):
        su = uy[rows] - d[:, None] * ux[rows]
        sl = ly[rows] - d[:, None] * lx[rows]
        iu = np.argmin(su, axis=1)
        il = np.argmax(sl, axis=1)
        r = np.arange(len(rows))
        f, g = su[r, iu], sl[r, il]
        return f - g, lx[rows, il] - ux[rows, iu]

    n = uy.shape[0]
    all_rows = np.arange(n)
    lo, hi = np.full(n, -limit), np.full(n, limit)
    f_lo, s_lo = evaluate(all_rows, lo)
    f_hi, s_hi = evaluate(all_rows, hi)
    best = np.zeros(n)
    at_limit = (s_lo < 0) | (s_hi > 0)
    best[s_lo <= 0] = -limit
    best[(s_hi >= 0) & (s_lo > 0)] = limit
    active = np.flatnonzero((s_lo > 0) & (s_hi < 0))
    for _ in range(200):
        if active.size == 0:
            break
        a_lo, a_hi = lo[active], hi[active]
        d = (f_hi[active] - f_lo[active] + s_lo[active] * a_lo - s_hi[active] * a_hi) / (s_lo[active] - s_hi[active])
        d = np.clip(d, a_lo, a_hi)
        tangent = f_lo[active] + s_lo[active] * (d - a_lo)
        f, s = evaluate(active, d)
        done = (f >= tangent - 1e-9 * (1.0 + np.abs(tangent))) | (s == 0)
        best[active[done]] = d[done]
        up = ~done & (s > 0)
        down = ~done & (s < 0)
        lo[active[up]], f_lo[active[up]], s_lo[active[up]] = d[up], f[up], s[up]
        hi[active[down]], f_hi[active[down]], s_hi[active[down]] = d[down], f[down], s[down]
        active = active[~done]
    else:
        best[active] = 0.5 * (lo[active] + hi[active])  # never reached in practice: a 200-step guard
    fu = np.min(uy - best[:, None] * ux, axis=1)
    gl = np.max(ly - best[:, None] * lx, axis=1)
    return (fu + gl) / 2, best, (fu - gl) / 2, at_limit


def drift_range(ux, uy, lx, ly, delta: np.ndarray, margin: np.ndarray, floor_ns: float,
                limit: float = _FIT_LIMIT_NS_PER_S) -> np.ndarray:
    """Per row, how well the points pin the max-margin line's drift: the width (ns/s) of the drifts whose
    margin is within ``floor_ns`` of the best ``margin`` (at ``delta``). The margin is concave in the
    drift, so they form an interval; each end is found by bisection between ``delta`` and ±``limit``.
    Wide when each direction's tight points sit at one place in the window and the line may tilt about
    them."""
    def margin_at(d):
        return (np.min(uy - d[:, None] * ux, axis=1) - np.max(ly - d[:, None] * lx, axis=1)) / 2

    target = margin - floor_ns
    ends = []
    for side in (-1.0, 1.0):
        inner, outer = delta.copy(), np.full(delta.shape, side * limit)
        for _ in range(40):  # 4e6 ns/s halved 40 times: under 1e-5 ns/s
            mid = (inner + outer) / 2
            ok = margin_at(mid) >= target
            inner, outer = np.where(ok, mid, inner), np.where(ok, outer, mid)
        ends.append(inner)
    return ends[1] - ends[0]


@dataclass
class EdgeFit:
    """Per edge of one window: b's offset relative to a (ns) at a's clock reading the window's middle plus
    ``origin_ns``, and its rate (ns per s of a's clock), with a spread for the baselines."""

    theta_ns: np.ndarray
    delta_ns_per_s: np.ndarray
    spread_ns: np.ndarray   # huygens: the margin; ntp: min RTT / 2; ptp: the intercept's standard error
    counts: np.ndarray      # (edges, 4): pure a->b, pure b->a, pairs a->b, pairs b->a
    origin_ns: np.ndarray   # x = 0 is a's clock reading the window's middle plus this (a's coarse offset)
    drift_range: Optional[np.ndarray] = None  # huygens: the drifts (ns/s) whose margin is within a floor of the best
    misclosure_ns: Optional[np.ndarray] = None  # huygens with the loop check: ``closures``


def _padded(group: np.ndarray, ngroups: int, x: np.ndarray, y: np.ndarray, fill: float):
    order = np.argsort(group, kind="stable")
    g = group[order]
    cnt = np.bincount(g, minlength=ngroups)
    start = np.concatenate([[0], np.cumsum(cnt)[:-1]])
    pos = np.arange(len(g)) - start[g]
    width = max(1, int(cnt.max()) if cnt.size else 1)
    px = np.zeros((ngroups, width))
    py = np.full((ngroups, width), fill)
    px[g, pos] = x[order]
    py[g, pos] = y[order]
    return px, py


def huygens_edges(p: Probes, w: Windows, e: Edges, is_pure: np.ndarray, bound_ns: float,
                  coarse_ns: np.ndarray, drop_short: bool = False, min_pure: int = 2,
                  loop_tol_ns: Optional[float] = None) -> list[EdgeFit]:
    """Steps 1 and 2 for every window; refuses a window with fewer than two pure pairs each way on an edge,
    or with ``drop_short`` leaves that edge out of that window (its estimate nan; ``estimate`` then solves
    the network effect over the edges kept, and refuses only a graph they no longer connect). ``loop_tol_ns``:
    also the ``drift_range`` of each edge that fails the robust network effect's loop check at that tolerance
    (the order in which ``loop_check`` relinks cut-off hosts; nan for the others)."""
    nw, ne = w.count, e.count
    fwd = e.forward
    cell = w.of_pair * ne + e.of_pair
    counts = np.zeros((nw * ne, 4), dtype=np.int64)
    for col, m in enumerate((is_pure & fwd, is_pure & ~fwd, fwd, ~fwd)):
        counts[:, col] = np.bincount(cell[m], minlength=nw * ne)
    is_short = (counts[:, 0] < 2) | (counts[:, 1] < 2)
    if drop_short:
        is_short |= (counts[:, 0] < min_pure) | (counts[:, 1] < min_pure)
    short = np.flatnonzero(is_short)
    if short.size and not drop_short:
        c = short[0]
        k, j = divmod(int(c), ne)
        a, b = p.hosts[e.a[j]], p.hosts[e.b[j]]
        raise EstimateInputError(
            f"probes: edge {a}-{b} in window {k} (from {w.start_ns + k * w.length_ns} ns on the reference's clock, "
            f"{w.span_ns(k) / 1e9:g} s long) holds {counts[c, 0]} pure pair(s) {a}->{b} and {counts[c, 1]} "
            f"{b}->{a} (of {counts[c, 2]} and {counts[c, 3]}); the fit needs at least two each way. Probe more "
            f"often, lengthen --window-s, or widen --pure-bound-ns (now {bound_ns:g} ns)")
    fits = []
    origin = coarse_ns[e.a]
    for k in range(nw):
        m = is_pure & (w.of_pair == k)
        mf, mr = m & fwd, m & ~fwd
        # On a's clock, from its reading of the window's middle (coarsely): a->b probes leave at tx0,
        # b->a probes arrive at rx0.
        zf = w.mid_ns(k) + origin[e.of_pair[mf]]
        zr = w.mid_ns(k) + origin[e.of_pair[mr]]
        ux, uy = _padded(e.of_pair[mf], ne, (p.tx0_ns[mf] - zf) / 1e9, (p.rx0_ns[mf] - p.tx0_ns[mf]).astype(float),
                         np.inf)
        lx, ly = _padded(e.of_pair[mr], ne, (p.rx0_ns[mr] - zr) / 1e9, (p.tx0_ns[mr] - p.rx0_ns[mr]).astype(float),
                         -np.inf)
        theta, delta, margin, at_limit = max_margin(ux, uy, lx, ly)
        gone = is_short[k * ne:(k + 1) * ne]
        if drop_short:  # an edge whose few pure pairs leave the drift unbounded is left out as well
            gone = gone | at_limit
        theta, delta, margin = (np.where(gone, np.nan, v) for v in (theta, delta, margin))
        at_limit = at_limit & ~gone
        if at_limit.any():
            j = int(np.flatnonzero(at_limit)[0])
            raise EstimateInputError(
                f"probes: edge {p.hosts[e.a[j]]}-{p.hosts[e.b[j]]} in window {k}: the probes imply a drift between "
                f"the two clocks of ±{_FIT_LIMIT_NS_PER_S / 1e3:g} ppm or more; allowed: each clock within "
                f"±{MAX_DRIFT_PPM:g} ppm (are tx_ns and rx_ns in ns, and do both directions' probes spread over "
                f"the window?)")
        fit = EdgeFit(theta, delta, margin, counts[k * ne:(k + 1) * ne], origin)
        if loop_tol_ns is not None:
            fit.misclosure_ns = miss = closures(len(p.hosts), e, fit, w.span_ns(k) / 2e9)
            r = np.flatnonzero(np.isfinite(miss) & (miss > loop_tol_ns))  # in no triangle (inf): kept, unchecked
            fit.drift_range = np.full(ne, np.nan)
            fit.drift_range[r] = drift_range(ux[r], uy[r], lx[r], ly[r], delta[r], margin[r], bound_ns / 2)
        fits.append(fit)
    return fits


# ---------------------------------------------------------------- the baselines' exchanges

def exchanges(p: Probes, e: Edges):
    """Two-step exchanges from the seq-0 probes: a probe X->Y (t1 on X, t2 on Y) and the first probe
    Y->X sent at or after t2 (t3 on Y, t4 on X). Returns per exchange: its edge, b's offset relative to
    a ((t2 - t1) + (t3 - t4)) / 2 signed for (a, b), the round trip (t4 - t1) - (t3 - t2), and its time on
    a's clock (the midpoint of a's two stamps)."""
    n = len(p.hosts)
    key = p.src.astype(np.int64) * n + p.dst
    rkey = p.dst.astype(np.int64) * n + p.src
    times = np.concatenate([p.tx0_ns, p.rx0_ns])
    _, rank = np.unique(times, return_inverse=True)
    rank_tx, rank_rx = rank[:len(key)], rank[len(key):]
    span = int(rank.max()) + 2
    cand = key * span + rank_tx            # candidates for the reply, keyed by their own direction
    order = np.argsort(cand, kind="stable")
    sorted_cand = cand[order]
    pos = np.searchsorted(sorted_cand, rkey * span + rank_rx, side="left")
    ok = pos < len(order)
    pos = np.where(ok, pos, 0)
    j = order[pos]
    ok &= key[j] == rkey
    i = np.flatnonzero(ok)
    j = j[ok]
    t1, t2, t3, t4 = p.tx0_ns[i], p.rx0_ns[i], p.tx0_ns[j], p.rx0_ns[j]
    off = ((t2 - t1) + (t3 - t4)) / 2.0
    rtt = ((t4 - t1) - (t3 - t2)).astype(np.float64)
    fwd = e.forward[i]
    off = np.where(fwd, off, -off)
    t_a = np.where(fwd, (t1 + t4) / 2.0, (t2 + t3) / 2.0)
    return e.of_pair[i], off, rtt, t_a, i


def baseline_edges(p: Probes, w: Windows, e: Edges, method: str, coarse_ns: np.ndarray) -> list[EdgeFit]:
    edge, off, rtt, t_a, first = exchanges(p, e)
    win = w.of_pair[first]
    ne = e.count
    origin = coarse_ns[e.a]
    fits = []
    for k in range(w.count):
        m = win == k
        ek, ok_, rk = edge[m], off[m], rtt[m]
        xk = (t_a[m] - w.mid_ns(k) - origin[ek]) / 1e9
        missing = np.setdiff1d(np.arange(ne), ek)
        if missing.size:
            j = int(missing[0])
            raise EstimateInputError(f"probes: edge {p.hosts[e.a[j]]}-{p.hosts[e.b[j]]} in window {k} holds no "
                                     f"exchange (a probe and a probe back after it) for the {method} baseline")
        theta, delta, spread = (_ntp_lines if method == "ntp" else _ptp_lines)(ek, xk, ok_, rk, ne)
        fits.append(EdgeFit(theta, delta, spread, np.zeros((ne, 4), dtype=np.int64), origin))
    return fits


def _ntp_lines(edge, x, off, rtt, ne):
    """NTP-style: in each half of the window the exchange of least round trip; the line through the two
    halves' samples (one sample, drift 0, when a half has none). Spread: the larger half's RTT / 2."""
    theta, delta, spread = np.zeros(ne), np.zeros(ne), np.zeros(ne)
    picks = []
    for half in (x < 0, x >= 0):
        idx = np.flatnonzero(half)
        order = np.lexsort((rtt[idx], edge[idx]))
        idx = idx[order]
        first = np.ones(len(idx), dtype=bool)
        first[1:] = edge[idx][1:] != edge[idx][:-1]
        best = np.full(ne, -1)
        best[edge[idx[first]]] = idx[first]
        picks.append(best)
    b1, b2 = picks
    both = (b1 >= 0) & (b2 >= 0)
    one = np.where(b1 >= 0, b1, b2)
    theta[:] = off[one]
    spread[:] = rtt[one] / 2
    i1, i2 = b1[both], b2[both]
    d = (off[i2] - off[i1]) / (x[i2] - x[i1])
    delta[both] = d
    theta[both] = off[i1] - d * x[i1]
    spread[both] = np.maximum(rtt[i1], rtt[i2]) / 2
    return theta, delta, spread


def _ptp_lines(edge, x, off, rtt, ne):
    """PTP-style: every exchange, averaged by a least-squares line per edge (the mean corrected for drift).
    Spread: the intercept's standard error (residual spread / sqrt(n))."""
    cnt = np.bincount(edge, minlength=ne).astype(np.float64)
    xm = np.bincount(edge, x, ne) / cnt
    ym = np.bincount(edge, off, ne) / cnt
    dx = x - xm[edge]
    sxx = np.bincount(edge, dx * dx, ne)
    slope = np.where(sxx > 0, np.bincount(edge, dx * (off - ym[edge]), ne) / np.where(sxx > 0, sxx, 1), 0.0)
    theta = ym - slope * xm
    res = off - theta[edge] - slope[edge] * x
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(np.bincount(edge, res * res, ne) / np.maximum(cnt - 2, 1))
        se = sd * np.sqrt(1.0 / cnt + xm * xm / np.where(sxx > 0, sxx, np.inf))
    return theta, slope, se


def along_tree(n: int, e: Edges, fit: EdgeFit, reference: Optional[int], edge_sd: np.ndarray, add_linear: bool):
    """Without the network effect: each host's offset and rate are the edges' estimates added along a
    breadth-first tree from the reference (each edge converted to the reference's time exactly, as in
    ``network_effect``). The uncertainty adds ``edge_sd`` along the path: linearly (bounds) or in
    quadrature (standard errors)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import breadth_first_order

    r = 0 if reference is None else reference
    idx = np.arange(e.count)
    g = coo_matrix((idx + 1.0, (e.a, e.b)), shape=(n, n)).tocsr()
    g = (g + g.T).tocsr()
    order, pred = breadth_first_order(g, r, directed=False, return_predecessors=True)
    theta, rate, unc, unc_rate = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    for h in order[1:]:
        q = pred[h]
        j = int(g[q, h]) - 1
        th, de, o = fit.theta_ns[j], fit.delta_ns_per_s[j], fit.origin_ns[j]
        if e.a[j] == q:   # the edge is (q, h): on q's clock
            theta[h] = theta[q] + th + de * (theta[q] - o) / 1e9
            rate[h] = rate[q] + de * (1 + rate[q] / 1e9)
        else:             # the edge is (h, q): on h's clock
            theta[h] = (theta[q] - th + de * o / 1e9) / (1 + de / 1e9)
            rate[h] = (rate[q] - de) / (1 + de / 1e9)
        sd = edge_sd[j]
        unc[h] = unc[q] + sd if add_linear else np.hypot(unc[q], sd)
        unc_rate[h] = np.nan
    if reference is None:
        theta -= theta.mean()
        rate -= rate.mean()
    return theta, rate, unc, unc_rate


# ---------------------------------------------------------------- the whole estimate

@dataclass
class Estimate:
    clocks: pa.Table
    edges: pa.Table
    score: Optional[list[dict]] = None


def reference_index(hosts: Sequence[str], reference: Optional[str]) -> Optional[int]:
    """None for the ensemble mean; the host's index otherwise (default: the first host in sorted order)."""
    if reference is None:
        return 0
    if reference == "mean":
        return None
    if reference not in hosts:
        shown = ", ".join(hosts[:5]) + (", ..." if len(hosts) > 5 else "")
        raise EstimateInputError(f"--reference: {reference!r} is not a host of the probe file ({shown}); give a "
                                 f"host name or 'mean' (the ensemble mean)")
    return list(hosts).index(reference)


def estimate(p: Probes, methods: Sequence[str] = ("huygens",), window_s: float = DEFAULT_WINDOW_S,
             pure_bound_ns: float = DEFAULT_PURE_BOUND_NS, reference: Optional[str] = None,
             drop_short_edges: bool = False, min_pure: int = 2, robust: bool = False,
             loop_check: bool = False) -> Estimate:
    """Every host's offset (ns) and drift (ppm) against the reference, per window and method.

    ``drop_short_edges``: an edge with fewer than two pure pairs each way in a window is left out of that
    window's Huygens estimates (both variants) instead of refusing the file, as long as the edges kept still
    connect every host to the reference (refused otherwise, naming a cut-off host). Under heavy load few
    pairs stay pure; the loops through the other edges then carry the estimate (docs/clockwork.md).
    ``robust``: Huygens' network effect by iteratively reweighted least squares (``robust_graph``) over every
    edge, so that a few edges whose loops do not close do not pull the others. The clocks table counts each
    host's edges that agree with the solution (``agreeing``; ``agreeing_edges``, below 2: ``unconfirmed_hosts``).
    ``loop_check`` (with ``robust``; off by default): a second start from the edges that pass the loop check
    (``loop_check``: a triangle through the edge closes within LOOP_TOLERANCE_BOUNDS purity bounds; hosts cut
    off linked again by their best-pinned edges), keeping the solution more edges agree with; the edges table
    then gives each edge's least misclosure (``loop_misclosure_ns``; inf in no triangle, nan without the
    check). It mends a minority of tilted edges but fails where most edges fail it (docs/clockwork.md, "The
    loop check")."""
    if loop_check and not robust:
        raise EstimateInputError("--loop-check: needs --robust (it is a start of the robust network effect)")
    for m in methods:
        if m not in METHODS:
            raise EstimateInputError(f"--method: {m!r} is not a method; allowed: {', '.join(METHODS)} or all")
    n = len(p.hosts)
    ref = reference_index(p.hosts, reference)
    ref_name = "mean" if ref is None else p.hosts[ref]
    check_true_drift(p)
    e = edges(p)
    check_connected(p.hosts, e, 0 if ref is None else ref)
    coarse = coarse_offsets(p, e, ref)
    w = windows(p, window_s, coarse)
    is_pure = pure(p, pure_bound_ns)
    rows: dict[str, list] = {c: [] for c in ("window", "window_mid_ns", "host", "method", "reference", "offset_ns",
                                             "drift_ppm", "offset_uncertainty_ns", "drift_uncertainty_ppm",
                                             "agreeing_edges")}
    erows: dict[str, list] = {c: [] for c in ("window", "window_mid_ns", "method", "a", "b", "a_clock_ns", "offset_ns",
                                              "drift_ppm", "spread_ns", "pure_ab", "pure_ba", "pairs_ab", "pairs_ba",
                                              "loop_misclosure_ns")}
    hosts = np.array(p.hosts, dtype=object)
    runs_huygens = any(m.startswith("huygens") for m in methods)
    tol_ns = LOOP_TOLERANCE_BOUNDS * pure_bound_ns
    huy = huygens_edges(p, w, e, is_pure, pure_bound_ns, coarse, drop_short_edges, min_pure,
                        tol_ns if robust and loop_check else None) if runs_huygens else None
    checks = {}  # window -> the edges the robust network effect's loop check keeps
    if robust and "huygens" in methods:
        for k, fit in enumerate(huy):
            if np.isnan(fit.theta_ns).any():  # drop_short_edges left some out: refused if those cut a host off
                check_connected(p.hosts, _kept(e, fit, np.isfinite(fit.theta_ns))[0], 0 if ref is None else ref,
                                f" in window {k} (edges with fewer than two pure pairs each way left out)")
            finite = np.isfinite(fit.theta_ns)
            checks[k] = loop_check_edges(n, e, fit, ref, tol_ns, fit.misclosure_ns, fit.drift_range) \
                if loop_check else finite
    graphs: dict[bytes, Graph] = {}  # per set of edges: windows with the same edges share one factorisation

    def graph_over(edges_kept: Edges, mask: np.ndarray) -> Graph:
        key = np.packbits(mask).tobytes()
        if key not in graphs:
            graphs[key] = Graph(n, edges_kept, ref)
        return graphs[key]

    huygens_edges_from = next((m for m in methods if m.startswith("huygens")), None)
    for m in methods:
        fits = huy if m.startswith("huygens") else baseline_edges(p, w, e, m, coarse)
        for k, fit in enumerate(fits):
            mid = round(float(w.mid_ns(k)))
            ek, fk, gk = e, fit, None
            agree = None
            if m == "huygens" and robust:
                # Two starts: least absolute deviations over every edge, and the edges the loop check kept
                # (connected: checked above); the solution more edges agree with is kept (on a tie the second:
                # it carries the relinking's choice by drift range, where loops cannot tell).
                best, finite = None, np.isfinite(fit.theta_ns)
                starts = (finite,) if np.array_equal(checks[k], finite) else (finite, checks[k])  # the same: once
                for mask in starts:
                    ek, fk = _kept(e, fit, mask)
                    sol = network_effect(robust_graph(graph_over(ek, mask), fk, pure_bound_ns / 2), fk)
                    ok = agreeing(e, fit, sol[0], sol[1], w.span_ns(k) / 2e9, tol_ns)
                    if best is None or ok.sum() >= best[1].sum():
                        best = sol, ok
                (theta, rate, u_theta, u_rate), ok = best
                agree = np.bincount(e.a[ok], minlength=n) + np.bincount(e.b[ok], minlength=n)
            elif m.startswith("huygens"):
                finite = np.isfinite(fit.theta_ns)
                if not finite.all():  # drop_short_edges left some out
                    ek, fk = _kept(e, fit, finite)
                    check_connected(p.hosts, ek, 0 if ref is None else ref, f" in window {k} (edges with fewer "
                                    f"than two pure pairs each way left out)")
                gk = graph_over(ek, finite)
            if m == "huygens":
                if agree is None:  # (the robust solution is in hand)
                    theta, rate, u_theta, u_rate = network_effect(gk, fk)
            else:
                if m == "huygens-no-ne":
                    _, sigma = gk.solve(fk.theta_ns)  # the loops' residual spread, per edge
                    sd = np.full(ek.count, sigma)
                else:
                    sd = fk.spread_ns
                theta, rate, u_theta, u_rate = along_tree(n, ek, fk, ref, sd, add_linear=(m == "ntp"))
            rows["window"].append(np.full(n, k))
            rows["window_mid_ns"].append(np.full(n, mid))
            rows["host"].append(hosts)
            rows["method"].append(np.full(n, m, dtype=object))
            rows["reference"].append(np.full(n, ref_name, dtype=object))
            rows["offset_ns"].append(theta)
            rows["drift_ppm"].append(rate / 1e3)
            rows["offset_uncertainty_ns"].append(u_theta)
            rows["drift_uncertainty_ppm"].append(u_rate / 1e3)
            rows["agreeing_edges"].append(np.full(n, None, dtype=object) if agree is None else agree)
            if m in ("ntp", "ptp") or m == huygens_edges_from:  # Huygens' raw edges once for both variants
                ne = e.count
                erows["window"].append(np.full(ne, k))
                erows["window_mid_ns"].append(np.full(ne, mid))
                erows["method"].append(np.full(ne, "huygens" if m.startswith("huygens") else m, dtype=object))
                erows["a"].append(hosts[e.a])
                erows["b"].append(hosts[e.b])
                erows["a_clock_ns"].append(w.mid_ns(k) + fit.origin_ns)
                erows["offset_ns"].append(fit.theta_ns)
                erows["drift_ppm"].append(fit.delta_ns_per_s / 1e3)
                erows["spread_ns"].append(fit.spread_ns)
                for c, name in enumerate(("pure_ab", "pure_ba", "pairs_ab", "pairs_ba")):
                    erows[name].append(fit.counts[:, c])
                erows["loop_misclosure_ns"].append(fit.misclosure_ns if m.startswith("huygens") and
                                                   fit.misclosure_ns is not None else np.full(ne, np.nan))
    clocks = _table(rows, {"window": pa.uint32(), "window_mid_ns": pa.int64(), "host": pa.string(),
                           "method": pa.string(), "reference": pa.string(), "offset_ns": pa.float64(),
                           "drift_ppm": pa.float64(), "offset_uncertainty_ns": pa.float64(),
                           "drift_uncertainty_ppm": pa.float64(), "agreeing_edges": pa.uint32()})
    edge_table = _table(erows, {"window": pa.uint32(), "window_mid_ns": pa.int64(), "method": pa.string(),
                                "a": pa.string(), "b": pa.string(), "a_clock_ns": pa.float64(),
                                "offset_ns": pa.float64(), "drift_ppm": pa.float64(), "spread_ns": pa.float64(),
                                "pure_ab": pa.int64(),
                                "pure_ba": pa.int64(), "pairs_ab": pa.int64(), "pairs_ba": pa.int64(),
                                "loop_misclosure_ns": pa.float64()})
    out = Estimate(clocks, edge_table)
    if p.has_truth:
        out.clocks, out.score = _scored(p, w, ref, out.clocks)
    return out


def unconfirmed_hosts(clocks: pa.Table) -> list[str]:
    """The hosts whose robust estimate fewer than two of their edges agree with, in any window
    (``agreeing_edges`` below 2: the estimate rests on one edge, or none), in sorted order."""
    counts = clocks.column("agreeing_edges").to_pylist()
    return sorted({h for h, c in zip(clocks.column("host").to_pylist(), counts) if c is not None and c < 2})


def _table(rows: dict, types: dict) -> pa.Table:
    cols = {c: (np.concatenate(v) if v else np.zeros(0)) for c, v in rows.items()}
    return pa.table({c: pa.array(cols[c], types[c]) for c in types})


# ---------------------------------------------------------------- the score against true time

def true_offsets(p: Probes, w: Windows, ref: Optional[int], near_ns: float = 50e6) -> np.ndarray:
    """(windows, hosts): each host's true offset against the reference at the instant the reference's
    clock reads the window's middle, from the rows' stamps and true times.

    A stamp's clock error (stamp - true time) is the clock's plus the stamp's noise. Per host and window,
    a least-squares line of it against true time locates the instant (on the reference's line, or the
    hosts' mean line, by fixed-point iteration). The clock is then read near that instant only, within
    ``near_ns`` (50 ms), so that a wandering drift (a curved clock) is read where it is: the slope is the
    least-squares one of those stamps, and the level the mean of two medians, of the send stamps' and of
    the receive stamps' errors about that slope. Medians shrug off a heavy tail, and noise that makes send
    stamps early and receive stamps late by mirror-image amounts cancels between the two. A host with
    fewer than two stamps of each kind there keeps its window's line."""
    n = len(p.hosts)
    m = len(p.src)
    h = np.concatenate([p.src, p.src, p.dst, p.dst]).astype(np.int64)
    k = np.tile(w.of_pair, 4)
    t = np.concatenate([p.true_tx0_ps, p.true_tx1_ps, p.true_rx0_ps, p.true_rx1_ps]) / 1000.0
    c = np.concatenate([p.tx0_ns, p.tx1_ns, p.rx0_ns, p.rx1_ns]) - t
    is_tx = np.arange(4 * m) < 2 * m
    tt = t - w.mid_ns(k)   # centred per window for precision
    group = k * n + h
    size = w.count * n
    a, b = (x.reshape(w.count, n) for x in _lines(group, tt, c, size))
    instant, _ = _at_instant(a, b, ref)
    near = np.abs(tt - instant[k]) <= near_ns
    g, tn, cn, txn = group[near], tt[near], c[near], is_tx[near]
    _, slope = _lines(g, tn, cn, size)
    resid = cn - slope[g] * tn
    level = (_medians(g[txn], resid[txn], size) + _medians(g[~txn], resid[~txn], size)) / 2
    enough = ((np.bincount(g[txn], minlength=size) >= 2) & (np.bincount(g[~txn], minlength=size) >= 2))
    a2, b2 = level.reshape(w.count, n), slope.reshape(w.count, n)
    enough = enough.reshape(w.count, n)
    _, out = _at_instant(np.where(enough, a2, a), np.where(enough, b2, b), ref)
    return out


def _medians(group: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """The median of ``values`` per group (nan for an empty group)."""
    order = np.lexsort((values, group))
    g, v = group[order], values[order]
    cnt = np.bincount(g, minlength=size)
    start = np.concatenate([[0], np.cumsum(cnt)[:-1]])
    out = np.full(size, np.nan)
    has = cnt > 0
    lo = start[has] + (cnt[has] - 1) // 2
    hi = start[has] + cnt[has] // 2
    out[has] = (v[lo] + v[hi]) / 2
    return out


def _at_instant(a: np.ndarray, b: np.ndarray, ref: Optional[int]) -> tuple[np.ndarray, np.ndarray]:
    """From per (window, host) lines err = a + b * t of clock error against true time t (ns from the
    window's middle): the instant the reference reads the middle (err_ref(t) = -t), and every host's
    offset against the reference there."""
    rel = np.zeros(a.shape[0])
    for _ in range(6):
        err = a + b * rel[:, None]
        rel = -(err.mean(axis=1) if ref is None else err[:, ref])
    err = a + b * rel[:, None]
    return rel, err - (err.mean(axis=1, keepdims=True) if ref is None else err[:, ref:ref + 1])


def _scored(p: Probes, w: Windows, ref: Optional[int], clocks: pa.Table):
    truth = true_offsets(p, w, ref)
    hosts = {h: i for i, h in enumerate(p.hosts)}
    hi = np.array([hosts[h] for h in clocks.column("host").to_pylist()])
    k = clocks.column("window").to_numpy().astype(np.int64)
    true = truth[k, hi]
    err = clocks.column("offset_ns").to_numpy() - true
    clocks = clocks.append_column("true_offset_ns", pa.array(true)).append_column("error_ns", pa.array(err))
    method = np.array(clocks.column("method").to_pylist(), dtype=object)
    counted = np.ones(len(err), dtype=bool) if ref is None else hi != ref
    score = []
    for m in dict.fromkeys(method):
        e = np.abs(err[(method == m) & counted])
        score.append({"method": m, "samples": int(e.size), "p50_abs_error_ns": float(np.percentile(e, 50)),
                      "p99_abs_error_ns": float(np.percentile(e, 99)), "max_abs_error_ns": float(e.max())})
    return clocks, score

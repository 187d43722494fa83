"""Huygens' step 3, the network effect (docs/clockwork.md, "Step 3"): the
probe graph's least squares over the edges' estimates, and its robust form
for loaded fabrics (reweighted least squares; a loop check that leaves out
edges whose loops do not close, as a second start; agreement to choose). ``estimate.py`` runs steps 1 and 2 and
calls these per window. Edges and their fits are estimate.py's ``Edges`` and
``EdgeFit`` (not imported here: estimate.py imports this module)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

# An edge passes the loop check when a triangle through it closes within this many purity bounds.
LOOP_TOLERANCE_BOUNDS = 2.0


class Graph:
    """The probe graph's least squares: min over theta of sum_e (v_e - (theta_b - theta_a))^2 with the
    reference's theta fixed at 0; the reduced Laplacian is factored once (Cholesky) since every window
    has the same edges. For the ensemble mean as reference, the solution is shifted to mean 0 (least
    squares fixes theta only up to a constant)."""

    def __init__(self, n: int, e: Any, reference: Optional[int], weights: Optional[np.ndarray] = None):
        from scipy.linalg import cho_factor, cho_solve

        self.n, self.e, self.reference = n, e, reference
        w = np.ones(e.count) if weights is None else np.asarray(weights, dtype=np.float64)
        self.w = w
        r = 0 if reference is None else reference
        lap = np.zeros((n, n))
        np.add.at(lap, (e.a, e.a), w)
        np.add.at(lap, (e.b, e.b), w)
        np.add.at(lap, (e.a, e.b), -w)
        np.add.at(lap, (e.b, e.a), -w)
        self.keep = np.delete(np.arange(n), r)
        self._factor = cho_factor(lap[np.ix_(self.keep, self.keep)])
        inv = np.zeros((n, n))
        inv[np.ix_(self.keep, self.keep)] = cho_solve(self._factor, np.eye(n - 1))
        if reference is None:  # the covariance's shape for a mean-zero solution: the Laplacian's pseudo-inverse
            row = inv.sum(axis=1)
            self.var_shape = np.diag(inv) - 2 * row / n + inv.sum() / n ** 2
        else:
            self.var_shape = np.diag(inv)
        self.dof = e.count - (n - 1)

    def solve(self, v: np.ndarray) -> tuple[np.ndarray, float]:
        """The least-squares potentials and the residuals' rms per degree of freedom (nan on a tree)."""
        from scipy.linalg import cho_solve

        rhs = np.zeros(self.n)
        np.add.at(rhs, self.e.b, self.w * v)
        np.add.at(rhs, self.e.a, -self.w * v)
        theta = np.zeros(self.n)
        theta[self.keep] = cho_solve(self._factor, rhs[self.keep])
        if self.reference is None:
            theta -= theta.mean()
        res = v - (theta[self.e.b] - theta[self.e.a])
        sigma = float(np.sqrt((self.w * res) @ res / self.w.mean() / self.dof)) if self.dof > 0 else float("nan")
        return theta, sigma


def network_effect(g: Graph, fit: Any, passes: int = 8):
    """Offsets (ns) and rates (ns/s) of every host against the reference at the instant the reference reads
    the window's middle, with their standard errors. An edge's line is on a's clock, x = 0 where it reads
    the middle plus origin_e; a reads the middle plus theta_a at that instant, so the edge's value there is
    theta_e + delta_e * (theta_a - origin_e), and its rate against the reference's clock delta_e *
    (1 + rate_a). Both need the solution, so the solve starts from the coarse offsets and is repeated until
    it moves by under 1e-6 ns (each pass shrinks the change by about |delta| ~ 1e-5)."""
    e = g.e
    theta = np.zeros(g.n)
    theta[e.a] = fit.origin_ns
    rate = np.zeros(g.n)
    for _ in range(passes):
        v = fit.theta_ns + fit.delta_ns_per_s * (theta[e.a] - fit.origin_ns) / 1e9
        r = fit.delta_ns_per_s * (1 + rate[e.a] / 1e9)
        new_theta, s_theta = g.solve(v)
        new_rate, s_rate = g.solve(r)
        moved = max(np.max(np.abs(new_theta - theta)), np.max(np.abs(new_rate - rate)))
        theta, rate = new_theta, new_rate
        if moved < 1e-6:
            break
    sd = np.sqrt(g.var_shape)
    return theta, rate, s_theta * sd, s_rate * sd


ROBUST_PASSES = 30
TUKEY_C = 4.685  # Tukey's biweight constant (95 % efficiency under Gaussian residuals)


def robust_graph(g: Graph, fit: Any, floor_ns: float) -> Graph:
    """The network effect made robust to a few bad edges. Least squares spreads an edge's error around
    every loop through it: an edge whose bounds are set by queued probes (under heavy load a direction
    may keep no pair near its base delay in a window) is wrong by up to microseconds and pulls every host
    near it. Two stages of iteratively reweighted least squares (an MM-estimate):

    1. Least absolute deviations (min over theta of sum_e |v_e - (theta_b - theta_a)|; each edge weighted
       by 1 / max(|residual|, ``floor_ns``), the stamps' own spread). It ignores the wrong edges as long
       as, across every cut of the probe graph, they are fewer than half; its residuals then show them.
    2. From there, Tukey's biweight: weight (1 - u^2)^2 with u the residual over 4.685 robust sigmas
       (1.4826 x the median absolute residual, at least ``floor_ns``), 0 beyond, so that the wrong edges
       drop out entirely and the rest count as in least squares. An edge keeps a token weight 1e-6 when
       the edges kept would not connect every host.

    Returns the reweighted graph."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    e, n = g.e, g.n

    def residuals(graph):
        theta, _ = graph.solve(fit.theta_ns)
        return fit.theta_ns - (theta[e.b] - theta[e.a])

    cur, w = g, np.ones(e.count)
    for stage in ("lad", "biweight"):
        for _ in range(ROBUST_PASSES):
            res = residuals(cur)
            if stage == "lad":
                new = 1.0 / np.maximum(np.abs(res), floor_ns)
                new /= new.max()
            else:
                scale = max(1.4826 * float(np.median(np.abs(res))), floor_ns)
                u = res / (TUKEY_C * scale)
                new = np.where(np.abs(u) < 1, (1 - u * u) ** 2, 0.0)
                kept = new > 0
                lab = connected_components(coo_matrix((np.ones(int(kept.sum())), (e.a[kept], e.b[kept])),
                                                      shape=(n, n)), directed=False)[1]
                if np.any(lab != lab[0]):
                    new = np.maximum(new, 1e-6)
            if np.allclose(new, w, rtol=1e-3, atol=1e-6):
                break
            w = new
            cur = Graph(n, e, g.reference, w)
    return cur




def closures(n: int, e: Any, fit: Any, half_span_s: float) -> np.ndarray:
    """Per edge (a, b), the least misclosure over the triangles a-b-c through it, ns: the loop's offsets
    theta_ab + theta_bc + theta_ca and rates likewise must sum to zero; the misclosure is the largest
    amount the three lines miss that by anywhere in the window, |offsets' sum| + |rates' sum| x half the
    window's span. inf for an edge in no triangle (or without an estimate)."""
    ok = np.isfinite(fit.theta_ns)
    a, b = e.a[ok], e.b[ok]
    th, de = np.zeros((n, n)), np.zeros((n, n))
    th[a, b], th[b, a] = fit.theta_ns[ok], -fit.theta_ns[ok]
    de[a, b], de[b, a] = fit.delta_ns_per_s[ok], -fit.delta_ns_per_s[ok]
    has = np.zeros((n, n), dtype=bool)
    has[a, b] = has[b, a] = True
    out = np.full(e.count, np.inf)
    rows = np.flatnonzero(ok)
    step = max(1, 4_000_000 // max(n, 1))
    for s in range(0, rows.size, step):
        j = rows[s:s + step]
        ea, eb = e.a[j], e.b[j]
        miss = (np.abs(fit.theta_ns[j, None] + th[eb] - th[ea])
                + np.abs(fit.delta_ns_per_s[j, None] + de[eb] - de[ea]) * half_span_s)
        out[j] = np.where(has[ea] & has[eb], miss, np.inf).min(axis=1)
    return out


def loop_check(n: int, e: Any, fit: Any, reference: Optional[int], tol_ns: float, miss: np.ndarray,
               drift_range: Optional[np.ndarray] = None) -> np.ndarray:
    """Which edges the robust network effect keeps. Under a standing queue a direction's pure pairs can all
    wait but one; the max-margin line then tilts between the two directions' queueing (an edge hundreds of
    ppm and microseconds off) and, where such edges are half of a host's, reweighting cannot tell them from
    the good ones. Huygens' premise is that loops close: an edge is kept when some triangle through it
    closes within ``tol_ns`` (``miss``: ``closures``), or when it lies in no triangle (nothing to check it by). Hosts
    the kept edges no longer link to the reference are linked again by the left-out edges whose drift the
    fit pins best (narrowest ``drift_range``; else least misclosure), one at a time, as in Kruskal's
    spanning tree. Returns the kept edges."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    finite = np.isfinite(fit.theta_ns)
    keep = finite & ((miss <= tol_ns) | np.isinf(miss))
    _, label = connected_components(coo_matrix((np.ones(int(keep.sum())), (e.a[keep], e.b[keep])), shape=(n, n)),
                                    directed=False)
    order = np.lexsort((np.arange(e.count), miss, miss if drift_range is None else drift_range))
    for j in order:
        if not finite[j] or keep[j] or label[e.a[j]] == label[e.b[j]]:
            continue
        keep[j] = True
        label[label == label[e.b[j]]] = label[e.a[j]]
    return keep


def agreeing(e: Any, fit: Any, theta: np.ndarray, rate: np.ndarray, half_span_s: float, tol_ns: float) -> np.ndarray:
    """Per edge, whether its line agrees with a solution (offsets ``theta``, rates ``rate`` against the
    reference, as ``network_effect`` returns them): the two lines part by at most ``tol_ns`` anywhere in the
    window (|offset difference| + |rate difference| x half the window's span). False without an estimate."""
    v = fit.theta_ns + fit.delta_ns_per_s * (theta[e.a] - fit.origin_ns) / 1e9
    r = fit.delta_ns_per_s * (1 + rate[e.a] / 1e9)
    with np.errstate(invalid="ignore"):
        miss = np.abs(v - (theta[e.b] - theta[e.a])) + np.abs(r - (rate[e.b] - rate[e.a])) * half_span_s
        return miss <= tol_ns

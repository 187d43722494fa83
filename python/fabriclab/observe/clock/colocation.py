"""VM colocation from clock estimates and probe delays (docs/clockwork.md,
"The cloud model and VM colocation", "The detector").

VMs of one physical machine read one oscillator: the same drift and the
same wander, their offsets apart by a constant. So, per pair of VMs (a, b),
over the windows of ``clocks.parquet`` (the estimator's output):

- their drift difference is zero in every window, and
- their offset difference (both read at the same instant, the window's
  middle) is the same in every window: any difference of rates, constant or
  wandering, moves it (Kohno et al.'s skew fingerprint, read through the
  offsets it accumulates).

Both are tested together by one chi-square statistic, each term scaled by
the estimates' uncertainty (with a floor, since the estimator's is a lower
bound):

    X = sum_w (d_w - mean d)^2 / var_o,w + sum_w (delta drift_w)^2 / var_d,w

with 2W - 1 degrees of freedom. ``p_same`` = P(chi2 >= X): how likely so
large a mismatch is under "one oscillator". Groups are cut from a
complete-linkage clustering on X / dof, so every pair inside a group passes.

The second signal is the sender-side queueing delay (the patent's delay
signal): VMs behind one hypervisor queue see the same queueing when they
send. Each probe's one-way delay is read on the estimated clocks, less the
least of its (src, dst); per sender and time bin, the least of those excesses
(what all its destinations share: its own side); per pair of senders, the
Pearson correlation of the two series over the bins both have. A pair whose
delays correlate (at least ``corr_min``) has its distance divided by
``corr_boost``: it tips pairs near the threshold, it cannot make a pair of
clearly different clocks one machine."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa

from ...errors import InputError
from .probes import Probes

REQUIRED = ("window", "window_mid_ns", "host", "offset_ns", "drift_ppm")
# Floors of the estimates' uncertainty (the estimator's own is a lower bound:
# docs/clockwork.md). Chosen on calibration seeds of the benchmark, not on the
# scored ones (docs/reproductions.md).
OFFSET_FLOOR_NS = 3.0
DRIFT_FLOOR_PPM = 0.05
# Significance of the test "one oscillator".
ALPHA = 1e-4
CORR_MIN = 0.6
CORR_BOOST = 4.0
BIN_NS = 1_000_000
MIN_BINS = 10


class ColocationInputError(InputError):
    pass


@dataclass
class Colocation:
    """The detector's answer: ``groups`` (group, host, size, confidence; every
    host once) and ``pairs`` (a, b, windows, chi2, dof, p_same, delay_corr,
    distance, same)."""

    groups: pa.Table
    pairs: pa.Table

    def group_sets(self) -> list[set[str]]:
        g = self.groups.to_pydict()
        out: dict[int, set] = {}
        for k, h in zip(g["group"], g["host"]):
            out.setdefault(k, set()).add(h)
        return [out[k] for k in sorted(out)]


def read_clocks(path: Path) -> pa.Table:
    """clocks.parquet (``fabriclab clock estimate``), checked for the columns the detector reads."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise ColocationInputError(f"clocks: no such file: {path}")
    try:
        t = pq.read_table(str(path))
    except (pa.ArrowException, OSError) as e:
        raise ColocationInputError(f"clocks: {path} is not a readable Parquet file ({e})") from None
    return t


def _columns(t: pa.Table, method: str) -> pa.Table:
    missing = [c for c in REQUIRED if c not in t.column_names]
    if missing:
        raise ColocationInputError(f"clocks: missing column(s) {', '.join(missing)} (needs {', '.join(REQUIRED)}; "
                                   f"the output of `fabriclab clock estimate`)")
    if "method" in t.column_names:
        methods = sorted(set(t.column("method").to_pylist()))
        if method not in methods:
            raise ColocationInputError(f"--method: the clocks file holds {', '.join(methods)}, not {method!r}")
        import pyarrow.compute as pc

        t = t.filter(pc.equal(t.column("method"), method))
    if t.num_rows == 0:
        raise ColocationInputError("clocks: no rows")
    return t


def _grid(t: pa.Table):
    """(hosts, window ids, mids, offsets, drifts, offset sd, drift sd), arrays (W, n); NaN where missing."""
    hosts = sorted(set(t.column("host").to_pylist()))
    wins = sorted(set(t.column("window").to_pylist()))
    hi = {h: i for i, h in enumerate(hosts)}
    wi = {w: i for i, w in enumerate(wins)}
    W, n = len(wins), len(hosts)
    arr = {c: np.full((W, n), np.nan) for c in ("offset_ns", "drift_ppm", "offset_uncertainty_ns",
                                                  "drift_uncertainty_ppm")}
    mids = np.zeros(W)
    rows_w = [wi[w] for w in t.column("window").to_pylist()]
    rows_h = [hi[h] for h in t.column("host").to_pylist()]
    for c in arr:
        if c in t.column_names:
            arr[c][rows_w, rows_h] = t.column(c).to_numpy(zero_copy_only=False).astype(float)
    mids[rows_w] = t.column("window_mid_ns").to_numpy(zero_copy_only=False).astype(float)
    return hosts, wins, mids, arr


def offset_noise_ns(off: np.ndarray, mids: np.ndarray) -> float:
    """The noise of a pair's offset difference from window to window: the
    median over pairs of the RMS residual of a quadratic fit of the
    difference against time (a rate difference, and a wander, bend the
    series smoothly; the noise does not), scaled for the fit's three
    parameters. NaN with fewer than four windows."""
    W, n = off.shape
    if W < 4 or n < 2:
        return float("nan")
    i, j = np.triu_indices(n, 1)
    d = off[:, i] - off[:, j]
    x = (mids - mids.mean()) / max(np.ptp(mids), 1.0)
    basis = np.stack([np.ones(W), x, x * x], axis=1)
    coef, *_ = np.linalg.lstsq(basis, d, rcond=None)
    rms = np.sqrt(((d - basis @ coef) ** 2).sum(0) / (W - 3))
    return float(np.median(rms))


def pair_statistics(t: pa.Table, offset_floor_ns: float = OFFSET_FLOOR_NS,
                    drift_floor_ppm: float = DRIFT_FLOOR_PPM):
    """(hosts, X, dof, W, offset noise): the chi-square statistic of every
    pair (n x n), its degrees of freedom, the windows, and the noise of an
    offset difference used (ns)."""
    hosts, _, mids, a = _grid(t)
    off, dr = a["offset_ns"], a["drift_ppm"]
    if np.isnan(off).any() or np.isnan(dr).any():
        raise ColocationInputError("clocks: a host lacks an offset or a drift in some window (every host needs "
                                   "both in every window)")
    W = off.shape[0]
    noise = offset_noise_ns(off, mids)
    if np.isfinite(noise):
        # The pairs' own scatter: the estimator's per-host uncertainty (against the reference) holds errors
        # that two hosts share and that cancel in their difference.
        vo = np.full((W, len(hosts), len(hosts)), max(noise, offset_floor_ns) ** 2)
    else:
        uo = np.nan_to_num(a["offset_uncertainty_ns"], nan=0.0)
        vo = uo[:, :, None] ** 2 + uo[:, None, :] ** 2 + 2 * offset_floor_ns ** 2
    d = off[:, :, None] - off[:, None, :]
    mean = (d / vo).sum(0) / (1 / vo).sum(0)
    xo = ((d - mean) ** 2 / vo).sum(0)
    ud = np.nan_to_num(a["drift_uncertainty_ppm"], nan=0.0)
    vd = ud[:, :, None] ** 2 + ud[:, None, :] ** 2 + 2 * drift_floor_ppm ** 2
    xd = ((dr[:, :, None] - dr[:, None, :]) ** 2 / vd).sum(0)
    return hosts, xo + xd, 2 * W - 1, W, noise


def probe_delays(p: Probes, clocks: pa.Table, hosts: list[str]):
    """Every probe's one-way delay on the estimated clocks: rx - tx, each
    stamp moved by its host's offset at the probe's time (its window's
    offset and drift), and its excess over the least of its (src, dst).
    Returns (src, dst, t_ref_ns, owd_ns, excess_ns), hosts as indices into
    ``hosts`` (probes of other hosts are left out)."""
    names, _, mids, a = _grid(clocks)
    missing = sorted(set(hosts) - set(names))
    if missing:
        raise ColocationInputError(f"hosts: {missing[0]!r} has no clock estimate")
    col = [names.index(h) for h in hosts]
    n = len(hosts)
    pos = {h: i for i, h in enumerate(hosts)}
    idx = np.array([pos.get(h, -1) for h in p.hosts])
    src, dst = idx[p.src], idx[p.dst]
    keep = (src >= 0) & (dst >= 0)
    src, dst = src[keep], dst[keep]
    tx, rx = p.tx0_ns[keep].astype(float), p.rx0_ns[keep].astype(float)
    if tx.size == 0:
        empty = np.zeros(0)
        return src, dst, empty, empty, empty
    off, dr = a["offset_ns"][:, col], a["drift_ppm"][:, col]

    def clock_offset(h, t_ref):
        w = np.clip(np.searchsorted((mids[1:] + mids[:-1]) / 2, t_ref), 0, len(mids) - 1)
        return off[w, h] + dr[w, h] * 1e-6 * (t_ref - mids[w])

    t_ref = tx - off[0, src]
    owd = (rx - clock_offset(dst, t_ref)) - (tx - clock_offset(src, t_ref))
    key = src * n + dst
    base = np.full(n * n, np.inf)
    np.minimum.at(base, key, owd)
    return src, dst, t_ref, owd, owd - base[key]


def delay_correlation(p: Probes, clocks: pa.Table, hosts: list[str], bin_ns: int = BIN_NS,
                      min_bins: int = MIN_BINS) -> np.ndarray:
    """(n x n) Pearson correlation of the senders' queueing delay (NaN where
    fewer than ``min_bins`` common bins or no variation), hosts as ``hosts``."""
    n = len(hosts)
    corr = np.full((n, n), np.nan)
    src, _, t_ref, _, excess = probe_delays(p, clocks, hosts)
    if t_ref.size == 0:
        return corr
    b = ((t_ref - t_ref.min()) // bin_ns).astype(np.int64)
    nb = int(b.max()) + 1
    series = np.full(n * nb, np.inf)
    np.minimum.at(series, src * nb + b, excess)
    series = series.reshape(n, nb)
    series[np.isinf(series)] = np.nan
    for i in range(n):
        for j in range(i + 1, n):
            both = np.isfinite(series[i]) & np.isfinite(series[j])
            if both.sum() < min_bins:
                continue
            x, y = series[i, both], series[j, both]
            if x.std() == 0 or y.std() == 0:
                continue
            corr[i, j] = corr[j, i] = float(np.corrcoef(x, y)[0, 1])
    return corr


def detect(clocks: pa.Table, probes: Optional[Probes] = None, method: str = "huygens",
           offset_floor_ns: float = OFFSET_FLOOR_NS, drift_floor_ppm: float = DRIFT_FLOOR_PPM, alpha: float = ALPHA,
           corr_min: float = CORR_MIN, corr_boost: float = CORR_BOOST, bin_ns: int = BIN_NS,
           hosts: Optional[list[str]] = None) -> Colocation:
    """Groups of VMs sharing a machine. ``hosts``: only these (default: every
    host of the clocks table)."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform
    from scipy.stats import chi2

    if offset_floor_ns <= 0 or drift_floor_ppm <= 0:
        raise ColocationInputError("--offset-floor-ns, --drift-floor-ppm: must be positive")
    if not 0 < alpha < 1:
        raise ColocationInputError(f"--alpha: must be within (0, 1), got {alpha}")
    t = _columns(clocks, method)
    if hosts is not None:
        import pyarrow.compute as pc

        unknown = sorted(set(hosts) - set(t.column("host").to_pylist()))
        if unknown:
            raise ColocationInputError(f"--hosts: {unknown[0]!r} is not a host of the clocks file")
        t = t.filter(pc.is_in(t.column("host"), pa.array(hosts)))
    names, x, dof, W, _ = pair_statistics(t, offset_floor_ns, drift_floor_ppm)
    n = len(names)
    p_same = chi2.sf(x, dof)
    corr = delay_correlation(probes, t, names, bin_ns) if probes is not None else np.full((n, n), np.nan)
    dist = x / dof
    boosted = np.nan_to_num(corr, nan=-1.0) >= corr_min
    dist = np.where(boosted, dist / corr_boost, dist)
    np.fill_diagonal(dist, 0.0)
    cut = chi2.isf(alpha, dof) / dof
    if n > 1:
        labels = fcluster(linkage(squareform(dist, checks=False), method="complete"), t=cut, criterion="distance")
    else:
        labels = np.ones(1, dtype=int)
    # Groups numbered by their first host in sorted order.
    order = {}
    for lab in labels:
        order.setdefault(lab, len(order))
    group = np.array([order[lab] for lab in labels])
    same = group[:, None] == group[None, :]
    conf = np.zeros(n)
    for g in set(group.tolist()):
        m = np.flatnonzero(group == g)
        if len(m) > 1:
            inside = p_same[np.ix_(m, m)][~np.eye(len(m), dtype=bool)]
            conf[m] = inside.min()
        else:
            others = np.delete(p_same[m[0]], m[0])
            conf[m] = 1.0 - (others.max() if others.size else 0.0)
    size = np.bincount(group)[group]
    groups = pa.table({"group": pa.array(group, pa.uint32()), "host": pa.array(names, pa.string()),
                       "size": pa.array(size, pa.uint32()), "confidence": pa.array(conf, pa.float64())})
    iu = np.triu_indices(n, 1)
    pairs = pa.table({
        "a": pa.array([names[i] for i in iu[0]], pa.string()), "b": pa.array([names[j] for j in iu[1]], pa.string()),
        "windows": pa.array(np.full(len(iu[0]), W), pa.uint32()), "chi2": pa.array(x[iu], pa.float64()),
        "dof": pa.array(np.full(len(iu[0]), dof), pa.uint32()), "p_same": pa.array(p_same[iu], pa.float64()),
        "delay_corr": pa.array(corr[iu], pa.float64()), "distance": pa.array(dist[iu], pa.float64()),
        "same": pa.array(same[iu], pa.bool_())})
    return Colocation(groups, pairs)


def queue_sharing_groups(q_ns: np.ndarray, hosts: list[str], queued_ns: float = 1_000_000.0,
                         tolerance: float = 0.35) -> list[list[str]]:
    """Groups of hosts behind one queue, from load rounds (the cluster-in-a-box's
    selection; docs/clockwork-control.md, "Selection in the box"): ``q_ns[i, r]`` is
    host i's sender-side queueing in round r (the box splits each pair's
    median excess delay in the round into sender and receiver sides:
    systems/clockwork/box_select.py). Hosts behind one FIFO see the same queue at the same time, so two
    hosts are one group when, in every round, their queueing differs by at
    most ``tolerance`` of the larger (both below ``queued_ns`` counts as
    equal; a round missing either's value is left out), and both were queued (above ``queued_ns``) in at least one round:
    a queue that never built shows nothing. Complete linkage, so every pair
    inside a group passes. Every host once; groups in order of their first
    host."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    n = len(hosts)
    if n < 2:
        return [list(hosts)]
    q = np.asarray(q_ns, dtype=float)
    top = np.fmax(q[:, None, :], q[None, :, :])
    both = np.isfinite(q[:, None, :]) & np.isfinite(q[None, :, :])  # a round without a host's value: no evidence
    rel = np.where(both & (top > queued_ns), np.abs(q[:, None, :] - q[None, :, :]) / np.maximum(top, 1.0), 0.0)
    rel = rel.max(axis=2) if q.shape[1] else np.zeros((n, n))
    seen = (np.nan_to_num(q, nan=0.0) > queued_ns).any(axis=1)
    dist = np.where(seen[:, None] & seen[None, :], rel, 1.0 + tolerance)
    np.fill_diagonal(dist, 0.0)
    labels = fcluster(linkage(squareform(dist, checks=False), method="complete"), t=tolerance, criterion="distance")
    order: dict[int, int] = {}
    for lab in labels:
        order.setdefault(lab, len(order))
    out: list[list[str]] = [[] for _ in order]
    for h, lab in zip(hosts, labels):
        out[order[lab]].append(h)
    return out

"""The report's plots (matplotlib, Agg), each returned as PNG bytes."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from ..fmt import time_unit
from ...sim.results import BUCKETS

_STYLES = ("-", "--", ":", "-.")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    plt = _plt()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _cdf(ax, values: np.ndarray, **kw) -> None:
    """An empirical CDF as steps from 0 (a single value is a visible jump)."""
    v = np.sort(values)
    ax.step(np.concatenate([v[:1], v]), np.arange(0, len(v) + 1) / len(v), where="post", **kw)


def _series_by_bucket_and_class(flows: pd.DataFrame, column: str):
    """(label, linestyle index, colour index, finished values of ``column``)
    per size bucket (and class, when there are several)."""
    done = flows[flows["fct_ps"].notna() & flows[column].notna()]
    classes = sorted(done["class"].unique().tolist())
    for bi, (name, pred) in enumerate(BUCKETS):
        in_bucket = done[pred(done["size_bytes"])]
        for ci, c in enumerate(classes):
            d = in_bucket[in_bucket["class"] == c] if len(classes) > 1 else in_bucket
            if len(d):
                lbl = f"{name}{f' class {c}' if len(classes) > 1 else ''} ({len(d):,})"
                yield lbl, ci, bi, d[column].to_numpy(dtype=float)
            if len(classes) <= 1:
                break


def _cdf_figure(series, scale: float, xlabel: str, title: str, log: bool) -> bytes:
    """One CDF line per (bucket, class) series: colour by bucket, style by class."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    for lbl, ci, bi, v in series:
        _cdf(ax, v / scale, label=lbl, color=f"C{bi}", linestyle=_STYLES[ci % len(_STYLES)])
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CDF")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    return _png(fig)


def fct_cdf(flows: pd.DataFrame) -> bytes | None:
    series = list(_series_by_bucket_and_class(flows, "fct_ps"))
    if not series:
        return None
    unit, scale = time_unit(float(np.median(np.concatenate([s[3] for s in series]))))
    return _cdf_figure(series, scale, f"flow completion time ({unit})",
                       "FCT by flow size (small < 100 KB, large > 10 MB)", log=True)


def slowdown_cdf(flows: pd.DataFrame) -> bytes | None:
    series = list(_series_by_bucket_and_class(flows, "slowdown"))
    if not series:
        return None
    return _cdf_figure(series, 1.0, "slowdown (FCT / ideal FCT)", "slowdown by flow size",
                       log=all((v > 0).all() for *_, v in series))


def links_bar(links: pd.DataFrame) -> bytes | None:
    if not len(links):
        return None
    plt = _plt()
    d = links.sort_values("utilization", ascending=False, kind="stable").head(40)
    fig, ax = plt.subplots(figsize=(9, 3.5))
    ax.bar(range(len(d)), d["utilization"].to_numpy(dtype=float) * 100, color="tab:blue")
    ax.set_xticks(range(len(d)), [f"{a}→{b}" for a, b in zip(d.src_node, d.dst_node)], rotation=90, fontsize=6)
    ax.set_ylabel("utilization (%)")
    ax.set_title(f"busiest links (top {len(d)} of {len(links)})")
    fig.tight_layout()
    return _png(fig)


def _thin(t: np.ndarray, q: np.ndarray, bins: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """A long series thinned to ``bins`` points, each bin's maximum (peaks stay)."""
    if len(t) <= 2 * bins:
        return t, q
    edges = np.linspace(t[0], t[-1], bins + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
    qmax = np.full(bins, -np.inf)
    np.maximum.at(qmax, idx, q)
    keep = np.isfinite(qmax)
    return edges[:-1][keep], qmax[keep]


def queues(series: list[tuple[str, np.ndarray, np.ndarray, int, int]]) -> bytes:
    """Queue occupancy over time, one step line per (label, time_ps, bytes,
    port index: colour, band index: line style)."""
    plt = _plt()
    tmax = max((float(s[1].max()) for s in series if len(s[1])), default=0.0)
    unit, scale = time_unit(tmax)
    fig, ax = plt.subplots(figsize=(9, 4))
    for lbl, t, q, port, band in series:
        t, q = _thin(np.asarray(t, dtype=float), np.asarray(q, dtype=float))
        ax.step(t / scale, q / 1e3, where="post", label=lbl, color=f"C{port % 10}",
                linestyle=_STYLES[band % len(_STYLES)], linewidth=1)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("queue (KB)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("queue occupancy of the ports with the highest maximum queue")
    fig.tight_layout()
    return _png(fig)


def jobs(times: dict[str, np.ndarray]) -> bytes | None:
    """Iteration time (ms) per iteration, one line per job."""
    if not any(len(v) for v in times.values()):
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for name, v in times.items():
        ax.plot(np.arange(len(v)), v / 1e9, marker="o", label=name)
    ax.set_xlabel("iteration")
    ax.set_ylabel("iteration time (ms)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("training jobs: iteration times (slowest worker)")
    fig.tight_layout()
    return _png(fig)


def owd_matrix(owd: pd.DataFrame) -> bytes | None:
    """The one-way delays' excess (queueing) per connection: src x dst heatmaps of the median and the p99."""
    if not len(owd):
        return None
    plt = _plt()
    hosts = sorted(set(owd["src"]) | set(owd["dst"]))
    idx = {h: i for i, h in enumerate(hosts)}
    g = owd.groupby(["src", "dst"])["excess_ns"]
    stats = {"median": g.median(), "p99": g.quantile(0.99)}
    vmax = max(float(stats["p99"].max()), 1e-9)
    unit, scale = time_unit(vmax * 1e3)
    scale /= 1e3  # ps per unit -> ns per unit
    n = len(hosts)
    size = min(5.0, 2.0 + 0.12 * n)
    fig, axes = plt.subplots(1, 2, figsize=(2 * size + 1.6, size))
    for ax, (name, s) in zip(axes, stats.items()):
        m = np.full((n, n), np.nan)
        for (a, b), v in s.items():
            m[idx[a], idx[b]] = v / scale
        im = ax.imshow(m, cmap="viridis", vmin=0, vmax=vmax / scale, interpolation="nearest")
        ax.set_title(f"{name} excess one-way delay ({unit})", fontsize=10)
        ax.set_xlabel("dst")
        ax.set_ylabel("src")
        if n <= 32:
            ax.set_xticks(range(n), hosts, rotation=90, fontsize=7)
            ax.set_yticks(range(n), hosts, fontsize=7)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return _png(fig)


def owd_timeline(owd: pd.DataFrame, most: int = 6) -> bytes | None:
    """One-way delay over the send time, one panel per connection: the ``most`` busiest (by messages), or all
    when there are no more; the base as a line, the true delay (a simulated run) as crosses."""
    if not len(owd):
        return None
    plt = _plt()
    counts = owd.groupby(["src", "dst"]).size().sort_values(ascending=False, kind="stable")
    conns = list(counts.index[:most])
    t0 = int(owd["send_start_ns"].min())
    tspan = max(float(owd["send_start_ns"].max() - t0), 1.0)
    tunit, tscale = time_unit(tspan * 1e3)
    dmax = max(float(owd["owd_ns"].abs().max()), 1.0)
    dunit, dscale = time_unit(dmax * 1e3)
    fig, axes = plt.subplots(len(conns), 1, figsize=(8, 1.2 + 1.6 * len(conns)), sharex=True, squeeze=False)
    for ax, (a, b) in zip(axes[:, 0], conns):
        d = owd[(owd["src"] == a) & (owd["dst"] == b)].sort_values("send_start_ns")
        x = (d["send_start_ns"].to_numpy(dtype=float) - t0) * 1e3 / tscale
        ax.plot(x, d["owd_ns"].to_numpy(dtype=float) * 1e3 / dscale, "o", ms=5, mfc="none", color="C0",
                label="one-way delay")
        ax.axhline(float(d["base_ns"].min()) * 1e3 / dscale, color="C2", lw=1, label="base")
        true = d["true_owd_ns"].dropna()
        if len(true):
            xt = (d.loc[true.index, "send_start_ns"].to_numpy(dtype=float) - t0) * 1e3 / tscale
            ax.plot(xt, true.to_numpy(dtype=float) * 1e3 / dscale, "x", ms=3, color="C3", label="true (simulated)")
        ax.set_ylabel(f"{a}→{b} ({dunit})", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, loc="upper right")
    axes[0, 0].set_title(f"one-way delay per connection ({len(conns)} of {len(counts)}, the busiest)", fontsize=10)
    axes[-1, 0].set_xlabel(f"send start ({tunit} after the first)")
    fig.tight_layout()
    return _png(fig)

"""``fabriclab report DIR``: a self-contained HTML report (inline plots and
tables) of a run, a sweep or a reproduction folder."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

import pandas as pd

from .errors import InputError


def _png_tag(data: bytes, alt: str) -> str:
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode()}"/>' \
           f"<figcaption>{html.escape(alt)}</figcaption></figure>"


def _fig_png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _dict_table(d: dict, prefix: str = "") -> list[tuple[str, str]]:
    rows = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            rows += _dict_table(v, key + ".")
        elif isinstance(v, list) and len(v) > 12:
            rows.append((key, f"[{len(v)} values]"))
        else:
            rows.append((key, f"{v:,.4g}" if isinstance(v, float) else str(v)))
    return rows


def _fct_plots(flows: pd.DataFrame) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from .results import BUCKETS

    out = []
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, pred in BUCKETS:
        d = flows[pred(flows["size_bytes"]) & flows["fct_ps"].notna()]["fct_ps"].to_numpy(dtype=float) / 1e6
        if len(d):
            d.sort()
            ax.plot(d, np.arange(1, len(d) + 1) / len(d), label=f"{name} ({len(d)})")
    ax.set_xscale("log")
    ax.set_xlabel("flow completion time (us)")
    ax.set_ylabel("CDF")
    ax.legend()
    ax.set_title("FCT by flow size (small < 100 KB, large > 10 MB)")
    fig.tight_layout()
    out.append(_png_tag(_fig_png(fig), "FCT CDF per size bucket"))
    return out


def _links_plot(links: pd.DataFrame) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = links.sort_values("utilization", ascending=False).head(40)
    fig, ax = plt.subplots(figsize=(9, 3.5))
    ax.bar(range(len(d)), d["utilization"], color="tab:blue")
    ax.set_xticks(range(len(d)), [f"{a}→{b}" for a, b in zip(d.src_node, d.dst_node)], rotation=90, fontsize=6)
    ax.set_ylabel("utilization")
    ax.set_title("busiest links")
    fig.tight_layout()
    return _png_tag(_fig_png(fig), "link utilization")


def _jobs_plot(jobs: pd.DataFrame) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for name, g in jobs.groupby("job"):
        t = g.groupby("iteration")["iteration_time_ps"].max() / 1e9
        ax.plot(t.index, t.to_numpy(), marker="o", label=name)
    ax.set_xlabel("iteration")
    ax.set_ylabel("iteration time (ms, slowest worker)")
    ax.legend()
    fig.tight_layout()
    return _png_tag(_fig_png(fig), "training jobs' iteration times")


def _read(path: Path, reader):
    """A result file read by ``reader``; a damaged one is bad input naming it."""
    try:
        return reader(path)
    except Exception as e:  # pyarrow, pandas and json raise many kinds
        raise InputError(f"report: {path} cannot be read ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                         f"is it a fabriclab result file?") from None


def _table(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """A result table holding at least ``columns``."""
    df = _read(path, pd.read_parquet)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"report: {path} lacks the column(s) {', '.join(missing)}; is it a fabriclab result file?")
    return df


def build_report(folder: Path) -> Path:
    if not folder.is_dir():
        raise InputError(f"report: {folder} is not a folder")
    parts = [f"<h1>fabriclab report: {html.escape(str(folder))}</h1>"]
    summary_path = folder / "summary.json"
    found = False
    if summary_path.is_file():
        found = True
        summary = _read(summary_path, lambda p: json.loads(p.read_text()))
        if not isinstance(summary, dict):
            raise InputError(f"report: {summary_path} is not a fabriclab summary (expected a JSON object)")
        rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in _dict_table(summary))
        parts.append(f"<h2>Summary</h2><table>{rows}</table>")
    if (folder / "flows.parquet").is_file() and not (folder / "points.parquet").is_file():
        found = True
        flows = _table(folder / "flows.parquet", ("size_bytes", "fct_ps", "slowdown", "class"))
        parts.append("<h2>Flows</h2>" + "".join(_fct_plots(flows)))
        if (folder / "links.parquet").is_file():
            parts.append("<h2>Links</h2>" + _links_plot(_table(folder / "links.parquet", ("utilization",))))
    if (folder / "jobs.parquet").is_file() and not (folder / "points.parquet").is_file():
        found = True
        parts.append("<h2>Training jobs</h2>" + _jobs_plot(_table(folder / "jobs.parquet", ("job", "iteration", "end_ps"))))
    if (folder / "points.parquet").is_file():
        found = True
        pts = _read(folder / "points.parquet", pd.read_parquet)
        keep = [c for c in pts.columns if c.startswith("param.") or c in ("point", "flows_total") or "mean_iteration" in c
                or c.endswith("fct.all.fct_mean_ps") or c.endswith("fct.small.fct_p99_ps")]
        parts.append("<h2>Sweep points</h2>" + pts[keep].to_html(index=False, float_format=lambda x: f"{x:,.4g}"))
    for png in sorted(folder.glob("*.png")):
        found = True
        parts.append(_png_tag(png.read_bytes(), png.stem))
    for csv in sorted(folder.glob("*.csv")):
        df = _read(csv, pd.read_csv)
        if len(df) <= 60:
            parts.append(f"<h2>{html.escape(csv.name)}</h2>" + df.to_html(index=False, float_format=lambda x: f"{x:,.4g}"))
    if not found:
        raise InputError(f"report: {folder} holds no fabriclab results (summary.json, *.parquet or *.png)")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}"
             "img{max-width:100%}figcaption{font-size:12px;color:#555}")
    out = folder / "report.html"
    out.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>fabriclab report</title>"
                   f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")
    return out

"""``fabriclab report DIR``: a self-contained HTML report (inline plots and
tables, readable units) of a run, a sweep or a reproduction folder.

Sections, each present when its files are: the run at a glance (summary.json);
flows by size bucket and class, FCT and slowdown CDFs (flows.parquet); the
busiest links (links.parquet); messages per app (messages.parquet) and queue
occupancy over time of the busiest ports (queues.parquet); training jobs
(jobs.parquet); one-way delays of collective messages (owd.parquet, from
``fabriclab owd``); sweep points (points.parquet); a reproduction's plots and
tables (*.png, *.csv); the resolved scenario and the whole summary.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ...errors import InputError
from . import plots
from . import sections
from .html import esc, figure, nested, note, page, section

__all__ = ["build_report"]


def _read(path: Path, reader):
    """A result file read by ``reader``; a damaged one is bad input naming it."""
    try:
        return reader(path)
    except Exception as e:  # pyarrow, pandas and json raise many kinds
        raise InputError(f"report: {path} cannot be read ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                         f"is it a fabriclab result file?") from None


def _table(path: Path, columns: tuple[str, ...], numeric: tuple[str, ...] = ()) -> pd.DataFrame:
    """A result table holding at least ``columns``, those in ``numeric`` numbers."""
    df = _read(path, pd.read_parquet)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"report: {path} lacks the column(s) {', '.join(missing)}; is it a fabriclab result file?")
    bad = [c for c in numeric if c in df.columns and not (pd.api.types.is_numeric_dtype(df[c])
                                                          and not pd.api.types.is_bool_dtype(df[c]))]
    if bad:
        raise InputError(f"report: {path}: the column(s) {', '.join(bad)} should hold numbers; "
                         f"is it a fabriclab result file?")
    return df


def _optional(folder: Path, name: str, columns: tuple[str, ...], numeric: tuple[str, ...] = ()) -> pd.DataFrame | None:
    p = folder / name
    return _table(p, columns, numeric) if p.is_file() else None


def build_report(folder: Path) -> Path:
    """Writes ``folder/report.html`` and returns its path."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"report: {folder} is not a folder")

    # Read (and check) every input first: a bad file is an error naming it, before any work.
    summary = None
    if (folder / "summary.json").is_file():
        summary = _read(folder / "summary.json", lambda p: json.loads(p.read_text()))
        if not isinstance(summary, dict):
            raise InputError(f"report: {folder / 'summary.json'} is not a fabriclab summary (expected a JSON object)")
    points = _optional(folder, "points.parquet", ())
    sweep = points is not None
    flows = links = jobs = messages = queues = None
    if not sweep:  # a sweep's flows/jobs tables are every point's rows together: its points table tells instead
        flows = _optional(folder, "flows.parquet", ("size_bytes", "fct_ps", "slowdown", "class"),
                          ("size_bytes", "fct_ps", "slowdown", "class"))
        jobs = _optional(folder, "jobs.parquet", ("job", "iteration", "start_ps", "end_ps"),
                         ("iteration", "start_ps", "end_ps"))
    if flows is not None:
        links = _optional(folder, "links.parquet", ("src_node", "dst_node", "utilization"),
                          ("utilization", "rate_bps", "bytes", "drops", "ecn_marks", "max_queue_bytes"))
    messages = _optional(folder, "messages.parquet", ("app", "size_bytes", "fct_ps"), ("size_bytes", "fct_ps", "start_ps"))
    queues = _optional(folder, "queues.parquet", ("time_ps", "link_id", "queue_bytes"), ("time_ps", "queue_bytes"))
    scenario = None
    if (folder / "scenario.resolved.toml").is_file():
        scenario = _read(folder / "scenario.resolved.toml", lambda p: p.read_text())
    owd = _optional(folder, "owd.parquet", ("src", "dst", "send_start_ns", "owd_ns", "base_ns", "excess_ns"),
                    ("send_start_ns", "owd_ns", "base_ns", "excess_ns"))
    owd_clocks = None
    if owd is not None:
        import pyarrow.parquet as pq

        meta = _read(folder / "owd.parquet", pq.read_schema).metadata or {}
        owd_clocks = {k.decode(): v.decode() for k, v in meta.items()}
    bottleneck = None
    if (folder / "bottleneck.json").is_file():
        bottleneck = _read(folder / "bottleneck.json", lambda p: json.loads(p.read_text()))
        if not isinstance(bottleneck, dict) or not isinstance(bottleneck.get("verdict"), dict):
            raise InputError(f"report: {folder / 'bottleneck.json'} is not `fabriclab bottleneck`'s output "
                             f"(expected an object with a 'verdict')")
    pngs = sorted(folder.glob("*.png"))
    if owd is not None:  # the OWD section draws its own figures from owd.parquet
        pngs = [p for p in pngs if p.name not in ("owd_matrix.png", "owd_timeline.png")]
    csvs = [(p, _read(p, pd.read_csv)) for p in sorted(folder.glob("*.csv"))]
    if all(x is None for x in (summary, points, flows, jobs, messages, queues, owd)) and not pngs:
        raise InputError(f"report: {folder} holds no fabriclab results (summary.json, *.parquet or *.png)")

    job_times = sections.job_times(jobs) if jobs is not None else None
    parts = []
    head = sections.headline(summary, flows, messages, job_times, points)
    if head:
        parts.append(section("run", "The run", head))
    if flows is not None:
        parts.append(section("flows", "Flows by size bucket and class", sections.flows_table(flows)))
        figs = [(plots.fct_cdf(flows), "FCT CDF per size bucket"), (plots.slowdown_cdf(flows), "slowdown CDF per size bucket")]
        figs = "".join(figure(png, cap) for png, cap in figs if png is not None)
        if figs:
            parts.append(section("fct", "Flow completion times", figs))
    if links is not None:
        bar = plots.links_bar(links)
        parts.append(section("links", "Links", sections.links_table(links)
                             + (figure(bar, "link utilization") if bar is not None else "")))
    if messages is not None:
        parts.append(section("messages", "Messages by app", sections.messages_table(messages)))
    if queues is not None:
        series, ports = sections.queue_series(queues)
        body = ports + (figure(plots.queues(series), "queue occupancy over time") if series else "")
        parts.append(section("queues", "Queues of the busiest ports", body))
    if job_times is not None:
        png = plots.jobs({n: j.times_ps for n, j in job_times.items()})
        parts.append(section("jobs", "Training jobs", sections.jobs_table(job_times)
                             + (figure(png, "training jobs' iteration times") if png is not None else "")))
    if owd is not None:
        body = sections.owd_section(owd, owd_clocks)
        for png, cap in ((plots.owd_matrix(owd), "median and p99 excess one-way delay, src x dst"),
                         (plots.owd_timeline(owd), "one-way delay per connection over time")):
            if png is not None:
                body += figure(png, cap)
        if bottleneck is not None:
            body += sections.bottleneck_note(bottleneck)
        parts.append(section("owd", "One-way delays of collective messages", body))
    elif bottleneck is not None:
        parts.append(section("owd", "Bottleneck from one-way delays", sections.bottleneck_note(bottleneck)))
    if points is not None:
        parts.append(section("sweep", "Sweep points", sections.points_table(points)))
    if pngs or csvs:
        body = "".join(figure(_read(p, Path.read_bytes), p.stem) for p in pngs)
        for p, df in csvs:
            body += (f"<h3>{esc(p.name)}</h3>" + sections.frame_table(df) if len(df) <= 60
                     else note(f"{p.name}: {len(df):,} rows, not shown"))
        parts.append(section("files", "Plots and tables", body))
    if scenario is not None:
        parts.append(section("scenario", "Scenario (resolved)", f"<pre>{esc(scenario)}</pre>"))
    if summary is not None:
        parts.append(section("summary", "Summary (summary.json)", nested(summary)))
    out = folder / "report.html"
    out.write_text(page(f"fabriclab report: {folder}", parts))
    return out

"""The report's tables: figures computed from the result files, formatted
in readable units (:mod:`fabriclab.observe.fmt`)."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import fmt
from ..fmt import MISSING, format_value
from ...sim.results import BUCKETS, LARGE_MIN_BYTES, SMALL_MAX_BYTES, fct_stats
from .html import note, table

BUCKET_NOTE = (f"small < {fmt.size_bytes(SMALL_MAX_BYTES)}, medium {fmt.size_bytes(SMALL_MAX_BYTES)} .. "
               f"{fmt.size_bytes(LARGE_MIN_BYTES)}, large > {fmt.size_bytes(LARGE_MIN_BYTES)}; FCT statistics "
               f"over finished flows, percentiles by linear interpolation")


def _pct(part, whole) -> str:
    ok = all(isinstance(x, numbers.Real) and not isinstance(x, bool) for x in (part, whole))
    return f" ({fmt.percent(part / whole)})" if ok and whole else ""


# ------------------------------------------------------------------ (a) headline

def headline(summary: dict | None, flows: pd.DataFrame | None, messages: pd.DataFrame | None,
             jobs: dict[str, "JobTimes"] | None, points: pd.DataFrame | None) -> str:
    s = summary or {}
    rows: list[list[str]] = []

    def row(name, value):
        rows.append([name, value])

    if "scenario" in s:
        row("scenario", str(s["scenario"]))
    if "backend" in s:
        row("backend", str(s["backend"]))
    if "seed" in s:
        row("seed", format_value("seed", s["seed"]))
    if "sim_time_ps" in s:
        row("simulated time", format_value("sim_time_ps", s["sim_time_ps"]))
    if "events" in s:
        perf = s.get("performance", {}) if isinstance(s.get("performance"), dict) else {}
        text = format_value("events", s["events"])
        if "wall_time_s" in perf:
            text += f" in {format_value('wall_time_s', perf['wall_time_s'])} of wall time"
        if "events_per_s" in perf:
            text += f" ({format_value('events_per_s', perf['events_per_s'])})"
        row("events", text)
    if points is not None:
        row("sweep points", fmt.count(len(points)))
    if flows is not None and points is None:
        done = int(flows["fct_ps"].notna().sum())
        row("flows finished / total", f"{fmt.count(done)} / {fmt.count(len(flows))}{_pct(done, len(flows))}")
    elif "flows_total" in s:
        done, total = s.get("flows_finished", 0), s["flows_total"]
        row("flows finished / total", f"{format_value('flows', done)} / {format_value('flows', total)}{_pct(done, total)}")
    if messages is not None:
        done = int(messages["fct_ps"].notna().sum())
        row("messages finished / total", f"{fmt.count(done)} / {fmt.count(len(messages))}{_pct(done, len(messages))}")
    if jobs:
        row("training jobs", ", ".join(
            f"{n} ({j.iterations_done} of {j.iterations} iterations{'' if j.finished else ', unfinished'})"
            for n, j in jobs.items()))
    links = s.get("links") if isinstance(s.get("links"), dict) else None
    if links:
        if "mean_utilization" in links and "max_utilization" in links:
            row("link utilization mean / max", f"{format_value('mean_utilization', links['mean_utilization'])} / "
                                                f"{format_value('max_utilization', links['max_utilization'])}")
        if "drops" in links:
            row("drops", format_value("drops", links["drops"]))
        if "ecn_marks" in links:
            row("ECN marks", format_value("ecn_marks", links["ecn_marks"]))
        if "max_queue_bytes" in links:
            row("max queue", format_value("max_queue_bytes", links["max_queue_bytes"]))
    if "retransmits" in s:
        row("retransmitted segments", format_value("retransmits", s["retransmits"]))
    if not rows:
        return ""
    return table(["", "value"], rows)


# ------------------------------------------------------------------ (b) flows

FLOW_HEADERS = ["bucket", "class", "flows", "finished", "mean FCT", "p50 FCT", "p99 FCT", "p99.9 FCT",
                "mean slowdown", "p99 slowdown"]


def flow_rows(flows: pd.DataFrame) -> list[list[str]]:
    """One row per (size bucket, class) holding flows, bucket by bucket, then
    all sizes per class."""
    classes = sorted(flows["class"].dropna().unique().tolist())
    rows = []
    buckets = list(BUCKETS) + [("all", lambda s: s == s)]
    for name, pred in buckets:
        in_bucket = flows[pred(flows["size_bytes"])]
        for c in classes:
            d = in_bucket[in_bucket["class"] == c]
            if not len(d):
                continue
            st = fct_stats(d)
            done = fmt.count(st["finished"]) + _pct(st["finished"], st["flows"])
            rows.append([name, str(int(c)), fmt.count(st["flows"]), done,
                         fmt.time_ps(st.get("fct_mean_ps")), fmt.time_ps(st.get("fct_p50_ps")),
                         fmt.time_ps(st.get("fct_p99_ps")), fmt.time_ps(st.get("fct_p999_ps")),
                         fmt.slowdown(st.get("slowdown_mean")), fmt.slowdown(st.get("slowdown_p99"))])
    return rows


def flows_table(flows: pd.DataFrame) -> str:
    if not len(flows):
        return note("no flows")
    return table(FLOW_HEADERS, flow_rows(flows), numeric_from=2) + note(BUCKET_NOTE)


# ------------------------------------------------------------------ (d) links

LINK_HEADERS = ["link", "rate", "utilization", "throughput", "bytes", "drops", "ECN marks", "max queue", "mean queue"]
BUSIEST_LINKS = 15


def links_table(links: pd.DataFrame) -> str:
    if not len(links):
        return note("no links")
    d = links.sort_values("utilization", ascending=False, kind="stable").head(BUSIEST_LINKS)
    get = lambda r, c: r[c] if c in d.columns else None  # noqa: E731
    rows = []
    for _, r in d.iterrows():
        rate = get(r, "rate_bps")
        rows.append([f"{r['src_node']} → {r['dst_node']}", fmt.rate_bps(rate), fmt.percent(r["utilization"]),
                     MISSING if rate is None else fmt.fixed(float(r["utilization"]) * float(rate), 1e9, "Gbit/s"),
                     fmt.size_bytes(get(r, "bytes")), fmt.count(get(r, "drops")), fmt.count(get(r, "ecn_marks")),
                     fmt.fixed(get(r, "max_queue_bytes"), 1e3, "KB"), fmt.fixed(get(r, "mean_queue_bytes"), 1e3, "KB")])
    return (table(LINK_HEADERS, rows) +
            note(f"the {len(d)} busiest of {len(links)} links by utilization; throughput = utilization × rate"))


# ------------------------------------------------------------------ (e) messages and queues

MESSAGE_HEADERS = ["app", "messages", "finished", "bytes", "mean FCT", "p50 FCT", "p99 FCT", "p99.9 FCT",
                   "mean first byte", "retransmits"]


def messages_table(msgs: pd.DataFrame) -> str:
    if not len(msgs):
        return note("no messages")
    rows = []
    for app, g in msgs.groupby("app", sort=True, dropna=False):
        fct = g["fct_ps"].dropna().to_numpy(dtype=float)
        pct = (lambda q: float(np.percentile(fct, q))) if len(fct) else (lambda q: None)
        first = None
        if "first_byte_ps" in g.columns and "start_ps" in g.columns:
            fb = g[g["first_byte_ps"].notna()]
            if len(fb):
                first = float((fb["first_byte_ps"].astype(float) - fb["start_ps"].astype(float)).mean())
        rows.append([MISSING if pd.isna(app) else str(app), fmt.count(len(g)),
                     fmt.count(len(fct)) + _pct(len(fct), len(g)),
                     fmt.size_bytes(float(g["size_bytes"].astype(float).sum())),
                     fmt.time_ps(float(fct.mean()) if len(fct) else None), fmt.time_ps(pct(50)), fmt.time_ps(pct(99)),
                     fmt.time_ps(pct(99.9)), fmt.time_ps(first),
                     fmt.count(g["retransmits"].sum()) if "retransmits" in g.columns else MISSING])
    return table(MESSAGE_HEADERS, rows) + note("FCT statistics over finished messages; first byte: "
                                                 "mean time from a message's start to its first byte's arrival")


BUSIEST_PORTS = 6


def queue_series(q: pd.DataFrame) -> tuple[list[tuple[str, np.ndarray, np.ndarray, int, int]], str]:
    """Lines of the queue plot: the (up to) 6 ports (links) with the highest
    maximum occupancy (all bands together), one line per port, or per port
    and band when the table has several bands; and a table of those ports."""
    if not len(q):
        return [], note("queues.parquet holds no samples")
    has_band = "band" in q.columns and q["band"].nunique() > 1
    total = q.groupby(["link_id", "time_ps"], sort=True)["queue_bytes"].sum()
    peak = total.groupby(level="link_id").max()
    top = sorted(peak.index.tolist(), key=lambda lid: (-float(peak[lid]), lid))[:BUSIEST_PORTS]
    names = {}
    for lid in top:
        r = q[q["link_id"] == lid].iloc[0]
        names[lid] = (f"{r['src_node']}→{r['dst_node']}" if "src_node" in q.columns and "dst_node" in q.columns
                      else f"link {lid}")
    series, rows = [], []
    for i, lid in enumerate(top):
        g = q[q["link_id"] == lid].sort_values("time_ps", kind="stable")
        if has_band:
            for j, (band, gb) in enumerate(g.groupby("band", sort=True)):
                series.append((f"{names[lid]} band {int(band)}", gb["time_ps"].to_numpy(dtype=float),
                               gb["queue_bytes"].to_numpy(dtype=float), i, j))
        else:
            series.append((names[lid], g["time_ps"].to_numpy(dtype=float), g["queue_bytes"].to_numpy(dtype=float), i, 0))
        t = total[lid]
        rows.append([names[lid], str(int(lid)), fmt.fixed(float(peak[lid]), 1e3, "KB"),
                     fmt.time_ps(float(t.idxmax())), fmt.count(len(g))])
    return series, table(["port", "link id", "max queue", "first at", "samples"], rows, numeric_from=1)


# ------------------------------------------------------------------ (f) jobs

@dataclass
class JobTimes:
    workers: int
    iterations: int
    iterations_done: int
    finished: bool
    times_ps: np.ndarray  # per finished iteration: the slowest worker's end minus the previous one's


def job_times(jobs: pd.DataFrame) -> dict[str, JobTimes]:
    """Per job, iteration times as the engine's summary computes them: per
    iteration the slowest worker's end; the first counted from the job's start."""
    out = {}
    for name, g in jobs.groupby("job", sort=True):
        ends = g.groupby("iteration")["end_ps"].agg(lambda s: float(s.max()) if s.notna().all() else np.nan)
        done = ends.dropna()
        done = done[done.index < (ends[ends.isna()].index.min() if ends.isna().any() else np.inf)]
        start = float(g["start_ps"].astype(float).min())
        times = np.diff(np.concatenate([[start], done.to_numpy(dtype=float)]))
        out[str(name)] = JobTimes(int(g["worker"].nunique()) if "worker" in g.columns else 0, int(len(ends)),
                                  int(len(done)), bool(g["end_ps"].notna().all()), times)
    return out


JOB_HEADERS = ["job", "workers", "iterations", "first iteration", "mean iteration", "p99 iteration", "max iteration"]


def jobs_table(jobs: dict[str, JobTimes]) -> str:
    rows = []
    for name, j in jobs.items():
        steady = j.times_ps[1:] if len(j.times_ps) > 1 else j.times_ps
        ms = lambda v: fmt.fixed(v, 1e9, "ms")  # noqa: E731
        rows.append([name, fmt.count(j.workers) if j.workers else MISSING,
                     f"{j.iterations_done} of {j.iterations}" if not j.finished else str(j.iterations),
                     ms(j.times_ps[0] if len(j.times_ps) else None),
                     ms(float(steady.mean()) if len(steady) else None),
                     ms(float(np.percentile(steady, 99)) if len(steady) else None),
                     ms(float(steady.max()) if len(steady) else None)])
    return table(JOB_HEADERS, rows) + note(
        "iteration time: the slowest worker's end minus the previous iteration's; mean, p99 and max over the "
        "iterations after the first (warm-up), as in the summary's mean_iteration_time_ps")


# ------------------------------------------------------------------ (g) sweeps and CSV tables

def _keep_point_column(c: str) -> bool:
    return (c.startswith("param.") or c in ("point", "flows_total", "links.max_utilization")
            or "mean_iteration" in c or c.endswith("fct.all.fct_mean_ps") or c.endswith("fct.small.fct_p99_ps")
            or c.endswith("fct.large.fct_p99_ps"))


def frame_table(df: pd.DataFrame, columns: list[str] | None = None) -> str:
    """A data frame with readable headers and every cell formatted by its column's name."""
    cols = [c for c in (columns or list(df.columns))]
    rows = [[format_value(str(c), v) for c, v in zip(cols, r)] for r in df[cols].itertuples(index=False, name=None)]
    return table([fmt.label(str(c)) for c in cols], rows, numeric_from=0)


def points_table(points: pd.DataFrame) -> str:
    return frame_table(points, [c for c in points.columns if _keep_point_column(str(c))])


# ------------------------------------------------------------------ one-way delays (owd.parquet)

OWD_HEADERS = ["connection", "messages", "base", "p50 excess", "p99 excess", "p50 sender delay", "p99 |error|"]
BUSIEST_CONNECTIONS = 15


def owd_section(owd: pd.DataFrame, meta: dict | None) -> str:
    """How the clocks were corrected, and per connection (the busiest by messages) the base, the excess's
    median and p99, the sender-side delay and, in a simulated run, the p99 error against true time."""
    if not len(owd):
        return note("no messages")
    meta = meta or {}
    if meta.get("clocks") == "corrected":
        how = (f"clocks corrected by an estimate (method {meta.get('method') or '?'}, reference "
               f"{meta.get('reference') or '?'})")
    else:
        how = "clocks uncorrected: each delay includes the receiver's minus the sender's clock offset"
    g = owd.groupby(["src", "dst"], sort=True)
    d = pd.DataFrame({"messages": g.size(), "base": g["base_ns"].min(), "p50": g["excess_ns"].median(),
                      "p99": g["excess_ns"].quantile(0.99)})
    d["sender"] = g["sender_delay_ns"].median() if "sender_delay_ns" in owd.columns else np.nan
    if "error_ns" in owd.columns:
        d["error"] = g["error_ns"].apply(lambda e: e.abs().quantile(0.99) if e.notna().any() else np.nan)
    else:
        d["error"] = np.nan
    d = d.sort_values("messages", ascending=False, kind="stable")
    rows = []
    for (a, b), r in d.head(BUSIEST_CONNECTIONS).iterrows():
        rows.append([f"{a} → {b}", fmt.count(int(r["messages"])),
                     *(MISSING if pd.isna(r[c]) else fmt.time_ps(float(r[c]) * 1e3)
                       for c in ("base", "p50", "p99", "sender", "error"))])
    return (note(f"{len(owd):,} messages, {len(d)} connections; {how}. Base: the least delay of the "
                 f"connection (propagation and serialization); excess: the rest (queueing).")
            + table(OWD_HEADERS, rows)
            + note(f"the {min(len(d), BUSIEST_CONNECTIONS)} busiest of {len(d)} connections by messages"))


def bottleneck_note(doc: dict) -> str:
    """`fabriclab bottleneck`'s verdict (bottleneck.json) in a sentence; its hops are in
    bottleneck_hops.csv (shown with the folder's tables)."""
    v = doc["verdict"]
    if v.get("kind") == "none":
        return note(f"bottleneck: none ({v.get('reason', '')})")
    conns = ", ".join(f"{c[0]} → {c[1]} ({c[2]} of {c[3]})" for c in v.get("connections", [])[:8])
    return note(f"bottleneck: {str(v.get('kind')).replace('_', ' ')} {v.get('component')} (hop {v.get('hop')}), "
                f"confidence {float(v.get('confidence', 0)):.2f}: {float(v.get('purity', 0)):.0%} of its messages "
                f"elevated, {float(v.get('coverage', 0)):.0%} of the {v.get('elevated')} elevated messages; "
                f"connections through it (elevated of all): {conns}")

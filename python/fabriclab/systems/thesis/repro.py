"""Reproduction of "Making DDNNs friendlier in the data center" (ETH MSc
thesis, 2020; seed 002).

Chapter 4 (event-driven, the job alone on the network): 2 workers, a 100 MB
ResNet-50-like model of 100 layers, 900 ms of compute per iteration
(forward : backward = 1 : 2), 6.28 MB tensor fusion, links of 1, 2, 5, 10 and
20 Gbit/s with 10 us of propagation delay (Table 4.1); FIFO versus priority
transmit queue, inter-iteration barrier on and off. The thesis reports a 12 %
shorter iteration with the priority queue at 1 Gbit/s and no difference from
2 Gbit/s up (Figure 4.7), and timelines (Figures 4.8 to 4.11).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...api import simulate
from ...scenario.model import Scenario

MS = 10**9
CH4_RATES_GBPS = (1, 2, 5, 10, 20)
PAPER_CH4 = "priority queue: -12% iteration time at 1 Gbit/s; no difference at 2 Gbit/s and above (Fig. 4.7)"


def ch4_scenario(rate_gbps: float, queue: str, barrier: bool, iterations: int = 4) -> Scenario:
    return Scenario.from_dict({
        "name": f"thesis-ch4 {rate_gbps}G {queue} barrier={barrier}",
        "backend": "flow",
        "topology": {"kind": "star", "hosts": 2, "link_rate_bps": int(rate_gbps * 10**9), "link_delay_ps": "10us"},
        "jobs": [{
            "name": "horovod", "profile": "thesis-resnet50", "layers": 100, "model_bytes": 100_000_000,
            "compute_ps": 900 * MS, "iterations": iterations, "fusion_bytes": 6_280_000,
            "barrier": barrier, "queue": queue, "send_overhead_ps": 0,
        }],
    })


def ch4(out_dir: Path, quick: bool = False) -> pd.DataFrame:
    rows = []
    results = {}
    for rate in CH4_RATES_GBPS:
        for queue in ("fifo", "priority"):
            for barrier in (True, False):
                r = simulate(ch4_scenario(rate, queue, barrier, 3 if quick else 4))
                j = r.summary["jobs"]["horovod"]
                rows.append({"rate_gbps": rate, "queue": queue, "barrier": barrier,
                             "iteration_time_ms": j["mean_iteration_time_ps"] / MS})
                results[(rate, queue, barrier)] = r
    df = pd.DataFrame(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    df.to_csv(out_dir / "ch4_iteration_times.csv", index=False)
    plot_ch4(df, out_dir / "ch4_iteration_times.png")
    for name, key in (("fig4.8_1G_fifo_barrier", (1, "fifo", True)), ("fig4.9_1G_priority_nobarrier", (1, "priority", False)),
                      ("fig4.10_5G_fifo", (5, "fifo", True)), ("fig4.11_5G_priority", (5, "priority", True))):
        plot_timeline(results[key], out_dir / f"{name}.png", title=f"{key[0]} Gbit/s, {key[1]}, barrier {'on' if key[2] else 'off'}")
    return df


def ch4_summary(df: pd.DataFrame) -> dict:
    out = {}
    for barrier in (True, False):
        d = df[df.barrier == barrier].pivot(index="rate_gbps", columns="queue", values="iteration_time_ms")
        out[f"barrier_{'on' if barrier else 'off'}"] = {
            f"{int(rate)}G": {"fifo_ms": round(row.fifo, 1), "priority_ms": round(row.priority, 1),
                              "priority_change_pct": round(100 * (row.priority / row.fifo - 1), 1)}
            for rate, row in d.iterrows()
        }
    out["paper"] = PAPER_CH4
    return out


def plot_ch4(df: pd.DataFrame, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, barrier in zip(axes, (True, False)):
        d = df[df.barrier == barrier]
        for queue, marker in (("fifo", "o"), ("priority", "s")):
            q = d[d.queue == queue]
            ax.plot(q.rate_gbps, q.iteration_time_ms, marker=marker, label=queue)
        ax.axhline(900, color="0.6", ls=":", label="compute (900 ms)")
        ax.set_xscale("log")
        ax.set_xticks(CH4_RATES_GBPS, [str(x) for x in CH4_RATES_GBPS])
        ax.set_xlabel("link rate (Gbit/s)")
        ax.set_title(f"2 workers, 100 MB, barrier {'on' if barrier else 'off'}")
        ax.legend()
    axes[0].set_ylabel("iteration time (ms)")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def plot_timeline(res, png: Path, title: str = "", worker: int = 0, iteration: int = 1) -> None:
    """Figures 4.8-4.11: compute lanes of one iteration, allreduce intervals
    per fusion (blue) and when each fusion's data is needed (orange: the
    next iteration's forward start of the fusion's lowest layer)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tl = res.timeline
    tl = tl[tl.worker == worker]
    ms = lambda x: x / MS  # noqa: E731
    fig, ax = plt.subplots(figsize=(11, 4.5))
    for lane, kind, color in ((0, "backward", "tab:green"), (1, "forward", "tab:purple")):
        d = tl[(tl.kind == kind) & (tl.iteration.isin([iteration, iteration + 1]) if kind == "forward" else (tl.iteration == iteration))]
        ax.broken_barh([(ms(s), ms(e - s)) for s, e in zip(d.start_ps, d.end_ps)], (lane - 0.4, 0.8), color=color)
    ar = tl[(tl.kind == "allreduce") & (tl.iteration == iteration)].sort_values("index")
    fwd_next = tl[(tl.kind == "forward") & (tl.iteration == iteration + 1)].set_index("index")["start_ps"]
    lowest = {x["fusion"]: x["lowest_layer"] for x in res.summary["jobs"]["horovod"]["fusions"]}
    for k, row in enumerate(ar.itertuples()):
        y = 2 + k * 0.5
        ax.broken_barh([(ms(row.start_ps), ms(row.end_ps - row.start_ps))], (y - 0.2, 0.4), color="tab:blue")
        need = fwd_next.get(lowest[row.index])
        if need is not None:
            ax.plot([ms(need)] * 2, [y - 0.25, y + 0.25], color="tab:orange", lw=2)
    nl = int(tl[tl.kind == "forward"]["index"].max()) + 1
    ax.set_yticks([0, 1] + [2 + k * 0.5 for k in range(len(ar))],
                  ["backward", "forward"] + [f"fusion {int(f)}" for f in ar["index"]], fontsize=6)
    ax.set_xlabel("simulated time (ms)")
    ax.set_title(title + f" — iteration {iteration}, worker {worker} ({nl} layers)")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- chapter 5
# Table 5.3: compute-to-network ratio -> iteration (compute) time, 100 MB, 8 workers, 10 Gbit/s.
CH5_RATIOS = {16: 2240, 8: 1120, 4: 560, 2: 280}
CH5_FLOW_RATES = (23, 46, 92, 184)  # flows/s per host (U_pfabric = rate * 1.7 MB * 8 / 10 Gbit/s)
PAPER_CH5 = ("small-flow mean FCT -40..70% at low background load without slowing Horovod; "
             "Horovod slowed >= 29% at 184 flows/s (Fig. 5.19)")


def ch5_base(duration_s: float, persistent: bool = True) -> dict:
    """Single switch, 8 hosts at 10 Gbit/s with 10 us links, pfifo_fast-like
    three bands of 1000-packet drop-tail FIFOs (Table 5.2), NewReno (ns-3's
    default), web-search flows at class 0 (band 0) between all hosts.
    Horovod's ring messages continue persistent connections (as its TCP
    connections between neighbours do); web-search flows are separate."""
    return {
        "name": "thesis-ch5", "backend": "packet",
        "topology": {"kind": "star", "hosts": 8, "link_rate_bps": "10Gbps", "link_delay_ps": "10us"},
        "queue": {"discipline": "prio", "bands": 3, "priomap": [0, 1, 2, 2, 2, 2, 2, 2], "limit_packets": 1000,
                  "ecn_threshold_packets": "off"},
        "transport": {"cc": "newreno"},
        "traffic": [{"flows_per_s": 8 * 23, "cdf": "websearch", "duration_ps": int(duration_s * 1e12), "tag": "websearch"}],
        "jobs": [{"name": "horovod", "profile": "thesis-resnet50", "layers": 50, "model_bytes": 100_000_000,
                  "compute_ps": 2240 * MS, "iterations": 6, "fusion_bytes": 5_333_329, "barrier": False,
                  "queue": "priority", "class": 0, "send_overhead_ps": 0, "persistent_connections": persistent}],
    }


def ch5_experiment(duration_s: float, ratios, rates, seeds) -> dict:
    points_grid = {
        "jobs.0.compute_ps": [CH5_RATIOS[r] * MS for r in ratios],
        "traffic.0.flows_per_s": [8 * x for x in rates],
        "jobs.0.class": [0, 1],
        "seed": list(seeds),
    }
    return {"base": ch5_base(duration_s), "grid": points_grid}


def ch5(out_dir: Path, quick: bool = False, workers: int | None = None) -> pd.DataFrame:
    import tomli_w

    from ...sweep import run_sweep

    duration = 3.0 if quick else 12.0
    ratios = (4,) if quick else tuple(CH5_RATIOS)
    rates = (46, 184) if quick else CH5_FLOW_RATES
    seeds = (1,) if quick else (1, 2, 3)
    exp = ch5_experiment(duration, ratios, rates, seeds)
    # Enough iterations to cover the run: duration / iteration time, plus one.
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for ratio in ratios:
        e = {"base": dict(exp["base"]), "grid": dict(exp["grid"])}
        e["base"]["jobs"] = [dict(exp["base"]["jobs"][0], iterations=int(duration * 1000 / CH5_RATIOS[ratio]) + 1)]
        e["grid"]["jobs.0.compute_ps"] = [CH5_RATIOS[ratio] * MS]
        path = out_dir / f"ratio{ratio}.toml"
        path.write_text(tomli_w.dumps(e))
        sweep_dir = out_dir / f"ratio{ratio}"
        run_sweep(path, sweep_dir, workers=workers)
        rows.append(_ch5_metrics(sweep_dir, ratio, duration))
    df = pd.concat(rows, ignore_index=True)
    df.to_csv(out_dir / "ch5_points.csv", index=False)
    return df


def _ch5_metrics(sweep_dir: Path, ratio: int, duration_s: float) -> pd.DataFrame:
    """Per point: Horovod's mean iteration time (start to start of worker 0's
    forward pass, the first iteration excluded), and mean and p99 FCT of small
    (< 100 KB) and large (> 10 MB) web-search flows started after the warm-up
    and before the cool-down (1 s each; 0.5 s in quick runs)."""
    import numpy as np
    import pyarrow.parquet as pq

    pts = pq.read_table(sweep_dir / "points.parquet").to_pandas()
    flows = pq.read_table(sweep_dir / "flows.parquet").to_pandas()
    jobs = pq.read_table(sweep_dir / "jobs.parquet").to_pandas()
    out = []
    edge = min(1.0, duration_s / 6)
    lo, hi = edge * 1e12, (duration_s - edge) * 1e12
    for _, p in pts.iterrows():
        f = flows[(flows.point == p.point) & (flows.tag == "websearch") & (flows.start_ps >= lo) & (flows.start_ps < hi)]
        j = jobs[jobs.point == p.point]
        starts = j[j.worker == 0].sort_values("iteration")["start_ps"].to_numpy(dtype=float)
        it = np.diff(starts)[1:] if len(starts) > 2 else np.diff(starts)
        v = p.to_dict()
        fps = v.get("param.traffic.0.flows_per_s")
        row = {"ratio": ratio, "flows_per_s_per_host": None if fps is None else int(round(fps / 8)),
               "horovod_class": int(v.get("param.jobs.0.class", 1)), "seed": int(v["param.seed"]),
               "iteration_ms": float(np.mean(it)) / MS if len(it) else float("nan")}
        for name, sel in (("small", f.size_bytes < 100_000), ("large", f.size_bytes > 10_000_000)):
            d = f[sel]["fct_ps"].dropna().to_numpy(dtype=float)
            row[f"{name}_mean_us"] = float(d.mean()) / 1e6 if len(d) else float("nan")
            row[f"{name}_p99_us"] = float(np.percentile(d, 99)) / 1e6 if len(d) else float("nan")
            row[f"{name}_n"] = int(len(d))
        out.append(row)
    return pd.DataFrame(out)


def ch5_summary(df: pd.DataFrame) -> dict:
    """Change when Horovod runs at the lower priority (class 1) instead of
    the background's (class 0), per cell, averaged over seeds."""
    m = df.groupby(["ratio", "flows_per_s_per_host", "horovod_class"]).mean(numeric_only=True).reset_index()
    out = {}
    for (ratio, rate), g in m.groupby(["ratio", "flows_per_s_per_host"]):
        same = g[g.horovod_class == 0].iloc[0]
        low = g[g.horovod_class == 1].iloc[0]
        pct = lambda a, b: round(100 * (b / a - 1), 1)  # noqa: E731
        out[f"ratio{ratio}_{rate}fps"] = {
            "horovod_util_pct": round(100 / ratio, 2), "background_util_pct": round(rate * 1.7 * 8 / 100, 2),
            "iteration_same_ms": round(same.iteration_ms, 1), "iteration_lower_ms": round(low.iteration_ms, 1),
            "iteration_change_pct": pct(same.iteration_ms, low.iteration_ms),
            "small_mean_change_pct": pct(same.small_mean_us, low.small_mean_us),
            "small_p99_change_pct": pct(same.small_p99_us, low.small_p99_us),
            "large_mean_change_pct": pct(same.large_mean_us, low.large_mean_us),
            "large_p99_change_pct": pct(same.large_p99_us, low.large_p99_us),
        }
    out["paper"] = PAPER_CH5
    return out


def plot_ch5(summary: dict, png: Path) -> None:
    """Figure 5.19: heatmaps of the change from lowering Horovod's priority,
    by Horovod's expected link utilisation (rows) and the background's (columns)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cells = {k: v for k, v in summary.items() if k.startswith("ratio")}
    hs = sorted({v["horovod_util_pct"] for v in cells.values()})
    bs = sorted({v["background_util_pct"] for v in cells.values()})
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, key, title in zip(axes, ("iteration_change_pct", "small_mean_change_pct", "large_mean_change_pct"),
                              ("Horovod iteration time change (%)", "small-flow mean FCT change (%)",
                               "large-flow mean FCT change (%)")):
        grid = np.full((len(hs), len(bs)), np.nan)
        for v in cells.values():
            grid[hs.index(v["horovod_util_pct"]), bs.index(v["background_util_pct"])] = v[key]
        lim = np.nanmax(np.abs(grid)) or 1
        im = ax.imshow(grid, cmap="RdYlGn_r", vmin=-lim, vmax=lim, origin="lower")
        for i in range(len(hs)):
            for j in range(len(bs)):
                if not np.isnan(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:+.0f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(bs)), [f"{b:g}" for b in bs])
        ax.set_yticks(range(len(hs)), [f"{h:g}" for h in hs])
        ax.set_xlabel("background link utilisation (%)")
        ax.set_ylabel("Horovod link utilisation (%)")
        ax.set_title(title, fontsize=9)
        fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


# Cells of the chapter-5 grid where static low priority slows Horovod by more
# than 5 % (docs/reproductions.md): (compute/network ratio, flows/s per host).
CH5_SLACK_CELLS = ((16, 184), (8, 92), (8, 184), (4, 92), (4, 184), (2, 23), (2, 46), (2, 92), (2, 184))
# Slack-aware variants: (slack_factor, slack_lag_rounds); lag 0 = deadline check only.
CH5_SLACK_VARIANTS = ((1.0, 0), (1.0, 1), (0.25, 1), (0.1, 1))


def ch5_slack(out_dir: Path, quick: bool = False, cells=None, seeds=None, duration_s: float | None = None,
              variants=CH5_SLACK_VARIANTS, workers: int | None = None) -> pd.DataFrame:
    """Beyond the thesis: slack-aware prioritisation (its future work). Per
    cell: Horovod at the background's class, at the lower one, and
    slack-aware (lower class while the transmit queue's slack lasts; ring
    stragglers and late fusions raised to the background's class) for each
    (slack_factor, slack_lag_rounds) variant. One row per run."""
    import tomli_w

    from ...sweep import run_sweep

    cells = cells or (((4, 92),) if quick else CH5_SLACK_CELLS)
    seeds = seeds or ((1,) if quick else (1, 2, 3))
    duration_s = duration_s or (3.0 if quick else 12.0)
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = []
    for ratio, rate in cells:
        base = ch5_base(duration_s)
        base["jobs"] = [dict(base["jobs"][0], compute_ps=CH5_RATIOS[ratio] * MS,
                             iterations=int(duration_s * 1000 / CH5_RATIOS[ratio]) + 1)]
        base["traffic"] = [dict(base["traffic"][0], flows_per_s=8 * rate)]
        runs = [("static", base, {"jobs.0.class": [0, 1], "seed": list(seeds)})]
        for lag in sorted({lag for _, lag in variants}):
            sa = dict(base, jobs=[dict(base["jobs"][0], **{"class": 1}, slack_aware=True, urgent_class=0,
                                       slack_lag_rounds=lag)])
            factors = [f for f, g in variants if g == lag]
            runs.append((f"slack_lag{lag}", sa, {"jobs.0.slack_factor": factors, "seed": list(seeds)}))
        for name, b, grid in runs:
            path = out_dir / f"r{ratio}_{rate}_{name}.toml"
            path.write_text(tomli_w.dumps({"base": b, "grid": grid}))
            d = out_dir / f"r{ratio}_{rate}_{name}"
            run_sweep(path, d, workers=workers)
            m = _ch5_metrics(d, ratio, duration_s)
            import pyarrow.parquet as pq

            pts = pq.read_table(d / "points.parquet").to_pandas()
            m["flows_per_s_per_host"] = rate
            if name == "static":
                m["policy"] = ["same" if c == 0 else "lower" for c in m.horovod_class]
            else:
                lag = int(name.removeprefix("slack_lag"))
                m["policy"] = [f"slack f={f:g} lag={lag}" for f in pts["param.jobs.0.slack_factor"]]
                m["urgent_bytes_frac"], m["raised_bytes_frac"] = _urgent_fractions(pts)
            frames.append(m)
    df = pd.concat(frames, ignore_index=True)
    df.to_csv(out_dir / "ch5_slack_points.csv", index=False)
    return df


def _urgent_fractions(pts: pd.DataFrame):
    """Per point of a sweep's points table: the share of Horovod's ring
    bytes sent at the urgent class and the share raised to it in flight."""
    total = pts["jobs.horovod.ring_bytes"]
    return (pts["jobs.horovod.urgent_bytes"] / total).to_numpy(), (pts["jobs.horovod.raised_bytes"] / total).to_numpy()


def ch5_slack_summary(df: pd.DataFrame) -> dict:
    """Per cell and policy, averaged over seeds: change of Horovod's
    iteration time and of the small flows' mean FCT against running Horovod
    at the background's class, and for the slack-aware variants the share of
    static low priority's iteration penalty removed and of its small-flow
    gain kept."""
    out = {}
    g = df.groupby(["ratio", "flows_per_s_per_host", "policy"]).mean(numeric_only=True)
    for (ratio, rate), cell in df.groupby(["ratio", "flows_per_s_per_host"]):
        same, low = g.loc[(ratio, rate, "same")], g.loc[(ratio, rate, "lower")]
        pct = lambda a, b: round(100 * (b / a - 1), 1)  # noqa: E731
        row = {"iteration_same_ms": round(same.iteration_ms, 1),
               "same_vs_compute_pct": pct(CH5_RATIOS[ratio], same.iteration_ms),
               "lower": {"iteration_pct": pct(same.iteration_ms, low.iteration_ms),
                         "small_mean_pct": pct(same.small_mean_us, low.small_mean_us)}}
        for pol in sorted(set(cell.policy) - {"same", "lower"}):
            x = g.loc[(ratio, rate, pol)]
            row[pol] = {
                "iteration_pct": pct(same.iteration_ms, x.iteration_ms),
                "small_mean_pct": pct(same.small_mean_us, x.small_mean_us),
                "penalty_removed": round(1 - (x.iteration_ms - same.iteration_ms) / (low.iteration_ms - same.iteration_ms), 2),
                "gain_kept": round((x.small_mean_us - same.small_mean_us) / (low.small_mean_us - same.small_mean_us), 2),
                "urgent_bytes_pct": round(100 * x.urgent_bytes_frac, 1),
                "raised_bytes_pct": round(100 * x.raised_bytes_frac, 1),
            }
        out[f"ratio{ratio}_{rate}fps"] = row
    return out


def plot_ch5_slack(summary: dict, png: Path) -> None:
    """Per cell where static low priority hurts Horovod: the share of its
    iteration penalty each slack-aware variant removes (x) against the share
    of the small flows' gain it keeps (y). Static same priority is (1, 0),
    static low priority (0, 1); the top right is the goal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    pols = sorted({k for v in summary.values() for k in v if k.startswith("slack")})
    markers = dict(zip(pols, "osD^v<>"))
    for i, (cell, row) in enumerate(summary.items()):
        color = plt.cm.tab10(i % 10)
        for pol in pols:
            if pol in row:
                ax.scatter(row[pol]["penalty_removed"], row[pol]["gain_kept"], color=color, marker=markers[pol], s=40)
        ax.fill_between([], [], color=color, label=cell.replace("ratio", "ratio ").replace("_", ", ").replace("fps", " flows/s"))
    for pol in pols:
        ax.scatter([], [], color="gray", marker=markers[pol], label=pol)
    ax.plot([1, 0], [0, 1], color="gray", lw=0.8, ls="--")
    ax.axvline(0.5, color="gray", lw=0.5)
    ax.axhline(0.5, color="gray", lw=0.5)
    ax.set_xlabel("share of static low priority's iteration penalty removed")
    ax.set_ylabel("share of its small-flow mean FCT gain kept")
    ax.set_title("Slack-aware prioritisation on the chapter-5 cells")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def _point_dir(sweep_dir: Path, **params) -> Path:
    """The folder of the point whose parameters match ``params`` (dotted
    names with '.' written as '__')."""
    import json

    for d in sorted((sweep_dir / "points").iterdir()):
        p = json.loads((d / "point.json").read_text())
        if all(p.get(k.replace("__", ".")) == v for k, v in params.items()):
            return d
    raise KeyError(params)


def plot_ch5_figures(out_dir: Path) -> list[Path]:
    """Figure 5.6 (small-flow FCT CDFs, same vs lower priority) and Figures
    5.20-5.23 (Horovod progression: every worker's compute and allreduces)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    made = []
    ratio, rate = (16, 23) if (out_dir / "ratio16").is_dir() else (4, 46)
    sweep = out_dir / f"ratio{ratio}"
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for cls, label in ((0, "same priority"), (1, "Horovod lower")):
        d = _point_dir(sweep, jobs__0__class=cls, traffic__0__flows_per_s=8 * rate, seed=1)
        f = pd.read_parquet(d / "flows.parquet")
        x = np.sort(f[(f.tag == "websearch") & (f.size_bytes < 100_000)]["fct_ps"].dropna().to_numpy() / 1e6)
        ax.plot(x, np.arange(1, len(x) + 1) / len(x), label=f"{label} (mean {x.mean():.0f} us)")
    ax.set_xscale("log")
    ax.set_xlabel("small-flow completion time (us)")
    ax.set_ylabel("CDF")
    ax.set_title(f"Fig. 5.6: compute/network {ratio}, {rate} flows/s per host, seed 1")
    ax.legend()
    fig.tight_layout()
    made.append(out_dir / "fig5.6_small_fct_cdf.png")
    fig.savefig(made[-1], dpi=110)
    plt.close(fig)
    for fig_no, (r, fps, cls) in {"5.20": (4, 92, 0), "5.21": (4, 92, 1), "5.22": (2, 92, 0), "5.23": (2, 92, 1)}.items():
        sweep = out_dir / f"ratio{r}"
        if not sweep.is_dir():
            continue
        try:
            d = _point_dir(sweep, jobs__0__class=cls, traffic__0__flows_per_s=8 * fps, seed=1)
        except KeyError:
            continue
        tl = pd.read_parquet(d / "timeline.parquet")
        fig, ax = plt.subplots(figsize=(12, 4))
        for w, g in tl.groupby("worker"):
            comp = g[g.kind != "allreduce"]
            ax.broken_barh([(s / 1e9, (e - s) / 1e9) for s, e in zip(comp.start_ps, comp.end_ps)], (w * 2 - 0.4, 0.8),
                           color="tab:green")
            ar = g[g.kind == "allreduce"]
            ax.broken_barh([(s / 1e9, (e - s) / 1e9) for s, e in zip(ar.start_ps, ar.end_ps)], (w * 2 + 0.6, 0.6),
                           color="tab:blue", alpha=0.5)
        ax.set_yticks([w * 2 for w in sorted(tl.worker.unique())], [f"worker {w}" for w in sorted(tl.worker.unique())])
        ax.set_xlabel("simulated time (ms); green: compute, blue: allreduces")
        ax.set_title(f"Fig. {fig_no}: Horovod progression, compute/network {r}, {fps} flows/s per host, "
                     f"{'same' if cls == 0 else 'lower'} priority")
        fig.tight_layout()
        made.append(out_dir / f"fig{fig_no}_progression.png")
        fig.savefig(made[-1], dpi=100)
        plt.close(fig)
    return made

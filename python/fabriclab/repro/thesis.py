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

from ..engine import simulate
from ..scenario import Scenario

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

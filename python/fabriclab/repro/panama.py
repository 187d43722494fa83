"""Reproduction of PANAMA, "In-network aggregation for shared machine
learning clusters" (Gebara et al., MLSys 2021; seed 001), section 7.

- Figure 9 (load balancing): the multi-tier Clos of figure 3 (a k = 4
  fat-tree: 16 hosts, four core switches, so four aggregation trees), one
  8-worker job (one worker per edge switch) and a growing number of the
  other hosts sending long flows to the next pod. Aggregation latency (one
  allreduce of the model) for PANAMA on all four trees, PANAMA on a single
  tree (Agg1 to Agg4) and Ring-AllReduce over DCTCP.
- Figure 10 (fairness): one aggregation flow and one long TCP flow (DCTCP)
  sharing a 10 Gbit/s bottleneck, the TCP flow alone first, the
  aggregation joining at 0.25 s, with PANAMA's congestion control and
  without it (SwitchML*'s fixed window): per-class throughput on the
  bottleneck over time, and Jain's index over the shared period.

Both run on the packet backend. docs/reproductions.md sets our numbers
beside the paper's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..engine import simulate
from ..scenario import Scenario

MS = 10**9
US = 10**6

PAPER_FIG9 = ("PANAMA with all four trees has the lowest aggregation latency at every load; with a single tree "
              "(Agg1..Agg4) aggregation can be slower than Ring-AllReduce (Fig. 9)")
PAPER_FIG10 = ("with PANAMA's congestion control the aggregation and the non-aggregation flow share the bottleneck "
               "about equally (Fig. 10a); without it the non-aggregation flow starves (Fig. 10b)")

# SwitchML*'s fixed window per tree: more than the bottleneck's bandwidth-delay
# product and ECN threshold together, as a pool of switch slots sized for
# line rate is.
SWITCHML_WINDOW_PACKETS = 128
# The switches' ECN marking threshold (section 7: 85 packets).
ECN_THRESHOLD_PACKETS = 85


# ----------------------------------------------------------------- figure 10
def fig10_scenario(control: str, scale: float = 1.0) -> Scenario:
    """Hosts h0, h1 under leaf0 and h2, h3 under leaf1, one spine, every link
    10 Gbit/s: leaf0 -> spine0 is the bottleneck of the TCP flow h1 -> h3 and
    of the aggregation tree of h0 and h2 (rooted at spine0)."""
    start, stop = int(250 * MS * scale), int(750 * MS * scale)
    kind = "panama" if control == "panama" else "switchml"
    window = SWITCHML_WINDOW_PACKETS if kind == "switchml" else 10
    return Scenario.from_dict({
        "name": f"panama-fig10 {control}", "backend": "packet", "stop_ps": stop,
        "topology": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 2, "spines": 1,
                     "link_rate_bps": "10Gbps", "spine_link_rate_bps": "10Gbps"},
        "queue": {"discipline": "fifo", "ecn_threshold_packets": ECN_THRESHOLD_PACKETS, "limit_bytes": "8MB"},
        "transport": {"cc": "dctcp"},
        "flows": [{"src": 1, "dst": 3, "size_bytes": "10GB", "class": 0}],
        "jobs": [{"name": "aggregation", "workers": [0, 2], "allreduce": kind, "class": 3, "layers": 1,
                  "model_bytes": "4MB", "fusion_bytes": "4MB", "compute_ps": "1us", "iterations": 1_000_000,
                  "start_ps": start, "barrier": False, "aggregation": {"window_packets": window}}],
        "outputs": {"queues_every_ps": max(int(MS * scale), 100 * US)},
    })


def class_rates(res, src: str, dst: str) -> pd.DataFrame:
    """Per sample interval, each class's throughput (Gbit/s of wire bytes) on ``src -> dst``."""
    c = res.classes
    c = c[(c.src_node == src) & (c.dst_node == dst)]
    cum = c.pivot_table(index="time_ps", columns="class", values="tx_bytes", aggfunc="max").sort_index()
    cum = cum.ffill().fillna(0)
    dt_s = cum.index.to_series().diff() / 1e12
    return (cum.diff() * 8).div(dt_s, axis=0).iloc[1:] / 1e9


def jain(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(x.sum() ** 2 / (len(x) * (x ** 2).sum())) if (x ** 2).sum() > 0 else 0.0


def fig10(out_dir: Path, quick: bool = False) -> dict:
    scale = 0.4 if quick else 1.0
    out: dict = {}
    series = {}
    for control in ("panama", "none"):
        s = fig10_scenario(control, scale)
        r = simulate(s)
        rates = class_rates(r, "leaf0", "spine0").rename(columns={0: "tcp_gbps", 3: "aggregation_gbps"})
        start = s.jobs[0].start_ps
        # The shared period, after 10 % of it for the aggregation's start.
        settle = start + (s.stop_ps - start) // 10
        shared = rates[rates.index > settle].mean()
        out[control] = {
            "tcp_alone_gbps": round(float(rates[rates.index <= start]["tcp_gbps"].mean()), 2),
            "tcp_shared_gbps": round(float(shared["tcp_gbps"]), 2),
            "aggregation_shared_gbps": round(float(shared["aggregation_gbps"]), 2),
            "jain_shared": round(jain([shared["tcp_gbps"], shared["aggregation_gbps"]]), 3),
            "drops": r.summary["links"]["drops"],
        }
        rates.index = rates.index / 1e12
        series[control] = rates
        out_dir.mkdir(parents=True, exist_ok=True)
        rates.to_csv(out_dir / f"fig10_{control}.csv", index_label="time_s")
    plot_fig10(series, out_dir / "fig10_fairness.png")
    out["paper"] = PAPER_FIG10
    return out


def plot_fig10(series: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
    for ax, (control, title) in zip(axes, (("panama", "(a) PANAMA"), ("none", "(b) without congestion control"))):
        d = series[control]
        ax.plot(d.index, d["tcp_gbps"], label="non-aggregation (DCTCP)")
        ax.plot(d.index, d["aggregation_gbps"], label="aggregation")
        ax.set_title(title)
        ax.set_xlabel("time (s)")
    axes[0].set_ylabel("throughput on the bottleneck (Gbit/s)")
    axes[0].legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


# ----------------------------------------------------------------- figure 9
FIG9_CONFIGS = ("PANAMA", "PANAMA-Agg1", "PANAMA-Agg2", "PANAMA-Agg3", "PANAMA-Agg4", "Ring-AllReduce")


def fig9_scenario(config: str, long_flow_hosts: int, model_bytes: int = 8 * 10**6, iterations: int = 3) -> Scenario:
    """A k = 4 fat-tree (figure 3's four trees), 8 workers on the even hosts
    (one per edge switch), and the first ``long_flow_hosts`` odd hosts each
    sending a long flow to the odd host of the next pod."""
    job = {"name": "job", "workers": list(range(0, 16, 2)), "class": 3, "layers": 1,
           "model_bytes": model_bytes, "fusion_bytes": model_bytes, "compute_ps": "1us",
           "iterations": iterations, "start_ps": 5 * MS, "barrier": True, "end_run": True}
    if config == "Ring-AllReduce":
        job["allreduce"] = "ring"
    else:
        job["allreduce"] = "panama"
        job["aggregation"] = {"trees": "all" if config == "PANAMA" else [f"core{int(config[-1]) - 1}"]}
    senders = list(range(1, 16, 2))[:long_flow_hosts]
    return Scenario.from_dict({
        "name": f"panama-fig9 {config} {long_flow_hosts}", "backend": "packet",
        "topology": {"kind": "fat_tree", "k": 4, "link_rate_bps": "10Gbps"},
        "queue": {"discipline": "fifo", "ecn_threshold_packets": ECN_THRESHOLD_PACKETS, "limit_bytes": "8MB"},
        "transport": {"cc": "dctcp"},
        "flows": [{"src": h, "dst": (h + 4) % 16, "size_bytes": "10GB", "class": 0} for h in senders],
        # The run ends with the job: the long flows would go on for seconds.
        "jobs": [job],
    })


def aggregation_latency_ms(res) -> list[float]:
    """Per iteration: first allreduce start to last worker holding the sum."""
    t = res.timeline
    a = t[t.kind == "allreduce"]
    g = a.groupby("iteration").agg(start=("start_ps", "min"), end=("end_ps", "max"))
    return list((g.end - g.start) / MS)


def fig9(out_dir: Path, quick: bool = False) -> pd.DataFrame:
    loads = (0, 8) if quick else (0, 2, 4, 6, 8)
    iterations = 2 if quick else 3
    rows = []
    for config in FIG9_CONFIGS:
        for n in loads:
            r = simulate(fig9_scenario(config, n, iterations=iterations))
            lat = aggregation_latency_ms(r)
            if len(lat) < iterations:
                raise RuntimeError(f"fig9 {config} with {n} long flows: {len(lat)} of {iterations} iterations done")
            rows.append({"config": config, "long_flow_hosts": n, "aggregation_latency_ms": float(np.mean(lat))})
    df = pd.DataFrame(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    df.to_csv(out_dir / "fig9_load_balancing.csv", index=False)
    plot_fig9(df, out_dir / "fig9_load_balancing.png")
    return df


def fig9_summary(df: pd.DataFrame) -> dict:
    p = df.pivot(index="long_flow_hosts", columns="config", values="aggregation_latency_ms")
    singles = p[[c for c in p.columns if "Agg" in c]]
    return {
        "aggregation_latency_ms": {str(n): {c: round(float(v), 2) for c, v in row.items()} for n, row in p.iterrows()},
        "panama_best_everywhere": bool((p["PANAMA"] <= p.min(axis=1) + 1e-9).all()),
        "worst_single_tree_over_ring": {str(n): round(float(singles.loc[n].max() / p.loc[n, "Ring-AllReduce"]), 2)
                                        for n in p.index},
        "paper": PAPER_FIG9,
    }


def plot_fig9(df: pd.DataFrame, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for config, d in df.groupby("config", sort=False):
        ax.plot(d.long_flow_hosts, d.aggregation_latency_ms, marker="o", label=config)
    ax.set_xlabel("hosts sending long flows")
    ax.set_ylabel("aggregation latency (ms)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)

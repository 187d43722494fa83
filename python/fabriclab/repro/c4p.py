"""C4P's figures 8, 9, 11 and 12 (C4 paper, section 4.2.2) on the C4P
testbed model (fabriclab/c4p), flow backend, fluid max-min rates.

- fig8: one allreduce job over 2..16 servers, ECMP versus C4P's paths.
- fig9: 8 two-server jobs (one server in each leaf group) at once, 1:1 and
  2:1 (half the spines), ECMP versus C4P.
- fig11: the same 8 jobs with C4P paths, a leaf-spine link going down
  mid-run, static spreading over the QPs versus dynamic load balancing;
  each allreduce's bus bandwidth in turn, as the paper's refined benchmark.
- fig12 (in fig11's run): bytes per uplink port of the leaf that lost a link,
  before and after the failure.

Bus bandwidths are nccl-tests' (GB/s, busbw = algbw * 2(n-1)/n). The
paper's axes say Gbit/s, but its values (ideal about 360, NVLink cap 362)
are those of a server of eight 400 Gbit/s NICs in GB/s, equivalently Gbit/s
per NIC; docs/c4p.md discusses it.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from ..c4p.bench import Job, RunConfig, run_jobs
from ..c4p.testbed import GPUS_PER_SERVER, testbed

PAPER = {
    "fig8": {"without_below": 240, "with_about": 360, "gain_percent": 50},
    "fig9_1to1": {"without_min": 171.93, "without_max": 263.27, "with_min": 353.86, "with_max": 360.57,
                  "gain_percent": 70.3},
    "fig9_2to1": {"gain_percent": 65.55, "with_spread": 11.27},
    "fig11": {"static_mean": 185.76, "dlb_mean": 301.46, "ideal": 315, "gain_percent": 62.3},
}
FAILED_LINK = ("leaf0", "spine0")


def _gbs(bps: float) -> float:
    return bps / 8e9


def nccl_table(rows: list[dict]) -> str:
    """nccl-tests' columns, one line per job (float sum, out of place)."""
    head = f"#{'job':>8} {'size':>12} {'count':>12} {'type':>6} {'redop':>6} {'root':>5} {'time':>10} {'algbw':>7} {'busbw':>7}\n"
    head += f"#{'':>8} {'(B)':>12} {'(elements)':>12} {'':>6} {'':>6} {'':>5} {'(us)':>10} {'(GB/s)':>7} {'(GB/s)':>7}\n"
    lines = []
    for r in rows:
        t_us = r["time_ps"] / 1e6
        algbw = r["size_bytes"] / (r["time_ps"] / 1e12) / 1e9
        busbw = algbw * 2 * (r["nranks"] - 1) / r["nranks"]
        lines.append(f" {r['job']:>8} {r['size_bytes']:>12} {r['size_bytes'] // 4:>12} {'float':>6} {'sum':>6} "
                     f"{-1:>5} {t_us:>10.1f} {algbw:>7.2f} {busbw:>7.2f}")
    return head + "\n".join(lines) + "\n"


def _rows(res, size_bytes: int, label: str) -> list[dict]:
    return [{"job": f"{label}{j.name}", "size_bytes": size_bytes, "nranks": j.nranks, "time_ps": t}
            for j in res.jobs for t in j.iteration_ps]


def fig8(out_dir: Path, quick: bool = False) -> dict:
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    counts = (2, 4) if quick else (2, 4, 8, 16)
    size = (64 << 20) if quick else (512 << 20)
    t = testbed(16)
    rows, tables, summary = [], [], {}
    for n in counts:
        # Servers alternate between the leaf groups, so every hop crosses the spines.
        servers = [(i // 2) + (8 if i % 2 else 0) for i in range(n)]
        for mode in ("ecmp", "c4p"):
            cfg = RunConfig(mode=mode, size_bytes=size, qps=2)
            res = run_jobs(t, [Job(f"{n}srv", servers)], cfg)
            bw = _gbs(res.jobs[0].busbw_bps(size)[0])
            rows.append({"servers": n, "gpus": n * GPUS_PER_SERVER, "mode": mode, "busbw_GBps": round(bw, 1)})
            tables.append(f"# {mode}, {n} servers\n" + nccl_table(_rows(res, size, f"{mode}-")))
    df = pd.DataFrame(rows)
    df.to_csv(out_dir / "fig8.csv", index=False)
    (out_dir / "fig8_nccl_tests.txt").write_text("\n".join(tables))
    for n in counts:
        e = df[(df.servers == n) & (df["mode"] == "ecmp")].busbw_GBps.iloc[0]
        c = df[(df.servers == n) & (df["mode"] == "c4p")].busbw_GBps.iloc[0]
        summary[f"{n}_servers"] = {"ecmp_GBps": e, "c4p_GBps": c, "gain_percent": round(100 * (c / e - 1), 1)}
    _plot_bars(df, "servers", out_dir / "fig8.png", "servers in the job")
    return {"ours": summary, "paper": PAPER["fig8"], "size_bytes": size}


def fig9(out_dir: Path, quick: bool = False) -> dict:
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    size = (32 << 20) if quick else (256 << 20)
    njobs = 4 if quick else 8
    rows, tables, summary = [], [], {}
    for over in (1.0, 2.0):
        t = testbed(16, oversubscription=over)
        jobs = [Job(f"job{i}", [i, 8 + i]) for i in range(njobs)]
        bws = {}
        for mode in ("ecmp", "c4p"):
            res = run_jobs(t, jobs, RunConfig(mode=mode, size_bytes=size, qps=2))
            bws[mode] = [_gbs(j.busbw_bps(size)[0]) for j in res.jobs]
            for j, bw in zip(res.jobs, bws[mode]):
                rows.append({"oversubscription": f"{over:g}:1", "mode": mode, "job": j.name, "busbw_GBps": round(bw, 2)})
            tables.append(f"# {mode}, {over:g}:1\n" + nccl_table(_rows(res, size, f"{mode}-")))
        e, c = bws["ecmp"], bws["c4p"]
        summary[f"{over:g}:1"] = {
            "ecmp_min_GBps": round(min(e), 2), "ecmp_max_GBps": round(max(e), 2),
            "c4p_min_GBps": round(min(c), 2), "c4p_max_GBps": round(max(c), 2),
            "c4p_spread_GBps": round(max(c) - min(c), 2),
            "gain_percent": round(100 * (sum(c) / sum(e) - 1), 1)}
    df = pd.DataFrame(rows)
    df.to_csv(out_dir / "fig9.csv", index=False)
    (out_dir / "fig9_nccl_tests.txt").write_text("\n".join(tables))
    _plot_jobs(df, out_dir / "fig9.png")
    return {"ours": summary, "paper": {"1:1": PAPER["fig9_1to1"], "2:1": PAPER["fig9_2to1"]}, "size_bytes": size}


def fig11(out_dir: Path, quick: bool = False) -> dict:
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    size = (16 << 20) if quick else (64 << 20)
    iterations = 6 if quick else 12
    njobs = 4 if quick else 8
    t = testbed(16)
    jobs = [Job(f"job{i}", [i, 8 + i]) for i in range(njobs)]
    # The link fails during the fourth allreduce (one takes about 0.45 ms here).
    down_ps = (400 if quick else 1_600) * 10**6
    events = [{"at_ps": down_ps, "link": list(FAILED_LINK), "action": "down"}]
    rows, tables, summary, ports = [], [], {}, []
    for balance in ("split", "dlb"):
        cfg = RunConfig(mode="c4p", balance=balance, qps=4, qp_depth=4, size_bytes=size, iterations=iterations,
                        link_events=events)
        res = run_jobs(t, jobs, cfg)
        name = "static" if balance == "split" else "dlb"
        after = []
        for j in res.jobs:
            end = 0
            for k, (tp, bw) in enumerate(zip(j.iteration_ps, j.busbw_bps(size))):
                start, end = end, end + tp
                rows.append({"balance": name, "job": j.name, "iteration": k, "end_ps": end,
                             "busbw_GBps": round(_gbs(bw), 2)})
                if start > down_ps:
                    after.append(_gbs(bw))
        before = [r["busbw_GBps"] for r in rows if r["balance"] == name and r["end_ps"] < down_ps]
        summary[name] = {"before_mean_GBps": round(statistics.fmean(before), 1),
                         "after_mean_GBps": round(statistics.fmean(after), 1),
                         "after_min_GBps": round(min(after), 1), "after_max_GBps": round(max(after), 1)}
        tables.append(f"# C4P {name}, {FAILED_LINK[0]}-{FAILED_LINK[1]} down at {down_ps / 1e9:g} ms\n"
                      + nccl_table(_rows(res, size, f"{name}-")))
        L = res.links
        for _, lk in L[(L.src_node == FAILED_LINK[0]) & L.dst_node.str.startswith("spine")].iterrows():
            ports.append({"balance": name, "port": f"{lk.src_node}->{lk.dst_node}", "bytes": int(lk["bytes"])})
    s, d = summary["static"], summary["dlb"]
    summary["ideal_after_GBps"] = round(s["before_mean_GBps"] * 7 / 8, 1)
    summary["gain_percent"] = round(100 * (d["after_mean_GBps"] / s["after_mean_GBps"] - 1), 1)
    df = pd.DataFrame(rows)
    df.to_csv(out_dir / "fig11.csv", index=False)
    pd.DataFrame(ports).to_csv(out_dir / "fig12_leaf_ports.csv", index=False)
    (out_dir / "fig11_nccl_tests.txt").write_text("\n".join(tables))
    _plot_series(df, down_ps, out_dir / "fig11.png")
    return {"ours": summary, "paper": PAPER["fig11"], "size_bytes": size, "iterations": iterations,
            "failed_link": list(FAILED_LINK), "fig12_leaf0_uplink_bytes": ports}


def _plot_bars(df, key, path, xlabel):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    keys = sorted(df[key].unique())
    for k, mode in enumerate(("ecmp", "c4p")):
        vals = [df[(df[key] == x) & (df["mode"] == mode)].busbw_GBps.iloc[0] for x in keys]
        ax.bar([i + 0.4 * k for i in range(len(keys))], vals, width=0.4, label="with C4P" if mode == "c4p" else "ECMP")
    ax.set_xticks([i + 0.2 for i in range(len(keys))], [str(x) for x in keys])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("busbw (GB/s)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_jobs(df, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3), sharey=True)
    for ax, over in zip(axes, ("1:1", "2:1")):
        d = df[df.oversubscription == over]
        for k, mode in enumerate(("ecmp", "c4p")):
            m = d[d["mode"] == mode]
            ax.bar([i + 0.4 * k for i in range(len(m))], m.busbw_GBps, width=0.4,
                   label="with C4P" if mode == "c4p" else "ECMP")
        ax.set_title(over)
        ax.set_xlabel("job")
    axes[0].set_ylabel("busbw (GB/s)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_series(df, down_ps, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3), sharey=True)
    for ax, name in zip(axes, ("static", "dlb")):
        d = df[df.balance == name]
        for job, g in d.groupby("job"):
            ax.plot(g.end_ps / 1e9, g.busbw_GBps, marker=".", lw=0.8)
        ax.axvline(down_ps / 1e9, color="k", ls=":")
        ax.set_title(f"C4P {name}")
        ax.set_xlabel("time (ms)")
    axes[0].set_ylabel("busbw (GB/s)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

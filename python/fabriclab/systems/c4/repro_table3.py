"""C4's Table 3 as a model (`fabriclab reproduce c4-table3`): the
error-induced downtime of a month-long 2400-GPU job under the June 2023
practice and under C4D, part by part, beside the paper's percentages.
The model and every assumed parameter are in fabriclab/systems/c4/downtime.py."""

from __future__ import annotations

import statistics
from pathlib import Path

from . import downtime as dt


def table3(out_dir: Path, quick: bool = False) -> dict:
    import pandas as pd

    months = 5 if quick else 200
    rows, summary, totals = [], {}, {}
    for name, practice in dt.PRACTICES.items():
        exp = dt.expected(practice)
        totals[name] = exp["percent"]["total"]
        runs = [dt.simulate(practice, 30 * dt.DAY_S, seed) for seed in range(1, months + 1)]
        paper = dt.PAPER_TABLE3[name]
        for part in (*dt.PARTS, "total"):
            sims = [r["percent"][part] for r in runs]
            rows.append({"practice": name, "part": part, "expected_percent": exp["percent"][part],
                         "months_mean_percent": statistics.fmean(sims),
                         "months_p10_percent": _quantile(sims, 0.1), "months_p90_percent": _quantile(sims, 0.9),
                         "paper_percent": paper[part]})
        for kind, v in exp["diagnosis_by_kind_percent"].items():
            rows.append({"practice": name, "part": f"diagnosis: {kind}", "expected_percent": v,
                         "months_mean_percent": statistics.fmean(r["diagnosis_by_kind_percent"][kind] for r in runs),
                         "months_p10_percent": None, "months_p90_percent": None,
                         "paper_percent": paper["by_kind"][kind]})
        summary[name] = {
            "assumptions": {"errors_per_day": round(practice.errors_per_day, 4),
                            "checkpoint_interval_s": practice.checkpoint_interval_s,
                            "detection_s": practice.detection_s, "reinit_s": practice.reinit_s,
                            "auto_isolation_s": practice.auto_isolation_s,
                            "manual_diagnosis_s": {k.name: k.manual_diagnosis_s for k in practice.mix}},
            "expected_percent": {k: round(v, 2) for k, v in exp["percent"].items()},
            "paper_percent": {k: paper[k] for k in (*dt.PARTS, "total")},
            "months": months,
        }
    j, c = totals["june-2023"], totals["c4d"]
    summary["reduction"] = {"ours": round(j / c, 1), "paper": round(31.19 / 1.16, 1)}
    df = pd.DataFrame(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    df.to_csv(out_dir / "table3_downtime.csv", index=False)
    _plot(df, out_dir / "table3_downtime.png")
    return summary


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def _plot(df, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, name in zip(axes, dt.PRACTICES):
        d = df[(df.practice == name) & df.part.isin(dt.PARTS)].set_index("part").loc[list(dt.PARTS)]
        bottom = [0.0, 0.0]
        for part in dt.PARTS:
            vals = [d.loc[part, "expected_percent"], d.loc[part, "paper_percent"]]
            ax.bar(["ours (expected)", "paper"], vals, bottom=bottom, label=part.replace("_", " "))
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_title(name)
        ax.set_ylabel("downtime, % of the job's time")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)

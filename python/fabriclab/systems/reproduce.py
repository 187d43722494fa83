"""Running reproductions by name (``fabriclab reproduce NAME``), all quick
modes at once (``fabriclab reproduce all --quick``), and the tables of the
registry (systems/registry/): the page's summary table and the quick
checks' verdicts."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

from .registry import QUICK, REPRODUCTIONS, ROWS

HEADER = ["seed", "figure / table", "metric", "paper", "ours", "tolerance", "status", "command"]


def names() -> tuple[str, ...]:
    return tuple(r.name for r in REPRODUCTIONS)


def run(what: str, out_dir: Path, quick: bool = False, seed_base: int | None = None, workers: int = 1) -> dict:
    """Runs one reproduction into ``out_dir`` and returns its summary
    (written to ``out_dir/summary.json`` as well)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if what == "blink":
        from .blink import repro as blink

        summary = blink.run(out_dir, quick=quick)
    elif what == "thesis-ch4":
        from .thesis import repro as thesis

        summary = thesis.ch4_summary(thesis.ch4(out_dir, quick=quick))
    elif what == "thesis-ch5":
        from .thesis import repro as thesis

        summary = thesis.ch5_summary(thesis.ch5(out_dir, quick=quick))
        thesis.plot_ch5(summary, out_dir / "fig5.19_heatmaps.png")
        thesis.plot_ch5_figures(out_dir)
    elif what == "thesis-slack":
        from .thesis import repro as thesis

        summary = thesis.ch5_slack_summary(thesis.ch5_slack(out_dir, quick=quick))
        thesis.plot_ch5_slack(summary, out_dir / "slack_tradeoff.png")
    elif what == "panama-fig8":
        from .panama import repro as panama

        summary = panama.fig8_summary(panama.fig8(out_dir, quick=quick))
    elif what == "panama-fig8-1024":
        from .panama import repro as panama

        # The paper's 1024 servers: a k = 16 fat-tree on the flow backend.
        summary = panama.fig8_summary(panama.fig8(out_dir, quick=quick, backend="flow", k=16))
    elif what == "panama-fig9":
        from .panama import repro as panama

        summary = panama.fig9_summary(panama.fig9(out_dir, quick=quick))
    elif what == "panama-fig10":
        from .panama import repro as panama

        summary = panama.fig10(out_dir, quick=quick)
    elif what == "c4-table3":
        from .c4 import repro_table3 as downtime

        summary = downtime.table3(out_dir, quick=quick)
    elif what == "c4p-fig13-llm":
        from .c4p import fig13_llm

        summary = fig13_llm.fig13_llm(out_dir, quick=quick)
    elif what == "megatron-weak-scaling":
        from .megatron import repro as megatron

        summary = megatron.weak_scaling(out_dir, quick=quick)
    elif what.startswith("c4p-"):
        from .c4p import repro as c4p

        summary = getattr(c4p, what.removeprefix("c4p-"))(out_dir, quick=quick)
    elif what == "c4-diagnosis":
        from .c4 import repro_diagnosis as c4

        summary = c4.run(out_dir, quick=quick, seed_base=seed_base)
    elif what == "c4-recovery":
        from .c4 import repro_recovery as c4_recovery

        summary = c4_recovery.run(out_dir, quick=quick)
    elif what == "clock-sync":
        from .clockwork import repro_sync

        summary = repro_sync.run(out_dir, quick=quick, workers=workers)
    elif what == "colocation":
        from .clockwork import repro_colocation

        summary = repro_colocation.run(out_dir, quick=quick, workers=workers)
    elif what == "bottleneck":
        from .clockwork import repro_bottleneck

        summary = repro_bottleneck.run(out_dir, quick=quick, workers=workers)
    elif what == "clockwork-nccl":
        from .clockwork import repro_nccl

        summary = repro_nccl.run(out_dir, quick=quick, workers=workers)
    elif what == "clockwork-ray":
        from .clockwork import repro_ray

        summary = repro_ray.run(out_dir, quick=quick, workers=workers)
    else:
        raise ValueError(f"unknown reproduction {what!r}")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def check_quick(name: str, summary: dict) -> list[dict]:
    """The quick checks of reproduction ``name`` against ``summary``: one
    dict per check (metric, paper, ours, band, holds)."""
    out = []
    for q in QUICK:
        if q.repro != name:
            continue
        try:
            ours = q.read(summary)
        except (KeyError, IndexError, TypeError, ValueError):
            ours = float("nan")
        out.append({"reproduction": name, "metric": q.metric, "key": q.key, "paper": q.paper, "ours": ours,
                    "recorded": q.value, "band": str(q.band), "holds": q.band.holds(ours)})
    return out


def run_all_quick(out_dir: Path, workers: int = 1, only: tuple[str, ...] | None = None, progress=None) -> list[dict]:
    """Runs every quick mode (or those in ``only``) into ``out_dir/NAME`` and
    checks each against its quick bands; writes ``out_dir/quick_checks.csv``
    and returns the rows (with each run's wall seconds)."""
    rows = []
    for r in REPRODUCTIONS:
        if only is not None and r.name not in only:
            continue
        if progress:
            progress(r.name)
        t0 = time.perf_counter()
        summary = run(r.name, out_dir / r.name, quick=True, workers=workers)
        wall = round(time.perf_counter() - t0, 1)
        for c in check_quick(r.name, summary):
            rows.append({**c, "wall_s": wall})
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "quick_checks.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["reproduction", "metric", "key", "paper", "ours", "recorded", "band",
                                          "holds", "wall_s"])
        w.writeheader()
        w.writerows(rows)
    return rows


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def quick_table(rows: list[dict]) -> str:
    """Plain text: one line per quick check."""
    head = ("reproduction", "metric", "paper", "ours (quick)", "band", "holds")
    body = [(r["reproduction"], r["metric"], r["paper"], _fmt(r["ours"]), r["band"], "yes" if r["holds"] else "NO")
            for r in rows]
    return _text_table(head, body)


def list_table() -> str:
    """Plain text: the registry (reproductions, then the page's rows)."""
    head = ("reproduction", "runs on", "quick s", "in CI", "full run", "quick checks")
    body = [(r.name, r.runs_on, "?" if r.quick_s is None else f"{r.quick_s:g}", r.ci.removeprefix("tests/") or "on demand",
             r.full, str(sum(q.repro == r.name for q in QUICK))) for r in REPRODUCTIONS]
    rows = [(x.repro or "-", x.metric, x.paper, x.ours, x.tolerance, x.verdict, x.full_date or "-") for x in ROWS]
    return (_text_table(head, body) + "\n\n"
            + _text_table(("reproduction", "metric", "paper", "ours (full)", "tolerance", "status", "date"), rows))


def _text_table(head, body) -> str:
    width = [max(len(str(c)) for c in col) for col in zip(head, *body)]
    width = [min(w, 60) for w in width]
    lines = ["  ".join(str(c)[:w].ljust(w) for c, w in zip(head, width)).rstrip(),
             "  ".join("-" * w for w in width)]
    lines += ["  ".join(str(c)[:w].ljust(w) for c, w in zip(row, width)).rstrip() for row in body]
    return "\n".join(lines)


def markdown_table() -> str:
    """docs/reproductions.md's summary table, from ``ROWS``."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in ROWS]
    return "\n".join(lines)


def replace_table(page: str) -> str:
    """``page`` with its summary table (the one headed like ``HEADER``) replaced by :func:`markdown_table`."""
    lines = page.split("\n")
    head = "| " + " | ".join(HEADER) + " |"
    if head not in lines:
        raise ValueError("docs/reproductions.md: no summary table with header " + head)
    i = lines.index(head)
    j = i
    while j < len(lines) and lines[j].startswith("|"):
        j += 1
    return "\n".join(lines[:i] + markdown_table().split("\n") + lines[j:])


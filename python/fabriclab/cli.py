"""The command line: ``fabriclab run | validate | topo show``.

Bad input exits with code 2 and one message naming the field and the rule,
never a traceback."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from .results import BUCKETS
from .scenario import Scenario, ScenarioError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="fabriclab: the network side of distributed ML training.")
topo_app = typer.Typer(no_args_is_help=True, help="Topologies.")
app.add_typer(topo_app, name="topo")

err = Console(stderr=True)
out = Console()

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


def _fail(msg: str, code: int = EXIT_BAD_INPUT) -> None:
    err.print(f"[bold red]error:[/] {msg}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _load(path: Optional[Path]) -> Scenario:
    return Scenario.default() if path is None else Scenario.load(path)


def _fmt_us(ps) -> str:
    return "-" if ps is None else f"{ps / 1e6:,.1f}"


def _summary_table(summary: dict) -> Table:
    t = Table(
        title=f"FCT (us) — {summary['flows_finished']}/{summary['flows_total']} flows finished",
        caption="small < 100 KB, medium 100 KB..10 MB, large > 10 MB",
    )
    for col in ("bucket", "flows", "mean", "p50", "p99", "p99.9", "mean slowdown"):
        t.add_column(col, justify="right" if col != "bucket" else "left")
    for name in ["all"] + [b for b, _ in BUCKETS]:
        s = summary["fct"][name]
        if s["finished"] == 0:
            t.add_row(name, str(s["flows"]), "-", "-", "-", "-", "-")
            continue
        t.add_row(
            name, str(s["finished"]), _fmt_us(s["fct_mean_ps"]), _fmt_us(s["fct_p50_ps"]),
            _fmt_us(s["fct_p99_ps"]), _fmt_us(s["fct_p999_ps"]), f"{s['slowdown_mean']:.2f}",
        )
    return t


def _jobs_table(summary: dict) -> Table:
    t = Table(title="Training jobs")
    for col in ("job", "iterations", "mean iteration (ms)", "first (ms)", "min gradient slack (ms)"):
        t.add_column(col, justify="left" if col == "job" else "right")
    for name, j in summary["jobs"].items():
        mean = j.get("mean_iteration_time_ps")
        first = j["iteration_times_ps"][0] if j["iteration_times_ps"] else None
        slack = j.get("gradient_slack_ps", {}).get("min")
        fmt = lambda v: "-" if v is None or v != v else f"{v / 1e9:,.1f}"  # noqa: E731
        t.add_row(name, f"{j['iterations']}{'' if j['finished'] else ' (unfinished)'}", fmt(mean), fmt(first), fmt(slack))
    return t


def _links_table(summary: dict) -> Table:
    ln = summary["links"]
    perf = summary["performance"]
    t = Table(title="Fabric")
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_row("simulated time (ms)", f"{summary['sim_time_ps'] / 1e9:,.3f}")
    t.add_row("link utilization mean / max", f"{ln['mean_utilization']:.3f} / {ln['max_utilization']:.3f}")
    t.add_row("drops", f"{ln['drops']:,}")
    t.add_row("ECN marks", f"{ln['ecn_marks']:,}")
    t.add_row("max queue (bytes)", f"{ln['max_queue_bytes']:,}")
    t.add_row("retransmitted segments", f"{summary['retransmits']:,}")
    t.add_row("events", f"{summary['events']:,}")
    t.add_row("wall time (s) / events per s", f"{perf['wall_time_s']:.2f} / {perf['events_per_s'] / 1e6:.2f} M")
    return t


@app.command()
def run(
    scenario: Optional[Path] = typer.Argument(None, help="Scenario TOML; the built-in default when omitted."),
    out_dir: Path = typer.Option(Path("fabriclab-out"), "--out", help="Output folder (must be empty or absent)."),
    force: bool = typer.Option(False, "--force", help="Replace a non-empty output folder."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Override the scenario's seed."),
    backend: Optional[str] = typer.Option(None, "--backend", help="Override the backend: packet or flow."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or tables."),
) -> None:
    """Run a scenario and write flows.parquet, links.parquet, summary.json and scenario.resolved.toml."""
    from .engine import simulate

    s = _load(scenario)
    changes = {}
    if seed is not None:
        changes["seed"] = seed
    if backend is not None:
        changes["backend"] = backend
    if changes:
        s = s.replace(**changes)
    if out_dir.exists() and (not out_dir.is_dir() or (any(out_dir.iterdir()) and not force)):
        _fail(f"--out: {out_dir} is not an empty folder (use --force to replace it)")
    s.to_core()  # resolve everything (files, CDFs, host indices) before running
    res = simulate(s, progress=not quiet)
    res.write(out_dir, force=force)
    if not quiet:
        out.print(_summary_table(res.summary))
        if "jobs" in res.summary:
            out.print(_jobs_table(res.summary))
        out.print(_links_table(res.summary))
        out.print(f"results in [bold]{out_dir}[/]")


@app.command()
def validate(scenario: Path = typer.Argument(..., help="Scenario TOML to check.")) -> None:
    """Check a scenario without running it (schema, files, topology)."""
    from .engine import build_simulator

    s = Scenario.load(scenario)
    build_simulator(s)
    t = s.build_topology()
    out.print(f"{scenario}: ok ({len(t.hosts)} hosts, {len(t.nodes) - len(t.hosts)} switches, "
              f"{len(t.links)} links, backend {s.backend})")


@topo_app.command("show")
def topo_show(
    scenario: Optional[Path] = typer.Argument(None, help="Scenario TOML; the built-in default when omitted."),
    png: Path = typer.Option(Path("topology.png"), "--out", help="PNG file to write."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="Draw a GPU server instead: dgx1p, dgx1v, dgx2, pcie."),
    gpus: str = typer.Option("all", "--gpus", help="With --gpu: the allocated GPUs."),
    plan: Optional[str] = typer.Option(None, "--plan", help="With --gpu: overlay the rings or trees of ring|trees."),
    op: str = typer.Option("allreduce", "--op", help="With --plan: the collective."),
) -> None:
    """Draw a scenario's topology, or a GPU server with a plan's rings or trees, as a PNG."""
    from .draw import draw_gpu_plan, draw_topology

    if gpu is not None:
        from .collectives.algos import Allocation, PlanningError, make_plan
        from .collectives.bench import build_topology, parse_gpus

        try:
            t = build_topology(gpu, 1, "100Gbps")
            alloc = Allocation(t, parse_gpus(gpus, len(t.gpus)))
            p = make_plan(plan, op, alloc, 1 << 20) if plan else None
        except PlanningError as e:
            _fail(str(e))
        draw_gpu_plan(t, alloc.gpus, p, png, title=f"{gpu} GPUs {alloc.gpus}" + (f": {op} {plan}" if plan else ""))
        out.print(f"wrote {png}")
        return
    s = _load(scenario)
    t = s.build_topology()
    draw_topology(t, png, title=f"{s.name}: {s.topology.kind}")
    out.print(f"wrote {png} ({len(t.hosts)} hosts, {len(t.nodes) - len(t.hosts)} switches, {len(t.links)} links)")


@app.command()
def bench(
    topology: str = typer.Option("dgx1v", "--topology", help="dgx1p, dgx1v, dgx2 or pcie."),
    gpus: str = typer.Option("all", "--gpus", help="Allocated GPU ids, e.g. 0,1,2 or 0-2,8-12 (servers hold 8 or 16)."),
    op: str = typer.Option("allreduce", "--op", help="allreduce, broadcast, reduce, allgather, reduce_scatter."),
    algo: str = typer.Option("ring", "--algo", help="ring, tree, trees, halving-doubling, direct, hierarchical, hybrid, auto."),
    sizes: str = typer.Option("8:1G", "--sizes", help="MIN:MAX message sizes (K, M, G are powers of 2)."),
    factor: int = typer.Option(2, "--factor", help="Step factor between sizes."),
    chunk: str = typer.Option("auto", "--chunk", help="Pipelining chunk: a size, 'none', or 'auto' (simulated search)."),
    root: int = typer.Option(0, "--root", help="Root rank of broadcast and reduce."),
    servers: int = typer.Option(1, "--servers", help="Number of servers joined by a top-of-rack switch."),
    nic: str = typer.Option("100Gbps", "--nic", help="NIC rate between servers."),
    backend: str = typer.Option("flow", "--backend", help="flow or packet."),
    csv_out: Optional[Path] = typer.Option(None, "--csv", help="Also write the table as CSV."),
    check: bool = typer.Option(False, "--verify", help="Verify every plan before running it."),
) -> None:
    """A simulated nccl-tests: time one collective over message sizes."""
    from .collectives.algos import PlanningError
    from .collectives.bench import explain_text, run_bench, table_text, write_csv

    if backend not in ("flow", "packet"):
        _fail(f"--backend: must be 'flow' or 'packet', got {backend!r}")
    try:
        rows, alloc = run_bench(topology, gpus, op, algo, sizes, factor, chunk, root, servers, nic, backend, check)
    except PlanningError as e:
        _fail(str(e))
    out.print(f"# {op} on {topology} x{servers}, GPUs {alloc.gpus}, algorithm {algo}, backend {backend}", highlight=False)
    out.print(table_text(rows, op, root), highlight=False, soft_wrap=True)
    if algo == "auto":
        out.print(explain_text(rows), highlight=False, soft_wrap=True)
    if csv_out:
        write_csv(rows, csv_out, op, alloc.n)


@app.command()
def sweep(
    experiment: Path = typer.Argument(..., help="Experiment TOML: base scenario and [grid]."),
    out_dir: Path = typer.Option(Path("sweep-out"), "--out", help="Output folder; rerunning resumes it."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Parallel points (default: all cores)."),
    max_points: Optional[int] = typer.Option(None, "--max-points", help="Run at most this many pending points now."),
    ray_address: Optional[str] = typer.Option(None, "--ray", help="Run on a Ray cluster at ADDRESS ('local': start one)."),
) -> None:
    """Run a grid of scenarios in parallel, resumable, into one Parquet dataset."""
    from .sweep import SweepError, run_sweep

    if workers is not None and workers < 1:
        _fail("--workers: must be at least 1")
    try:
        run_sweep(experiment, out_dir, workers, max_points, ray_address=ray_address)
    except SweepError as e:
        _fail(str(e))
    done = (out_dir / "points.parquet").is_file()
    out.print(f"sweep {'complete' if done else 'partial (run again to resume)'}: {out_dir}")


@app.command()
def report(folder: Path = typer.Argument(..., help="A run, sweep or reproduction folder.")) -> None:
    """Write FOLDER/report.html: a self-contained report with plots and tables."""
    from .report import build_report

    try:
        out_path = build_report(folder)
    except FileNotFoundError as e:
        _fail(str(e))
    out.print(f"wrote {out_path}")


@app.command()
def reproduce(
    what: str = typer.Argument(..., help="Which reproduction: blink, thesis-ch4, thesis-ch5, thesis-slack."),
    out_dir: Path = typer.Option(Path("repro-out"), "--out", help="Folder for tables and plots."),
    quick: bool = typer.Option(False, "--quick", help="A small subset that runs in seconds (for CI)."),
) -> None:
    """Run a paper reproduction end to end and print our numbers beside the paper's."""
    import json

    if what == "blink":
        from .repro import blink

        summary = blink.run(out_dir, quick=quick)
    elif what == "thesis-ch4":
        from .repro import thesis

        summary = thesis.ch4_summary(thesis.ch4(out_dir, quick=quick))
    elif what == "thesis-ch5":
        from .repro import thesis

        summary = thesis.ch5_summary(thesis.ch5(out_dir, quick=quick))
        thesis.plot_ch5(summary, out_dir / "fig5.19_heatmaps.png")
        thesis.plot_ch5_figures(out_dir)
    elif what == "thesis-slack":
        from .repro import thesis

        summary = thesis.ch5_slack_summary(thesis.ch5_slack(out_dir, quick=quick))
        thesis.plot_ch5_slack(summary, out_dir / "slack_tradeoff.png")
    else:
        _fail(f"reproduce: unknown reproduction {what!r} (known: blink, thesis-ch4, thesis-ch5, thesis-slack)")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    out.print_json(json.dumps(summary))
    out.print(f"tables and plots in {out_dir}")


def main() -> None:
    """Entry point: maps every known error to exit code 2 with one clear line."""
    try:
        rc = app(standalone_mode=False)  # click returns the code of typer.Exit here
        sys.exit(rc if isinstance(rc, int) else 0)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (ScenarioError, FileExistsError) as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as e:  # click usage errors and anything unexpected
        import click

        if isinstance(e, click.exceptions.ClickException):
            e.show()
            sys.exit(EXIT_BAD_INPUT)
        if isinstance(e, click.exceptions.Abort):
            sys.exit(130)
        err.print(f"[bold red]internal error:[/] {type(e).__name__}: {e}", highlight=False)
        sys.exit(EXIT_INTERNAL)
    except BaseException as e:  # a Rust panic arrives as pyo3's PanicException (a BaseException)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        err.print(f"[bold red]internal error (core panic):[/] {e}", highlight=False)
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()

"""The command line: the typer application with every command (``fabriclab --help``).

Bad input exits with code 2 and one message naming the field and the rule,
never a traceback."""

from __future__ import annotations

import os
import sys

from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Optional  # noqa: E402

import typer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.text import Text  # noqa: E402

from . import commands  # noqa: E402
from ..errors import InputError  # noqa: E402
from ..util.inputs import check_out_dir  # noqa: E402

if TYPE_CHECKING:
    from ..scenario.model import Scenario

app = typer.Typer(add_completion=False, no_args_is_help=True, help="fabriclab: the network side of distributed ML training.")
topo_app = typer.Typer(no_args_is_help=True, help="Topologies.")
app.add_typer(topo_app, name="topo")
trace_app = typer.Typer(no_args_is_help=True, help="Execution traces (Chakra).")
app.add_typer(trace_app, name="trace")
from ..runtime.cli import register as _register_runtime  # noqa: E402
_register_runtime(app)
from ..runtime.cluster.cli import register as _register_cluster  # noqa: E402
_cluster_app = _register_cluster(app)
from ..observe.compare import register as _register_compare  # noqa: E402
_register_compare(app)
from ..systems.panama.cli import register as _register_panama  # noqa: E402
_register_panama(app)
from ..observe.clock.cli import register as _register_clock  # noqa: E402
_register_clock(app)
from ..systems.clockwork.bottleneck_cli import register as _register_bottleneck  # noqa: E402
_register_bottleneck(app)
from ..observe.owd_cli import register as _register_owd  # noqa: E402
_register_owd(app)
from ..systems.clockwork.cli import register as _register_cloud  # noqa: E402
_register_cloud(app)
from ..systems.clockwork.cli import register_cluster_select as _register_cluster_select  # noqa: E402
_register_cluster_select(_cluster_app)

# Markup off: user text (paths, names, messages) is printed literally.
err = Console(stderr=True, markup=False)
out = Console(markup=False)

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


def _fail(msg: str) -> None:
    """Refuses bad input: the message names the option or field."""
    raise InputError(msg)


MEMORY_LIMIT = typer.Option(
    None, "--memory-limit", metavar="SIZE",
    help="Refuse scenarios estimated to need more memory than this (e.g. 16GiB; 'off': no check). "
         "Default: FABRICLAB_MEMORY_LIMIT, else the memory available now.")


def _check_out_file(path: Path, option: str) -> None:
    """A file the command will write: refused before any work if it cannot be."""
    if path.is_dir():
        _fail(f"{option}: {path} is a folder; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        _fail(f"{option}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        _fail(f"{option}: the folder {parent} is not writable")


def _load(path: Optional[Path]) -> Scenario:
    return commands.load(path)


@app.command()
def run(
    scenario: Optional[Path] = typer.Argument(None, help="Scenario TOML; the built-in default when omitted."),
    out_dir: Path = typer.Option(Path("fabriclab-out"), "--out", help="Output folder (must be empty or absent)."),
    force: bool = typer.Option(False, "--force", help="Replace a non-empty output folder."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Override the scenario's seed."),
    backend: Optional[str] = typer.Option(None, "--backend", help="Override the backend: packet or flow."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or tables."),
    memory_limit: Optional[str] = MEMORY_LIMIT,
) -> None:
    """Run a scenario and write flows.parquet, links.parquet, summary.json and scenario.resolved.toml."""
    commands.run(scenario, out_dir, force, seed, backend, quiet, memory_limit)


@app.command()
def validate(
    scenario: Path = typer.Argument(..., metavar="SCENARIO", help="Scenario TOML to check."),
    memory_limit: Optional[str] = MEMORY_LIMIT,
) -> None:
    """Check a scenario without running it (schema, files, topology, memory)."""
    commands.validate(scenario, memory_limit)


@topo_app.command("show")
def topo_show(
    scenario: Optional[Path] = typer.Argument(None, help="Scenario TOML; the built-in default when omitted."),
    png: Path = typer.Option(Path("topology.png"), "--out",
                             help="Image file to write; its extension picks the format (.png, .svg, .pdf, ...)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="Draw a GPU server instead: dgx1p, dgx1v, dgx2, pcie."),
    gpus: str = typer.Option("all", "--gpus", help="With --gpu: the allocated GPUs."),
    plan: Optional[str] = typer.Option(None, "--plan", help="With --gpu: overlay the rings or trees of ring|trees."),
    op: str = typer.Option("allreduce", "--op", help="With --plan: the collective."),
) -> None:
    """Draw a scenario's topology, or a GPU server with a plan's rings or trees, as an image (PNG by default)."""
    from ..observe.draw import draw_gpu_plan, draw_topology

    _check_out_file(png, "--out")
    # matplotlib picks the format from the extension: formats it writes with no other program (pgf needs LaTeX).
    image_formats = ("png", "svg", "svgz", "pdf", "eps", "ps", "jpg", "jpeg", "tif", "tiff")
    if png.suffix.lower().lstrip(".") not in image_formats:
        got = f"the extension {png.suffix!r}" if png.suffix else "no extension"
        _fail(f"--out: {png} has {got}; the extension picks the image format, one of "
              f"{', '.join('.' + f for f in image_formats)}")
    if gpu is not None:
        from ..collectives.algos import Allocation, make_plan
        from ..sim.bench import build_topology, parse_gpus

        if plan is not None and plan not in ("ring", "trees"):
            _fail(f"--plan: must be 'ring' or 'trees', got {plan!r}")
        t = build_topology(gpu, 1, "100Gbps", option="--gpu")
        alloc = Allocation(t, parse_gpus(gpus, len(t.gpus)))
        p = make_plan(plan, op, alloc, 1 << 20) if plan else None
        draw_gpu_plan(t, alloc.gpus, p, png, title=f"{gpu} GPUs {alloc.gpus}" + (f": {op} {plan}" if plan else ""))
        out.print(f"wrote {png}")
        return
    s = _load(scenario)
    from .commands import named
    from ..sim.pipeline import checked_topology

    with named(scenario):  # a topology too big for this machine is refused before it is built
        _, t = checked_topology(s)
    draw_topology(t, png, title=f"{s.name}: {s.topology.kind}")
    out.print(f"wrote {png} ({len(t.hosts)} hosts, {len(t.nodes) - len(t.hosts)} switches, {len(t.links)} links)")


@trace_app.command("show")
def trace_show(prefix: Path = typer.Argument(..., help="The files' prefix: PREFIX.0.et, PREFIX.1.et, ...")) -> None:
    """What a Chakra trace holds, per rank: nodes by type, collectives by type and process group (pg_name),
    for writing its [[trace_jobs]] entry (docs/llm.md, "Chakra traces")."""
    from rich.table import Table

    from ..sim.apps.chakra import describe

    ranks = describe(prefix)
    t = Table(title=f"{prefix}: {len(ranks)} ranks")
    for col in ("rank", "file", "nodes by type", "collectives (type, pg_name: count, bytes)"):
        t.add_column(col)
    for r in ranks:
        t.add_row(str(r["rank"]), r["file"], "\n".join(f"{k} {v:,}" for k, v in r["types"].items()),
                  "\n".join(f"{k} {pg or '-'}: {n:,}, {b:,} B" for (k, pg), (n, b) in r["collectives"].items()))
    out.print(t)
    groups = sorted({pg for r in ranks for (_, pg) in r["collectives"] if pg})
    out.print(f"process groups named: {', '.join(groups) if groups else 'none (every collective spans all ranks)'}")


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
    flow_model: str = typer.Option("fluid", "--flow-model",
                                   help="The flow backend's model: fluid (NVLink, PCIe, NVSwitch, RDMA: line rate "
                                        "from the first byte) or tcp (slow start: collectives over TCP sockets)."),
    csv_out: Optional[Path] = typer.Option(None, "--csv", help="Also write the table as CSV."),
    check: bool = typer.Option(False, "--verify", help="Verify every plan before running it."),
) -> None:
    """A simulated nccl-tests: time one collective over message sizes."""
    from ..sim.bench import explain_text, run_bench, table_text, write_csv

    if csv_out is not None:
        _check_out_file(csv_out, "--csv")
    rows, alloc = run_bench(topology, gpus, op, algo, sizes, factor, chunk, root, servers, nic, backend, check,
                            flow_model=flow_model)
    model = f" ({flow_model})" if backend == "flow" else ""
    out.print(f"# {op} on {topology} x{servers}, GPUs {alloc.gpus}, algorithm {algo}, backend {backend}{model}",
              highlight=False, soft_wrap=True)
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
    memory_limit: Optional[str] = MEMORY_LIMIT,
) -> None:
    """Run a grid of scenarios in parallel, resumable, into one Parquet dataset."""
    from ..sweep import run_sweep

    run_sweep(experiment, out_dir, workers, max_points, ray_address=ray_address, memory_limit=memory_limit)
    done = (out_dir / "points.parquet").is_file()
    out.print(f"sweep {'complete' if done else 'partial (run again to resume)'}: {out_dir}")


@app.command()
def report(folder: Path = typer.Argument(..., help="A run, sweep or reproduction folder.")) -> None:
    """Write FOLDER/report.html: a self-contained report with plots and tables."""
    from ..observe.report import build_report

    out_path = build_report(folder)
    out.print(f"wrote {out_path}")


@app.command()
def reproduce(
    what: Optional[str] = typer.Argument(None, help="Which reproduction: blink, thesis-ch4, thesis-ch5, thesis-slack, "
                                                    "panama-fig8, panama-fig8-1024, panama-fig9, panama-fig10, c4-table3, "
                                                    "c4p-fig8, c4p-fig9, c4p-fig10, c4p-fig11, c4p-fig13, c4p-fig13-llm, c4-diagnosis, "
                                                    "c4-recovery, clock-sync, colocation, bottleneck, clockwork-nccl, "
                                                    "clockwork-ray, megatron-weak-scaling; or 'all' (with "
                                                    "--quick: every quick mode, checked against its quick bands)."),
    out_dir: Path = typer.Option(Path("repro-out"), "--out", help="Folder for tables and plots."),
    quick: bool = typer.Option(False, "--quick", help="A small subset that runs in seconds (for CI)."),
    # At least 1000: the scenarios' simulation seeds are SEED_BASE - 1000 + i + 1, never negative.
    seed_base: Optional[int] = typer.Option(None, "--seed-base", min=1000,
                                            help="c4-diagnosis only: scenario i draws from seed SEED_BASE + i "
                                                 "(default 9000, the blind held-out range of the eighth pass; 1000 with --quick; "
                                                 "1000, 3000, 4000, 7000 and 8000: earlier held-out ranges; 5000 and 6000: the "
                                                 "ranges the detector was developed on)."),
    workers: int = typer.Option(1, "--workers", min=1, help="clock-sync, colocation, bottleneck and clockwork-* only: "
                                                               "simulations run on this many processes."),
    list_: bool = typer.Option(False, "--list", help="Print the registry of reproductions (systems/registry/) and exit."),
) -> None:
    """Run a paper reproduction end to end and print our numbers beside the paper's."""
    import json

    from ..systems import reproduce as repro

    if list_:
        out.print(repro.list_table(), highlight=False, soft_wrap=True)
        return
    known = repro.names()
    if what is None:
        _fail(f"reproduce: name a reproduction ({', '.join(known)}, or all with --quick), or give --list")
    if what == "all":
        if not quick:
            _fail("reproduce all: only with --quick (the full runs take hours; run them one by one)")
        if seed_base is not None:
            _fail("reproduce all: --seed-base is for c4-diagnosis alone")
        check_out_dir(out_dir, "--out")
        rows = repro.run_all_quick(out_dir, workers=workers,
                                   progress=lambda n: out.print(f"running {n} --quick", highlight=False))
        out.print(repro.quick_table(rows), highlight=False, soft_wrap=True)
        held = sum(r["holds"] for r in rows)
        out.print(f"{held} of {len(rows)} quick headlines inside their bands; CSV: {out_dir / 'quick_checks.csv'}",
                  highlight=False)
        if held < len(rows):
            raise typer.Exit(1)
        return
    if what not in known:
        _fail(f"reproduce: unknown reproduction {what!r} (known: {', '.join(known)}, all)")
    check_out_dir(out_dir, "--out")
    summary = repro.run(what, out_dir, quick=quick, seed_base=seed_base, workers=workers)
    out.print_json(json.dumps(summary))
    out.print(f"tables and plots in {out_dir}")


def main(argv: Optional[list[str]] = None) -> None:
    """Entry point. Bad input (an :class:`InputError`, a usage error, an
    unusable file) exits with code 2 and one line naming the field or option;
    anything else is a bug: one line with the path of a file holding the
    traceback, exit code 3. No traceback ever reaches the terminal."""
    sys.exit(_run_guarded(argv))


def _run_guarded(argv: Optional[list[str]]) -> int:
    try:
        rc = app(args=argv, prog_name="fabriclab", standalone_mode=False)
        return rc if isinstance(rc, int) else 0
    except BaseException as e:
        return _exit_code_for(e)


def _exit_code_for(e: BaseException) -> int:
    """Reports an exception that ended a command (one line, never a
    traceback) and returns the exit code: bad input 2, a bug 3."""
    if isinstance(e, typer.Exit):
        return e.exit_code
    if isinstance(e, InputError):
        _print_error(str(e))
    elif isinstance(e, typer.TyperException):  # usage errors: unknown command or option, bad option value
        _print_usage_error(e)
    elif isinstance(e, (typer.Abort, KeyboardInterrupt)):
        err.print("aborted", markup=False, highlight=False)
        return 130
    elif isinstance(e, OSError):  # a file or folder the user named could not be read or written
        _print_error(_os_error_text(e))
    elif isinstance(e, MemoryError):
        _print_error("out of memory: the scenario needs more memory than this machine could give; "
                     "make it smaller (see docs/scenario.md, 'Limits')")
    elif isinstance(e, SystemExit):
        return e.code if isinstance(e.code, int) else 1
    else:  # a bug (a core panic arrives as _core.CorePanic)
        return _internal_error(e)
    return EXIT_BAD_INPUT


def _print_error(msg: str) -> None:
    """One `error:` line; the message is printed literally (no rich markup)."""
    err.print(Text.assemble(("error:", "bold red"), " ", msg), highlight=False, soft_wrap=True)


def _print_usage_error(e) -> None:
    ctx = getattr(e, "ctx", None)
    msg = e.format_message() if hasattr(e, "format_message") else str(e)
    if type(e).__name__ == "NoArgsIsHelpError" and ctx is not None:  # the help was printed already
        msg = f"'{ctx.command_path}' needs a command"
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    _print_error(msg + hint)


def _os_error_text(e: OSError) -> str:
    where = f"{e.filename}: " if e.filename else ""
    return f"{where}{e.strerror or e}"


def _internal_error(e: BaseException) -> int:
    """Writes the traceback to a file and prints one line pointing at it."""
    import tempfile
    import traceback

    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    try:
        fd, path = tempfile.mkstemp(prefix="fabriclab-internal-error-", suffix=".txt")
        with os.fdopen(fd, "w") as f:
            f.write(f"fabriclab {_version()}\nargv: {sys.argv!r}\n\n{text}")
        where = f"the traceback is in {path}"
    except OSError:
        where = "the traceback could not be written to a file"
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    err.print(Text.assemble(("internal error:", "bold red"), f" {type(e).__name__}: {first} ({where}; "
                            f"please report it with the input that caused it)"), highlight=False, soft_wrap=True)
    return EXIT_INTERNAL


def _version() -> str:
    from .._version import __version__

    return __version__


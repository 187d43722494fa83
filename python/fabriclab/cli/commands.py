"""What `fabriclab run` and `fabriclab validate` do, without the parser:
the typer commands in main.py and the quick path in quick.py both call
these, so both give the same results, output and errors. Nothing here
imports typer; rich only when something is printed."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..errors import InputError

if TYPE_CHECKING:
    from rich.table import Table

    from ..scenario.model import Scenario

_out = None


def out():
    """The console for results (stdout); markup off: user text is printed literally."""
    global _out
    if _out is None:
        from rich.console import Console

        _out = Console(markup=False)
    return _out


@contextmanager
def named(path: Optional[Path]):
    """Errors found after the schema (resolving the topology, paths, files
    the scenario names, the core's checks) start with the scenario file's
    name, as the schema's own errors do. Options are checked outside it
    (``memory_limit``, the output folder's claim): their errors name the
    option."""
    try:
        yield
    except InputError as e:
        msg = str(e)
        if path is None or msg.startswith(f"{path}: "):
            raise
        raise InputError(f"{path}: {msg}") from None


def memory_limit_bytes(memory_limit: Optional[str]) -> int | str:
    """``--memory-limit`` (else FABRICLAB_MEMORY_LIMIT, else the memory
    available now) read once, before the scenario's own checks: bytes, or
    'off'. Its errors name the option or the variable."""
    from ..sim.limits import resolve_limit

    cap = resolve_limit(memory_limit)
    return "off" if cap is None else cap


def load(path: Optional[Path]) -> Scenario:
    # The schema (pydantic and its models) only for commands that read a scenario.
    from ..scenario.model import Scenario

    return Scenario.default() if path is None else Scenario.load(path)


# Variables OpenBLAS reads for its thread count, in its order of precedence.
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def default_blas_threads(environ=os.environ) -> bool:
    """Asks OpenBLAS for one thread unless the user chose a count: sets
    OPENBLAS_NUM_THREADS=1 when none of BLAS_THREAD_VARS is set; returns
    whether it did. numpy's OpenBLAS (scipy-openblas) starts a thread per
    core, up to its MAX_THREADS of 64, when numpy is imported, and a run
    never calls BLAS: on this 2-core box that start costs about 0.03 s of
    CPU per run (docs/performance.md, "Fourth pass"); more cores, more
    threads. OpenBLAS reads the variable once, when it is loaded, so this
    must run before numpy is first imported. Only `fabriclab run` calls it:
    a library user's process and the other commands (planners, sweeps)
    keep OpenBLAS's own default."""
    if any(v in environ for v in BLAS_THREAD_VARS):
        return False
    environ["OPENBLAS_NUM_THREADS"] = "1"
    return True


@contextmanager
def signals_unwind():
    """SIGTERM and SIGHUP end a command as SIGINT does: by an exception
    (SystemExit with 128 + the signal's number, the shell's code for death
    by that signal), so that the output folder's staging is removed on the
    way out. Their default action would end the process at once and leave
    it. A handler someone else set (SIG_IGN under nohup, a harness's own)
    is kept; off the main thread nothing changes. The core runs a slice of
    simulated time with the GIL released, so the signal is acted on when
    that slice returns, as SIGINT is."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def unwind(signum, frame):
        raise SystemExit(128 + signum)

    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_DFL:
            old[sig] = signal.signal(sig, unwind)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _say_stale(folder) -> None:
    """One line on stderr when claiming the output folder removed staging
    folders that killed runs left beside it (OutputFolder.stale_removed)."""
    if not folder.stale_removed:
        return
    import sys

    names = ", ".join(f"{p.name} (pid {pid})" for p, pid in folder.stale_removed)
    print(f"note: removed {len(folder.stale_removed)} staging folder(s) left beside {folder.out} by fabriclab runs "
          f"that were killed before they finished: {names}", file=sys.stderr)


def run(scenario: Optional[Path], out_dir: Path, force: bool, seed: Optional[int], backend: Optional[str],
        quiet: bool, memory_limit: Optional[str]) -> None:
    with signals_unwind():
        _run(scenario, out_dir, force, seed, backend, quiet, memory_limit)


def _run(scenario: Optional[Path], out_dir: Path, force: bool, seed: Optional[int], backend: Optional[str],
         quiet: bool, memory_limit: Optional[str]) -> None:
    default_blas_threads()  # before anything imports numpy
    from ..api import simulate
    from ..sim.results import OutputFolder

    s = load(scenario)
    for option, field, value in (("--seed", "seed", seed), ("--backend", "backend", backend)):
        if value is not None:
            try:
                s = s.replace(**{field: value})
            except InputError as e:
                rule = str(e).split(f"{field}: ", 1)[-1]
                raise InputError(f"{option}: {value!r}: {rule}") from None
    inputs = ([scenario] if scenario is not None else []) + s.input_files()
    memory_limit = memory_limit_bytes(memory_limit)
    # The folder is claimed (checked, created) before the run, filled only when it succeeded.
    if s.recovery is not None:  # detection, isolation and restarts (docs/c4-recovery.md)
        from ..systems.c4.recovery import print_summary

        with OutputFolder(out_dir, force, tuple(inputs)) as folder, named(scenario):
            _say_stale(folder)
            rec = simulate(s, memory_limit=memory_limit)
            rec.write_into(folder.staging)
        if not quiet:
            print_summary(out(), rec)
            out().print(f"results in {out_dir}")
        return
    with OutputFolder(out_dir, force, tuple(inputs)) as folder, named(scenario):
        _say_stale(folder)
        res = simulate(s, progress=not quiet, memory_limit=memory_limit)
        res.write_into(folder.staging)
    if not quiet:
        out().print(_summary_table(res.summary))
        if "jobs" in res.summary:
            out().print(_jobs_table(res.summary))
        out().print(_links_table(res.summary))
        out().print(f"results in {out_dir}")


def validate(scenario: Path, memory_limit: Optional[str]) -> None:
    from ..observe.clock.calibrate import stale
    from ..scenario.fabric import needs_calibration
    from ..sim.pipeline import estimate_text, resolve_and_build

    s = load(scenario)
    memory_limit = memory_limit_bytes(memory_limit)
    calibrates = needs_calibration(s)
    remade = stale(s)
    if calibrates:  # the table the run's calibration pass computes; an empty one builds the same core
        s = s.replace(transport={**s.transport.model_dump(by_alias=True), "packet_rocket_correction": []})
    # Resolved once: the memory check (before building a topology that may not fit), the topology, the core's JSON.
    with named(scenario):
        _, t = resolve_and_build(s, memory_limit)
    out().print(f"{scenario}: ok ({len(t.hosts)} hosts, {len(t.nodes) - len(t.hosts)} switches, "
                f"{len(t.links)} links, backend {s.backend})")
    # Informs, never refuses: a long run is the user's to choose.
    out().print(f"  estimate: {estimate_text(s, t)}", soft_wrap=True)
    if calibrates:
        out().print("  note: Packet Rocket reads estimated clocks: `fabriclab run` first runs the probe mesh alone "
                    "to estimate them (docs/clockwork-control.md); not run here, so a mesh the estimator refuses "
                    "(too few pure pairs) shows only in the run (exit 2)", soft_wrap=True)
    if remade:
        out().print("  note: transport.packet_rocket_correction was made for another scenario "
                    "(packet_rocket_correction_for differs): `fabriclab run` makes it again", soft_wrap=True)
    for note in s.ignored_settings():
        out().print(f"  note: ignored: {note}", soft_wrap=True)


def _fmt_us(ps) -> str:
    return "-" if ps is None else f"{ps / 1e6:,.1f}"


def _summary_table(summary: dict) -> Table:
    from rich.table import Table

    from ..sim.results import BUCKETS

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
    from rich.table import Table

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
    from rich.table import Table

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

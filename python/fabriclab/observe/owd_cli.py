"""`fabriclab owd RUN_DIR`: a one-way delay for every collective message (docs/clockwork.md, "One-way
delays"). `register(app)` adds it to the main CLI; bad input is an InputError (exit 2). Heavy modules are
imported inside the command, so `fabriclab --help` stays fast."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("owd")
    def owd_cmd(
        run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="A run folder holding ccl.parquet."),
        clocks: Optional[Path] = typer.Option(None, "--clocks", help="clocks.parquet from `fabriclab clock "
                                              "estimate`: every host's offset and drift per window. Without it "
                                              "the clocks are used as they are (uncorrected)."),
        out: Optional[Path] = typer.Option(None, "--out", help="Folder for owd.parquet and the PNGs; default "
                                           "RUN_DIR."),
        method: Optional[str] = typer.Option(None, "--method", help="Which of --clocks' methods to use; default "
                                             "huygens, or the only one."),
        hosts: Optional[str] = typer.Option(None, "--hosts", help="Comma-separated host names, rank 0 first: "
                                            "where the ranks of ops the run's scenario does not place ran (the "
                                            "runtime's, training jobs'); default rank<r>."),
        timelines: int = typer.Option(6, "--timelines", min=1, help="Connections drawn in the timeline (the "
                                      "busiest)."),
        clock: str = typer.Option("real", "--clock", help="Which readings are the hosts' clocks: real (the "
                                  "*_real_ns columns) or mono (*_mono_ns: the runtime's CLOCK_MONOTONIC, e.g. in a "
                                  "box with time namespaces, with clocks from an agent mesh run with --clock "
                                  "monotonic)."),
        true_real: bool = typer.Option(False, "--true-real", help="The *_real_ns readings are true time (every "
                                       "rank on one machine, as in a cluster-in-a-box): report each OWD's error."),
    ) -> None:
        """The one-way delay of every message of RUN_DIR/ccl.parquet, split into base, excess (queueing) and
        the sender-side delay; owd.parquet, the src x dst matrix and timelines per connection as PNG."""
        from . import owd as ow

        names = None
        if hosts is not None:
            names = [h.strip() for h in hosts.split(",")]
            if not all(names):
                raise ow.OwdError(f"owd: --hosts {hosts!r}: an empty host name; give names separated by commas")
        o, written = ow.run(run_dir, clocks, out, method, timelines, names, clock, true_real)
        t = o.table
        how = (f"clocks corrected by {clocks} (method {o.method}, reference {o.reference})" if o.corrected
               else "clocks UNCORRECTED (no --clocks): delays include the hosts' clock offsets")
        typer.echo(f"{len(t)} messages, {t.groupby(['src', 'dst']).ngroups} connections; {how}")
        typer.echo(f"one-way delay p50 {t['owd_ns'].median():.0f} ns, excess p50 / p99 "
                   f"{t['excess_ns'].median():.0f} / {t['excess_ns'].quantile(0.99):.0f} ns")
        if t["true_owd_ns"].notna().any():
            e = t["error_ns"].abs()
            typer.echo(f"error against true time ({'simulated' if o.source == 'simulator' else '*_real_ns'}): "
                       f"|error| p50 {e.median():.1f} ns, p99 "
                       f"{e.quantile(0.99):.1f} ns, max {e.max():.1f} ns")
        for n in o.notes:
            typer.echo(f"note: {n}")
        typer.echo("wrote " + ", ".join(str(p) for p in written))

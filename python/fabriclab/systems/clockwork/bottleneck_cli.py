"""`fabriclab bottleneck RUN_DIR`: name the bottleneck from the one-way delays of a run's collective messages
(docs/clockwork.md, "Bottleneck identification"). `register(app)` adds it to the main CLI; bad input is an
InputError (exit 2). Heavy modules are imported inside the command, so `fabriclab --help` stays fast."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("bottleneck")
    def bottleneck_cmd(
        run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="A run folder holding ccl.parquet."),
        owd: Optional[Path] = typer.Option(None, "--owd", help="owd.parquet from `fabriclab owd` (default: the "
                                           "delays are computed from RUN_DIR/ccl.parquet as `fabriclab owd` does)."),
        clocks: Optional[Path] = typer.Option(None, "--clocks", help="As for `fabriclab owd`: clocks.parquet from "
                                              "`fabriclab clock estimate`; without it the clocks are used as they "
                                              "are."),
        method: Optional[str] = typer.Option(None, "--method", help="As for `fabriclab owd`."),
        hosts: Optional[str] = typer.Option(None, "--hosts", help="As for `fabriclab owd`: comma-separated host "
                                            "names, rank 0 first, for ops the run's scenario does not place."),
        scenario: Optional[Path] = typer.Option(None, "--scenario", help="Route the messages by this scenario's "
                                                "topology (shortest paths: the cluster-in-a-box's static routes) "
                                                "instead of the run's messages.parquet."),
        out: Optional[Path] = typer.Option(None, "--out", help="Folder for bottleneck.json and "
                                           "bottleneck_hops.csv; default RUN_DIR."),
    ) -> None:
        """Name the bottleneck of a run's collective messages: a fabric link, a sending host, a receiving host,
        or none, from their one-way delays and routes (tomography over the routes' directed hops)."""
        from ...observe.owd import OwdError
        from . import bottleneck as bn

        names = None
        if hosts is not None:
            names = [h.strip() for h in hosts.split(",")]
            if not all(names):
                raise OwdError(f"bottleneck: --hosts {hosts!r}: an empty host name; give names separated by commas")
        v, ev, notes, written = bn.run(run_dir, owd, clocks, method, names, scenario, out)
        typer.echo(v.line())
        for c in v.connections:
            typer.echo(f"  {c[0]} -> {c[1]}: {c[2]} of {c[3]} messages elevated")
        typer.echo("hops (best first):")
        for r in ev.head(5).itertuples(index=False):
            typer.echo(f"  {r.hop}: {r.elevated} of {r.messages} elevated, score {r.score}, delay above expected "
                       f"p50 {r.above_p50_ns / 1000:.0f} us")
        for n in notes:
            typer.echo(f"note: {n}")
        typer.echo("wrote " + ", ".join(str(p) for p in written))

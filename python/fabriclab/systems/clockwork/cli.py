"""`fabriclab cloud select`: cluster selection on a simulated public cloud
(docs/clockwork.md, "Cluster selection"). Heavy modules are imported inside
the command, so `fabriclab --help` stays fast."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    cloud_app = typer.Typer(no_args_is_help=True, help="A public cloud's VMs: choose a cluster from them "
                            "(the scenario's cloud section; docs/clockwork.md).")
    app.add_typer(cloud_app, name="cloud")

    @cloud_app.command("select")
    def select_cmd(
        scenario: Path = typer.Argument(..., metavar="SCENARIO", help="A scenario with [cloud] (docs/scenario.md)."),
        vms: int = typer.Option(..., "--vms", help="M: the VMs the job needs."),
        margin: Optional[int] = typer.Option(None, "--margin", help="VMs asked beyond M (over-provisioning); "
                                             "default: M/4 rounded up, at least 1."),
        out: Path = typer.Option(..., "--out", help="Folder for selection.json and selection.csv."),
        measure_ms: int = typer.Option(400, "--measure-ms", help="How long the probe mesh runs (simulated ms), "
                                       "unless the scenario's [probes] says."),
        window_ms: int = typer.Option(100, "--window-ms", help="The clock estimator's window."),
    ) -> None:
        """Over-provision M + margin VMs, measure them with the probe mesh (excess one-way delay, colocation),
        keep the M best for a ring collective and order them; print what was rejected and why."""
        from ...errors import InputError
        from ...scenario.model import Scenario
        from ...util.inputs import check_out_dir
        from . import select as sel

        if window_ms <= 0:
            raise InputError(f"--window-ms: must be positive, got {window_ms}")
        s = Scenario.load(scenario)
        margin = sel.default_margin(vms) if margin is None else margin
        sel.measurement_scenario(s, vms, margin, measure_ms)  # bad input refused before anything runs
        check_out_dir(out, "--out")
        m, r = sel.select(s, vms, margin, measure_ms, window_ms)
        sel.write(out, m, r)
        shared = ", ".join("{" + ",".join(g) + "}" for g in m.groups if len(g) > 1) or "none"
        typer.echo(f"pool: {len(m.vms)} VMs (M = {vms} + margin {margin}); sharing a machine: {shared}")
        typer.echo(f"  {'vm':<6} {'machine':<8} {'group':>5} {'excess p50 us':>14} {'p99 us':>9} {'bulk Gbit/s':>12}"
                   "  verdict")
        for row in r.table:
            typer.echo(f"  {row['vm']:<6} {'unknown':<8} {row['group']:>5} {row['excess_p50_ns'] / 1000:>14.2f} "
                       f"{row['excess_p99_ns'] / 1000:>9.2f} {row['bulk_bps'] / 1e9:>12.2f}  {row['verdict']}: "
                       f"{row['reason']}")
        typer.echo(f"bulk: the lesser of a VM's best send and best receive of {sel.BULK_BYTES} bytes; slow below "
                   f"{sel.SLOW_SHARE:g} x the documented per-VM cap, {m.cap_bps / 1e9:g} Gbit/s")
        typer.echo(f"hosts = {r.hosts}   # ring order, for [[collectives]] hosts or [[jobs]] workers")
        typer.echo(f"wrote {out / 'selection.json'} and {out / 'selection.csv'}")

"""`fabriclab cloud select`: cluster selection on a simulated public cloud
(docs/clockwork-control.md, "Cluster selection"). Heavy modules are imported inside
the command, so `fabriclab --help` stays fast."""

from __future__ import annotations

import math

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


def register_cluster_select(cluster_app: typer.Typer) -> None:
    """`fabriclab cluster select`: the same selection in the cluster-in-a-box."""

    @cluster_app.command("select")
    def cluster_select_cmd(
        vms: int = typer.Option(..., "--vms", help="M: the hosts the job needs (the box's hosts are the pool)."),
        out: Path = typer.Option(..., "--out", help="Folder for selection.json, selection.csv and probes.parquet."),
        name: str = typer.Option("box", "--name", help="The box (fabriclab cluster up; a [cloud] scenario's box "
                                 "has the tenant's VMs as hosts)."),
        idle_s: float = typer.Option(1.5, "--idle-s", help="Seconds of probe mesh before the load rounds."),
        round_s: float = typer.Option(0.6, "--round-s", help="Seconds of each load round."),
        peers: Optional[int] = typer.Option(None, "--peers", help="Mesh peers per host (default min(5, N - 1))."),
        seed: int = typer.Option(0, "--seed", help="Seed of the mesh's peers and the load rounds."),
        prefer: str = typer.Option("quiet", "--prefer", help="quiet: keep slow and noisy hosts out before spreading "
                                   "over machines; spread: the simulated selection's order (shared machines first)."),
    ) -> None:
        """Measure the box's hosts with the real probe mesh (idle, then load rounds: excess one-way delay, queue
        sharing, stream rates), keep the M best for a ring and order them; print what was rejected and why."""
        from ...errors import InputError
        from ...util.inputs import check_out_dir
        import numpy as np

        from . import box_select as bs

        if not (math.isfinite(idle_s) and math.isfinite(round_s)) or idle_s <= 0 or round_s <= bs.RAMP_S:
            raise InputError(f"--idle-s, --round-s: must be finite, positive, and --round-s above the {bs.RAMP_S} s "
                             f"ramp; got {idle_s}, {round_s}")
        if prefer not in ("quiet", "spread"):
            raise InputError(f"--prefer: quiet or spread, got {prefer!r}")
        n = bs.check_vms(name, vms)
        check_out_dir(out, "--out")
        out.mkdir(parents=True, exist_ok=True)
        try:
            bm = bs.measure_box(name, idle_s, round_s, peers, seed, out_dir=out)
        except bs.MeasureFailure as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1) from None
        r = bs.choose(bm.m, vms, prefer=prefer)
        bs.write(out, bm, r)
        m = bm.m
        from .select import SLOW_SHARE as SLOW
        shared = ", ".join("{" + ",".join(g) + "}" for g in m.groups if len(g) > 1) or "none"
        typer.echo(f"pool: {n} hosts of box {name!r}, M = {vms}; {bm.probes} probe pairs, {len(bm.rounds)} load "
                   f"rounds; behind one queue: {shared}")
        typer.echo(f"  {'host':<6} {'group':>5} {'excess p50 us':>14} {'p99 us':>9} {'queue max us':>13} "
                   f"{'best Mbit/s':>12} {'score us':>9}  verdict")
        for i, row in enumerate(r.table):
            qmax = np.nanmax(bm.q_ns[i]) / 1000 if np.isfinite(bm.q_ns[i]).any() else float("nan")
            typer.echo(f"  {row['vm']:<6} {row['group']:>5} {row['excess_p50_ns'] / 1000:>14.2f} "
                       f"{row['excess_p99_ns'] / 1000:>9.2f} {qmax:>13.1f} {row['bulk_bps'] / 1e6:>12.1f} "
                       f"{row['score_ns'] / 1000:>9.1f}  "
                       f"{row['verdict']}: {row['reason']}")
        typer.echo(f"slow below {SLOW:g} x the rate each offered, {m.cap_bps / 1e6:.1f} Mbit/s ({bs.LOAD_SHARE:g} x the per-VM cap); noisy by the score: the sender side of the pairs' idle p{bs.SCORE_QUANTILE:g} excess; groups: hosts whose queueing "
                   "matched in every load round (the box has one kernel clock: no clock signal)")
        typer.echo(f"hosts = {r.vms}   # ring order: fabriclab runtime bench --cluster {name}:{','.join(r.vms)} "
                   f"-n {vms}")
        typer.echo(f"wrote {out / 'selection.json'} and {out / 'selection.csv'}")

"""`fabriclab panama ...`: the software aggregator (docs/panama.md)."""

from __future__ import annotations

import json
from typing import List

import typer


def register(app: typer.Typer) -> None:
    panama_app = typer.Typer(no_args_is_help=True, help="PANAMA: in-network aggregation (software aggregator).")
    app.add_typer(panama_app, name="panama")

    @panama_app.command("aggregator")
    def aggregator_cmd(
        bind: str = typer.Option(..., "--bind", help="ip:port the aggregator listens at."),
        job: List[str] = typer.Option(..., "--job", help="JOB:TREES:ip:port,ip:port,... one per job; "
                                      "worker i of the list is input port i."),
        memory: int = typer.Option(64 << 20, "--memory-bytes", help="Accelerator buffer, shared by the jobs."),
        idle: float = typer.Option(5.0, "--idle-s", help="Stop after this long without a packet (from the start, too)."),
    ) -> None:
        """Aggregate real UDP packets of the figure-4 format until idle; print the counts as JSON."""
        from ...errors import InputError
        from .aggregator import serve

        jobs = []
        for i, text in enumerate(job):
            parts = text.split(":", 2)
            if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
                raise InputError(f"--job[{i}]: {text!r} is not JOB:TREES:ip:port,ip:port,... (e.g. 1:4:127.0.0.1:9101,127.0.0.1:9102)")
            jobs.append((int(parts[0]), int(parts[1]), parts[2].split(",")))
            if not 0 <= jobs[-1][0] <= 65535 or not 1 <= jobs[-1][1] <= 255:
                raise InputError(f"--job[{i}]: JOB must be within 0..65535 and TREES within 1..255")
        typer.echo(json.dumps(serve(bind, jobs, memory, idle), indent=2))

    @panama_app.command("check-aggregator")
    def check_cmd(
        workers: int = typer.Option(4, "-n", "--workers"), trees: int = typer.Option(2, "--trees"),
        packets: int = typer.Option(200, "--packets", help="Packets per worker."),
        floats: int = typer.Option(256, "--floats", help="float32 values per packet."),
        window: int = typer.Option(8, "--window", help="Outstanding packets per tree per worker."),
    ) -> None:
        """Python workers (processes) check every aggregated sum bit for bit against numpy."""
        from .aggregator import check

        r = check(workers, trees, packets, floats, window)
        typer.echo(json.dumps(r, indent=2))
        if any(w["wrong"] or w["results"] != packets for w in r["workers"]):
            raise typer.Exit(1)

    @panama_app.command("bench-aggregator")
    def bench_cmd(
        workers: int = typer.Option(4, "-n", "--workers"), trees: int = typer.Option(4, "--trees"),
        packets: int = typer.Option(20000, "--packets", help="Packets per worker."),
        floats: int = typer.Option(256, "--floats", help="float32 values per packet."),
        window: int = typer.Option(32, "--window", help="Outstanding packets per tree per worker."),
    ) -> None:
        """The aggregator's throughput against Rust load-generating workers."""
        from .aggregator import bench

        r = bench(workers, trees, packets, floats, window)
        typer.echo(json.dumps(r, indent=2))

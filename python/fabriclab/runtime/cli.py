"""The runtime's commands: `fabriclab launch` and `fabriclab runtime bench`.
`register(app)` adds them to the main CLI; errors are InputError (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer


def register(app: typer.Typer) -> None:
    runtime_app = typer.Typer(no_args_is_help=True, help="The real runtime: collectives over TCP.")
    app.add_typer(runtime_app, name="runtime")

    @app.command("launch", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def launch_cmd(
        n: int = typer.Option(..., "-n", "--nproc", help="Number of local processes (ranks)."),
        master_port: Optional[int] = typer.Option(None, "--master-port", help="Rank 0's port; a free one if omitted."),
        cmd: List[str] = typer.Argument(None, metavar="-- CMD ...", help="The command every rank runs."),
        cluster: Optional[str] = typer.Option(None, "--cluster", help="Run rank i in host i of this "
                                              "cluster-in-a-box (fabriclab cluster up; docs/cluster.md)."),
    ) -> None:
        """Start N local ranks with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
        MASTER_PORT) and a random FABRICLAB_TOKEN; stop all if one fails."""
        from .launch import launch

        rc = launch(n, list(cmd or []), master_port=master_port, cluster=cluster)
        raise typer.Exit(rc)

    @runtime_app.command("bench")
    def bench_cmd(
        op: str = typer.Option("allreduce", "--op", help="allreduce, broadcast, reduce, allgather, reduce_scatter, "
                               "alltoall."),
        algo: Optional[str] = typer.Option(None, "--algo", help="ring, tree, halving-doubling or direct (default: "
                                           "ring; direct for alltoall)."),
        sizes: str = typer.Option("8:64M", "--sizes", help="min:max bytes (K, M, G suffixes)."),
        factor: int = typer.Option(2, "--factor", help="Multiply the size by this between rows."),
        n: int = typer.Option(4, "-n", "--nproc", help="Number of local processes."),
        iters: int = typer.Option(20, "--iters", help="Timed iterations per size."),
        warmup: int = typer.Option(5, "--warmup", help="Untimed iterations per size first."),
        dtype: str = typer.Option("float32", "--dtype", help="float32, float64, int32, int64, float16."),
        root: int = typer.Option(0, "--root", help="Root of broadcast and reduce."),
        chunk: int = typer.Option(1 << 20, "--chunk", help="Pipelining chunk in bytes."),
        csv: Optional[Path] = typer.Option(None, "--csv", help="Also write the rows to this CSV file."),
        master_port: Optional[int] = typer.Option(None, "--master-port", help="Rank 0's port; a free one if omitted."),
        telemetry: Optional[Path] = typer.Option(None, "--telemetry", help="Write every rank's per-message telemetry "
                                                 "to this folder as ccl.parquet (docs/telemetry.md)."),
        cluster: Optional[str] = typer.Option(None, "--cluster", help="Run rank i in host i of this "
                                              "cluster-in-a-box instead of over loopback (docs/cluster.md)."),
        baseline: Optional[str] = typer.Option(None, "--baseline", help="mpi (mpi4py Allreduce under mpirun) or "
                                               "gloo (torch.distributed): the same table for a baseline "
                                               "(allreduce only; scripts/install-baselines.sh)."),
        rocket_us: Optional[float] = typer.Option(None, "--packet-rocket-threshold-us", help="Turn Packet Rocket "
                                                  "on: hold a connection's next chunk while the echoed one-way "
                                                  "delay exceeds the path's base by more than this (docs/clockwork-control.md)."),
        rocket_clock: Optional[str] = typer.Option(None, "--packet-rocket-clock", help="Packet Rocket's clock: ideal "
                                                   "(CLOCK_REALTIME), host (with the emulated error below) or "
                                                   "estimated (less --packet-rocket-correction's table; the default "
                                                   "with a table, else host)."),
        clock_offsets: Optional[str] = typer.Option(None, "--clock-offsets-ns", help="Emulated clock error: each "
                                                    "rank's offset, ns, comma-separated (as the clock agent's --offset-ns)."),
        clock_drifts: Optional[str] = typer.Option(None, "--clock-drifts-ppm", help="Emulated clock error: each "
                                                   "rank's drift, ppm, comma-separated (as --drift-ppm)."),
        clock_epoch: Optional[int] = typer.Option(None, "--clock-epoch-ns", help="The emulated clocks' epoch "
                                                  "(CLOCK_REALTIME ns where the drift term is zero); default: the "
                                                  "correction table's clock_epoch_ns, else now."),
        correction: Optional[Path] = typer.Option(None, "--packet-rocket-correction", help="The correction table "
                                                  "(JSON) `fabriclab clock rocket-table` makes."),
        reload_ms: Optional[float] = typer.Option(None, "--packet-rocket-correction-reload-ms", help="Re-read the "
                                                  "table's file when it changes (`rocket-table --watch-s` refitting "
                                                  "it), checked at most this often (1 ms or more; each "
                                                  "check is a stat() on a send or receive thread)."),
    ) -> None:
        """nccl-tests' table for the runtime (or a baseline), on local processes over loopback TCP or in a cluster-in-a-box."""
        from ..util.inputs import check_out_dir
        from .bench import run_bench, table_text, write_csv
        from .errors import RuntimeFailure, RuntimeInputError

        if csv is not None and (csv.is_dir() or not (csv.parent if str(csv.parent) else Path(".")).is_dir()):
            raise RuntimeInputError(f"--csv: cannot write {csv} (a folder, or its folder does not exist)")
        if telemetry is not None:
            check_out_dir(telemetry, "--telemetry")
        if chunk < 1:
            raise RuntimeInputError(f"--chunk: must be a positive number of bytes, got {chunk}")
        if baseline is not None and (op != "allreduce" or telemetry is not None or rocket_us is not None):
            raise RuntimeInputError("--baseline: baselines run --op allreduce only, without --telemetry "
                                    "or --packet-rocket-threshold-us")
        if algo is None:
            algo = "direct" if op == "alltoall" else "ring"
        from .bench import check_clock

        clock = check_clock(n, rocket_clock, clock_offsets, clock_drifts, clock_epoch, correction, reload_ms)
        if baseline is not None and clock is not None:
            raise RuntimeInputError("--baseline: baselines run without Packet Rocket's clock options")
        if clock is not None and rocket_us is None:
            raise RuntimeInputError("--packet-rocket-clock: the clock options (--packet-rocket-clock, --clock-offsets-ns, "
                                    "--clock-drifts-ppm, --clock-epoch-ns, --packet-rocket-correction) set the clock "
                                    "Packet Rocket's stamps read, and do nothing without it; give "
                                    "--packet-rocket-threshold-us too")
        stats: list = []
        try:
            if baseline is not None:
                from .bench import run_baseline_bench

                rows = run_baseline_bench(baseline, sizes, factor, n, iters, warmup, dtype, master_port, cluster)
                algo = f"{baseline} (baseline)"
            else:
                rows = run_bench(op, algo, sizes, factor, n, iters, warmup, dtype, root, chunk, master_port, telemetry,
                                 cluster, rocket_us, stats, clock)
        except RuntimeFailure as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1) from None
        typer.echo(table_text(rows, op, algo, n, dtype, root, iters, warmup, cluster))
        if rocket_us is not None:
            from .bench import rocket_text

            typer.echo(rocket_text(stats, rocket_us))
        if csv is not None:
            write_csv(rows, csv, op, algo, n, dtype, root)

    @runtime_app.command("probe")
    def probe_cmd(
        n: int = typer.Option(4, "-n", "--nproc", help="Number of ranks."),
        cluster: Optional[str] = typer.Option(None, "--cluster", help="Run rank i in host i of this "
                                              "cluster-in-a-box (docs/cluster.md); else local processes."),
        nbytes: str = typer.Option("4M", "--bytes", help="Bytes of each one-way bandwidth probe (K, M suffixes)."),
        pings: int = typer.Option(10, "--pings", help="8-byte ping-pongs per pair (the median is the RTT)."),
        repeats: int = typer.Option(3, "--repeats", help="Bandwidth probes per pair (the fastest is kept: "
                                    "CPU contention only ever slows a transfer)."),
        root: int = typer.Option(0, "--root", help="Root of the broadcast trees."),
        out: Optional[Path] = typer.Option(None, "--json", help="Also write measurements and trees to this file."),
        master_port: Optional[int] = typer.Option(None, "--master-port", help="Rank 0's port; a free one if omitted."),
        model: str = typer.Option("nic", "--model", help="Graph TreeGen packs: nic (a tree edge i->j uses i's "
                                  "uplink and j's downlink, estimated from the matrix: hosts behind a switch) "
                                  "or pairs (every pair its measured rate at once: dedicated links)."),
    ) -> None:
        """Blink's start-up probe: every ordered pair's latency and bandwidth over the runtime's
        connections (one pair at a time), then TreeGen's trees on the measured graph."""
        import json

        from ..collectives.metrics import parse_size
        from .errors import RuntimeFailure, RuntimeInputError
        from .probe import Measurements, matrix_text
        from .probe_cmd import packing_text, run_probe

        if out is not None and (out.is_dir() or not (out.parent if str(out.parent) else Path(".")).is_dir()):
            raise RuntimeInputError(f"--json: cannot write {out} (a folder, or its folder does not exist)")
        size = parse_size(nbytes, "--bytes")
        try:
            res = run_probe(n, cluster, size, pings, root, master_port, model=model, repeats=repeats)
        except RuntimeFailure as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1) from None
        typer.echo(matrix_text(Measurements.from_dict(res["measurements"])))
        typer.echo(packing_text(res))
        if out is not None:
            out.write_text(json.dumps(res, indent=1))

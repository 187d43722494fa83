"""`fabriclab runtime bench`: nccl-tests' table for the runtime on local
processes. Each rank times ``iters`` back-to-back collectives per size and
placement after ``warmup`` ones (preceded by a barrier); the reported time is
the slowest rank's mean. Out of place, the input buffer is copied into the
output buffer and the collective runs there in place (what Open MPI's
allreduce does for a separate receive buffer), and the copy is timed; in
place, the collective runs on the input itself. Before timing, one run of
each placement on known inputs is checked against the exact expected result:
``#wrong`` counts wrong elements, as in nccl-tests."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..collectives.metrics import parse_sizes
from ..collectives.metrics import bus_bandwidth
from .errors import RuntimeFailure, RuntimeInputError
from .plans import ALGOS, OPS, check_algo
from .timing import PLACEMENTS, time_placements

NP_TYPES = {"float32": "float", "float64": "double", "int32": "int32", "int64": "int64", "float16": "half"}


@dataclass
class Figures:
    time_us: float  # as printed (2 decimals)
    algbw_gbps: float
    busbw_gbps: float
    wrong: int


@dataclass
class Row:
    size: int
    count: int
    out_of_place: Figures
    in_place: Figures


def worker(spec: dict, out_dir: str) -> None:
    import numpy as np

    from .comm import Communicator
    from .plans import plan_json

    clk = spec.get("clock") or {}
    r = int(os.environ["RANK"])
    c = Communicator.from_env(chunk_bytes=spec["chunk_bytes"], telemetry=spec["telemetry"],
                              packet_rocket_threshold_us=spec.get("packet_rocket_threshold_us"),
                              packet_rocket_clock=clk.get("mode"),
                              clock_offset_ns=clk["offsets_ns"][r] if clk.get("offsets_ns") else 0,
                              clock_drift_ppm=clk["drifts_ppm"][r] if clk.get("drifts_ppm") else 0.0,
                              clock_epoch_ns=clk.get("epoch_ns"), packet_rocket_correction=clk.get("correction"),
                              packet_rocket_correction_reload_ms=clk.get("reload_ms"))
    dt = np.dtype(spec["dtype"]).type
    n, r, op, root = c.world_size, c.rank, spec["op"], spec["root"]
    rows = []
    for size in spec["sizes"]:
        count = max(1, size // np.dtype(dt).itemsize)
        text = plan_json(op, spec["algo"], n, count, np.dtype(dt).itemsize, root, spec["chunk_bytes"])

        def run(src, dst):
            if dst is not src:
                np.copyto(dst, src)
            c.run_plan(text, dst)

        rows.append(time_placements(np, op, count, dt, r, n, root, run, spec["iters"], spec["warmup"], c.barrier))
    Path(out_dir, f"rank{r}.json").write_text(json.dumps(rows))
    Path(out_dir, f"rocket{r}.json").write_text(json.dumps(c.rocket_stats()))
    if spec["telemetry"]:
        c.write_telemetry(Path(out_dir, f"ccl{r}.parquet"))
    c.close()


def make_figures(op: str, n: int, size: int, time_ns: float, wrong: int) -> Figures:
    """The printed figures: bandwidths follow from the printed (rounded) time."""
    t_us = max(round(time_ns / 1e3, 2), 0.01)
    algbw, busbw = bus_bandwidth(op, n, size, round(t_us * 1e6))
    return Figures(t_us, round(algbw / 1e9, 2), round(busbw / 1e9, 2), wrong)


def make_rows(op: str, n: int, per_rank: list[list[dict]]) -> list[Row]:
    """Per size: the slowest rank's mean time and the wrong elements summed over ranks."""
    rows = []
    for i in range(len(per_rank[0])):
        xs = [pr[i] for pr in per_rank]
        figs = {p: make_figures(op, n, xs[0]["size"], max(x[p]["time_ns"] for x in xs), sum(x[p]["wrong"] for x in xs))
                for p in PLACEMENTS}
        rows.append(Row(xs[0]["size"], xs[0]["count"], **figs))
    return rows


def run_bench(op: str, algo: str, sizes: str, factor: int, n: int, iters: int = 20, warmup: int = 5,
              dtype: str = "float32", root: int = 0, chunk_bytes: int | None = 1 << 20,
              master_port: int | None = None, telemetry_dir=None, cluster: str | None = None,
              packet_rocket_threshold_us: float | None = None, rocket_stats: list | None = None,
              clock: dict | None = None) -> list[Row]:
    """Runs the ranks and returns the table's rows; with ``telemetry_dir``,
    every rank's per-message telemetry goes to ``telemetry_dir/ccl.parquet``.
    ``packet_rocket_threshold_us`` turns Packet Rocket on in every rank; a list
    passed as ``rocket_stats`` receives each rank's counters (None when off).
    ``clock`` (check_clock's result) is Packet Rocket's clock: its mode, each
    rank's emulated offset and drift, their epoch and the correction table."""
    from .launch import launch

    size_list = check_args(op, algo, dtype, n, iters, warmup, root, sizes, factor)
    t = packet_rocket_threshold_us
    if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < 1e9):
        raise RuntimeInputError(f"--packet-rocket-threshold-us: must be a number of microseconds >= 0, got {t!r}")
    spec = {"op": op, "algo": algo, "sizes": size_list, "iters": iters, "warmup": warmup, "dtype": dtype,
            "root": root, "chunk_bytes": chunk_bytes, "telemetry": telemetry_dir is not None,
            "packet_rocket_threshold_us": packet_rocket_threshold_us, "clock": clock}
    with tempfile.TemporaryDirectory(prefix="fabriclab-bench-") as d:
        cmd = [sys.executable, "-c", "import sys, json; from fabriclab.runtime.bench import worker; "
               "worker(json.loads(sys.argv[1]), sys.argv[2])", json.dumps(spec), d]
        rc = launch(n, cmd, master_port=master_port, cluster=cluster)
        if rc != 0:
            raise RuntimeFailure(f"bench: a rank failed (exit code {rc}); its error is printed above", "bench")
        per_rank = [json.loads(Path(d, f"rank{r}.json").read_text()) for r in range(n)]
        if rocket_stats is not None:
            rocket_stats.extend(json.loads(Path(d, f"rocket{r}.json").read_text()) for r in range(n))
        if telemetry_dir is not None:
            import pyarrow as pa
            import pyarrow.parquet as pq

            tables = [pq.read_table(Path(d, f"ccl{r}.parquet")) for r in range(n)]
            # Made once the run succeeded (checked before it by the CLI); a ccl.parquet already there is replaced.
            Path(telemetry_dir).mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.concat_tables(tables), Path(telemetry_dir, "ccl.parquet"))
    return make_rows(op, n, per_rank)


def check_clock(n: int, mode: str | None, offsets_ns: str | None, drifts_ppm: str | None, epoch_ns: int | None,
                correction=None, reload_ms: float | None = None) -> dict | None:
    """The bench's clock options (comma-separated per rank lists) checked, naming the option; None when
    none is given. The epoch is shared by every rank: the given one, else the correction table's
    ``clock_epoch_ns`` (the emulated clocks its probes were taken on), else now; the table is read here by
    the ranks' own reader (a table for another world size, or an epoch other than its own, stops the bench
    before launch); the rest is checked by each rank's Communicator (exit 2 naming the field)."""
    if mode is None and offsets_ns is None and drifts_ppm is None and epoch_ns is None and correction is None:
        if reload_ms is not None:
            raise RuntimeInputError("--packet-rocket-correction-reload-ms: needs --packet-rocket-correction")
        return None
    if reload_ms is not None and (correction is None or not 1 <= reload_ms < 1e9):
        raise RuntimeInputError("--packet-rocket-correction-reload-ms: a number of milliseconds within 1 and 1e9 "
                                "(below 1e9), with "
                                f"--packet-rocket-correction; got {reload_ms!r}"
                                + ("" if correction is not None else " without a table"))
    if mode is not None and mode not in ("ideal", "host", "estimated"):
        raise RuntimeInputError(f"--packet-rocket-clock: {mode!r} is not one of ideal, host, estimated")

    def per_rank(text, option, kind):
        if text is None:
            return None
        try:
            vals = [kind(v) for v in text.split(",")]
        except ValueError:
            raise RuntimeInputError(f"{option}: must be {n} comma-separated numbers (one per rank), got {text!r}") from None
        if len(vals) != n:
            raise RuntimeInputError(f"{option}: give one value per rank ({n}), got {len(vals)}")
        return vals

    drifts = per_rank(drifts_ppm, "--clock-drifts-ppm", float)
    if drifts is not None and not all(abs(d) <= 1000 for d in drifts):
        raise RuntimeInputError(f"--clock-drifts-ppm: each drift must be within ±1000 ppm, got {drifts_ppm!r}")
    if correction is not None and not Path(correction).is_file():
        raise RuntimeInputError(f"--packet-rocket-correction: no such file: {correction}")
    if epoch_ns is not None and not abs(epoch_ns) <= 2**62:
        raise RuntimeInputError(f"--clock-epoch-ns: must be within ±2^62 ns (CLOCK_REALTIME ns), got {epoch_ns}")
    from .._core import RtError, rocket_clock_epoch
    from .errors import translate

    try:
        epoch = rocket_clock_epoch(n, None if epoch_ns is None else int(epoch_ns),
                                   None if correction is None else os.fspath(correction))
    except RtError as e:
        msg = str(translate(e))
        for field, option in (("packet_rocket_correction", "--packet-rocket-correction"),
                              ("clock_epoch_ns", "--clock-epoch-ns")):
            if msg.startswith(field):
                msg = option + msg.removeprefix(field)
        raise RuntimeInputError(msg) from None
    return {"mode": mode, "offsets_ns": per_rank(offsets_ns, "--clock-offsets-ns", int), "drifts_ppm": drifts,
            "epoch_ns": int(epoch), "correction": None if correction is None else str(Path(correction).resolve()),
            "reload_ms": reload_ms}


def check_args(op, algo, dtype, n, iters, warmup, root, sizes, factor) -> list[int]:
    """The bench's arguments checked (naming the option); returns the sizes."""
    if op not in OPS:
        raise RuntimeInputError(f"--op: unknown collective {op!r} (known: {', '.join(OPS)})")
    if algo not in ALGOS:
        raise RuntimeInputError(f"--algo: unknown algorithm {algo!r} (the runtime has {', '.join(ALGOS)})")
    check_algo(op, algo, "--algo")
    if dtype not in NP_TYPES:
        raise RuntimeInputError(f"--dtype: {dtype!r} is not one of {', '.join(NP_TYPES)}")
    if not 1 <= n <= 256:
        raise RuntimeInputError(f"-n: must be within 1..256, got {n}")
    if iters < 1 or warmup < 0:
        raise RuntimeInputError("--iters: must be at least 1 (and --warmup at least 0)")
    if not 0 <= root < n:
        raise RuntimeInputError(f"--root: must be a rank within 0..{n - 1}, got {root}")
    size_list = parse_sizes(sizes, factor)
    if size_list[-1] > 1 << 32:
        raise RuntimeInputError("--sizes: at most 4G on local processes")
    if op == "alltoall":
        import numpy as np

        item = np.dtype(dtype).itemsize
        for size in size_list:
            if size % (n * item):
                raise RuntimeInputError(f"--sizes: an all-to-all over {n} ranks splits the buffer into {n} equal "
                                        f"blocks of whole {dtype} elements, but {size} bytes is not a multiple of "
                                        f"{n} x {item} bytes")
    return size_list


def run_baseline_bench(baseline: str, sizes: str, factor: int, n: int, iters: int = 20, warmup: int = 5,
                       dtype: str = "float32", master_port: int | None = None, cluster: str | None = None) -> list[Row]:
    """The same table for a baseline allreduce (baselines.py: MPI or Gloo)."""
    from .baselines import run_baseline

    size_list = check_args("allreduce", "ring", dtype, n, iters, warmup, 0, sizes, factor)
    per_rank = run_baseline(baseline, size_list, n, iters, warmup, dtype, master_port, cluster)
    return make_rows("allreduce", n, per_rank)


def table_text(rows: list[Row], op: str, algo: str, n: int, dtype: str, root: int, iters: int, warmup: int,
               cluster: str | None = None) -> str:
    redop = "sum" if op in ("allreduce", "reduce", "reduce_scatter") else "none"
    r = root if op in ("broadcast", "reduce") else -1
    where = f"{n} ranks in cluster-in-a-box {cluster!r}" if cluster else f"{n} local processes over loopback TCP"
    lines = [
        f"# fabriclab runtime bench: {op}, algo {algo}, {where}, "
        f"{iters} iterations after {warmup} warm-up",
        "# out-of-place: the input copied into the output buffer, then reduced there (the copy timed); "
        "time: the slowest rank's mean",
        "#",
        "#                                                       out-of-place                       in-place",
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)",
    ]
    for x in rows:
        cols = "".join(f"  {f.time_us:7.2f}  {f.algbw_gbps:6.2f}  {f.busbw_gbps:6.2f}  {f.wrong:6d}"
                       for f in (x.out_of_place, x.in_place))
        lines.append(f"{x.size:12d}  {x.count:12d}  {NP_TYPES[dtype]:>8s}  {redop:>6s}  {r:6d}{cols}")
    figs = [f for x in rows for f in (x.out_of_place, x.in_place)]
    wrong = sum(f.wrong for f in figs)
    lines.append(f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}")
    avg = sum(f.busbw_gbps for f in figs) / len(figs)  # nccl-tests averages both placements
    lines.append(f"# Avg bus bandwidth    : {avg:.4f} ")
    return "\n".join(lines)


def rocket_text(stats: list, threshold_us: float) -> str:
    """The bench's Packet Rocket line: its counters summed over the ranks."""
    tot = {k: sum(s[k] for s in stats) for k in ("echoes", "pauses", "paused_ns", "held_ns")}
    return (f"# Packet Rocket       : threshold {threshold_us:g} us; {tot['pauses']} pauses "
            f"({tot['paused_ns'] / 1e6:.3f} ms in all), messages held {tot['held_ns'] / 1e6:.3f} ms, "
            f"{tot['echoes']} echoes (summed over ranks)")


def write_csv(rows: list[Row], path, op: str, algo: str, n: int, dtype: str, root: int) -> None:
    import csv

    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["op", "algorithm", "nranks", "size_bytes", "count", "type", "root", "placement", "time_us",
                    "algbw_GBps", "busbw_GBps", "wrong"])
        for x in rows:
            for placement in PLACEMENTS:
                f = getattr(x, placement)
                w.writerow([op, algo, n, x.size, x.count, dtype, root if op in ("broadcast", "reduce") else -1,
                            placement.replace("_", "-"), f"{f.time_us:.2f}", f"{f.algbw_gbps:.2f}",
                            f"{f.busbw_gbps:.2f}", f.wrong])

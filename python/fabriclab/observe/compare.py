"""`fabriclab compare`: the same collective plan, run for real in a
cluster-in-a-box and simulated (packet backend) on the box's scenario, side
by side (docs/compare.md).

One plan text per size is built here (the runtime's planner, float32
elements, the runtime's chunking), written to a file the ranks read, and
read by the simulator through the same core reader (``Plan.from_json``): the
simulator runs exactly the steps the runtime executed.

What the simulator does not model is stated, not hidden: the hosts' CPU
(it is charged as ``reduce_bps``, measured here from numpy's float32 sum,
and ``send_overhead_ps`` per message), the kernel's TCP (timestamps, delayed
ACKs, TSO/GSO) and the htb shaper's bursts."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import InputError

ALGOS = ("ring", "tree", "halving-doubling", "direct")
ITEM = 4  # float32
DEFAULT_SIZES = "1M:64M"
DEFAULT_OVERHEAD_US = 80.0  # per message: see docs/compare.md (a 4 KiB ring step through the box)
LINUX_RTO_MIN_PS = 200_000_000_000  # include/net/tcp.h: TCP_RTO_MIN = HZ / 5
LINUX_RTO_INIT_PS = 1_000_000_000_000  # TCP_TIMEOUT_INIT = 1 s


class CompareError(InputError):
    """Bad input to compare: the message names the option or field."""


@dataclass
class Job:
    """What compare runs: one plan text per size."""
    op: str
    algo: str  # the planner, or the plan file's algorithm
    n: int
    sizes: list[int]
    plans: list[str]
    source: str  # "ring" or "plan file.json"


@dataclass
class Row:
    size: int
    real_us: float  # as printed (2 decimals)
    sim_us: float   # as printed (2 decimals)
    ratio: float    # real / sim from the printed times (3 decimals)
    real_busbw: float  # GB/s from the printed time (4 decimals)
    sim_busbw: float
    wrong: int      # wrong elements in the real run's check (-1: not checked)


# --------------------------------------------------------------------------- input

def resolve_source(what: str | None, algo: str | None, plan: str | None) -> tuple[str | None, str | None]:
    """PLAN_OR_ALGO, --algo and --plan to (algo, plan path): exactly one source."""
    if what is not None:
        if what in ALGOS:
            if plan is not None or (algo is not None and algo != what):
                raise CompareError(f"PLAN_OR_ALGO: {what!r} given together with --algo/--plan; give one")
            algo = what
        elif what.endswith(".json") or Path(what).is_file():
            if algo is not None or (plan is not None and plan != what):
                raise CompareError(f"PLAN_OR_ALGO: {what!r} given together with --algo/--plan; give one")
            plan = what
        else:
            raise CompareError(f"PLAN_OR_ALGO: {what!r} is neither an algorithm ({', '.join(ALGOS)}) "
                               "nor a plan JSON file")
    if algo is not None and plan is not None:
        raise CompareError("--plan: give either --algo or --plan, not both")
    if algo is None and plan is None:
        algo = "ring"
    if algo is not None and algo not in ALGOS:
        raise CompareError(f"--algo: unknown algorithm {algo!r} (the runtime has {', '.join(ALGOS)})")
    return algo, plan


def build_job(op: str, algo: str | None, plan_path: str | None, sizes: str | None, factor: int, n: int | None,
              chunk_bytes: int, hosts: int) -> Job:
    """Checks the arguments (naming the option) and builds the plan texts."""
    from ..collectives.algos import PlanningError
    from ..collectives.metrics import parse_sizes
    from ..runtime.plans import OPS, plan_json

    if chunk_bytes < ITEM:
        raise CompareError(f"--chunk: must be at least one float32 ({ITEM} bytes), got {chunk_bytes}")
    if plan_path is not None:
        if sizes is not None:
            raise CompareError("--sizes: a plan file has its own size (size_bytes); drop --sizes or use --algo")
        try:
            text = Path(plan_path).read_text()
        except OSError as e:
            raise CompareError(f"--plan: cannot read {plan_path}: {e.strerror}") from None
        from ..collectives.plan import Plan

        try:
            p = Plan.from_json(text)
        except ValueError as e:
            raise CompareError(f"--plan: {e}") from None
        if n is not None and n != p.nranks:
            raise CompareError(f"-n: the plan has {p.nranks} ranks, got -n {n}")
        n = p.nranks
        bad = [(r, i) for r, rs in enumerate(p.ranks) for i, s in enumerate(rs)
               if s.offset % ITEM or s.bytes % ITEM]
        if p.size_bytes % ITEM or bad:
            where = f"rank {bad[0][0]} step {bad[0][1]}" if bad else "size_bytes"
            raise CompareError(f"--plan: the runtime runs float32 buffers, so every range must be whole 4-byte "
                               f"elements ({where} is not)")
        job = Job(p.collective, p.algorithm or "plan", n, [p.size_bytes], [text], f"plan {plan_path}")
    else:
        ops = [o for o in OPS if o != "alltoall"]  # alltoall: compare a plan file (--plan)
        if op not in ops:
            raise CompareError(f"--op: unknown collective {op!r} (known: {', '.join(ops)}; alltoall through --plan)")
        if algo != "ring" and op != "allreduce":
            raise CompareError(f"--algo: {algo} supports allreduce only (ring supports {', '.join(ops)})")
        if n is None:
            n = hosts
        try:
            size_list = parse_sizes(sizes or DEFAULT_SIZES, factor)
        except PlanningError as e:
            raise CompareError(str(e)) from None
        if size_list[-1] > 1 << 30:
            raise CompareError("--sizes: at most 1G (every rank holds the buffer in memory)")
        if size_list[0] < ITEM:
            raise CompareError(f"--sizes: at least one float32 ({ITEM} bytes), got {size_list[0]}")
        job = Job(op, algo, n, size_list, [], algo)
    if not 2 <= job.n <= hosts:
        raise CompareError(f"-n: the box has {hosts} hosts, so 2..{hosts} ranks; got {job.n}")
    if plan_path is None:
        job.plans = [plan_json(op, algo, job.n, s // ITEM, ITEM, 0, chunk_bytes) for s in job.sizes]
        job.sizes = [s // ITEM * ITEM for s in job.sizes]
    return job


def box_scenario(path: str):
    """The box's scenario (the loader's errors name the field) and its host count."""
    from ..runtime.cluster.plan import build_plan
    from ..scenario.model import Scenario

    s = Scenario.load(path)
    build_plan(s, "check")  # refuses what the box cannot build, naming the field
    return s, len(s.build_topology().hosts)


# --------------------------------------------------------------------------- simulated side

def measure_reduce_bps(nbytes: int = 1 << 20, repeat: int = 30) -> int:
    """This machine's float32 sum rate (numpy ``a += b`` on ``nbytes`` buffers, the best of ``repeat``),
    in bits of reduced data per second: the simulator's ``reduce_bps``."""
    import numpy as np

    a = np.ones(nbytes // 4, np.float32)
    b = np.ones(nbytes // 4, np.float32)
    np.add(a, b, out=a)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        np.add(a, b, out=a)
        best = min(best, time.perf_counter_ns() - t0)
    return int(8 * nbytes / (max(best, 1) / 1e9))


def sim_scenario(s) -> dict:
    """The box's scenario for run_plan: its topology, queues and transport, no other workload, packet backend."""
    d = s.model_dump(by_alias=True, exclude_none=True)
    for k in ("traffic", "flows", "jobs", "collectives", "flows_csv", "stop_ps"):
        d.pop(k, None)
    d["backend"] = "packet"
    # The box's hosts run Linux's TCP, whose retransmission timer never goes
    # below TCP_RTO_MIN = 200 ms; the box does not set the scenario's
    # min_rto_ps (docs/cluster.md). A datacenter minimum (the default 1 ms)
    # would fire spuriously in the simulator behind the host queue the
    # runtime's pipelined chunks build (1.7 ms at 1 Gbit/s).
    d["transport"]["min_rto_ps"] = max(d["transport"]["min_rto_ps"], LINUX_RTO_MIN_PS)
    d["transport"]["initial_rto_ps"] = max(d["transport"]["initial_rto_ps"], LINUX_RTO_INIT_PS)
    return d


def simulate(job: Job, s, reduce_bps: int, overhead_ps: int, progress=None) -> list[int]:
    """Completion time (ps) of every plan, simulated alone on the box's topology, ranks on hosts 0..n-1."""
    from ..collectives.plan import Plan
    from ..sim.plans import run_plan

    topo = s.build_topology()
    scen = sim_scenario(s)
    out = []
    for size, text in zip(job.sizes, job.plans):
        plan = Plan.from_json(text)
        t = run_plan(plan, topo, list(range(job.n)), "packet", reduce_bps, overhead_ps, scen,
                     persistent_connections=True).time_ps
        out.append(t)
        if progress:
            progress(f"simulated {size} B: {t / 1e6:.2f} us")
    return out


# --------------------------------------------------------------------------- real side

def worker(spec_path: str, out_dir: str) -> None:
    """One rank: checks each plan once on known inputs, then times ``iters`` runs after ``warmup``."""
    import numpy as np

    from ..runtime.timing import count_wrong, inputs
    from ..runtime.comm import Communicator

    spec = json.loads(Path(spec_path).read_text())
    c = Communicator.from_env()
    n, r, op = c.world_size, c.rank, spec["op"]
    rows = []
    for text in spec["plans"]:
        d = json.loads(text)
        count, root = d["size_bytes"] // ITEM, d.get("root") or 0
        wrong = -1
        if spec["check"]:
            x, exp, part = inputs(np, op, count, np.float32, r, n, root)
            c.run_plan(text, x)
            wrong = count_wrong(op, x, exp, part, r, root)
        buf = np.zeros(count, np.float32)
        for _ in range(spec["warmup"]):
            c.run_plan(text, buf)
        c.barrier()
        t0 = time.perf_counter_ns()
        for _ in range(spec["iters"]):
            c.run_plan(text, buf)
        rows.append({"time_ns": (time.perf_counter_ns() - t0) / spec["iters"], "wrong": wrong})
    Path(out_dir, f"rank{r}.json").write_text(json.dumps(rows))
    c.close()


def run_real(job: Job, cluster: str, iters: int, warmup: int, check: bool) -> list[tuple[float, int]]:
    """(slowest rank's mean time in ns, wrong elements) per plan, ranks in the box's hosts 0..n-1."""
    from ..runtime.errors import RuntimeFailure
    from ..runtime.launch import launch

    with tempfile.TemporaryDirectory(prefix="fabriclab-compare-") as d:
        spec = Path(d, "spec.json")
        spec.write_text(json.dumps({"op": job.op, "plans": job.plans, "iters": iters, "warmup": warmup,
                                    "check": check}))
        cmd = [sys.executable, "-c", "import sys; from fabriclab.observe.compare import worker; worker(sys.argv[1], sys.argv[2])",
               str(spec), d]
        rc = launch(job.n, cmd, cluster=cluster)
        if rc != 0:
            raise RuntimeFailure(f"compare: a rank failed (exit code {rc}); its error is printed above", "compare")
        per_rank = [json.loads(Path(d, f"rank{r}.json").read_text()) for r in range(job.n)]
    out = []
    for i in range(len(job.plans)):
        xs = [pr[i] for pr in per_rank]
        wrong = -1 if any(x["wrong"] < 0 for x in xs) else sum(x["wrong"] for x in xs)
        out.append((max(x["time_ns"] for x in xs), wrong))
    return out


# --------------------------------------------------------------------------- the table

def make_row(op: str, n: int, size: int, real_ns: float, sim_ps: int, wrong: int) -> Row:
    """The printed figures: ratio and busbw follow from the printed (rounded) times."""
    from ..collectives.metrics import bus_bandwidth

    real_us = max(round(real_ns / 1e3, 2), 0.01)
    sim_us = max(round(sim_ps / 1e6, 2), 0.01)
    rb = bus_bandwidth(op, n, size, round(real_us * 1e6))[1]
    sb = bus_bandwidth(op, n, size, round(sim_us * 1e6))[1]
    return Row(size, real_us, sim_us, round(real_us / sim_us, 3), round(rb / 1e9, 4), round(sb / 1e9, 4), wrong)


def summary(rows: list[Row], tolerance: float = 0.10, min_size: int = 1 << 20) -> str:
    big = [x for x in rows if x.size >= min_size]
    if not big:
        return f"# no size of at least {min_size} bytes: the {tolerance:.0%} target is not assessed"
    inside = sum(1 for x in big if abs(x.ratio - 1) <= tolerance)
    lo, hi = min(x.ratio for x in big), max(x.ratio for x in big)
    return (f"# sizes >= {min_size} B: real/sim {lo:.3f}..{hi:.3f}; within {tolerance:.0%}: {inside} of {len(big)} "
            f"({'met' if inside == len(big) else 'missed'})")


def table_text(rows: list[Row], job: Job, header: list[str]) -> str:
    lines = [f"# {h}" for h in header]
    lines += [
        "#       size     real time      sim time   real/sim   real busbw    sim busbw  #wrong",
        "#        (B)          (us)          (us)                  (GB/s)       (GB/s)",
    ]
    for x in rows:
        if x.real_us == 0:  # --sim-only
            lines.append(f"{x.size:12d}  {'-':>12s}  {x.sim_us:12.2f}  {'-':>9s}  {'-':>11s}  {x.sim_busbw:11.4f}  "
                         f"{'-':>6s}")
            continue
        lines.append(f"{x.size:12d}  {x.real_us:12.2f}  {x.sim_us:12.2f}  {x.ratio:9.3f}  {x.real_busbw:11.4f}  "
                     f"{x.sim_busbw:11.4f}  {x.wrong:6d}")
    lines.append(summary(rows) if all(x.real_us > 0 for x in rows) else "# real side skipped: no ratio")
    return "\n".join(lines)


def write_csv(rows: list[Row], path, job: Job, reduce_bps: int, overhead_ps: int) -> None:
    import csv

    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["op", "algorithm", "nranks", "size_bytes", "real_us", "sim_us", "ratio_real_sim",
                    "real_busbw_GBps", "sim_busbw_GBps", "wrong", "reduce_bps", "send_overhead_ps"])
        for x in rows:
            w.writerow([job.op, job.algo, job.n, x.size, f"{x.real_us:.2f}", f"{x.sim_us:.2f}", f"{x.ratio:.3f}",
                        f"{x.real_busbw:.4f}", f"{x.sim_busbw:.4f}", x.wrong, reduce_bps, overhead_ps])


# --------------------------------------------------------------------------- the command

def register(app) -> None:
    """Adds `fabriclab compare` to the main CLI."""

    import typer

    @app.command("compare")
    def compare_cmd(
        what: Optional[str] = typer.Argument(None, metavar="PLAN_OR_ALGO",
                                             help="ring, tree, halving-doubling, direct, or a plan JSON file."),
        cluster: Path = typer.Option(..., "--cluster", help="The box's scenario file (star or leaf_spine)."),
        op: str = typer.Option("allreduce", "--op", help="allreduce (every algo); ring also: broadcast, reduce, "
                               "allgather, reduce_scatter."),
        algo: Optional[str] = typer.Option(None, "--algo", help="ring, tree, halving-doubling or direct."),
        plan: Optional[str] = typer.Option(None, "--plan", help="A plan-format-v1 JSON file (its own size)."),
        sizes: Optional[str] = typer.Option(None, "--sizes", help=f"min:max bytes (default {DEFAULT_SIZES})."),
        factor: int = typer.Option(2, "--factor", help="Multiply the size by this between rows."),
        n: Optional[int] = typer.Option(None, "-n", "--nproc", help="Ranks on hosts 0..n-1 (default: every host)."),
        iters: int = typer.Option(5, "--iters", help="Timed iterations per size (real side)."),
        warmup: int = typer.Option(2, "--warmup", help="Untimed iterations per size first (real side)."),
        chunk: int = typer.Option(1 << 20, "--chunk", help="Pipelining chunk in bytes (the runtime's)."),
        overhead_us: float = typer.Option(DEFAULT_OVERHEAD_US, "--overhead-us", help="Simulated software overhead "
                                          "per message (us): the runtime's thread hand-offs and syscalls."),
        reduce_gbps: Optional[float] = typer.Option(None, "--reduce-gbps", help="Simulated reduction rate in Gbit/s "
                                                    "of data; default: this machine's numpy float32 sum, measured."),
        name: str = typer.Option("box", "--name", help="The box's name; an existing box of that name is used."),
        gso: bool = typer.Option(False, "--gso", help="Build the box with GSO (cluster up --gso)."),
        keep: bool = typer.Option(False, "--keep", help="Leave the box up afterwards."),
        csv: Optional[Path] = typer.Option(None, "--csv", help="Also write the rows to this CSV file."),
        sim_only: bool = typer.Option(False, "--sim-only", help="Only the simulated side (no root needed)."),
    ) -> None:
        """The same plan, sizes and topology run in the cluster-in-a-box and simulated (packet backend), side by side."""
        from ..runtime.errors import RuntimeFailure

        try:
            table = run_compare(what, str(cluster), op, algo, plan, sizes, factor, n, iters, warmup, chunk,
                                overhead_us, reduce_gbps, name, gso, keep, csv, sim_only,
                                log=lambda m: typer.echo(m, err=True))
        except RuntimeFailure as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1) from None
        typer.echo(table)


def check_options(iters: int, warmup: int, overhead_us: float, reduce_gbps: float | None, csv) -> None:
    if iters < 1 or warmup < 0:
        raise CompareError("--iters: must be at least 1 (and --warmup at least 0)")
    if not 0 <= overhead_us <= 1e6 or overhead_us != overhead_us:
        raise CompareError(f"--overhead-us: must be within 0..1000000, got {overhead_us}")
    if reduce_gbps is not None and not 0 < reduce_gbps <= 1e6:
        raise CompareError(f"--reduce-gbps: must be positive (at most 1e6), got {reduce_gbps}")
    if csv is not None and (Path(csv).is_dir() or not Path(csv).resolve().parent.is_dir()):
        raise CompareError(f"--csv: cannot write {csv} (a folder, or its folder does not exist)")


def run_compare(what, cluster: str, op="allreduce", algo=None, plan=None, sizes=None, factor=2, n=None, iters=5,
                warmup=2, chunk=1 << 20, overhead_us=DEFAULT_OVERHEAD_US, reduce_gbps=None, name="box", gso=False,
                keep=False, csv=None, sim_only=False, log=None) -> str:
    """The whole command; returns the table's text."""
    from ..runtime.cluster.plan import check_name
    from ..runtime.errors import RuntimeFailure

    log = log or (lambda m: None)
    algo, plan = resolve_source(what, algo, plan)
    check_options(iters, warmup, overhead_us, reduce_gbps, csv)
    check_name(name)
    if not Path(cluster).exists():
        raise CompareError(f"--cluster: no such scenario file {cluster}")
    s, hosts = box_scenario(cluster)
    job = build_job(op, algo, plan, sizes, factor, n, chunk, hosts)
    reduce_bps = int(reduce_gbps * 1e9) if reduce_gbps is not None else measure_reduce_bps()
    overhead_ps = int(round(overhead_us * 1e6))

    real = [(float("nan"), -1)] * len(job.sizes)
    box_note = "real side skipped (--sim-only)"
    if not sim_only:
        real, box_note = _real_side(job, cluster, name, gso, keep, iters, warmup, log)
    log(f"simulating {len(job.sizes)} size(s) (packet backend)")
    sim = simulate(job, s, reduce_bps, overhead_ps, log)
    rows = [make_row(job.op, job.n, size, r[0] if r[0] == r[0] else 0.0, t, r[1])
            for size, r, t in zip(job.sizes, real, sim)]
    if sim_only:
        rows = [Row(x.size, 0.0, x.sim_us, 0.0, 0.0, x.sim_busbw, -1) for x in rows]
    if csv is not None:
        write_csv(rows, csv, job, reduce_bps, overhead_ps)
    t = s.topology
    header = [f"compare {job.op} {job.source}, {job.n} ranks on hosts 0..{job.n - 1} of {cluster} "
              f"({t.kind}, {t.link_rate_bps / 1e9:g} Gbit/s links, mss {s.transport.mss_bytes}, cc {s.transport.cc})",
              f"real: {box_note}; {iters} timed iterations after {warmup} warm-up, slowest rank's mean",
              f"sim: packet backend, persistent connections, min RTO 200 ms (Linux), reduce_bps {reduce_bps / 1e9:.1f} Gbit/s "
              f"({'given' if reduce_gbps is not None else 'measured: numpy float32 sum'}), "
              f"send overhead {overhead_us:g} us per message"]
    if any(x.wrong > 0 for x in rows):
        raise RuntimeFailure("compare: the real run computed wrong results:\n" + table_text(rows, job, header),
                             "compare")
    return table_text(rows, job, header)


def _real_side(job: Job, cluster: str, name: str, gso: bool, keep: bool, iters: int, warmup: int, log):
    from ..runtime.cluster.apply import ClusterFailure, load_state, remove, state_path, up

    existing = state_path(name).exists()
    if existing:
        state = load_state(name, "--name")
        if Path(state["scenario"]) != Path(cluster).resolve():
            raise CompareError(f"--name: cluster {name!r} is up with {state['scenario']}, not {cluster}; "
                               f"use another --name or fabriclab cluster down --name {name}")
        if bool(state.get("gso")) != gso:
            raise CompareError(f"--gso: cluster {name!r} was built {'with' if state.get('gso') else 'without'} "
                               "--gso; pass the same, or bring it down first")
        note = f"existing box {name!r}"
    else:
        log(f"cluster up {cluster} --name {name}{' --gso' if gso else ''}")
        try:
            state = up(cluster, name, False, gso)
        except ClusterFailure as e:
            raise CompareError(f"--cluster: the box could not be built: {e}") from None
        note = f"box {name!r} built"
    if state.get("omitted"):
        note += f" (not emulated: {'; '.join(state['omitted'])})"
    note += ", GSO on" if state.get("gso") else ", GSO off"
    try:
        log(f"running {len(job.sizes)} size(s) through the box")
        real = run_real(job, name, iters, warmup, check=job.op in ("allreduce", "broadcast", "reduce")
                        or not job.source.startswith("plan"))
    finally:
        if not existing and not keep:
            remove(name)
            log(f"cluster down --name {name}")
    return real, note

"""A simulated nccl-tests: sweep message sizes for one collective on a GPU
allocation and print nccl-tests' table (size, count, type, time, algbw,
busbw)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..collectives.algos import ALGOS, OPS, Allocation, PlanningError, make_plan
from ..collectives.metrics import bus_bandwidth, parse_size, parse_sizes
from ..collectives.verify import verify
from ..scenario.gpus import KINDS, gpu_cluster, gpu_server
from ..scenario.units import RateBps
from .plans import PLAN_FLOW_MODEL, choose_plan, run_plan

FLOAT_BYTES = 4
AUTO_CHUNKS = (64 * 1024, 256 * 1024, 1 << 20, 4 << 20, 16 << 20)


MAX_CHUNKS = 1 << 16
MAX_SERVERS = 256


def parse_gpus(text: str, total: int) -> list[int]:
    if text.strip() == "all":
        return list(range(total))
    out = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise PlanningError(f"--gpus: cannot read {part!r}; write GPU ids like 0,1,2 or ranges like 0-2,8-12")
        a, b = int(m.group(1)), int(m.group(2) or m.group(1))
        if b < a:
            raise PlanningError(f"--gpus: the range {part!r} is reversed; write it low-high, e.g. {b}-{a}")
        if b >= total:  # before building a list as long as the range
            raise PlanningError(f"--gpus: unknown GPU id {b} (this topology has GPUs 0..{total - 1})")
        out.extend(range(a, b + 1))
    return out


def topology_from_file(path: str, option: str = "--topology"):
    """A GPU topology from a topology file (see docs/scenario.md): its hosts
    are the GPUs, in order; links between two hosts count as NVLink."""
    from pathlib import Path

    from ..scenario.gpus import GpuTopology
    from ..scenario.topology import TopologyError, from_file

    try:
        data = from_file(Path(path), option)
    except TopologyError as e:
        raise PlanningError(str(e)) from None
    t = GpuTopology()
    t.nodes, t.links, t.layers = data.nodes, data.links, data.layers
    t.gpus = list(data.hosts)
    gid = {node: g for g, node in enumerate(t.gpus)}
    for lk in t.links:
        if lk["a"] in gid and lk["b"] in gid:
            t.nvlink[(gid[lk["a"]], gid[lk["b"]])] = t.nvlink[(gid[lk["b"]], gid[lk["a"]])] = lk["rate_bps"]
    t.servers = [list(range(len(t.gpus)))]
    return t


def build_topology(name: str, servers: int, nic: str, option: str = "--topology"):
    """A GPU server or cluster by kind, or a topology file; errors name
    ``option`` (the command-line option that gave ``name``)."""
    if name.endswith((".toml", ".json")):
        return topology_from_file(name, option)
    if name not in KINDS:
        raise PlanningError(f"{option}: unknown {name!r} (known: {', '.join(KINDS)}, or a .toml/.json topology file)")
    if not 1 <= servers <= MAX_SERVERS:
        raise PlanningError(f"--servers: must be within 1..{MAX_SERVERS}, got {servers}")
    if servers == 1:
        return gpu_server(name)
    if name == "pcie":
        raise PlanningError(f"{option} pcie: only one server (--servers 1)")
    from pydantic import TypeAdapter, ValidationError

    try:
        nic_bps = TypeAdapter(RateBps).validate_python(nic)
    except ValidationError:
        raise PlanningError(f"--nic: cannot read {nic!r} as a rate (e.g. 40Gbps)") from None
    if nic_bps <= 0:
        raise PlanningError("--nic: must be positive")
    return gpu_cluster(name, servers, nic_bps)


@dataclass
class Row:
    size: int
    count: int
    time_ps: int
    algbw: float
    busbw: float
    algo: str
    chunk: int | None
    tried: list | None = None  # auto: (algorithm, chunk, time_ps) of every candidate


def run_bench(topology: str, gpus: str, op: str, algo: str, sizes: str, factor: int = 2, chunk: str = "auto",
              root: int = 0, servers: int = 1, nic: str = "100Gbps", backend: str = "flow",
              check: bool = False, progress=None, flow_model: str = PLAN_FLOW_MODEL) -> tuple[list[Row], Allocation]:
    if op not in OPS:
        raise PlanningError(f"--op: unknown collective {op!r} (known: {', '.join(OPS)})")
    if algo not in ALGOS:
        raise PlanningError(f"--algo: unknown algorithm {algo!r} (known: {', '.join(ALGOS)})")
    if backend not in ("flow", "packet"):
        raise PlanningError(f"--backend: must be 'flow' or 'packet', got {backend!r}")
    if flow_model not in ("fluid", "tcp"):
        raise PlanningError(f"--flow-model: must be 'fluid' or 'tcp', got {flow_model!r}")
    size_list = parse_sizes(sizes, factor)
    if chunk not in ("auto", "none"):
        fixed = parse_size(chunk, "--chunk")
        if fixed < 1:
            raise PlanningError("--chunk: must be positive")
        if size_list[-1] // fixed > MAX_CHUNKS:
            raise PlanningError(f"--chunk: {fixed} bytes cuts {size_list[-1]} bytes into more than {MAX_CHUNKS} chunks; "
                                f"use a chunk of at least {-(-size_list[-1] // MAX_CHUNKS)} bytes")
    topo = build_topology(topology, servers, nic)
    alloc = Allocation(topo, parse_gpus(gpus, len(topo.gpus)))
    if op == "alltoall":
        from ..collectives.plan import block_bytes

        for size in size_list:
            block_bytes(size, alloc.n, "--sizes")
    if op in ("broadcast", "reduce") and not 0 <= root < alloc.n:
        raise PlanningError(f"--root: must be a rank within 0..{alloc.n - 1}, got {root}")
    rows = []
    for size in size_list:
        if chunk == "none":
            choices = (None,)
        elif chunk == "auto":
            choices = (None,) + tuple(c for c in AUTO_CHUNKS if 4 * c <= size and size // c <= 4096)
        else:
            choices = (fixed,)
        tried = None
        if algo == "auto":
            plan, tried = choose_plan(op, alloc, size, root, backend, choices, flow_model=flow_model)
            t = min(x[2] for x in tried)
        else:
            best = None
            for c in choices:
                plan = make_plan(algo, op, alloc, size, c, root)
                if check:
                    verify(plan)
                t = run_plan(plan, topo, alloc.rank_hosts, backend, flow_model=flow_model).time_ps
                if best is None or t < best[0]:
                    best = (t, plan)
            t, plan = best
        algbw, busbw = bus_bandwidth(op, alloc.n, size, t)
        rows.append(Row(size, size // FLOAT_BYTES, t, algbw, busbw, plan.algorithm, plan.meta.get("chunk_bytes"), tried))
        if progress:
            progress(size)
    return rows, alloc


def table_text(rows: list[Row], op: str, root: int) -> str:
    redop = "sum" if op in ("allreduce", "reduce", "reduce_scatter") else "none"
    r = root if op in ("broadcast", "reduce") else -1
    lines = [
        "#       size         count      type   redop    root     time   algbw   busbw  algorithm     chunk",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)",
    ]
    for x in rows:
        lines.append(f"{x.size:12d}  {x.count:12d}  {'float':>8s}  {redop:>6s}  {r:6d}  {x.time_ps / 1e6:8.2f}  "
                     f"{x.algbw / 1e9:6.2f}  {x.busbw / 1e9:6.2f}  {x.algo:12s}  {x.chunk if x.chunk else '-'}")
    return "\n".join(lines)


def explain_text(rows: list[Row]) -> str:
    """Why auto chose what it chose: each candidate's best time per size."""
    lines = ["# auto: best simulated time of each candidate algorithm (us); the fastest is chosen"]
    for x in rows:
        if not x.tried:
            continue
        best: dict[str, float] = {}
        for a, _, t in x.tried:
            best[a] = min(best.get(a, float("inf")), t)
        cands = "  ".join(f"{a}={t / 1e6:.2f}" for a, t in sorted(best.items(), key=lambda kv: kv[1]))
        lines.append(f"{x.size:12d}  {cands}")
    return "\n".join(lines)


def write_csv(rows: list[Row], path, op: str, nranks: int) -> None:
    import csv

    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["op", "nranks", "size_bytes", "count", "type", "time_ps", "time_us", "algbw_GBps", "busbw_GBps",
                    "algorithm", "chunk_bytes"])
        for x in rows:
            w.writerow([op, nranks, x.size, x.count, "float", x.time_ps, f"{x.time_ps / 1e6:.3f}",
                        f"{x.algbw / 1e9:.4f}", f"{x.busbw / 1e9:.4f}", x.algo, x.chunk or ""])

"""Concurrent allreduce jobs on the C4P testbed, as nccl-tests runs them.

A job is a ring allreduce over all GPUs of its servers with 8 channels
(NCCL's rail rings): channel c visits the GPUs of even-numbered servers in
the order c, c+1, ..., c+7 and of odd-numbered servers backwards, so a
channel enters and leaves a server through the NIC of one rail, and every
NIC carries one channel each way. Each connection between servers is
``qps`` queue pairs whose source ports come from the C4P master, or at
random without it (``mode = "ecmp"``). Iterations run back to back (a
rank starts an allreduce when it has finished the previous one), and the
bus bandwidth of each is measured, as the paper's refined benchmark prints
it after every operation (section 4.2.2, figure 11).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from ...collectives.plan import Plan
from ...collectives.rings import block_rings, ring_allreduce
from ...collectives.metrics import BUSBW_FACTOR
from ...sim.apps.collectives import collective_spec
from ...sim.pipeline import core_spec
from .master import Master, ecmp_src_ports
from .testbed import GPUS_PER_SERVER, Router, Testbed

REDUCE_BPS = 8 * 1_100 * 10**9  # H800 HBM3 3.35 TB/s over three streams (two reads, one write)
SEND_OVERHEAD_PS = 1_000_000  # 1 us per message, as the collectives' default (scenario/workloads.py)
# The master's reaction to a link failure (repath). The paper gives none; its
# figure 11 spans many seconds of allreduces, ours a few ms, so any reaction
# on its time scale would be invisible there. 10 us: short against one of our
# allreduces (0.1-0.5 ms), and after the switches' own rerouting.
REPATH_DELAY_PS = 10_000_000


@dataclass
class Job:
    """All GPUs of ``servers`` in NCCL's rail rings; or, with ``rail``, a
    data-parallel group of a job whose tensor parallelism stays inside the
    servers: GPU ``rail`` of each server, in one ring (one channel)."""
    name: str
    servers: list[int]
    rail: int | None = None

    @property
    def nranks(self) -> int:
        return len(self.servers) * (1 if self.rail is not None else GPUS_PER_SERVER)

    def rings(self) -> list[list[int]]:
        return [list(range(len(self.servers)))] if self.rail is not None else rail_rings(len(self.servers))

    def server_of(self, rank: int) -> int:
        return rank if self.rail is not None else rank // GPUS_PER_SERVER

    def hosts(self, topo: Testbed) -> list[int]:
        if self.rail is not None:
            return [topo.gpu_host(s, self.rail) for s in self.servers]
        return [topo.gpu_host(s, k) for s in self.servers for k in range(GPUS_PER_SERVER)]


@dataclass
class RunConfig:
    mode: str = "c4p"  # "c4p" | "ecmp"
    balance: str = "split"  # "split" (static) | "dlb"
    qps: int = 2
    qp_depth: int = 1
    size_bytes: int = 256 << 20
    chunk_bytes: int = 1 << 20
    window: int = 4
    iterations: int = 1
    link_events: list[dict] = field(default_factory=list)
    faulty: list[tuple[str, str]] = field(default_factory=list)  # known to the master before the jobs start
    # C4P: the master gives the QPs a link failure cut new paths REPATH_DELAY_PS after it (Master.fail).
    repath: bool = False
    seed: int = 0
    # Scenario fields beside the defaults, e.g. the packet backend with DCQCN
    # over PFC ({"backend": "packet", "transport": {"cc": "dcqcn"}, ...}).
    network: dict = field(default_factory=dict)
    # Times at which to record every link's cumulative bytes (RunResult.link_bytes).
    snapshots_ps: list[int] = field(default_factory=list)
    keep_messages: bool = False  # RunResult.messages: every message (each QP part of a send)


def rail_rings(nservers: int) -> list[list[int]]:
    """The 8 channels' rings over ranks ``server index * 8 + gpu``."""
    return block_rings(nservers * GPUS_PER_SERVER, GPUS_PER_SERVER)


def repeat(plan: Plan, iterations: int) -> Plan:
    """``iterations`` copies of ``plan`` run back to back on every rank: a
    rank's first steps of copy j wait for all its steps of copy j - 1 that
    nothing else waits for."""
    out = Plan.empty(plan.collective, plan.nranks, plan.size_bytes, algorithm=plan.algorithm)
    for r, steps in enumerate(plan.ranks):
        n = len(steps)
        needed = {d for s in steps for d in s.deps}
        sinks = [i for i in range(n) if i not in needed]
        for j in range(iterations):
            for s in steps:
                deps = [d + j * n for d in s.deps] or ([x + (j - 1) * n for x in sinks] if j else [])
                if s.op == "send":
                    out.send(r, s.peer, s.offset, s.bytes, deps=deps)
                else:
                    out.recv(r, s.peer, s.offset, s.bytes, reduce=s.reduce, deps=deps)
    out.meta.update(plan.meta)
    return out


def job_plan(job: Job, cfg: RunConfig) -> Plan:
    p = ring_allreduce(job.nranks, cfg.size_bytes, rings=job.rings(), chunk_bytes=cfg.chunk_bytes, window=cfg.window)
    return repeat(p, cfg.iterations)


def cross_pairs(job: Job) -> list[tuple[int, int]]:
    """(rank, next rank) of every ring hop between servers."""
    out = []
    for ring in job.rings():
        for a, b in zip(ring, ring[1:] + ring[:1]):
            if job.server_of(a) != job.server_of(b):
                out.append((a, b))
    return out


@dataclass
class JobResult:
    name: str
    nranks: int
    iteration_ps: list[int]  # each allreduce's duration
    end_ps: int = 0  # when its last allreduce ended

    def busbw_bps(self, size_bytes: int) -> list[float]:
        f = BUSBW_FACTOR["allreduce"](self.nranks)
        return [8 * size_bytes / (t / 1e12) * f for t in self.iteration_ps]


@dataclass
class RunResult:
    jobs: list[JobResult]
    links: object  # pandas DataFrame of links.parquet's columns
    qps: object  # pandas DataFrame: what each QP carried
    src_ports: dict
    events: int
    cnps: object = None  # pandas Series: CNPs each host's receivers sent to it (DCQCN), by sender host
    end_ps: int = 0
    link_bytes: dict = field(default_factory=dict)  # snapshot time -> {(from, to): cumulative bytes}
    messages: object = None  # pandas DataFrame of messages.parquet's columns, with keep_messages


def _repaths(master: Master | None, cfg: RunConfig, specs: list[dict], jobs: list[Job], topo: Testbed) -> None:
    """Adds to the QP groups the master's new source ports after each link
    that goes down (in time order), REPATH_DELAY_PS after it."""
    if master is None:
        raise ValueError("repath: only with mode 'c4p' (the master re-allocates paths)")
    group_of = {}
    for spec, job in zip(specs, jobs):
        hosts = job.hosts(topo)
        for g in spec["qps"]:
            g["repaths"] = []
            group_of[(hosts[g["rank"]], hosts[g["peer"]])] = g
    for ev in sorted((e for e in cfg.link_events if e["action"] == "down"), key=lambda e: e["at_ps"]):
        for (src, dst, k), port in master.fail([tuple(ev["link"])]).items():
            group_of[(src, dst)]["repaths"].append({"at_ps": ev["at_ps"] + REPATH_DELAY_PS, "qp": k,
                                                   "src_port": port})


def run_jobs(topo: Testbed, jobs: list[Job], cfg: RunConfig, master: Master | None = None) -> RunResult:
    """Runs the jobs together on the flow backend (fluid max-min rates)."""
    import pandas as pd

    from ..._core import Simulator
    from ...sim.results import read_parquet_bytes
    from ...scenario.model import Scenario

    rng = random.Random(cfg.seed)
    if cfg.mode == "c4p":
        master = master or Master(topo, faulty=cfg.faulty, seed=cfg.seed)
    elif cfg.mode == "ecmp":
        router = Router(topo)
    else:
        raise ValueError(f"mode: 'c4p' or 'ecmp', got {cfg.mode!r}")
    specs, src_ports = [], {}
    for job in jobs:
        plan = job_plan(job, cfg)
        hosts = job.hosts(topo)
        spec = collective_spec(plan, topo, hosts, name=job.name, reduce_bps=REDUCE_BPS,
                               send_overhead_ps=SEND_OVERHEAD_PS)
        groups = []
        for a, b in cross_pairs(job):
            if cfg.mode == "c4p":
                ports = master.allocate(hosts[a], hosts[b], cfg.qps)
            else:
                ports = ecmp_src_ports(topo, router, hosts[a], hosts[b], cfg.qps, rng)
            groups.append({"rank": a, "peer": b, "src_ports": ports})
            src_ports[(job.name, a, b)] = ports
        spec.update({"qps": groups, "balance": cfg.balance, "qp_depth": cfg.qp_depth})
        specs.append(spec)
    if cfg.repath:
        _repaths(master, cfg, specs, jobs, topo)
    net = {"backend": "flow", "flow_model": "fluid", "seed": cfg.seed,
           "link_events": cfg.link_events, "routing": {"resilient_hash": True}}
    net.update(cfg.network)
    scenario = Scenario.from_dict(net)
    core = core_spec(scenario, topology_data=topo)
    core["collectives"] = specs
    sim = Simulator(json.dumps(core))
    link_bytes = {}
    for at in sorted(cfg.snapshots_ps):
        sim.run_until(at)
        lk = sim.links()
        link_bytes[at] = {(a, b): n for a, b, n in zip(lk["src_node"], lk["dst_node"], lk["bytes"])}
    sim.run_until(2**63)
    tables = sim.app_tables()
    steps = pd.DataFrame(tables["steps"])
    starts = dict(zip(tables["collectives"]["collective"], tables["collectives"]["start_ps"]))
    results = []
    for job in jobs:
        st = steps[steps["collective"] == job.name]
        per_rank = st.groupby("rank")["step"].transform("size") // cfg.iterations
        it = st["step"] // per_rank
        if st["end_ps"].isna().any():
            raise RuntimeError(f"{job.name}: did not finish (a path lost for good?)")
        ends = st.assign(it=it).groupby("it")["end_ps"].max().sort_index().tolist()
        prev = [starts[job.name]] + ends[:-1]
        results.append(JobResult(job.name, job.nranks,
                                 [int(e - p) for e, p in zip(ends, prev)], int(ends[-1])))
    links = read_parquet_bytes(sim.links_parquet()).to_pandas()
    cnps = None
    if net["backend"] == "packet":  # the flow backend sends no CNPs
        msgs = sim.messages()
        cnps = pd.Series(msgs["cnps"]).groupby(pd.Series(msgs["src"])).sum()
    return RunResult(results, links, pd.DataFrame(tables.get("qps", {})), src_ports, sim.events, cnps,
                     sim.last_active_ps, link_bytes, pd.DataFrame(sim.messages()) if cfg.keep_messages else None)

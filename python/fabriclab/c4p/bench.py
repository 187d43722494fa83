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

from ..collectives.plan import Plan
from ..collectives.rings import ring_allreduce
from ..collectives.run import BUSBW_FACTOR, collective_spec
from .master import Master, ecmp_src_ports
from .testbed import GPUS_PER_SERVER, Router, Testbed

REDUCE_BPS = 8 * 1_100 * 10**9  # H800 HBM3 3.35 TB/s over three streams (two reads, one write)
SEND_OVERHEAD_PS = 1_000_000  # 1 us per message, as the collectives' default (scenario.py)


@dataclass
class Job:
    name: str
    servers: list[int]


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
    seed: int = 0


def rail_rings(nservers: int) -> list[list[int]]:
    """The 8 channels' rings over ranks ``server index * 8 + gpu``."""
    g = GPUS_PER_SERVER
    rings = []
    for c in range(g):
        order = [(c + k) % g for k in range(g)]
        ring = []
        for i in range(nservers):
            ring += [i * g + x for x in (order if i % 2 == 0 else order[::-1])]
        rings.append(ring)
    return rings


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


def job_plan(nservers: int, cfg: RunConfig) -> Plan:
    n = nservers * GPUS_PER_SERVER
    p = ring_allreduce(n, cfg.size_bytes, rings=rail_rings(nservers), chunk_bytes=cfg.chunk_bytes, window=cfg.window)
    return repeat(p, cfg.iterations)


def cross_pairs(nservers: int) -> list[tuple[int, int]]:
    """(rank, next rank) of every ring hop between servers."""
    g = GPUS_PER_SERVER
    out = []
    for ring in rail_rings(nservers):
        for a, b in zip(ring, ring[1:] + ring[:1]):
            if a // g != b // g:
                out.append((a, b))
    return out


@dataclass
class JobResult:
    name: str
    nranks: int
    iteration_ps: list[int]  # each allreduce's duration

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


def run_jobs(topo: Testbed, jobs: list[Job], cfg: RunConfig, master: Master | None = None) -> RunResult:
    """Runs the jobs together on the flow backend (fluid max-min rates)."""
    import pandas as pd

    from .._core import Simulator
    from ..results import links_table
    from ..scenario import Scenario

    rng = random.Random(cfg.seed)
    if cfg.mode == "c4p":
        master = master or Master(topo, faulty=cfg.faulty, seed=cfg.seed)
    elif cfg.mode == "ecmp":
        router = Router(topo)
    else:
        raise ValueError(f"mode: 'c4p' or 'ecmp', got {cfg.mode!r}")
    specs, src_ports = [], {}
    for job in jobs:
        plan = job_plan(len(job.servers), cfg)
        hosts = [topo.gpu_host(s, k) for s in job.servers for k in range(GPUS_PER_SERVER)]
        spec = collective_spec(plan, topo, hosts, name=job.name, reduce_bps=REDUCE_BPS,
                               send_overhead_ps=SEND_OVERHEAD_PS)
        groups = []
        for a, b in cross_pairs(len(job.servers)):
            if cfg.mode == "c4p":
                ports = master.allocate(hosts[a], hosts[b], cfg.qps)
            else:
                ports = ecmp_src_ports(topo, router, hosts[a], hosts[b], cfg.qps, rng)
            groups.append({"rank": a, "peer": b, "src_ports": ports})
            src_ports[(job.name, a, b)] = ports
        spec.update({"qps": groups, "balance": cfg.balance, "qp_depth": cfg.qp_depth})
        specs.append(spec)
    scenario = Scenario.from_dict({"backend": "flow", "flow_model": "fluid", "seed": cfg.seed,
                                   "link_events": cfg.link_events, "routing": {"resilient_hash": True}})
    core = scenario.to_core(topology_data=topo)
    core["collectives"] = specs
    sim = Simulator(json.dumps(core))
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
        results.append(JobResult(job.name, len(job.servers) * GPUS_PER_SERVER,
                                 [int(e - p) for e, p in zip(ends, prev)]))
    links = links_table(sim.links(), sim.last_active_ps).to_pandas()
    return RunResult(results, links, pd.DataFrame(tables.get("qps", {})), src_ports, sim.events)

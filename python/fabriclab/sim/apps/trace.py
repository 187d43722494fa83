"""Jobs replayed from Chakra execution traces (``[[trace_jobs]]``),
lowered onto the core's dependency-graph job (``graph_jobs``), the one LLM
jobs run on: no second executor. After the run, the LLM app's collection
turns the graph job's tables into rows of ``jobs.parquet``,
``timeline.parquet``, ``ccl.parquet`` and ``groups.parquet`` and the
summary's ``trace_jobs`` section (docs/llm.md, "Chakra traces").

Per rank, a node becomes:

- ``COMP_NODE``: a compute node of ``duration_micros``; nodes with
  ``is_cpu_op`` (host operators, and the host side of a collective, which
  older converters typed ``COMM_COLL_NODE``) as ``cpu_ops`` says;
  ``METADATA_NODE``: nothing (its dependencies pass through);
- ``COMM_COLL_NODE``: its collective (``comm_type``) of ``comm_size``
  bytes over the ranks of its ``pg_name`` (``trace_jobs[i].groups``; none:
  every rank), on fabriclab's planners: ring allreduce, allgather and
  reduce-scatter, direct all-to-all, chain broadcast and reduce rooted at
  the group's first rank;
- ``COMM_SEND_NODE`` / ``COMM_RECV_NODE``: a message to ``comm_dst`` /
  from ``comm_src`` (global ranks; absent, the other rank of a two-rank
  ``pg_name``), paired in order within each source, destination and
  ``comm_tag``.

A rank's communication on one process group runs in trace order (one
NCCL stream per communicator); its GPU compute nodes run in launch order
per stream, and its communication waits for the kernels launched before
it (``_Rank._gpu_order``). Whatever cannot be honoured is refused naming
the rank and the node."""

from __future__ import annotations

import heapq
from pathlib import Path

from ...scenario.base import U32_MAX, ScenarioError
from ..app import Resolving
from ..limits import BYTES_PER_FLOW, BYTES_PER_TIMELINE_ROW
from .chakra import COMM_TYPES, TraceNode, Unread, rank_files, read_rank
from .graph import GraphApp, GraphBuild, intern, rank_slowdowns

# Chakra's collectives fabriclab runs, by comm_type, as the plan format's op.
COLLECTIVES = {"ALL_REDUCE": "allreduce", "ALL_GATHER": "allgather", "REDUCE_SCATTER": "reduce_scatter",
               "ALL_TO_ALL": "alltoall", "BROADCAST": "broadcast", "REDUCE": "reduce"}
WORLD = ""  # the process group of collectives without pg_name
MAX_DURATION_PS = 2**62  # a node's time (about 53 days): sums of many stay inside the core's u64 picoseconds


class Trace(GraphApp):
    name = "trace"
    section = "trace_jobs"
    numbered_groups = False  # a group is named by its pg_name

    def jobs(self, s) -> list:
        return s.trace_jobs

    def resolve(self, r: Resolving) -> None:
        self.add(r, [lower(r.scenario, i, j, len(r.topology.hosts)) for i, j in enumerate(r.scenario.trace_jobs)])

    def estimate(self, s, est, hosts: int, rate_bps: float) -> None:
        for i, j in enumerate(s.trace_jobs):
            rows, msgs, _ = _size(s, i, j)
            est.add(f"trace_jobs[{i}].path", rows * BYTES_PER_TIMELINE_ROW + msgs * BYTES_PER_FLOW,
                    f"a traced job: about {est.count(rows)} timeline rows and {est.count(msgs)} messages per run")

    def events(self, s, t, est) -> None:
        for i, j in enumerate(s.trace_jobs):
            rows, msgs, nbytes = _size(s, i, j)
            est.add(f"trace_jobs[{i}]", 2 * rows)
            est.load(f"trace_jobs[{i}]", nbytes, msgs, est.hops.mean(list(range(len(t.hosts)))))


def _size(s, i: int, j) -> tuple[int, int, float]:
    """Node runs, messages and bytes of a run (a collective's messages as a ring's)."""
    ranks = _read(s, i, j)
    rows = msgs = nbytes = 0
    for nodes in ranks:
        for nd in nodes:
            rows += 1
            size = nd.attrs.get("comm_size", 0)
            pg = nd.attrs.get("pg_name", WORLD)
            if nd.type in ("COMM_SEND_NODE", "COMM_COLL_NODE") and isinstance(size, int) and isinstance(pg, str):
                n = len(j.groups.get(pg, ranks))  # no pg_name: every rank
                k = 1 if nd.type == "COMM_SEND_NODE" else 2 * max(n - 1, 1)
                msgs, nbytes = msgs + k, nbytes + size * (1 if k == 1 else 2)
    return rows * j.iterations, msgs * j.iterations, nbytes * j.iterations


def _read(s, i: int, j) -> list[list[TraceNode]]:
    """Every rank's nodes; errors name the job's path, the rank and its file. Kept on the job's
    configuration while its files are unchanged: a run's estimate and lowering read them once."""
    field = f"trace_jobs[{i}].path"
    files = rank_files(s._resolve_path(j.path), field)
    ident = [(str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files]
    if j._parsed is None or j._parsed[0] != ident:
        j._parsed = (ident, [read_rank(f, f"{field}: rank {r} ({f.name})") for r, f in enumerate(files)])
    return j._parsed[1]


class _Rank:
    """One rank's trace checked and reduced to what the core runs: kept nodes in topological order with
    their dependencies, what each does, and its communication per process group in trace order."""

    def __init__(self, field: str, r: int, nodes: list[TraceNode], file: Path, j, n: int):
        self.r, self.file = r, file
        self.where = f"{field}: rank {r} ({file.name})"
        byid: dict[int, TraceNode] = {}
        for nd in nodes:
            if nd.id in byid:
                raise ScenarioError(f"{self.where}: node id {nd.id} appears twice; node ids must be unique per rank")
            if nd.id > U32_MAX:
                raise ScenarioError(f"{self.where}: node {nd.id}: ids above {U32_MAX} are not supported")
            byid[nd.id] = nd
        self.deps = {}
        for nd in nodes:
            ds = nd.data_deps + (nd.ctrl_deps if j.ctrl_deps else [])
            for d in ds:
                if d not in byid:
                    kind = "data" if d in nd.data_deps else "control"
                    raise ScenarioError(f"{self.node(nd)} has a {kind} dependency on node {d}, which is not in "
                                        f"rank {r}'s trace")
            self.deps[nd.id] = sorted(set(ds))
        self.order = self._topological(byid)
        self.what = {nd.id: self._classify(nd, j, n) for nd in nodes}
        # Dependencies through dropped nodes (metadata, skipped CPU ops, one-rank collectives) pass on.
        reach: dict[int, set] = {}
        self.kept: list[int] = []
        self.kdeps: dict[int, set] = {}
        for v in self.order:
            up = set().union(*(reach[d] for d in self.deps[v])) if self.deps[v] else set()
            if self.what[v][0] == "pass":
                reach[v] = up
            else:
                reach[v] = {v}
                self.kept.append(v)
                self.kdeps[v] = up
        self._gpu_order(byid)
        self.stream: dict[str, list[int]] = {}
        for v in self.kept:
            w = self.what[v]
            if w[0] in ("coll", "send", "recv"):
                seq = self.stream.setdefault(w[-1], [])
                if seq:
                    self.kdeps[v].add(seq[-1])
                seq.append(v)
        self.byid = byid

    def _gpu_order(self, byid: dict) -> None:
        """The GPU's own order, which a converted trace leaves to the host: chakra's PyTorch converter makes
        a kernel depend only on the CPU operator that launched it, so with CPU operators skipped every kernel
        would be ready at once. Kept GPU compute nodes run in launch order (topological order, the smaller id
        first) per ``stream`` attribute (absent: one stream); a collective, send or receive waits for the
        last kernel launched before it on every stream, as NCCL's stream waits for the compute stream."""
        last: dict = {}
        for v in self.kept:
            nd, w = byid[v], self.what[v]
            if nd.attrs.get("is_cpu_op"):
                continue
            if w[0] == "compute":
                st = nd.attrs.get("stream", 0)
                if st in last:
                    self.kdeps[v].add(last[st])
                last[st] = v
            elif w[0] in ("coll", "send", "recv"):
                self.kdeps[v].update(last.values())

    def node(self, nd: TraceNode) -> str:
        return f"{self.where}: node {nd.id} ({nd.name!r})"

    def _topological(self, byid: dict) -> list[int]:
        """Node ids in dependency order, the smaller id first among the ready ones."""
        users: dict[int, list[int]] = {v: [] for v in byid}
        left = {v: len(self.deps[v]) for v in byid}
        for v in byid:
            for d in self.deps[v]:
                users[d].append(v)
        ready = [v for v in byid if not left[v]]
        heapq.heapify(ready)
        out = []
        while ready:
            v = heapq.heappop(ready)
            out.append(v)
            for u in users[v]:
                left[u] -= 1
                if not left[u]:
                    heapq.heappush(ready, u)
        if len(out) < len(byid):
            stuck = min(v for v in byid if left[v])
            raise ScenarioError(f"{self.node(byid[stuck])} is on a dependency cycle; a trace is acyclic")
        return out

    def _classify(self, nd: TraceNode, j, n: int) -> tuple:
        """("compute", ps) | ("pass",) | ("coll", op, bytes, group) | ("send"/"recv", peer, tag, bytes, group)."""
        a, t = nd.attrs, nd.type
        for k in ("comm_size", "tensor_size", "num_ops", "comm_type", "comm_tag", "comm_src", "comm_dst", "stream"):
            if k in a and (isinstance(a[k], bool) or not isinstance(a[k], int)):
                raise ScenarioError(f"{self.node(nd)}: attribute {k} must be an integer; got {a[k]!r}")
        if isinstance(a.get("is_cpu_op"), Unread) or isinstance(a.get("involved_dim"), Unread):
            k = "is_cpu_op" if isinstance(a.get("is_cpu_op"), Unread) else "involved_dim"
            raise ScenarioError(f"{self.node(nd)}: attribute {k} is {a[k]!r}")
        if not isinstance(a.get("pg_name", WORLD), str):
            raise ScenarioError(f"{self.node(nd)}: attribute pg_name must be a string; got {a['pg_name']!r}")
        if t == "METADATA_NODE":
            return ("pass",)
        if t == "COMP_NODE" or (t == "COMM_COLL_NODE" and a.get("is_cpu_op")):  # the latter: a launch on the host
            if a.get("is_cpu_op") and j.cpu_ops == "skip":
                return ("pass",)
            ops = a.get("num_ops", 0)
            if j.peak_flops is not None and t == "COMP_NODE" and not a.get("is_cpu_op") and ops > 0:
                s = max(ops / j.peak_flops, a.get("tensor_size", 0) * 8 / j.memory_bps if j.memory_bps else 0)
                ps, what = round(s * 1e12), "its roofline time"
            else:
                ps, what = nd.duration_micros * 1_000_000, f"duration_micros {nd.duration_micros}"
            if ps > MAX_DURATION_PS:
                raise ScenarioError(f"{self.node(nd)}: {what} is {ps} ps, above the {MAX_DURATION_PS} ps "
                                    f"(about 53 days) a node may take")
            return ("compute", ps)
        group = a.get("pg_name", WORLD)
        if t in ("COMM_COLL_NODE", "COMM_SEND_NODE", "COMM_RECV_NODE"):
            if group != WORLD and group not in j.groups:
                raise ScenarioError(f"{self.node(nd)}: process group {group!r} is not among the job's groups "
                                    f"({', '.join(map(repr, j.groups)) or 'none given'}); give its ranks in "
                                    f"groups.{group}")
            size = a.get("comm_size", a.get("tensor_size", 0 if t == "COMM_RECV_NODE" else None))
            if size is None or size < 0 or (size == 0 and t != "COMM_RECV_NODE"):
                raise ScenarioError(f"{self.node(nd)}: needs comm_size, a positive number of bytes; got {size}")
        if t == "COMM_COLL_NODE":
            ct = a.get("comm_type")
            name = COMM_TYPES[ct] if isinstance(ct, int) and 0 <= ct < len(COMM_TYPES) else f"comm_type {ct}"
            if name not in COLLECTIVES:
                raise ScenarioError(f"{self.node(nd)}: collective {name} is not one fabriclab runs "
                                    f"({', '.join(COLLECTIVES)})")
            dims = a.get("involved_dim")
            if group == WORLD and dims is not None and not all(dims):
                raise ScenarioError(f"{self.node(nd)}: involved_dim {dims} names dimensions of ASTRA-sim's logical "
                                    f"topology; give the node a pg_name and its ranks in groups")
            members = j.groups.get(group, range(n))
            if self.r not in members:
                raise ScenarioError(f"{self.node(nd)}: process group {group or 'world'!r} has ranks "
                                    f"{list(members)}, not this rank")
            return ("pass",) if len(members) == 1 else ("coll", COLLECTIVES[name], size, group)
        if t in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
            key = "comm_dst" if t == "COMM_SEND_NODE" else "comm_src"
            peer = a.get(key)
            pair = j.groups.get(group, [])
            if peer is None and len(pair) == 2 and self.r in pair:
                peer = pair[1 - pair.index(self.r)]  # a two-rank group names the peer
            if not isinstance(peer, int) or not 0 <= peer < n or peer == self.r:
                raise ScenarioError(f"{self.node(nd)}: {t} needs {key}, another rank of the job's 0..{n - 1}, or "
                                    f"a pg_name whose group has this rank and one other; got {key} {peer} and "
                                    f"pg_name {group!r} (chakra's PyTorch converter records no {key})")
            return ("send" if t == "COMM_SEND_NODE" else "recv", peer, a.get("comm_tag", 0), size, group)
        raise ScenarioError(f"{self.node(nd)}: {t} cannot be honoured (fabriclab runs compute, collective, send "
                            f"and receive nodes; memory, storage, batch and checkpoint nodes are not modelled)")


def _match(ranks: list[_Rank], j, n: int) -> None:
    """Every group's members issue the same collectives in the same order, every receive has its send
    (paired in order within each source, destination and tag, as ASTRA-sim matches on the tag; same
    size), and the ranks together cannot deadlock."""
    members = {g: list(rs) for g, rs in j.groups.items()} | {WORLD: list(range(n))}
    for g, rs in members.items():
        seqs = {r: [v for v in ranks[r].stream.get(g, []) if ranks[r].what[v][0] == "coll"] for r in rs}
        first = rs[0]
        for r in rs[1:]:
            a, b = seqs[first], seqs[r]
            for k in range(max(len(a), len(b))):
                if k >= len(a) or k >= len(b):
                    x, y = (r, b[k]) if k >= len(a) else (first, a[k])
                    other = first if x == r else r
                    raise ScenarioError(f"{ranks[x].node(ranks[x].byid[y])}: collective {k + 1} on process group "
                                        f"{g or 'world'!r}, but rank {other} joins only {min(len(a), len(b))}")
                wa, wb = ranks[first].what[a[k]], ranks[r].what[b[k]]
                if wa[1:3] != wb[1:3]:
                    raise ScenarioError(f"{ranks[r].node(ranks[r].byid[b[k]])}: {wb[1]} of {wb[2]} bytes, the "
                                        f"{k + 1}th collective on group {g or 'world'!r}, meets rank {first}'s "
                                        f"node {a[k]}, {wa[1]} of {wa[2]} bytes")
    sends: dict[tuple, list] = {}
    recvs: dict[tuple, list] = {}
    for rk in ranks:
        for v in rk.kept:
            w = rk.what[v]
            if w[0] == "send":
                sends.setdefault((rk.r, w[1], w[2]), []).append(v)
            elif w[0] == "recv":
                recvs.setdefault((w[1], rk.r, w[2]), []).append(v)
    for (s, d, tag) in sorted(set(sends) | set(recvs)):
        ss, rr = sends.get((s, d, tag), []), recvs.get((s, d, tag), [])
        for k in range(max(len(ss), len(rr))):
            if k >= len(ss):
                raise ScenarioError(f"{ranks[d].node(ranks[d].byid[rr[k]])}: a receive from rank {s} with tag {tag} "
                                    f"without its send (rank {s} sends {len(ss)} with that tag to rank {d})")
            if k >= len(rr):
                raise ScenarioError(f"{ranks[s].node(ranks[s].byid[ss[k]])}: a send to rank {d} with tag {tag} that "
                                    f"no receive takes (rank {d} receives {len(rr)} with that tag from rank {s})")
            ws, wr = ranks[s].what[ss[k]], ranks[d].what[rr[k]]
            if wr[3] and ws[3] != wr[3]:
                raise ScenarioError(f"{ranks[d].node(ranks[d].byid[rr[k]])}: receive {k + 1} from rank {s} "
                                    f"with tag {tag} ({wr[3]} bytes) meets send node {ss[k]} ({ws[3]} bytes)")
    _deadlock(ranks, sends, recvs, members)


def _deadlock(ranks: list[_Rank], sends: dict, recvs: dict, members: dict) -> None:
    """A topological order over every rank's nodes, each receive after its send and each collective
    after every member has reached it; what is left waits forever."""
    deps: dict[tuple, list] = {(rk.r, v): [(rk.r, d) for d in rk.kdeps[v]] for rk in ranks for v in rk.kept}
    for key, ss in sends.items():
        for a, b in zip(ss, recvs.get(key, [])):
            deps[(key[1], b)].append((key[0], a))
    for g, rs in members.items():
        seqs = [[v for v in ranks[r].stream.get(g, []) if ranks[r].what[v][0] == "coll"] for r in rs]
        for k in range(len(seqs[0])):
            inst = ("coll", g, k)
            deps[inst] = [d for r, s in zip(rs, seqs) for d in deps[(r, s[k])]]
            for r, s in zip(rs, seqs):
                deps[(r, s[k])] = [inst]
    users: dict = {v: [] for v in deps}
    left = {v: len(ds) for v, ds in deps.items()}
    for v, ds in deps.items():
        for d in ds:
            users[d].append(v)
    ready = [v for v in deps if not left[v]]
    while ready:
        for u in users[ready.pop()]:
            left[u] -= 1
            if not left[u]:
                ready.append(u)
    stuck = {v for v in deps if left[v] and v[0] != "coll"}
    if stuck:
        # The first stuck node of the lowest rank whose own rank's dependencies are all done: it waits on another.
        r, v = min((r, v) for r, v in stuck if not any((r, d) in stuck for d in ranks[r].kdeps[v]))
        raise ScenarioError(f"{ranks[r].node(ranks[r].byid[v])} can never run: the ranks' sends, receives and "
                            f"collectives wait on each other in a circle")


def lower(s, i: int, j, nh: int) -> dict:
    """Trace job ``i`` of scenario ``s`` as the core's graph job on a topology of ``nh`` hosts."""
    field = f"trace_jobs[{i}]"
    files = rank_files(s._resolve_path(j.path), f"{field}.path")
    n = len(files)
    hosts = list(range(n)) if j.hosts == "all" else list(j.hosts)
    if j.hosts == "all" and nh != n:
        raise ScenarioError(f"{field}.hosts: 'all' gives the topology's {nh} hosts, but the trace has {n} ranks; "
                            f"give {n} hosts")
    if len(hosts) != n or len(set(hosts)) != n or not all(0 <= h < nh for h in hosts):
        raise ScenarioError(f"{field}.hosts: needs {n} distinct host indices in 0..{nh - 1} (one per rank)")
    for g, rs in j.groups.items():
        if max(rs) >= n:
            raise ScenarioError(f"{field}.groups.{g}: rank {max(rs)} is not one of the trace's ranks 0..{n - 1}")
    slow = rank_slowdowns(field, j.slowdown, n)
    ranks = [_Rank(field, r, nodes, f, j, n) for r, (nodes, f) in enumerate(zip(_read(s, i, j), files))]
    _match(ranks, j, n)
    b = GraphBuild()
    label = b.label
    names = sorted({w[-1] for rk in ranks for v in rk.kept if (w := rk.what[v])[0] == "coll"})
    # A group's label (and so its name in groups.parquet and ccl.parquet) is its pg_name; "world" without one.
    groups = [{"label": label(g or "world"), "ranks": list(j.groups.get(g, range(n)))} for g in names]
    gid = {g: k for k, g in enumerate(names)}
    programs, program_of, out = [], {}, []
    for rk in ranks:
        slots: list[int] = []
        peers: list[int] = []
        index = {v: k for k, v in enumerate(rk.kept)}
        prog = []
        for v in rk.kept:
            w = rk.what[v]
            nd = {"kind": w[0], "deps": sorted(index[d] for d in rk.kdeps[v]), "duration_ps": 0, "slot": 0,
                  "plan": 0, "bytes": 0, "label": label(w[0] if w[0] != "coll" else w[1]), "index": v}
            if w[0] == "compute":
                nd["duration_ps"] = w[1]
            elif w[0] == "coll":
                nd["kind"] = "collective"
                nd["slot"] = intern(slots, gid[w[3]])
                nd["plan"] = b.plan(w[1], len(groups[gid[w[3]]]["ranks"]))
                nd["bytes"] = w[2]
            else:
                nd["slot"] = intern(peers, w[1])
                nd["bytes"] = w[3] if w[0] == "send" else 0
            prog.append(nd)
        key = repr(prog)
        if key not in program_of:
            program_of[key] = len(programs)
            programs.append(prog)
        out.append({"host": hosts[rk.r], "program": program_of[key], "groups": slots, "peers": peers,
                    "slowdown": slow[rk.r]})
    return b.job(j, out, groups, programs)


TRACE = Trace()

"""Blink's start-up probe for the runtime: measure every ordered pair's
latency and bandwidth over the communicator's own connections, build the
topology graph and plan with TreeGen (collectives/treegen.py, the
planners' implementation) on it. docs/runtime.md, "Blink at run time".

Graph models: ``nic`` (the default; collectives/nicgraph.py): a tree edge
i -> j consumes i's uplink and j's downlink, estimated from the matrix, so
the trees respect that a host's pairs share its one NIC; ``pairs``: one
edge per ordered pair with its measured bandwidth as its own capacity,
which holds for dedicated point-to-point links (Blink's NVLinks) but
overstates a switched network, where pairs were measured one at a time.

Schedule: **one ordered pair at a time**, every rank in a barrier between
pairs, so no two probes ever share a link (sequential: n(n-1) probes; a
round-robin of disjoint pairs would be n-1 times faster on a star but can
share uplinks on a leaf-spine). For the pair i -> j:

- latency: ``pings`` ops of one 8-byte ping i -> j and pong j -> i; i times
  each op, the median is the round-trip time (rtt) as a collective step
  sees it (thread hand-offs included), latency = rtt / 2;
- bandwidth: ``repeats`` ops in which i sends ``nbytes`` in 1 MiB messages
  and j answers 8 bytes once all have arrived; i times each (T), and
  bw = 8 nbytes / (min T - rtt). The fastest op, not the mean: CPU
  contention, scheduling and timer slack only ever lengthen a transfer (on a
  shared machine one op in a few loses 10 % or more to them), so the
  fastest is the estimate nearest the path's own rate.

Every rank fills its row (as sender); a sum-allreduce of the matrices gives
every rank the same measurements, so every rank plans the same trees.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass

from ..collectives.nicgraph import PATH_SLACK
from .errors import RuntimeInputError

PROBE_MSG = 1 << 20
PING_BYTES = 8


@dataclass
class Measurements:
    n: int
    bw_bps: list[list[float]]  # [i][j]: i -> j goodput in bit/s (0 on the diagonal)
    rtt_s: list[list[float]]  # [i][j]: median round trip i -> j -> i as seen by i
    nbytes: int
    pings: int
    repeats: int = 1  # bulk transfers per pair; bw_bps is the fastest

    def to_dict(self) -> dict:
        return {"n": self.n, "bw_bps": self.bw_bps, "rtt_s": self.rtt_s, "nbytes": self.nbytes, "pings": self.pings,
                "repeats": self.repeats, "schedule": "sequential"}

    @classmethod
    def from_dict(cls, d: dict) -> "Measurements":
        n = d.get("n")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise RuntimeInputError(f"n: must be a positive integer, got {n!r}")
        for key in ("bw_bps", "rtt_s"):
            m = d.get(key)
            if not isinstance(m, list) or len(m) != n or any(not isinstance(r, list) or len(r) != n for r in m):
                raise RuntimeInputError(f"{key}: must be an {n} x {n} matrix")
            for i, row in enumerate(m):
                for j, v in enumerate(row):
                    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or v == float("inf"):
                        raise RuntimeInputError(f"{key}[{i}][{j}]: must be a finite number >= 0, got {v!r}")
        return cls(n, [[float(v) for v in r] for r in d["bw_bps"]], [[float(v) for v in r] for r in d["rtt_s"]],
                   int(d.get("nbytes", 0)), int(d.get("pings", 0)), int(d.get("repeats", 1)))


# ---------------------------------------------------------------- probe plans
def _plan(n: int, size: int, root: int, steps: dict[int, list[dict]]) -> str:
    return json.dumps({"version": 1, "collective": "broadcast", "nranks": n, "size_bytes": size, "root": root,
                       "algorithm": "probe", "meta": {}, "ranks": [steps.get(r, []) for r in range(n)]})


def ping_plan(n: int, i: int, j: int, nbytes: int) -> str:
    """i sends 8 bytes to j, j sends them back (the buffer's last 8 bytes)."""
    off = nbytes
    return _plan(n, nbytes + PING_BYTES, i, {
        i: [{"op": "send", "peer": j, "offset": off, "bytes": PING_BYTES},
            {"op": "recv", "peer": j, "offset": off, "bytes": PING_BYTES, "deps": [0]}],
        j: [{"op": "recv", "peer": i, "offset": off, "bytes": PING_BYTES},
            {"op": "send", "peer": i, "offset": off, "bytes": PING_BYTES, "deps": [0]}]})


def bulk_plan(n: int, i: int, j: int, nbytes: int) -> str:
    """i sends [0, nbytes) to j in PROBE_MSG messages; j acks 8 bytes once all arrived."""
    pieces = [(o, min(PROBE_MSG, nbytes - o)) for o in range(0, nbytes, PROBE_MSG)]
    si = [{"op": "send", "peer": j, "offset": o, "bytes": b} for o, b in pieces]
    si.append({"op": "recv", "peer": j, "offset": nbytes, "bytes": PING_BYTES})
    sj = [{"op": "recv", "peer": i, "offset": o, "bytes": b} for o, b in pieces]
    sj.append({"op": "send", "peer": i, "offset": nbytes, "bytes": PING_BYTES, "deps": list(range(len(pieces)))})
    return _plan(n, nbytes + PING_BYTES, i, {i: si, j: sj})


def measure(comm, nbytes: int = 4 << 20, pings: int = 10, repeats: int = 3) -> Measurements:
    """Every rank calls this at once (a collective). Sequential schedule: one
    ordered pair at a time, a barrier between pairs; each pair's bandwidth is
    the fastest of ``repeats`` bulk transfers (the module's docstring says why)."""
    import numpy as np

    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not PING_BYTES <= nbytes <= 1 << 30:
        raise RuntimeInputError(f"nbytes: must be an integer within 8..1G, got {nbytes!r}")
    if isinstance(pings, bool) or not isinstance(pings, int) or not 1 <= pings <= 10_000:
        raise RuntimeInputError(f"pings: must be an integer within 1..10000, got {pings!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= 100:
        raise RuntimeInputError(f"repeats: must be an integer within 1..100, got {repeats!r}")
    nbytes -= nbytes % 4
    n, me = comm.world_size, comm.rank
    buf = np.zeros((nbytes + PING_BYTES) // 4, np.int32)
    bw = np.zeros((n, n))
    rtt = np.zeros((n, n))
    comm.barrier()
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            pp, bp = ping_plan(n, i, j, nbytes), bulk_plan(n, i, j, nbytes)
            times = []
            for _ in range(pings):
                t0 = time.perf_counter()
                comm.run_plan(pp, buf)
                times.append(time.perf_counter() - t0)
            t = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                comm.run_plan(bp, buf)
                t = min(t, time.perf_counter() - t0)
            if me == i:
                r = statistics.median(times)
                rtt[i, j] = r
                bw[i, j] = 8 * nbytes / max(t - r, 1e-9)
            comm.barrier()
    comm.allreduce(bw)
    comm.allreduce(rtt)
    return Measurements(n, bw.tolist(), rtt.tolist(), nbytes, pings, repeats)


# ---------------------------------------------------------------- planning
MODELS = ("nic", "pairs")


def probe_graph(m: Measurements, op: str = "broadcast", model: str = "nic", path_slack: float = PATH_SLACK):
    """The topology graph: nodes = ranks, an edge i -> j per ordered pair
    measured with bandwidth > 0 (bit/s). ``model="pairs"``: the measured
    bandwidth is the edge's own capacity; for allreduce (trees used both
    ways) each pair gets the smaller of its two directions, both ways.
    ``model="nic"``: edges consume their hosts' NICs (nicgraph.nic_graph;
    a pair more than ``path_slack`` below both of its NICs keeps its own
    capacity too). The runtime's default is "nic": it runs over TCP
    between hosts that each reach a switch through one NIC, where the pair
    model promises every pair its measured rate at once."""
    import networkx as nx

    from ..collectives.nicgraph import nic_graph

    if model not in MODELS:
        raise RuntimeInputError(f"model: must be 'nic' (hosts behind a switch) or 'pairs' (dedicated links), "
                                f"got {model!r}")
    if isinstance(path_slack, bool) or not isinstance(path_slack, (int, float)) or not 0 <= path_slack < 1:
        raise RuntimeInputError(f"path_slack: must be a number within [0, 1), got {path_slack!r}")
    if model == "nic":
        return nic_graph(m.bw_bps, op == "allreduce", path_slack)
    g = nx.DiGraph()
    g.add_nodes_from(range(m.n))
    for i in range(m.n):
        for j in range(m.n):
            if i == j:
                continue
            c = min(m.bw_bps[i][j], m.bw_bps[j][i]) if op == "allreduce" else m.bw_bps[i][j]
            if c > 0:
                g.add_edge(i, j, capacity=c)
    return g


def pack(m: Measurements, op: str = "broadcast", root: int = 0, model: str = "nic"):
    """TreeGen on the measured graph: broadcast from ``root``; reduce into it
    (the packing of the reversed graph, trees then reversed: a reduce sends
    child -> parent; the NIC model's edges keep their resources, so a
    reversed edge still charges the sender's uplink); allreduce at the best
    root, undirected trees (under the NIC model every root packs the same)."""
    from ..collectives.treegen import best_root_packing, pack_trees

    if op not in ("broadcast", "reduce", "allreduce"):
        raise RuntimeInputError(f"op: TreeGen plans broadcast, reduce and allreduce, not {op!r}")
    if not 0 <= root < m.n:
        raise RuntimeInputError(f"root: must be a rank within 0..{m.n - 1}, got {root}")
    g = probe_graph(m, op, model)
    try:
        if op == "allreduce":
            return best_root_packing(g, both_directions=True)
        return pack_trees(g.reverse(copy=True) if op == "reduce" else g, root)
    except ValueError as e:
        raise RuntimeInputError(f"measurements: {e}") from None


def nic_loads(m: Measurements, op: str, p) -> dict[str, tuple[float, float]]:
    """Resource -> (load, capacity) of packing ``p`` (of either model) under
    the NIC model: how much of each estimated NIC (and path-limited pair)
    its trees use at their rates."""
    from ..collectives.treegen import resource_loads

    g = probe_graph(m, op, "nic")
    return resource_loads(g.reverse(copy=True) if op == "reduce" else g, p, op == "allreduce")


def plan_from_probe(m: Measurements, op: str, count: int, itemsize: int = 4, root: int = 0,
                    chunk_bytes: int | None = 1 << 20, model: str = "nic") -> tuple[str, object]:
    """The plan-format-v1 JSON of ``op`` over ``count`` elements along the
    trees TreeGen packs on the measured graph of ``model`` (data split in
    proportion to the tree rates), and the packing."""
    from ..collectives.trees import tree_collective
    from .plans import scale_to_elements

    if m.n == 1:
        raise RuntimeInputError("measurements: one rank has nothing to plan")
    if count < 1:
        raise RuntimeInputError("count: must be at least one element")
    if chunk_bytes is not None and chunk_bytes < itemsize:
        raise RuntimeInputError(f"chunk_bytes: must be at least one element ({itemsize} bytes), got {chunk_bytes}")
    p = pack(m, op, root, model)
    chunk = None if chunk_bytes is None else chunk_bytes // itemsize
    plan = tree_collective(op, m.n, count, p.trees, p.rates_bps, chunk, None, "trees (probed)")
    plan.meta.update({"packing_rate_bps": p.rate_bps, "root": p.root, "tree_rates_bps": p.rates_bps,
                      "graph_model": model})
    return scale_to_elements(plan.to_dict(), op, count, itemsize, root, chunk_bytes), p


# ---------------------------------------------------------------- text
def matrix_text(m: Measurements) -> str:
    w = 9
    head = "  from\\to " + "".join(f"{j:>{w}d}" for j in range(m.n))
    lines = ["# measured bandwidth (Mbit/s of payload), sender row -> receiver column", head]
    for i in range(m.n):
        lines.append(f"  {i:7d} " + "".join(f"{'-':>{w}s}" if i == j else f"{m.bw_bps[i][j] / 1e6:{w}.1f}"
                                           for j in range(m.n)))
    lines += ["# median round-trip time of an 8-byte ping-pong (us)", head]
    for i in range(m.n):
        lines.append(f"  {i:7d} " + "".join(f"{'-':>{w}s}" if i == j else f"{m.rtt_s[i][j] * 1e6:{w}.0f}"
                                           for j in range(m.n)))
    return "\n".join(lines)

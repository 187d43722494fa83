"""The plan format: per rank, an ordered list of steps on byte ranges of the
buffer, with explicit dependencies. See docs/plans.md.

A step is a ``send`` of ``[offset, offset+bytes)`` to ``peer`` or a ``recv``
of the same range from ``peer`` that either reduces into the local bytes
(``reduce=True``) or copies over them. The k-th send from rank a to rank b
matches the k-th receive at b from a. ``deps`` are indices of earlier steps of
the same rank that must complete first. ``path`` optionally pins a send to a
node path of the topology.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ..errors import InputError

PLAN_VERSION = 1
COLLECTIVES = ("broadcast", "reduce", "allreduce", "allgather", "reduce_scatter", "alltoall")


@dataclass
class Step:
    op: str  # "send" | "recv"
    peer: int
    offset: int
    bytes: int
    reduce: bool = False
    deps: list[int] = field(default_factory=list)
    path: list[str] | None = None

    def to_dict(self) -> dict:
        d = {"op": self.op, "peer": self.peer, "offset": self.offset, "bytes": self.bytes}
        if self.op == "recv":
            d["reduce"] = self.reduce
        if self.deps:
            d["deps"] = list(self.deps)
        if self.path is not None:
            d["path"] = list(self.path)
        return d


@dataclass
class Plan:
    collective: str
    nranks: int
    size_bytes: int
    ranks: list[list[Step]]
    root: int | None = None
    algorithm: str = ""
    meta: dict = field(default_factory=dict)
    version: int = PLAN_VERSION

    # -------------------------------------------------------------- building
    @classmethod
    def empty(cls, collective: str, nranks: int, size_bytes: int, root: int | None = None, algorithm: str = "") -> "Plan":
        if collective not in COLLECTIVES:
            raise ValueError(f"collective: must be one of {', '.join(COLLECTIVES)}, got {collective!r}")
        if nranks < 1:
            raise ValueError("nranks: must be at least 1")
        if size_bytes < 1:
            raise ValueError("size_bytes: must be positive")
        if collective == "alltoall":
            block_bytes(size_bytes, nranks)
        return cls(collective, nranks, size_bytes, [[] for _ in range(nranks)], root, algorithm)

    def send(self, rank: int, peer: int, offset: int, nbytes: int, deps=(), path=None) -> int:
        self.ranks[rank].append(Step("send", peer, offset, nbytes, False, sorted(set(d for d in deps if d is not None)), path))
        return len(self.ranks[rank]) - 1

    def recv(self, rank: int, peer: int, offset: int, nbytes: int, reduce: bool, deps=()) -> int:
        self.ranks[rank].append(Step("recv", peer, offset, nbytes, reduce, sorted(set(d for d in deps if d is not None))))
        return len(self.ranks[rank]) - 1

    def transfer(self, src: int, dst: int, offset: int, nbytes: int, reduce: bool,
                 send_deps=(), recv_deps=(), path=None) -> tuple[int, int]:
        """A matched send at ``src`` and receive at ``dst``; returns both step indices."""
        return (self.send(src, dst, offset, nbytes, send_deps, path),
                self.recv(dst, src, offset, nbytes, reduce, recv_deps))

    # -------------------------------------------------------------- facts
    @property
    def num_steps(self) -> int:
        return sum(len(r) for r in self.ranks)

    def bytes_sent(self) -> list[int]:
        return [sum(s.bytes for s in r if s.op == "send") for r in self.ranks]

    # -------------------------------------------------------------- JSON
    def to_dict(self) -> dict:
        return {
            "version": self.version, "collective": self.collective, "nranks": self.nranks,
            "size_bytes": self.size_bytes, "root": self.root, "algorithm": self.algorithm, "meta": self.meta,
            "ranks": [[s.to_dict() for s in r] for r in self.ranks],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict) -> "Plan":
        if d.get("version") != PLAN_VERSION:
            raise ValueError(f"plan version: expected {PLAN_VERSION}, got {d.get('version')!r}")
        ranks = [[Step(**s) for s in r] for r in d["ranks"]]
        return cls(d["collective"], d["nranks"], d["size_bytes"], ranks, d.get("root"), d.get("algorithm") or "",
                   d.get("meta") or {}, d["version"])

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        """Reads a plan document with the core's reader (the one the runtime
        uses too): types, unknown fields, version, ranks, ranges, root, peers,
        dependencies and message matching are checked; ValueError names the
        problem."""
        from .._core import read_plan

        return cls.from_dict(json.loads(read_plan(text)))


def shards(size_bytes: int, n: int) -> list[tuple[int, int]]:
    """The n contiguous shards of a buffer as (offset, bytes): shard i is
    ``[floor(i*S/n), floor((i+1)*S/n))``; some are empty when S < n."""
    bounds = [i * size_bytes // n for i in range(n + 1)]
    return [(bounds[i], bounds[i + 1] - bounds[i]) for i in range(n)]


def block_bytes(size_bytes: int, n: int, field_name: str = "size_bytes") -> int:
    """The block of an all-to-all: its buffer of ``size_bytes`` is ``n``
    equal blocks, block j going to rank j. InputError naming ``field_name``
    when the buffer does not split into n equal blocks."""
    if size_bytes % n:
        near = [m for m in (size_bytes - size_bytes % n, size_bytes + n - size_bytes % n) if m > 0]
        raise InputError(f"{field_name}: an all-to-all over {n} ranks splits the buffer into {n} equal blocks, "
                         f"but {size_bytes} bytes is not a multiple of {n} (give e.g. "
                         f"{' or '.join(str(m) for m in near)})")
    return size_bytes // n


def split_range(offset: int, nbytes: int, parts: int) -> list[tuple[int, int]]:
    return [(offset + o, b) for o, b in shards(nbytes, parts)]


def chunks(offset: int, nbytes: int, chunk_bytes: int | None) -> list[tuple[int, int]]:
    """``[offset, offset+nbytes)`` cut into pieces of at most ``chunk_bytes``
    (one piece when None); empty when nbytes is 0."""
    if nbytes <= 0:
        return []
    if not chunk_bytes or chunk_bytes >= nbytes:
        return [(offset, nbytes)]
    out = []
    o = offset
    end = offset + nbytes
    while o < end:
        b = min(chunk_bytes, end - o)
        out.append((o, b))
        o += b
    return out


def weighted_split(offset: int, nbytes: int, weights: list[float]) -> list[tuple[int, int]]:
    """Contiguous ranges proportional to ``weights`` (rounded, summing to nbytes)."""
    total = sum(weights)
    out = []
    acc = 0.0
    start = offset
    for i, w in enumerate(weights):
        acc += w
        end = offset + (nbytes if i == len(weights) - 1 else round(nbytes * acc / total))
        out.append((start, end - start))
        start = end
    return out


class LinkOrder:
    """Keeps sends on one (sender, receiver) pair in order with at most
    ``window`` of them in flight: send j waits for send j - window, as NCCL
    keeps a few chunk slots (NCCL_STEPS) per connection. ``dep(key)`` is the
    step the next send on ``key`` must wait for; ``add(key, step)`` records it."""

    def __init__(self, window: int = 2):
        if window < 1:
            raise ValueError("window: must be at least 1")
        self.window = window
        self.sent: dict = {}

    def dep(self, key):
        q = self.sent.get(key, [])
        return q[-self.window] if len(q) >= self.window else None

    def add(self, key, step: int) -> int:
        self.sent.setdefault(key, []).append(step)
        return step

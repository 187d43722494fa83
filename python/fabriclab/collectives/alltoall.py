"""All-to-all planners (docs/plans.md, "All-to-all"). Every rank's buffer is
n blocks of S/n bytes; block j of rank i goes to rank j, which keeps it as
its block i: the blocks' transpose, in place.

- ``direct_alltoall``: rank i sends block j straight to rank j, in a
  staggered order (step k: to rank i+k, from rank i-k, as NCCL orders the
  peers of its grouped sends), so that at each step every rank has one
  sender; ``window`` bounds the messages a rank has in flight (None: all at
  once). Each rank sends exactly (n-1)/n of its buffer.
- ``hierarchical_alltoall``: for ranks on GPU servers (g ranks per server,
  ranks server after server): (1) inside each server, rank (a, l) hands the
  blocks meant for the GPUs of local index m on every server to its
  neighbour (a, m), over NVLink (or the server's switch); (2) across the
  fabric, (a, m) sends the g blocks it gathered for (b, m) as one message,
  which land as (b, m)'s blocks of server a. Every fabric message joins two
  GPUs of the same local index (NCCL's PXN: the data reaches the GPU on the
  destination's rail first), there are g times fewer of them, each g times
  larger, and the last phase needs no scatter: the rail's GPU is the
  destination. Each rank sends (g-1)s + g(s-1) blocks (s servers).

Both run in place: a receive into a block waits for the sends that read the
block's old contents (the verifier proves there is no race).
"""

from __future__ import annotations

from ..errors import InputError
from .plan import Plan, block_bytes, chunks


class AlltoallError(InputError):
    pass


class _Access:
    """Per rank and block, the steps that read or wrote it so far: a write
    waits for every earlier access, a read for earlier writes."""

    def __init__(self, plan: Plan, blk: int):
        self.plan, self.blk = plan, blk
        self.reads: dict[tuple[int, int], list[int]] = {}
        self.writes: dict[tuple[int, int], list[int]] = {}

    def _blocks(self, offset: int, nbytes: int) -> range:
        return range(offset // self.blk, (offset + nbytes - 1) // self.blk + 1)

    def send(self, src: int, dst: int, offset: int, nbytes: int, deps=(), path=None) -> int:
        d = list(deps)
        for b in self._blocks(offset, nbytes):
            d += self.writes.get((src, b), [])
        i = self.plan.send(src, dst, offset, nbytes, d, path)
        for b in self._blocks(offset, nbytes):
            self.reads.setdefault((src, b), []).append(i)
        return i

    def recv(self, dst: int, src: int, offset: int, nbytes: int) -> int:
        d = []
        for b in self._blocks(offset, nbytes):
            d += self.reads.get((dst, b), []) + self.writes.get((dst, b), [])
        i = self.plan.recv(dst, src, offset, nbytes, False, d)
        for b in self._blocks(offset, nbytes):
            self.writes.setdefault((dst, b), []).append(i)
        return i


def _check_window(window):
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise AlltoallError(f"window: must be a positive number of messages in flight, or None (all), got {window!r}")


def direct_alltoall(n: int, size_bytes: int, chunk_bytes: int | None = None, paths=None,
                    window: int | None = None, field_name: str = "size_bytes") -> Plan:
    """Rank i sends block i+k to rank i+k at step k = 1..n-1 (each block cut
    into ``chunk_bytes`` messages); at most ``window`` messages of a rank in
    flight (None: no limit). ``paths``: optional pinned node path per (src, dst)."""
    blk = block_bytes(size_bytes, n, field_name)
    _check_window(window)
    plan = Plan.empty("alltoall", n, size_bytes, algorithm="direct")
    acc = _Access(plan, blk)
    path = lambda a, b: None if paths is None else paths.get((a, b))  # noqa: E731
    sent: list[list[int]] = [[] for _ in range(n)]
    pending = []  # (dst, src, offset at dst, bytes) in order
    for k in range(1, n):
        for i in range(n):
            j = (i + k) % n
            for o, b in chunks(j * blk, blk, chunk_bytes):
                dep = sent[i][-window] if window is not None and len(sent[i]) >= window else None
                sent[i].append(acc.send(i, j, o, b, [dep] if dep is not None else [], path(i, j)))
                pending.append((j, i, i * blk + o - j * blk, b))
    for j, i, o, b in pending:
        acc.recv(j, i, o, b)
    plan.meta.update({"chunk_bytes": chunk_bytes, "window": window})
    return plan


def hierarchical_alltoall(servers: list[list[int]], size_bytes: int, chunk_bytes: int | None = None,
                          paths=None, window: int | None = None, field_name: str = "size_bytes") -> Plan:
    """``servers``: the ranks of each server; every server holds the same
    number of ranks and rank (a, l) is ``a * g + l`` (ranks server after
    server). ``paths``: optional pinned node path per (src, dst) (the
    server's switch). ``chunk_bytes`` cuts messages; ``window`` as for
    :func:`direct_alltoall`, per phase."""
    s = len(servers)
    g = len(servers[0]) if servers else 0
    if g == 0 or any(len(x) != g for x in servers):
        raise AlltoallError("--gpus: a hierarchical all-to-all needs the same number of GPUs on every server, got "
                            + ", ".join(str(len(x)) for x in servers))
    if [r for x in servers for r in x] != list(range(s * g)):
        raise AlltoallError("--gpus: a hierarchical all-to-all needs ranks server after server (the GPUs of "
                            "the first server first, in order)")
    n = s * g
    blk = block_bytes(size_bytes, n, field_name)
    _check_window(window)
    plan = Plan.empty("alltoall", n, size_bytes, algorithm="hierarchical")
    acc = _Access(plan, blk)
    path = lambda a, b: None if paths is None else paths.get((a, b))  # noqa: E731

    def limited(sent: list[int]) -> list[int]:
        return [sent[-window]] if window is not None and len(sent) >= window else []

    # Phase 1, inside each server: (a, l) sends its block for (b, m) to (a, m),
    # which keeps it as its block for (b, l): for b = a that is its destination.
    recv1 = []
    sent = {r: [] for r in range(n)}
    for k in range(1, g):
        for a in range(s):
            for lo in range(g):
                m = (lo + k) % g
                src, relay = a * g + lo, a * g + m
                for dk in range(s):
                    b = (a + dk) % s
                    for o, c in chunks((b * g + m) * blk, blk, chunk_bytes):
                        sent[src].append(acc.send(src, relay, o, c, limited(sent[src]), path(src, relay)))
                        recv1.append((relay, src, (b * g + lo) * blk + o - (b * g + m) * blk, c))
    for relay, src, o, c in recv1:
        acc.recv(relay, src, o, c)
    # Phase 2, across the fabric: (a, m) sends its blocks for server b's GPUs,
    # now all meant for (b, m), to (b, m), where they are the blocks of server a.
    recv2 = []
    sent = {r: [] for r in range(n)}
    for dk in range(1, s):
        for a in range(s):
            b = (a + dk) % s
            for m in range(g):
                src, dst = a * g + m, b * g + m
                for o, c in chunks(b * g * blk, g * blk, chunk_bytes):
                    sent[src].append(acc.send(src, dst, o, c, limited(sent[src]), path(src, dst)))
                    recv2.append((dst, src, a * g * blk + o - b * g * blk, c))
    for dst, src, o, c in recv2:
        acc.recv(dst, src, o, c)
    plan.meta.update({"chunk_bytes": chunk_bytes, "window": window, "servers": s, "gpus_per_server": g})
    return plan

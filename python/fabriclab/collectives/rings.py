"""Ring collectives, NCCL style: one or several rings (channels), each owning
a contiguous part of the buffer; within a ring the data is cut into n slices
and every slice into chunks that are pipelined around the ring.

Allreduce = reduce-scatter (n-1 steps, each rank sends one slice and reduces
the one it receives) then allgather (n-1 steps of copies): every rank sends
2(n-1)/n of the data, the bandwidth-optimal amount (Patarasuk & Yuan, 2009).
"""

from __future__ import annotations

from .plan import LinkOrder, Plan, chunks, shards, split_range

WINDOW = 1  # chunks in flight per connection (stop-and-wait measured best here; see docs/plans.md)


def _rings_or_default(n: int, rings):
    rings = rings or [list(range(n))]
    for ring in rings:
        if sorted(ring) != list(range(n)):
            raise ValueError(f"a ring must visit every rank 0..{n - 1} once, got {ring}")
    return rings


def _paths(paths, a, b):
    return None if paths is None else paths.get((a, b))


def ring_allreduce(n: int, size_bytes: int, rings=None, chunk_bytes: int | None = None, paths=None,
                   window: int = WINDOW) -> Plan:
    """Allreduce over ``rings`` (lists of ranks in ring order; one channel per ring); ``window`` chunks in
    flight per connection (NCCL keeps several: its NCCL_STEPS slots)."""
    plan = Plan.empty("allreduce", n, size_bytes, algorithm="ring")
    rings = _rings_or_default(n, rings)
    if n == 1:
        return plan
    for ring, (base, length) in zip(rings, split_range(0, size_bytes, len(rings))):
        slices = split_range(base, length, n)
        pos = {r: p for p, r in enumerate(ring)}
        nxt = lambda r: ring[(pos[r] + 1) % n]  # noqa: E731
        prv = lambda r: ring[(pos[r] - 1) % n]  # noqa: E731
        # Each slice's chunks, cut once (not once per chunk index and step).
        slice_chunks = [chunks(*s, chunk_bytes) for s in slices]
        nchunks = max(len(c) for c in slice_chunks)
        order = LinkOrder(window)
        for c in range(nchunks):
            # Per rank, the step that last touched (received) each slice chunk.
            last_recv = {r: {} for r in ring}
            sent = {r: {} for r in ring}
            for phase in ("rs", "ag"):
                for s in range(n - 1):
                    for r in ring:
                        p = pos[r]
                        if phase == "rs":
                            out_slice, in_slice = (p - s) % n, (p - s - 1) % n
                        else:
                            out_slice, in_slice = (p + 1 - s) % n, (p - s) % n
                        cs, cr = slice_chunks[out_slice], slice_chunks[in_slice]
                        if c < len(cs):
                            o, b = cs[c]
                            dep = last_recv[r].get(out_slice)
                            key = (r, s, phase)
                            i = plan.send(r, nxt(r), o, b, deps=[dep, order.dep(key)], path=_paths(paths, r, nxt(r)))
                            order.add(key, i)
                            sent[r][out_slice] = i
                        if c < len(cr):
                            o, b = cr[c]
                            deps = [last_recv[r].get(in_slice), sent[r].get(in_slice)]
                            j = plan.recv(r, prv(r), o, b, reduce=(phase == "rs"), deps=deps)
                            last_recv[r][in_slice] = j
    plan.meta.update({"rings": rings, "chunk_bytes": chunk_bytes})
    return plan


def _ring_pass(plan: Plan, rings, chunk_bytes, paths, reduce: bool, shift: int) -> None:
    """n-1 steps around each of ``rings``: at step s, position p sends the
    slice of position p - s + shift and receives (reducing or copying) that
    of p - s - 1 + shift; position p's slice is the shard of rank ring[p],
    or with several rings (channels) ring k's part of it (each shard split
    evenly among the rings, as NCCL's channels split the buffer)."""
    n = plan.nranks
    sh = shards(plan.size_bytes, n)
    for k, ring in enumerate(rings):
        pos = {r: p for p, r in enumerate(ring)}
        # Each shard's part for this ring, cut into chunks once.
        shard_chunks = [chunks(*split_range(o, b, len(rings))[k], chunk_bytes) for o, b in sh]
        chunks_of = lambda p: shard_chunks[ring[p % n]]  # noqa: E731
        for c in range(max(len(x) for x in shard_chunks) if n > 1 else 0):
            last_recv = {r: {} for r in ring}
            for s in range(n - 1):
                for r in ring:
                    p = pos[r]
                    out_p, in_p = (p - s + shift) % n, (p - s - 1 + shift) % n
                    nxt, prv = ring[(p + 1) % n], ring[(p - 1) % n]
                    cs = chunks_of(out_p)
                    if c < len(cs):
                        plan.send(r, nxt, *cs[c], deps=[last_recv[r].get(out_p)], path=_paths(paths, r, nxt))
                    cr = chunks_of(in_p)
                    if c < len(cr):
                        deps = [last_recv[r].get(in_p)] if reduce else []
                        last_recv[r][in_p] = plan.recv(r, prv, *cr[c], reduce=reduce, deps=deps)
    plan.meta.update({"rings": [list(r) for r in rings], "chunk_bytes": chunk_bytes})


def ring_reduce_scatter(n: int, size_bytes: int, ring=None, chunk_bytes: int | None = None, paths=None,
                        rings=None) -> Plan:
    """Reduce-scatter: rank r ends with the sum of everyone's shard r (the
    pass is shifted by one so that each position finishes on its own shard).
    ``rings``: several rings (channels) in place of ``ring``."""
    plan = Plan.empty("reduce_scatter", n, size_bytes, algorithm="ring")
    _ring_pass(plan, _rings_or_default(n, rings or ([ring] if ring else None)), chunk_bytes, paths, True, -1)
    return plan


def ring_allgather(n: int, size_bytes: int, ring=None, chunk_bytes: int | None = None, paths=None,
                   rings=None) -> Plan:
    """Allgather: every rank ends with every rank's shard (``rings``: as in
    :func:`ring_reduce_scatter`)."""
    plan = Plan.empty("allgather", n, size_bytes, algorithm="ring")
    _ring_pass(plan, _rings_or_default(n, rings or ([ring] if ring else None)), chunk_bytes, paths, False, 0)
    return plan


def block_rings(n: int, block: int) -> list[list[int]]:
    """NCCL's rail rings over ``n`` ranks in blocks of ``block`` consecutive
    ranks (a server's GPUs): ``block`` rings; ring c visits each block's
    ranks in the order c, c+1, ..., c-1 (of the block), forwards on even
    blocks and backwards on odd ones, so it enters and leaves every block
    through one rank (one GPU's NIC), and every rank of a block is the
    crossing point of one ring each way."""
    if block < 1 or n % block:
        raise ValueError(f"block: {block} must divide the {n} ranks")
    rings = []
    for c in range(block):
        order = [(c + k) % block for k in range(block)]
        ring = []
        for i in range(n // block):
            ring += [i * block + x for x in (order if i % 2 == 0 else order[::-1])]
        rings.append(ring)
    return rings


def chain_broadcast(n: int, size_bytes: int, root: int, order=None, chunk_bytes: int | None = None,
                    paths=None, algorithm: str = "ring") -> Plan:
    """Broadcast along a chain starting at ``root`` (a ring without its last
    edge), pipelined by chunk."""
    plan = Plan.empty("broadcast", n, size_bytes, root=root, algorithm=algorithm)
    order = order or [root] + [r for r in range(n) if r != root]
    if order[0] != root:
        raise ValueError("the chain must start at the root")
    link = LinkOrder(WINDOW)
    for c, (o, b) in enumerate(chunks(0, size_bytes, chunk_bytes)):
        got = None
        for a, bnode in zip(order, order[1:]):
            i = link.add(a, plan.send(a, bnode, o, b, deps=[got, link.dep(a)], path=_paths(paths, a, bnode)))
            got = plan.recv(bnode, a, o, b, reduce=False)
    plan.meta.update({"order": order, "chunk_bytes": chunk_bytes})
    return plan


def chain_reduce(n: int, size_bytes: int, root: int, order=None, chunk_bytes: int | None = None,
                 paths=None, algorithm: str = "ring") -> Plan:
    """Reduce along a chain ending at ``root``, pipelined by chunk."""
    plan = Plan.empty("reduce", n, size_bytes, root=root, algorithm=algorithm)
    order = order or [r for r in range(n) if r != root] + [root]
    if order[-1] != root:
        raise ValueError("the chain must end at the root")
    link, last_recv = LinkOrder(WINDOW), {}
    for o, b in chunks(0, size_bytes, chunk_bytes):
        got = None
        for a, bnode in zip(order, order[1:]):
            link.add(a, plan.send(a, bnode, o, b, deps=[got, link.dep(a)], path=_paths(paths, a, bnode)))
            got = plan.recv(bnode, a, o, b, reduce=True, deps=[last_recv.get(bnode)])
            last_recv[bnode] = got
    plan.meta.update({"order": order, "chunk_bytes": chunk_bytes})
    return plan

"""Direct (one-hop) allreduce for switch topologies such as NVSwitch: N
one-hop trees, tree i rooted at rank i owning 1/N of the data (Blink talk,
DGX-2): every rank sends shard i straight to rank i, which sums them one by
one, then rank i sends the sum straight back to every rank."""

from __future__ import annotations

from .plan import Plan, chunks, shards


def direct_allreduce(n: int, size_bytes: int, chunk_bytes: int | None = None, paths=None) -> Plan:
    plan = Plan.empty("allreduce", n, size_bytes, algorithm="direct")
    path = lambda a, b: None if paths is None else paths.get((a, b))  # noqa: E731
    sh = shards(size_bytes, n)
    for owner, (o, b) in enumerate(sh):
        for co, cb in chunks(o, b, chunk_bytes):
            # Senders start from the rank after the owner, so that at every
            # moment each owner is fed by a different peer.
            order = [(owner + k) % n for k in range(1, n)]
            last = None
            sent = {}
            for src in order:
                sent[src] = plan.send(src, owner, co, cb, path=path(src, owner))
                last = plan.recv(owner, src, co, cb, reduce=True, deps=[last])
            for dst in order:
                s = plan.send(owner, dst, co, cb, deps=[last], path=path(owner, dst))  # noqa: F841
                plan.recv(dst, owner, co, cb, reduce=False, deps=[sent[dst]])
    plan.meta.update({"chunk_bytes": chunk_bytes})
    return plan

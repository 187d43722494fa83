"""Timing one collective at one size, nccl-tests' way: both placements (out
of place and in place), the checked run's wrong elements, then the mean of
``iters`` runs after ``warmup``. Shared by the runtime's bench and the Gloo
and MPI baselines, so that every row of the table is timed alike."""

from __future__ import annotations

import time


PLACEMENTS = ("out_of_place", "in_place")


def count_wrong(op, x, exp, part, rank, root) -> int:
    """Elements of this rank's result that differ from the reference (the
    part it owns for reduce-scatter; nothing off the root for reduce)."""
    if op == "reduce":
        return int((x != exp).sum()) if rank == root else 0
    if op == "reduce_scatter":
        return int((x[part[0]:part[1]] != exp[part[0]:part[1]]).sum())
    return int((x != exp).sum())


def inputs(np, op, count, dtype, rank, n, root):
    """Rank r's input and the expected output at rank r: small integers, so float sums are exact."""
    if op == "alltoall":  # every rank's blocks differ; the expected result is numpy's block transpose
        every = np.stack([((np.arange(count) * 7 + i * 31) % 97).astype(dtype) for i in range(n)])
        return every[rank].copy(), every.reshape(n, n, -1).transpose(1, 0, 2)[rank].reshape(-1).copy(), None
    base = (np.arange(count) % 13).astype(dtype)
    x = base + dtype(rank + 1)
    if op == "allreduce":
        return x, base * n + dtype(n * (n + 1) // 2), None
    if op == "broadcast":
        return x, base + dtype(root + 1), None
    if op == "reduce":
        return x, base * n + dtype(n * (n + 1) // 2), (root,)
    from .plans import shard_bounds
    lo, hi = shard_bounds(count, n, rank)
    if op == "reduce_scatter":
        return x, base * n + dtype(n * (n + 1) // 2), (lo, hi)
    exp = np.empty(count, dtype)  # allgather: shard i comes from rank i
    for i in range(n):
        a, b = shard_bounds(count, n, i)
        exp[a:b] = base[a:b] + dtype(i + 1)
    return x, exp, None


def time_placements(np, op, count, dt, rank, n, root, run, iters, warmup, barrier) -> dict:
    """One size, both placements: the checked run's wrong elements, then the mean time of
    ``iters`` runs after ``warmup``. ``run(src, dst)`` leaves op(src) in ``dst``; ``dst is src``
    in place."""
    out = {}
    for placement in PLACEMENTS:
        x, exp, part = inputs(np, op, count, dt, rank, n, root)
        dst = np.empty_like(x) if placement == "out_of_place" else x
        before = x.copy() if placement == "out_of_place" else None
        run(x, dst)
        wrong = count_wrong(op, dst, exp, part, rank, root)
        if before is not None:  # out of place must leave the input as it was
            wrong += int((x != before).sum())
        src = np.zeros(count, dt)
        dst = np.zeros(count, dt) if placement == "out_of_place" else src
        for _ in range(warmup):
            run(src, dst)
        barrier()
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            run(src, dst)
        out[placement] = {"time_ns": (time.perf_counter_ns() - t0) / iters, "wrong": wrong}
    return {"size": count * np.dtype(dt).itemsize, "count": count, **out}

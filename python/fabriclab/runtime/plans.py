"""Plans for the runtime, built with the topology-free planners over
``world_size`` ranks. The planners cut byte ranges; the runtime must not cut
an element, so a plan is built over ``count`` one-byte "elements" and every
offset and length is then scaled by the item size. Allgather and
reduce-scatter shards are therefore in elements: shard i is elements
``[floor(i*count/n), floor((i+1)*count/n))``; an all-to-all's blocks are
count/n elements (count must be a multiple of n)."""

from __future__ import annotations

import json
from functools import lru_cache

from ..collectives import rings as R
from ..collectives.alltoall import direct_alltoall
from ..collectives.plan import block_bytes
from ..errors import InputError
from ..collectives.direct import direct_allreduce
from ..collectives.halving_doubling import halving_doubling_allreduce
from ..collectives.trees import double_binary_tree_allreduce
from .errors import RuntimeInputError

OPS = ("allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "alltoall")
ALGOS = ("ring", "tree", "halving-doubling", "direct")
# Pipelining chunk for large messages (bytes); small messages go in one piece.
DEFAULT_CHUNK_BYTES = 1 << 20


def shard_bounds(count: int, n: int, i: int) -> tuple[int, int]:
    """Elements [start, end) of shard i (allgather / reduce-scatter)."""
    return i * count // n, (i + 1) * count // n


def check_algo(op: str, algo: str, field_name: str = "algo") -> None:
    """The algorithms of an op: ring builds every op but alltoall, which direct
    builds; tree and halving-doubling build allreduce."""
    if op == "alltoall" and algo != "direct":
        raise RuntimeInputError(f"{field_name}: alltoall runs with direct (each block straight to its rank), "
                                f"not {algo}")
    if op not in ("allreduce", "alltoall") and algo != "ring":
        raise RuntimeInputError(f"{field_name}: {algo} supports allreduce only (ring supports "
                                f"{', '.join(o for o in OPS if o != 'alltoall')}; direct alltoall too)")


def _build(op: str, algo: str, n: int, count: int, chunk: int | None, root: int):
    if op == "alltoall":
        return direct_alltoall(n, count, chunk)
    if algo == "ring":
        ring = list(range(n))
        if op == "allreduce":
            return R.ring_allreduce(n, count, [ring], chunk)
        if op == "reduce_scatter":
            return R.ring_reduce_scatter(n, count, ring, chunk)
        if op == "allgather":
            return R.ring_allgather(n, count, ring, chunk)
        order = ring[root:] + ring[:root]
        if op == "broadcast":
            return R.chain_broadcast(n, count, root, order, chunk)
        return R.chain_reduce(n, count, root, order[1:] + order[:1], chunk)
    if algo == "tree":
        return double_binary_tree_allreduce(n, count, chunk)
    if algo == "halving-doubling":
        return halving_doubling_allreduce(n, count)
    return direct_allreduce(n, count, chunk)


@lru_cache(maxsize=64)
def plan_json(op: str, algo: str, n: int, count: int, itemsize: int, root: int = 0,
              chunk_bytes: int | None = DEFAULT_CHUNK_BYTES) -> str:
    """The plan-format-v1 JSON of ``op`` over ``count`` elements of ``itemsize`` bytes."""
    if op not in OPS:
        raise RuntimeInputError(f"op: unknown collective {op!r} (known: {', '.join(OPS)})")
    if algo not in ALGOS:
        raise RuntimeInputError(f"algo: unknown algorithm {algo!r} (the runtime has {', '.join(ALGOS)})")
    check_algo(op, algo)
    if count < 1:
        raise RuntimeInputError("array: must hold at least one element")
    if op == "alltoall":
        try:
            block_bytes(count, n, "array")
        except InputError as e:
            raise RuntimeInputError(str(e).replace("bytes", "elements")) from None
    if not 0 <= root < n:
        raise RuntimeInputError(f"root: must be a rank within 0..{n - 1}, got {root}")
    if chunk_bytes is not None and chunk_bytes < itemsize:
        raise RuntimeInputError(f"chunk_bytes: must be at least one element ({itemsize} bytes), got {chunk_bytes}")
    chunk = None if chunk_bytes is None else chunk_bytes // itemsize
    return scale_to_elements(_build(op, algo, n, count, chunk, root).to_dict(), op, count, itemsize, root, chunk_bytes)


def scale_to_elements(d: dict, op: str, count: int, itemsize: int, root: int, chunk_bytes: int | None) -> str:
    """A plan dict built over ``count`` one-byte elements, scaled to ``itemsize``-byte ones, as JSON."""
    d["size_bytes"] = count * itemsize
    d["root"] = root if op in ("broadcast", "reduce") else None
    d["meta"] = {**d.get("meta", {}), "element_bytes": itemsize, "count": count, "chunk_bytes": chunk_bytes}
    for steps in d["ranks"]:
        for s in steps:
            s["offset"] *= itemsize
            s["bytes"] *= itemsize
    return json.dumps(d)

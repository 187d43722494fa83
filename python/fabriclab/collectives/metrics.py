"""nccl-tests' figures of merit (algorithm and bus bandwidth) and the sizes
a benchmark sweeps, shared by the simulated bench, the runtime's bench and
the comparison of the two."""

from __future__ import annotations

import re

from ..scenario.units import SizeBytes
from .algos import PlanningError

MAX_SIZE_BYTES = 1 << 40

BUSBW_FACTOR = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


def parse_size(text: str, what: str) -> int:
    from pydantic import TypeAdapter, ValidationError

    t = text.strip()
    if re.fullmatch(r"[0-9]+", t):
        return int(t)
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*([KMG])(i?B?)?", t, re.I)
    if m:
        mult = {"k": 1024, "m": 1024**2, "g": 1024**3}[m.group(2).lower()]  # nccl-tests: K/M/G are powers of 2
        return int(float(m.group(1)) * mult)
    try:
        return TypeAdapter(SizeBytes).validate_python(t)
    except ValidationError:
        raise PlanningError(f"{what}: cannot read {text!r} as a size (e.g. 8, 64K, 1M, 1G)") from None


# Sizes and chunk counts a bench may ask for: the simulated buffer is never
# allocated, but every chunk is a plan step held in memory.


def parse_sizes(text: str, factor: int) -> list[int]:
    if ":" in text:
        lo, hi = (parse_size(x, "--sizes") for x in text.split(":", 1))
    else:
        lo = hi = parse_size(text, "--sizes")
    if lo < 1 or hi < lo:
        raise PlanningError(f"--sizes: need 1 <= min <= max, got {text!r}")
    if hi > MAX_SIZE_BYTES:
        raise PlanningError(f"--sizes: at most {MAX_SIZE_BYTES} bytes (1T), got {hi}")
    if factor < 2:
        raise PlanningError(f"--factor: must be at least 2, got {factor}")
    out = []
    s = lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def bus_bandwidth(op: str, nranks: int, size_bytes: int, time_ps: int) -> tuple[float, float]:
    """nccl-tests' algorithm bandwidth S/t and bus bandwidth algbw * factor(op, n), in bytes per second."""
    algbw = size_bytes / (time_ps / 1e12)
    return algbw, algbw * BUSBW_FACTOR[op](nranks)

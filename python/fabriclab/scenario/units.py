"""Quantities with units in scenario files.

Every quantity field names its unit (`*_ps`, `*_bytes`, `*_bps`). A field
takes either a plain integer in that unit or a string with an explicit unit
of the same kind, e.g. ``"10Gbps"``, ``"10us"``, ``"64KiB"``. A string with a
unit of another kind (``link_rate_bps = "10us"``) is an error.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Annotated

from pydantic import BeforeValidator

_TIME = {"ps": 1, "ns": 10**3, "us": 10**6, "ms": 10**9, "s": 10**12}
_RATE = {"bps": 1, "kbps": 10**3, "mbps": 10**6, "gbps": 10**9, "tbps": 10**12}
_SIZE = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}

# The core stores every quantity as an unsigned 64-bit integer; every field
# using these types also declares its lower bound (ge=0 or gt=0).
U64_MAX = 2**64 - 1

_NUM = re.compile(r"^\s*([0-9][0-9_]*(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)\s*([a-zA-Z/]*)\s*$")


def _parser(table: dict[str, int], kind: str, example: str):
    allowed = ", ".join(table)

    def in_range(value: int, shown) -> int:
        # The lower bound is each field's own constraint (gt=0 or ge=0), which names it better.
        if value > U64_MAX:
            raise ValueError(f"{shown!r} is out of range: a {kind} must be within 0..{U64_MAX} in the field's unit")
        return value

    def parse(v):
        if isinstance(v, bool):
            raise ValueError(f"expected a {kind}, got a boolean")
        if isinstance(v, int):
            return in_range(v, v)
        if isinstance(v, float):
            if not math.isfinite(v):
                raise ValueError(f"must be a finite number, got {v}")
            if v != int(v):
                raise ValueError(f"expected a whole number ({kind} in the field's unit), got {v}")
            return in_range(int(v), v)
        if isinstance(v, str):
            m = _NUM.match(v)
            if not m:
                raise ValueError(f"cannot read {v!r} as a {kind}; write e.g. {example}")
            unit = m.group(2).lower().replace("bit/s", "bps").replace("/s", "ps")
            if unit == "":
                raise ValueError(f"{v!r} has no unit; write e.g. {example} or a plain integer")
            if unit not in table:
                raise ValueError(f"unit {m.group(2)!r} is not a {kind} unit (allowed: {allowed})")
            digits = m.group(1).replace("_", "")
            exp = re.search(r"e([+-]?[0-9]+)$", digits)
            if exp and int(exp.group(1)) > 40:  # far past the range; keep Fraction from building huge numbers
                raise ValueError(f"{v!r} is out of range: a {kind} must be within 0..{U64_MAX} in the field's unit")
            if exp and int(exp.group(1)) < -40:
                raise ValueError(f"{v!r} is not a whole number of the field's base unit")
            value = Fraction(digits) * table[unit]  # exact: "1.5us" is 1500000 ps, not a float's neighbour
            if value.denominator != 1:
                raise ValueError(f"{v!r} is not a whole number of the field's base unit")
            return in_range(int(value), v)
        raise ValueError(f"expected a {kind} (integer or string with unit), got {type(v).__name__}")

    return parse


TimePs = Annotated[int, BeforeValidator(_parser(_TIME, "time", "'10us'"))]
RateBps = Annotated[int, BeforeValidator(_parser(_RATE, "rate", "'10Gbps'"))]
SizeBytes = Annotated[int, BeforeValidator(_parser(_SIZE, "size", "'64KiB'"))]

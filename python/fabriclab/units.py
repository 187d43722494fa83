"""Quantities with units in scenario files.

Every quantity field names its unit (`*_ps`, `*_bytes`, `*_bps`). A field
takes either a plain integer in that unit or a string with an explicit unit
of the same kind, e.g. ``"10Gbps"``, ``"10us"``, ``"64KiB"``. A string with a
unit of another kind (``link_rate_bps = "10us"``) is an error.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator

_TIME = {"ps": 1, "ns": 10**3, "us": 10**6, "ms": 10**9, "s": 10**12}
_RATE = {"bps": 1, "kbps": 10**3, "mbps": 10**6, "gbps": 10**9, "tbps": 10**12}
_SIZE = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}

_NUM = re.compile(r"^\s*([0-9][0-9_]*(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)\s*([a-zA-Z/]*)\s*$")


def _parser(table: dict[str, int], kind: str, example: str):
    allowed = ", ".join(table)

    def parse(v):
        if isinstance(v, bool):
            raise ValueError(f"expected a {kind}, got a boolean")
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            if v != int(v):
                raise ValueError(f"expected a whole number ({kind} in the field's unit), got {v}")
            return int(v)
        if isinstance(v, str):
            m = _NUM.match(v)
            if not m:
                raise ValueError(f"cannot read {v!r} as a {kind}; write e.g. {example}")
            unit = m.group(2).lower().replace("bit/s", "bps").replace("/s", "ps")
            if unit == "":
                raise ValueError(f"{v!r} has no unit; write e.g. {example} or a plain integer")
            if unit not in table:
                raise ValueError(f"unit {m.group(2)!r} is not a {kind} unit (allowed: {allowed})")
            value = float(m.group(1).replace("_", "")) * table[unit]
            if value != round(value):
                raise ValueError(f"{v!r} is not a whole number of the field's base unit")
            return int(round(value))
        raise ValueError(f"expected a {kind} (integer or string with unit), got {type(v).__name__}")

    return parse


TimePs = Annotated[int, BeforeValidator(_parser(_TIME, "time", "'10us'"))]
RateBps = Annotated[int, BeforeValidator(_parser(_RATE, "rate", "'10Gbps'"))]
SizeBytes = Annotated[int, BeforeValidator(_parser(_SIZE, "size", "'64KiB'"))]

"""The registry's checks: a band around a number, a full run's checked number
(:class:`FullCheck`) and a quick run's (:class:`QuickCheck`, made by :func:`_q`)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Band:
    """A closed range ``[lo, hi]`` (either end may be open: ``None``)."""

    lo: float | None = None
    hi: float | None = None
    open_lo: bool = False  # "> lo" rather than ">= lo"

    def holds(self, x: float) -> bool:
        if x is None or math.isnan(x):
            return False
        above = self.lo is None or (x > self.lo if self.open_lo else x >= self.lo)
        return above and (self.hi is None or x <= self.hi)

    def __str__(self) -> str:
        if self.lo is not None and self.hi is not None:
            return f"{self.lo:g} to {self.hi:g}" + (" (lower end excluded)" if self.open_lo else "")
        if self.lo is not None:
            return f"{'>' if self.open_lo else '>='} {self.lo:g}"
        if self.hi is not None:
            return f"<= {self.hi:g}"
        return "any"



@dataclass(frozen=True)
class FullCheck:
    """One number of a row's "ours" cell with its machine-checkable band."""

    label: str
    ours: float
    band: Band




@dataclass(frozen=True)
class QuickCheck:
    """A headline number of a quick run: ``key`` is a path into its
    summary.json ("/" between the parts; an integer part indexes a list)."""

    repro: str
    metric: str
    key: str
    paper: str
    value: float  # the quick run's value when measured (QUICK_MEASURED)
    band: Band

    def read(self, summary: dict) -> float:
        x = summary
        for part in self.key.split("/"):
            x = x[int(part)] if isinstance(x, list) else x[part]
        return float(x)



def _q(repro: str, metric: str, key: str, paper: str, value: float, rel: float = 0.05, floor: float = 0.0) -> QuickCheck:
    """A quick check with its band: the measured value ± ``rel`` of it, and
    at least ± ``floor`` (for values at or near zero). Deterministic runs give
    the value exactly; the band leaves room for changes that move the last
    digits (summation order, a rounding) and fails on anything larger."""
    half = max(abs(value) * rel, floor)
    return QuickCheck(repro, metric, key, paper, value, Band(round(value - half, 6), round(value + half, 6)))

"""Quantities formatted for people.

Result files keep every quantity as a plain number in the unit its name
ends with (``*_ps`` picoseconds, ``*_bytes`` bytes, ``*_bps`` bits per
second); these functions turn such numbers into text a reader can take in at
a glance, e.g. ``time_ps(12_345_000) == "12.3 us"``.

Conventions:

* three significant digits, the unit chosen so the number lies in [1, 1000);
  times keep trailing zeros (``"12.0 us"``: a measurement), sizes and rates
  drop them (``"1.5 KB"``, ``"10 Gbit/s"``: usually round, configured values);
* sizes are decimal SI (1 KB = 1000 bytes), the ``KB``/``MB``/``GB`` units of
  scenario files (see :mod:`fabriclab.scenario.units`; ``KiB`` there is binary);
* a missing value (``None``, NaN, e.g. the FCT of an unfinished flow) is
  ``"—"``; a negative one keeps its sign (``"-1.50 us"``); never scientific
  notation.
"""

from __future__ import annotations

import math
import numbers
from decimal import ROUND_HALF_UP, Context, Decimal

MISSING = "—"

_TIME_UNITS = (("ps", 1.0), ("ns", 1e3), ("us", 1e6), ("ms", 1e9), ("s", 1e12))
_SIZE_UNITS = (("B", 1.0), ("KB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12), ("PB", 1e15))
_RATE_UNITS = (("bit/s", 1.0), ("kbit/s", 1e3), ("Mbit/s", 1e6), ("Gbit/s", 1e9), ("Tbit/s", 1e12))


def _missing(v) -> bool:
    if v is None:
        return True
    try:
        import pandas as pd

        if v is pd.NA or v is pd.NaT:
            return True
    except ImportError:  # pragma: no cover
        pass
    if isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral):
        return math.isnan(float(v))
    return False


def _real(v) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"expected a number, got {type(v).__name__} {v!r}")
    return float(v)


_CTX = Context(prec=400)  # every digit of any float


def _dec(x: float) -> Decimal:
    return Decimal(repr(float(x)))  # the shortest decimal that reads back as x: 12.25 is 12.25


def _fixed_decimals(x: float, decimals: int) -> str:
    """``x`` with ``decimals`` decimals, ties away from zero (12.25 -> 12.3,
    as by hand; Python's format rounds ties to even), thousands separated."""
    if not math.isfinite(x):
        return "∞" if x > 0 else "-∞"
    q = _dec(x).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP, context=_CTX)
    return f"{q:,.{decimals}f}"


def _round3(x: float) -> float:
    """``x`` (> 0) rounded to three significant digits, ties away from zero."""
    d = _dec(x)
    return float(d.quantize(Decimal(1).scaleb(d.adjusted() - 2), rounding=ROUND_HALF_UP, context=_CTX))


def _sig3(x: float) -> str:
    """``x`` (>= 0) with three significant digits, trailing zeros kept, no
    exponent; from 1000 on, every integer digit."""
    if x == 0:
        return "0"
    if x >= 1000:
        return _fixed_decimals(x, 0)
    x = _round3(x)
    if x >= 100:
        return _fixed_decimals(x, 0)
    if x >= 10:
        return _fixed_decimals(x, 1)
    if x >= 1:
        return _fixed_decimals(x, 2)
    return _fixed_decimals(x, 2 - math.floor(math.log10(x)))  # 0.0123 -> 4 decimals


def _strip(s: str) -> str:
    return s.rstrip("0").rstrip(".") if "." in s else s


def _scaled(v, units, keep_zeros: bool, exact_below: float = 0.0) -> str:
    """``v`` in the unit of ``units`` (name, size; ascending) that puts it in
    [1, 1000) after rounding to three significant digits."""
    if _missing(v):
        return MISSING
    x = _real(v)
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    sign, x = ("-", -x) if x < 0 else ("", x)
    if x == 0:
        return f"0 {units[0][0]}"
    if x < exact_below and x == int(x):  # e.g. 850 ps, 12 B: exact integers in the base unit
        return f"{sign}{int(x)} {units[0][0]}"
    r = _round3(x)
    name, size = units[0]
    for n, s in units:
        if r >= s:
            name, size = n, s
    y = _round3(x / size)  # 999.7 ps -> 1.00 ns, not 1000 ps
    if y >= 1000 and (name, size) != units[-1]:
        name, size = units[[u[0] for u in units].index(name) + 1]
        y = x / size
    text = _sig3(y if y < 1000 else x / size)
    return f"{sign}{text if keep_zeros else _strip(text)} {name}"


def time_ps(v) -> str:
    """A time in picoseconds: ``"850 ps"``, ``"12.3 ns"``, ``"4.56 us"``, ``"1.23 ms"``, ``"2.50 s"``."""
    return _scaled(v, _TIME_UNITS, keep_zeros=True, exact_below=1000)


def size_bytes(v, exact: bool = False) -> str:
    """A size in bytes, decimal SI: ``"850 B"``, ``"1.5 KB"``, ``"12 MB"``; with
    ``exact`` the byte count follows when the unit is not bytes:
    ``"1.5 KB (1,500 B)"``."""
    text = _scaled(v, _SIZE_UNITS, keep_zeros=False, exact_below=1000)
    if exact and text != MISSING and not text.endswith(" B") and math.isfinite(float(v)) and float(v) == int(float(v)):
        text += f" ({int(float(v)):,} B)"
    return text


def rate_bps(v) -> str:
    """A rate in bits per second: ``"10 Gbit/s"``, ``"2.5 Mbit/s"``."""
    return _scaled(v, _RATE_UNITS, keep_zeros=False, exact_below=1000)


def fixed(v, scale: float, unit: str) -> str:
    """``v / scale`` in one given unit (for a column compared row by row):
    ``fixed(950_840, 1e3, "KB") == "951 KB"``, three significant digits
    (more when the number is 1000 or more)."""
    if _missing(v):
        return MISSING
    x = _real(v) / scale
    sign, x = ("-", -x) if x < 0 else ("", x)
    return f"{sign}{_sig3(x)} {unit}"


def time_unit(max_ps: float) -> tuple[str, float]:
    """The unit (name, picoseconds per unit) for an axis of times up to
    ``max_ps``: the largest of ps, ns, us, ms, s that is at most ``max_ps``."""
    name, size = _TIME_UNITS[0]
    for n, s in _TIME_UNITS:
        if max_ps >= s:
            name, size = n, s
    return name, size


def percent(v) -> str:
    """A fraction as a percentage: ``0.4335 -> "43.4%"``, ``1 -> "100.0%"``,
    ``0.00012 -> "0.0120%"``."""
    if _missing(v):
        return MISSING
    x = _real(v) * 100
    if x == 0:
        return "0%"
    if abs(x) < 0.1:
        sign, a = ("-", -x) if x < 0 else ("", x)
        return f"{sign}{_sig3(a)}%"
    return f"{_fixed_decimals(x, 1)}%"


def slowdown(v) -> str:
    """A slowdown (FCT over the ideal FCT): ``"×2.31"``."""
    if _missing(v):
        return MISSING
    x = _real(v)
    sign, a = ("-", -x) if x < 0 else ("", x)
    return f"×{sign}{_sig3(a)}"


def count(v) -> str:
    """A count, with thousands separators: ``"85,929,200"``."""
    if _missing(v):
        return MISSING
    x = _real(v)
    if math.isfinite(x) and x == int(x):
        return f"{int(x):,}"
    return number(x)


def number(v) -> str:
    """A plain number without a unit: integers with thousands separators,
    others with four significant digits, never in scientific notation."""
    if _missing(v):
        return MISSING
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return f"{int(v):,}"
    x = _real(v)
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return _fixed_decimals(x, 0)
    return _strip(_fixed_decimals(x, max(0, 3 - math.floor(math.log10(abs(x))))))


# ------------------------------------------------------------------ by key

_LIST_MAX = 12


def kind_of(key: str) -> str | None:
    """The kind of quantity a result key names, from its last dotted segment
    that tells (``"gradient_slack_ps.mean"`` is a time): one of ``time``,
    ``bytes``, ``rate``, ``seconds``, ``ms``, ``us``, ``ns``, ``per_s``,
    ``percent``, ``slowdown``, ``id``, or None (a plain number)."""
    for seg in reversed(str(key).lower().split(".")):
        k = _segment_kind(seg)
        if k is not None:
            return k
    return None


def _segment_kind(seg: str) -> str | None:
    if seg.endswith("_ps") or seg == "ps":
        return "time"
    if seg.endswith("_bytes") or seg == "bytes":
        return "bytes"
    if seg.endswith("_bps") or seg == "bps":
        return "rate"
    if seg.endswith("_per_s"):
        return "per_s"
    for suffix in ("s", "ms", "us", "ns"):
        if seg.endswith("_" + suffix):
            return "seconds" if suffix == "s" else suffix
    if "utilization" in seg or seg == "load" or seg.endswith("_load") or seg.startswith("load_") \
            or seg.endswith("_fraction"):
        return "percent"
    if "slowdown" in seg:
        return "slowdown"
    if seg in ("seed", "id", "point", "class", "band") or seg.endswith("_id"):
        return "id"
    return None


_SCALE_PS = {"seconds": 1e12, "ms": 1e9, "us": 1e6, "ns": 1e3}


def format_value(key: str, value) -> str:
    """``value`` formatted by what ``key`` names: ``*_ps`` times, ``*_bytes``
    sizes (with the exact count), ``*_bps`` rates, ``*_s``/``*_ms``/``*_us``
    times in that unit, ``*utilization*``/``*load*`` percentages,
    ``*slowdown*`` factors, ids as they are, other numbers as counts or plain
    numbers. Strings are kept, booleans are "yes"/"no", missing values "—",
    lists formatted item by item (longer than 12: summarised)."""
    if isinstance(value, (list, tuple)):
        return _format_list(key, list(value))
    if isinstance(value, dict):
        return ", ".join(f"{k}: {format_value(f'{key}.{k}', v)}" for k, v in value.items())
    if _missing(value):
        return MISSING
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "yes" if value else "no"
    if not isinstance(value, numbers.Real):
        return str(value)
    kind = kind_of(key)
    if kind == "time":
        return time_ps(value)
    if kind == "bytes":
        return size_bytes(value, exact=True)
    if kind == "rate":
        return rate_bps(value)
    if kind in _SCALE_PS:
        return time_ps(float(value) * _SCALE_PS[kind])
    if kind == "per_s":
        return f"{number(value)}/s"
    if kind == "percent":
        return percent(value)
    if kind == "slowdown":
        return slowdown(value)
    if kind == "id":
        x = float(value)
        return str(int(x)) if math.isfinite(x) and x == int(x) else number(value)
    return count(value)


def _format_list(key: str, items: list) -> str:
    if not items:
        return "(none)"
    if len(items) <= _LIST_MAX:
        return ", ".join(format_value(key, v) for v in items)
    nums = [float(v) for v in items if isinstance(v, numbers.Real) and not isinstance(v, bool) and not _missing(v)]
    if len(nums) != len(items):
        return f"{len(items)} values"
    nums.sort()
    mid = len(nums) // 2
    median = nums[mid] if len(nums) % 2 else (nums[mid - 1] + nums[mid]) / 2
    f = lambda x: format_value(key, x) if kind_of(key) != "bytes" else size_bytes(x)  # noqa: E731
    return f"{len(items)} values: min {f(nums[0])}, median {f(median)}, max {f(nums[-1])}"


def label(key: str) -> str:
    """A column header for a result key: ``"fct.small.fct_p99_ps"`` ->
    ``"small FCT p99"``, ``"param.traffic.0.load"`` -> ``"traffic.0.load"``,
    ``"links.max_utilization"`` -> ``"links max utilization"``."""
    key = str(key)
    if key.startswith("param."):
        return key[len("param."):]
    segs = key.split(".")
    if len(segs) > 1 and segs[0] == "fct":
        segs = segs[1:]
    words = []
    for seg in segs:
        for suffix in ("_ps", "_bytes", "_bps"):
            if seg.endswith(suffix) and len(seg) > len(suffix):
                seg = seg[: -len(suffix)]
        for w in seg.split("_"):
            words.append({"fct": "FCT", "p999": "p99.9", "ecn": "ECN", "id": "id"}.get(w, w))
    out = []
    for w in words:  # "fct.all.fct_mean" -> "all FCT mean", no repeated word
        if not out or out[-1] != w:
            out.append(w)
    return " ".join(out)

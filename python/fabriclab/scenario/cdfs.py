"""Flow-size distributions: the built-in web-search and data-mining CDFs and
user CDF files (two columns, size in bytes and cumulative probability,
comma or whitespace separated, ``#`` comments, an optional header line)."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

from ..errors import InputError

BUILTIN = ("websearch", "datamining")


class CdfError(InputError):
    pass


def parse_cdf_text(text: str, source: str) -> list[tuple[float, float]]:
    points: list[tuple[float, float]] = []
    header_seen = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.replace(",", " ").split()
        if len(parts) != 2:
            raise CdfError(f"{source}:{lineno}: expected two columns (size_bytes, cdf), got {len(parts)}")
        try:
            x, p = float(parts[0]), float(parts[1])
        except ValueError:
            if not points and not header_seen:
                header_seen = True
                continue  # the header line
            raise CdfError(f"{source}:{lineno}: not a number: {line!r}") from None
        points.append((x, p))
    check_cdf(points, source)
    return points


def check_cdf(points: list[tuple[float, float]], source: str) -> None:
    if len(points) < 2:
        raise CdfError(f"{source}: a CDF needs at least two points")
    for i, (x, p) in enumerate(points):
        if not (math.isfinite(x) and 1 <= x < 2**64):
            # Flows are whole bytes: a CDF below one byte would be rounded up
            # while the arrival rate used its smaller mean, offering more load than asked.
            raise CdfError(f"{source}: point {i}: size_bytes must be at least 1 byte (and finite, below 2**64), got {x}")
        if not 0.0 <= p <= 1.0:  # also refuses nan
            raise CdfError(f"{source}: point {i}: probability must be within [0, 1], got {p}")
        if i and x < points[i - 1][0]:
            raise CdfError(f"{source}: point {i}: sizes must be non-decreasing ({x} after {points[i - 1][0]})")
        if i and p < points[i - 1][1]:
            raise CdfError(f"{source}: point {i}: the CDF must be monotone ({p} after {points[i - 1][1]})")
    if abs(points[-1][1] - 1.0) > 1e-9:
        raise CdfError(f"{source}: the CDF must end at 1, ends at {points[-1][1]}")


def load_cdf(name_or_path: str, base_dir: Path | None = None) -> list[tuple[float, float]]:
    """A built-in CDF by name, or a CDF file (relative paths from ``base_dir``)."""
    if name_or_path in BUILTIN:
        text = resources.files("fabriclab.data").joinpath(f"{name_or_path}.csv").read_text()
        return parse_cdf_text(text, name_or_path)
    path = Path(name_or_path)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if not path.exists():
        raise CdfError(f"{name_or_path}: no such CDF file (built-in CDFs: {', '.join(BUILTIN)})")
    from ..util.inputs import read_text

    try:
        text = read_text(path, str(name_or_path), "CDF file")
    except InputError as e:
        raise CdfError(str(e)) from None
    return parse_cdf_text(text, str(name_or_path))


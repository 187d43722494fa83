"""The delay matrix of C4D's communication-slow case (C4 section 3.1,
figure 6): element (i, j) is the delay of the connection from rank i
(row, the source) to rank j (column, the destination). High values form
a point (one slow connection), a row (the source is slow), a column (the
destination is slow), or a row and a column through the same rank (both
directions of one rank: its host)."""

from __future__ import annotations

import numpy as np


def classify(flagged: np.ndarray, present: np.ndarray) -> list[tuple[str, object]]:
    """Patterns of the flagged elements of a square matrix, as a list of
    ``("host", r)``, ``("row", r)``, ``("column", r)`` and ``("point", (i, j))``.

    A row is every present element of row r flagged, two of them at least;
    a column likewise; a rank whose row and column are both wholly flagged
    (one element each is enough: a ring rank sends to one and receives
    from one) is a host. Flagged elements in none of these are points."""
    flagged = np.asarray(flagged, dtype=bool) & np.asarray(present, dtype=bool)
    present = np.asarray(present, dtype=bool)
    n = flagged.shape[0]
    used = np.zeros_like(flagged)
    out: list[tuple[str, object]] = []
    row_full = [present[r].any() and not (present[r] & ~flagged[r]).any() for r in range(n)]
    col_full = [present[:, r].any() and not (present[:, r] & ~flagged[:, r]).any() for r in range(n)]
    # Ranks with the most flagged elements first; a rank whose flagged
    # elements another host already explains (a tree leaf whose one peer
    # is the slow host) is no host itself.
    hosts = [r for r in range(n) if row_full[r] and col_full[r]]
    hosts.sort(key=lambda r: (-(flagged[r].sum() + flagged[:, r].sum()), r))
    for r in hosts:
        if not ((flagged[r] & ~used[r]).any() or (flagged[:, r] & ~used[:, r]).any()):
            continue
        out.append(("host", r))
        used[r] |= flagged[r]
        used[:, r] |= flagged[:, r]
    for r in range(n):
        if row_full[r] and present[r].sum() >= 2 and (flagged[r] & ~used[r]).any():
            out.append(("row", r))
            used[r] |= flagged[r]
    for r in range(n):
        if col_full[r] and present[:, r].sum() >= 2 and (flagged[:, r] & ~used[:, r]).any():
            out.append(("column", r))
            used[:, r] |= flagged[:, r]
    for i, j in zip(*np.nonzero(flagged & ~used)):
        out.append(("point", (int(i), int(j))))
    return out

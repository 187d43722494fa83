"""Boolean route tomography, shared by C4D (its communication hang and the
probes) and Clockwork's bottleneck naming (docs/c4.md, docs/clockwork.md):
after Duffield's rule that a link on a good path is good, the link that the
bad (slow) paths cross most and the good ones least. Paths are lists of link
names; keys are whatever identifies a path (a connection, a message)."""

from __future__ import annotations


def scores(slow, healthy, paths) -> dict:
    """Per link crossed by a slow path: (slow paths through it) - (healthy
    paths through it)."""
    score: dict = {}
    for c in slow:
        for lk in set(paths.get(c, [])):
            score[lk] = score.get(lk, 0) + 1
    for c in healthy:
        for lk in set(paths.get(c, [])):
            if lk in score:
                score[lk] -= 1
    return score


def tomography(slow, healthy, paths, access=frozenset(), prefer_access=False, most_slow=False):
    """The link slow paths cross most and healthy ones least (:func:`scores`);
    the best score wins, then (``most_slow``) the link more slow paths cross,
    then links outside ``access`` before those in it (``prefer_access``: the
    other way round), then name order. None when no slow path crosses a
    link."""
    score = scores(slow, healthy, paths)
    if not score:
        return None
    best = max(score.values())
    tied = [lk for lk, v in score.items() if v == best]
    crossed = scores(slow, (), paths) if most_slow else {}
    return min((-crossed.get(lk, 0), (lk in access) != prefer_access, lk) for lk in tied)[2]

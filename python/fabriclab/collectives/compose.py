"""Composing plans: embedding a plan over a subset of ranks and a byte range
into a larger plan, after given steps (used by hybrid and hierarchical plans)."""

from __future__ import annotations

from .plan import Plan, Step


def embed(into: Plan, sub: Plan, rank_map: list[int], offset: int, after: dict[int, list[int]] | None = None,
          path_of=None) -> dict[int, list[int]]:
    """Appends ``sub``'s steps to ``into``: sub-rank i becomes ``rank_map[i]``,
    byte offsets shift by ``offset``, and every step of a rank that has no
    dependency inside ``sub`` also waits for ``after[rank]``. Returns, per
    rank, the steps of ``sub`` that nothing else in ``sub`` depends on (its
    sinks), for chaining the next phase."""
    after = after or {}
    sinks: dict[int, list[int]] = {}
    for i, steps in enumerate(sub.ranks):
        r = rank_map[i]
        base = len(into.ranks[r])
        used = set()
        for s in steps:
            used.update(s.deps)
        for s in steps:
            deps = [base + d for d in s.deps] if s.deps else list(after.get(r, []))
            path = s.path
            if path is None and path_of is not None and s.op == "send":
                path = path_of(r, rank_map[s.peer])
            into.ranks[r].append(Step(s.op, rank_map[s.peer], s.offset + offset, s.bytes, s.reduce, deps, path))
        sinks[r] = [base + j for j in range(len(steps)) if j not in used]
    return sinks


def merge_disjoint(into: Plan, other: Plan, offset: int) -> None:
    """Adds ``other`` (same ranks) working on ``[offset, offset + other.size)``."""
    embed(into, other, list(range(other.nranks)), offset)

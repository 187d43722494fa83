"""Recursive halving-doubling allreduce (Rabenseifner; Thakur, Rabenseifner &
Gropp, IJHPCA 2005): reduce-scatter by recursive halving, allgather by
recursive doubling, log2(p) steps each. With n not a power of two, the first
2r ranks (r = n - p, p the largest power of two <= n) pair up: each odd one
hands its data to its even neighbour before, and gets the result after."""

from __future__ import annotations

from .plan import Plan


def halving_doubling_allreduce(n: int, size_bytes: int, paths=None) -> Plan:
    plan = Plan.empty("allreduce", n, size_bytes, algorithm="halving-doubling")
    if n == 1:
        return plan
    path = lambda a, b: None if paths is None else paths.get((a, b))  # noqa: E731
    p = 1 << (n.bit_length() - 1)
    rem = n - p
    last: dict[int, list[int]] = {r: [] for r in range(n)}  # steps each next step of a rank depends on
    # Pre-step: odd ranks among the first 2*rem fold into their even neighbour.
    for i in range(rem):
        odd, even = 2 * i + 1, 2 * i
        s, rv = plan.transfer(odd, even, 0, size_bytes, reduce=True, path=path(odd, even))
        last[odd] = [s]
        last[even] = [rv]
    members = [2 * i for i in range(rem)] + list(range(2 * rem, n))  # virtual rank v -> real rank
    rng = {r: (0, size_bytes) for r in members}
    history: dict[int, list[tuple[int, tuple[int, int], tuple[int, int]]]] = {r: [] for r in members}
    d = p // 2
    while d >= 1:  # recursive halving
        new_last = {}
        for v, r in enumerate(members):
            partner = members[v ^ d]
            lo, length = rng[r]
            half = length // 2
            lower, upper = (lo, half), (lo + half, length - half)
            keep, give = (lower, upper) if v & d == 0 else (upper, lower)
            steps = []
            if give[1] > 0:
                steps.append(plan.send(r, partner, *give, deps=last[r], path=path(r, partner)))
            if keep[1] > 0:
                steps.append(plan.recv(r, partner, *keep, reduce=True, deps=last[r]))
            history[r].append((partner, keep, give))
            rng[r] = keep
            new_last[r] = steps or last[r]
        last.update(new_last)
        d //= 2
    # Recursive doubling: the same exchanges in reverse order, copying.
    for step in range(len(history[members[0]]) - 1, -1, -1):
        new_last = {}
        for r in members:
            partner, keep, give = history[r][step]
            steps = []
            if keep[1] > 0:
                steps.append(plan.send(r, partner, *keep, deps=last[r], path=path(r, partner)))
            if give[1] > 0:
                steps.append(plan.recv(r, partner, *give, reduce=False, deps=last[r]))
            new_last[r] = steps or last[r]
        last.update(new_last)
    for i in range(rem):  # post-step: results back to the odd ranks
        odd, even = 2 * i + 1, 2 * i
        plan.transfer(even, odd, 0, size_bytes, reduce=False, send_deps=last[even], recv_deps=last[odd],
                      path=path(even, odd))
    return plan

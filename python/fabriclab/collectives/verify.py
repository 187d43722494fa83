"""The plan verifier: executes a plan symbolically and proves its
postcondition, or says precisely what is wrong.

The buffer is cut into elementary segments at every step boundary. Each
rank holds, per segment, either nothing (``None``) or the set of ranks whose
input has been summed into it (a bitmask). A send carries the sender's
contents at the moment it runs; a receive either sums them in (reduce) or
replaces the local contents (copy). Steps run in an order that respects
dependencies and message matching; the verifier also proves the result is the
same in every such order: two steps of a rank that touch the same bytes, at
least one of them writing, must be ordered by happens-before (dependencies
and messages, transitively). Otherwise the plan has a data race.

An all-to-all (docs/plans.md) moves data without reduction, and a receive
may land at another offset than its send read: there each rank holds, per
segment, the origin of its bytes (a rank and the offset in that rank's
input), the buffer is also cut wherever a message carries a cut of one end
to the other, and the postcondition is the blocks' transpose: block i of
rank j holds block j of rank i.

Errors: unmatched or mismatched messages, dependencies that are not earlier
steps, deadlock (a cycle of waits), reading bytes a rank does not hold,
double counting (a contribution summed twice), races, and a postcondition
that does not hold.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass

from ..errors import InputError
from .plan import Plan, block_bytes, shards

# An all-to-all's cuts carried across messages: more than this many segments is refused.
MAX_SEGMENTS = 1 << 20


class PlanError(InputError):
    pass


@dataclass
class Report:
    steps: int
    messages: int
    segments: int
    bytes_sent: list[int]


def _structure(plan: Plan):
    n = plan.nranks
    if len(plan.ranks) != n:
        raise PlanError(f"plan lists {len(plan.ranks)} ranks, nranks is {n}")
    if plan.collective in ("broadcast", "reduce") and (plan.root is None or not 0 <= plan.root < n):
        raise PlanError(f"{plan.collective} needs a root within 0..{n - 1}, got {plan.root}")
    sends: dict[tuple[int, int], list[int]] = {}
    recvs: dict[tuple[int, int], list[int]] = {}
    for r, steps in enumerate(plan.ranks):
        for i, s in enumerate(steps):
            where = f"rank {r} step {i}"
            if s.op not in ("send", "recv"):
                raise PlanError(f"{where}: op must be 'send' or 'recv', got {s.op!r}")
            if not 0 <= s.peer < n or s.peer == r:
                raise PlanError(f"{where}: peer {s.peer} is not another rank")
            if s.bytes <= 0 or s.offset < 0 or s.offset + s.bytes > plan.size_bytes:
                raise PlanError(f"{where}: range [{s.offset}, {s.offset + s.bytes}) is empty or outside the "
                                f"buffer of {plan.size_bytes} bytes")
            for d in s.deps:
                if not 0 <= d < i:
                    raise PlanError(f"{where}: dependency {d} is not an earlier step of rank {r}")
            key = (r, s.peer) if s.op == "send" else (s.peer, r)
            (sends if s.op == "send" else recvs).setdefault(key, []).append(i)
    if plan.collective == "alltoall":
        try:
            block_bytes(plan.size_bytes, n)
        except InputError as e:
            raise PlanError(str(e)) from None
    moves = plan.collective == "alltoall"  # a receive may land elsewhere than its send read
    match: dict[tuple[int, int], tuple[int, int]] = {}  # (rank, recv idx) -> (rank, send idx)
    for key in sorted(set(sends) | set(recvs)):
        a, b = key
        ss, rr = sends.get(key, []), recvs.get(key, [])
        if len(ss) != len(rr):
            raise PlanError(f"rank {a} sends {len(ss)} messages to rank {b}, which receives {len(rr)} "
                            f"(a receive with no matching send, or a send nobody receives)")
        for k, (si, ri) in enumerate(zip(ss, rr)):
            s, t = plan.ranks[a][si], plan.ranks[b][ri]
            if moves and s.bytes != t.bytes:
                raise PlanError(f"message #{k} from rank {a} to rank {b}: the send (step {si}) carries {s.bytes} "
                                f"bytes but the receive (step {ri}) expects {t.bytes}")
            if not moves and (s.offset, s.bytes) != (t.offset, t.bytes):
                raise PlanError(f"message #{k} from rank {a} to rank {b}: the send (step {si}) carries "
                                f"[{s.offset}, {s.offset + s.bytes}) but the receive (step {ri}) expects "
                                f"[{t.offset}, {t.offset + t.bytes})")
            match[(b, ri)] = (a, si)
    return match


def _initial(plan: Plan, bounds: list[int]):
    n = plan.nranks
    nseg = len(bounds) - 1
    coll = plan.collective
    if coll == "alltoall":  # each byte's origin: (rank, offset in its input)
        return [[(r, bounds[g]) for g in range(nseg)] for r in range(n)]
    if coll in ("allreduce", "reduce", "reduce_scatter"):
        return [[1 << r] * nseg for r in range(n)]
    if coll == "broadcast":
        return [[(1 << plan.root) if r == plan.root else None] * nseg for r in range(n)]
    # allgather: rank r holds its own shard
    sh = shards(plan.size_bytes, n)
    out = []
    for r in range(n):
        lo, hi = sh[r][0], sh[r][0] + sh[r][1]
        out.append([(1 << r) if lo <= bounds[g] and bounds[g + 1] <= hi else None for g in range(nseg)])
    return out


def _postcondition(plan: Plan, state, bounds: list[int]) -> None:
    n = plan.nranks
    full = (1 << n) - 1
    coll = plan.collective
    sh = shards(plan.size_bytes, n)

    def owner(g):
        for r, (o, b) in enumerate(sh):
            if o <= bounds[g] < o + b:
                return r
        return None

    def fail(r, g, want, got):
        desc = lambda m: "nothing" if m is None else "{" + ", ".join(str(i) for i in range(n) if m >> i & 1) + "}"  # noqa: E731
        raise PlanError(f"{coll}: rank {r} ends with bytes [{bounds[g]}, {bounds[g + 1]}) holding the sum of "
                        f"ranks {desc(got)}, expected {desc(want)}")

    if coll == "alltoall":
        blk = plan.size_bytes // n
        for g in range(len(bounds) - 1):
            x, y = bounds[g], bounds[g + 1]
            i = x // blk
            for r in range(n):
                want = (i, r * blk + x - i * blk)
                if state[r][g] != want:
                    got = state[r][g]
                    raise PlanError(f"alltoall: rank {r} ends with bytes [{x}, {y}) holding rank {got[0]}'s input "
                                    f"bytes [{got[1]}, {got[1] + y - x}), expected rank {i}'s bytes "
                                    f"[{want[1]}, {want[1] + y - x}) (its block {r})")
        return
    for g in range(len(bounds) - 1):
        for r in range(n):
            v = state[r][g]
            if coll == "allreduce" and v != full:
                fail(r, g, full, v)
            elif coll == "reduce" and r == plan.root and v != full:
                fail(r, g, full, v)
            elif coll == "broadcast" and v != 1 << plan.root:
                fail(r, g, 1 << plan.root, v)
            elif coll == "allgather":
                o = owner(g)
                if v != 1 << o:
                    fail(r, g, 1 << o, v)
            elif coll == "reduce_scatter" and owner(g) == r and v != full:
                fail(r, g, full, v)


def _carried_cuts(plan: Plan, match, cuts: set[int]) -> list[int]:
    """The cuts closed under the messages: a cut inside a send's range is
    also made at the same distance into its receive's range, and back, so
    that a message's segments are the same at both ends."""
    pairs = []
    for (b, ri), (a, si) in match.items():
        s, t = plan.ranks[a][si], plan.ranks[b][ri]
        if s.offset != t.offset:
            pairs.append((s.offset, t.offset, s.bytes))
    bounds = sorted(cuts)
    while True:
        new = set()
        for p, q, length in pairs:
            for src, dst in ((p, q), (q, p)):
                lo, hi = bisect.bisect_right(bounds, src), bisect.bisect_left(bounds, src + length)
                for c in bounds[lo:hi]:
                    if dst + c - src not in cuts:
                        new.add(dst + c - src)
        if not new:
            return bounds
        cuts |= new
        if len(cuts) > MAX_SEGMENTS:
            raise PlanError(f"alltoall: its messages cut the buffer into more than {MAX_SEGMENTS} segments "
                            f"(offsets that do not line up across messages); give messages on common boundaries")
        bounds = sorted(cuts)


def verify(plan: Plan) -> Report:
    """Raises PlanError unless the plan is correct; returns a small report."""
    match = _structure(plan)
    n = plan.nranks
    cuts = {0, plan.size_bytes}
    for steps in plan.ranks:
        for s in steps:
            cuts.add(s.offset)
            cuts.add(s.offset + s.bytes)
    if plan.collective in ("allgather", "reduce_scatter"):
        for o, b in shards(plan.size_bytes, n):
            cuts.add(o)
            cuts.add(o + b)
    if plan.collective == "alltoall":
        blk = plan.size_bytes // n
        cuts.update(i * blk for i in range(n))
        bounds = _carried_cuts(plan, match, cuts)
    else:
        bounds = sorted(cuts)
    state = _initial(plan, bounds)

    base = [0]
    for steps in plan.ranks:
        base.append(base[-1] + len(steps))
    gid = lambda r, i: base[r] + i  # noqa: E731

    def segs(s):
        return range(bisect.bisect_left(bounds, s.offset), bisect.bisect_left(bounds, s.offset + s.bytes))

    # Predecessors: dependencies, and for a receive its matching send.
    waiting = {}
    succ: dict[int, list[tuple[int, int]]] = {}
    for r, steps in enumerate(plan.ranks):
        for i, s in enumerate(steps):
            preds = [(r, d) for d in s.deps]
            if s.op == "recv":
                preds.append(match[(r, i)])
            waiting[(r, i)] = len(preds)
            for p in preds:
                succ.setdefault(p, []).append((r, i))
    ready = [k for k, c in waiting.items() if c == 0]
    heapq.heapify(ready)
    anc: dict[tuple[int, int], int] = {}
    carried: dict[tuple[int, int], list] = {}
    accesses: dict[tuple[int, int], list[tuple[int, bool, tuple[int, int]]]] = {}  # (rank, seg) -> (gid, write, key)
    done = 0
    while ready:
        key = heapq.heappop(ready)
        r, i = key
        s = plan.ranks[r][i]
        a = 0
        for d in s.deps:
            a |= anc[(r, d)] | (1 << gid(r, d))
        if s.op == "recv":
            m = match[key]
            a |= anc[m] | (1 << gid(*m))
        anc[key] = a
        # Races first: every earlier access to these bytes at this rank must
        # happen-before this step when either of them writes.
        writes = s.op == "recv"
        for g in segs(s):
            for ga, wa, ka in accesses.get((r, g), ()):
                if (wa or writes) and not (a >> ga & 1):
                    raise PlanError(f"race at rank {r} on bytes [{bounds[g]}, {bounds[g + 1]}): steps {ka[1]} and "
                                    f"{i} are not ordered by dependencies and one of them writes")
        if s.op == "send":
            vals = []
            for g in segs(s):
                v = state[r][g]
                if v is None:
                    raise PlanError(f"rank {r} step {i} sends bytes [{bounds[g]}, {bounds[g + 1]}) it does not hold")
                vals.append(v)
                accesses.setdefault((r, g), []).append((gid(r, i), False, key))
            carried[key] = vals
        else:
            vals = carried.pop(match[key])
            for g, v in zip(segs(s), vals):
                cur = state[r][g]
                if s.reduce and plan.collective == "alltoall":
                    raise PlanError(f"rank {r} step {i}: an alltoall does not reduce (a receive copies its block)")
                if s.reduce:
                    if cur is None:
                        raise PlanError(f"rank {r} step {i} reduces into bytes [{bounds[g]}, {bounds[g + 1]}) "
                                        f"it does not hold")
                    if cur & v:
                        dup = [j for j in range(n) if (cur & v) >> j & 1]
                        raise PlanError(f"rank {r} step {i}: double counting: the contribution of rank(s) {dup} "
                                        f"to bytes [{bounds[g]}, {bounds[g + 1]}) would be summed twice")
                    state[r][g] = cur | v
                else:
                    state[r][g] = v
                accesses.setdefault((r, g), []).append((gid(r, i), True, key))
        done += 1
        for nxt in succ.get(key, []):
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                heapq.heappush(ready, nxt)
    total = base[-1]
    if done < total:
        blocked = sorted(k for k, c in waiting.items() if c > 0 and k not in anc)
        desc = []
        for r, i in blocked[:6]:
            s = plan.ranks[r][i]
            desc.append(f"rank {r} step {i} ({s.op} {'to' if s.op == 'send' else 'from'} {s.peer})")
        raise PlanError(f"deadlock: {total - done} steps can never run, e.g. " + "; ".join(desc) +
                        " (they wait in a cycle on each other)")
    _postcondition(plan, state, bounds)
    return Report(steps=total, messages=len(match), segments=len(bounds) - 1, bytes_sent=plan.bytes_sent())

"""Tree collectives: broadcast, reduce and allreduce along rooted trees
(given as parent maps), several trees at once with the data split between
them, pipelined by chunk. Used by the double binary tree (NCCL 2.4) and by
Blink's packed spanning trees.

Allreduce on a tree is a reduce towards the root followed by a broadcast back
down (Blink, MLSys'20 §3); a chunk's broadcast starts as soon as the root
holds its sum.
"""

from __future__ import annotations

from .plan import LinkOrder, Plan, chunks, weighted_split

WINDOW = 1  # chunks in flight per connection (stop-and-wait measured best here; see docs/plans.md)


def children_of(parent: dict[int, int | None]) -> dict[int, list[int]]:
    ch = {v: [] for v in parent}
    for v, p in sorted(parent.items()):
        if p is not None:
            ch[p].append(v)
    return ch


def root_of(parent: dict[int, int | None]) -> int:
    roots = [v for v, p in parent.items() if p is None]
    if len(roots) != 1:
        raise ValueError(f"a tree needs exactly one root, got {roots}")
    return roots[0]


def _postorder(parent):
    ch = children_of(parent)
    out = []

    def visit(v):
        for c in ch[v]:
            visit(c)
        out.append(v)

    visit(root_of(parent))
    if len(out) != len(parent):
        raise ValueError("the parent map is not a tree (a cycle or a detached node)")
    return out


def _tree_ops(plan: Plan, parent, rng, chunk_bytes, do_reduce: bool, do_bcast: bool, paths):
    """Adds the steps of one tree over byte range ``rng`` to ``plan``."""
    ch = children_of(parent)
    root = root_of(parent)
    post = _postorder(parent)
    pre = list(reversed(post))
    link = LinkOrder(WINDOW)
    last_reduce: dict[int, int] = {}  # reductions into a rank are serialized
    path = lambda a, b: None if paths is None else paths.get((a, b))  # noqa: E731
    for o, b in chunks(*rng, chunk_bytes):
        up_sent: dict[int, int] = {}
        summed: dict[int, int | None] = {}
        if do_reduce:
            for v in post:  # children before parents
                got = None
                for c in ch[v]:
                    got = plan.recv(v, c, o, b, reduce=True, deps=[last_reduce.get(v)])
                    last_reduce[v] = got
                summed[v] = got
                if parent[v] is not None:
                    p = parent[v]
                    up_sent[v] = link.add((v, p), plan.send(v, p, o, b, deps=[got, link.dep((v, p))], path=path(v, p)))
        if do_bcast:
            have = {root: summed.get(root)}
            for v in pre:  # parents before children
                if v != root:
                    p = parent[v]
                    have[v] = plan.recv(v, p, o, b, reduce=False, deps=[up_sent.get(v)])
                for c in ch[v]:
                    link.add((v, c), plan.send(v, c, o, b, deps=[have[v], link.dep((v, c))], path=path(v, c)))


def tree_collective(collective: str, n: int, size_bytes: int, trees: list[dict], weights=None,
                    chunk_bytes: int | None = None, paths=None, algorithm: str = "trees") -> Plan:
    """``collective`` in broadcast/reduce/allreduce over ``trees`` (parent
    maps over all n ranks, all rooted at the same rank for broadcast and
    reduce); tree i carries a contiguous share of the data proportional to
    ``weights[i]``."""
    if not trees:
        raise ValueError("at least one tree is needed")
    roots = {root_of(t) for t in trees}
    root = None
    if collective in ("broadcast", "reduce"):
        if len(roots) != 1:
            raise ValueError(f"{collective} trees must share one root, got {sorted(roots)}")
        root = roots.pop()
    for t in trees:
        if sorted(t) != list(range(n)):
            raise ValueError(f"every tree must span ranks 0..{n - 1}")
    plan = Plan.empty(collective, n, size_bytes, root=root, algorithm=algorithm)
    weights = weights or [1.0] * len(trees)
    for t, rng in zip(trees, weighted_split(0, size_bytes, weights)):
        if rng[1] == 0:
            continue
        _tree_ops(plan, t, rng, chunk_bytes, collective in ("reduce", "allreduce"),
                  collective in ("broadcast", "allreduce"), paths)
    plan.meta.update({"trees": [{str(k): v for k, v in t.items()} for t in trees], "weights": list(weights),
                      "chunk_bytes": chunk_bytes})
    return plan


def _inorder_tree(ranks: list[int]) -> dict[int, int | None]:
    """Balanced binary tree over ``ranks`` in in-order: the middle rank is
    the root; with 2^k - 1 ranks the leaves are every other rank."""
    parent: dict[int, int | None] = {}

    def build(lo, hi, p):
        if lo >= hi:
            return
        mid = (lo + hi) // 2
        parent[ranks[mid]] = p
        build(lo, mid, ranks[mid])
        build(mid + 1, hi, ranks[mid])

    build(0, len(ranks), None)
    return parent


def double_binary_trees(n: int) -> list[dict]:
    """NCCL 2.4's two complementary binary trees: the second is the first
    shifted by one rank, so that most ranks that are leaves in one tree are
    inner nodes in the other and each tree moves half of the data."""
    t1 = _inorder_tree(list(range(n)))
    t2 = _inorder_tree([(r + 1) % n for r in range(n)])
    return [t1, t2]


def double_binary_tree_allreduce(n: int, size_bytes: int, chunk_bytes: int | None = None, paths=None) -> Plan:
    if n == 1:
        return Plan.empty("allreduce", 1, size_bytes, algorithm="tree")
    return tree_collective("allreduce", n, size_bytes, double_binary_trees(n), [1, 1], chunk_bytes, paths, "tree")

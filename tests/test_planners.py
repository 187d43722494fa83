"""Every planner's plans verify over random rank counts (2..16) and sizes
from 1 byte up, including sizes not divisible by the rank count."""

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriclab.collectives import rings as R
from fabriclab.collectives.direct import direct_allreduce
from fabriclab.collectives.halving_doubling import halving_doubling_allreduce
from fabriclab.collectives.plan import shards
from fabriclab.collectives.treegen import pack_trees
from fabriclab.collectives.trees import double_binary_tree_allreduce, tree_collective
from fabriclab.collectives.verify import verify

ranks = st.integers(min_value=2, max_value=16)
sizes = st.integers(min_value=1, max_value=5000)
chunk = st.one_of(st.none(), st.integers(min_value=64, max_value=900))
SETTINGS = settings(max_examples=60, deadline=None)


@SETTINGS
@given(ranks, sizes, chunk, st.randoms(use_true_random=False))
def test_ring_plans(n, size, ch, rnd):
    ring = list(range(n))
    rnd.shuffle(ring)
    verify(R.ring_allreduce(n, size, [ring, ring[::-1]], ch))
    verify(R.ring_reduce_scatter(n, size, ring, ch))
    verify(R.ring_allgather(n, size, ring, ch))
    # Several rings (channels): each carries its part of every shard.
    verify(R.ring_reduce_scatter(n, size, chunk_bytes=ch, rings=[ring, ring[::-1]]))
    verify(R.ring_allgather(n, size, chunk_bytes=ch, rings=[ring, ring[::-1]]))
    root = rnd.randrange(n)
    verify(R.chain_broadcast(n, size, root, None, ch))
    verify(R.chain_reduce(n, size, root, None, ch))


@SETTINGS
@given(ranks, sizes, chunk)
def test_tree_hd_direct_plans(n, size, ch):
    verify(double_binary_tree_allreduce(n, size, ch))
    verify(halving_doubling_allreduce(n, size))
    verify(direct_allreduce(n, size, ch))


def random_tree(n, rnd, root):
    order = [root] + rnd.sample([r for r in range(n) if r != root], n - 1)
    return {v: (None if i == 0 else order[rnd.randrange(i)]) for i, v in enumerate(order)}


@SETTINGS
@given(ranks, sizes, chunk, st.integers(1, 4), st.randoms(use_true_random=False))
def test_multi_tree_plans(n, size, ch, k, rnd):
    root = rnd.randrange(n)
    trees = [random_tree(n, rnd, root) for _ in range(k)]
    weights = [rnd.random() + 0.1 for _ in range(k)]
    for op in ("broadcast", "reduce", "allreduce"):
        verify(tree_collective(op, n, size, trees, weights, ch))
    # Allreduce trees may have different roots.
    mixed = [random_tree(n, rnd, rnd.randrange(n)) for _ in range(k)]
    verify(tree_collective("allreduce", n, size, mixed, weights, ch))


@settings(max_examples=25, deadline=None)
@given(st.integers(3, 9), st.integers(1, 3000), st.randoms(use_true_random=False))
def test_treegen_plans_on_random_graphs_verify(n, size, rnd):
    g = nx.DiGraph()
    order = list(range(n))
    rnd.shuffle(order)
    for a, b in zip(order, order[1:] + order[:1]):  # a ring keeps it strongly connected
        c = rnd.choice([1, 2, 3]) * 10**9
        g.add_edge(a, b, capacity=c)
        g.add_edge(b, a, capacity=c)
    for _ in range(n):
        a, b = rnd.sample(range(n), 2)
        c = rnd.choice([1, 2]) * 10**9
        g.add_edge(a, b, capacity=c)
        g.add_edge(b, a, capacity=c)
    p = pack_trees(g, 0)
    verify(tree_collective("broadcast", n, size, p.trees, p.rates_bps, None))


def test_shards_cover_buffer_exactly():
    for n in range(1, 20):
        for size in (1, 2, 7, 100, 1001):
            sh = shards(size, n)
            assert sum(b for _, b in sh) == size
            assert all(sh[i][0] + sh[i][1] == sh[i + 1][0] for i in range(n - 1))


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 6), st.integers(1, 40))
def test_one_byte_chunks(n, size):
    verify(R.ring_allreduce(n, size, None, 1))
    verify(double_binary_tree_allreduce(n, size, 1))


@SETTINGS
@given(st.integers(min_value=1, max_value=6), st.integers(min_value=1, max_value=8), sizes)
def test_block_rings(blocks, block, size):
    """NCCL's rail rings: every ring visits every rank once and leaves each block from one rank; ring c crosses
    out of block i at rank c (even block) or its reverse's end, so the rings' crossing ranks of a block are all
    distinct (one NIC per ring), and the channelled ring plans verify."""
    n = blocks * block
    rings = R.block_rings(n, block)
    assert len(rings) == block and all(sorted(r) == list(range(n)) for r in rings)
    if blocks > 1:
        for i in range(blocks):
            exits = [r[(i + 1) * block - 1] for r in rings]  # block i fills positions i*block.. of every ring
            assert sorted(exits) == list(range(i * block, (i + 1) * block))
    if n > 1:
        verify(R.ring_reduce_scatter(n, size, rings=rings))
        verify(R.ring_allreduce(n, size, rings))

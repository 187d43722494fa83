"""All-to-all planners (collectives/alltoall.py): the verifier proves every
plan, and the bytes each rank sends match the hand counts."""

import pytest

from fabriclab.collectives.alltoall import AlltoallError, direct_alltoall, hierarchical_alltoall
from fabriclab.collectives.verify import verify
from fabriclab.errors import InputError


@pytest.mark.parametrize("n", [2, 3, 4, 7])
@pytest.mark.parametrize("chunk, window", [(None, None), (5, 1), (7, 3)])
def test_direct_sends_n_minus_one_blocks_per_rank(n, chunk, window):
    size = 24 * n  # blocks of 24 bytes
    p = direct_alltoall(n, size, chunk, window=window)
    report = verify(p)
    # Each rank sends every block but its own, once: (n-1)/n of its buffer.
    assert report.bytes_sent == [24 * (n - 1)] * n
    # No byte crosses twice: one message per (block, chunk) and pair.
    per_block = 1 if chunk is None else -(-24 // chunk)
    assert report.messages == n * (n - 1) * per_block


def test_direct_is_staggered_and_windowed():
    p = direct_alltoall(4, 16, window=1)
    sends = [[s.peer for s in steps if s.op == "send"] for steps in p.ranks]
    # Step k: rank i sends to i+k, so at each step every rank has exactly one sender.
    assert sends == [[1, 2, 3], [2, 3, 0], [3, 0, 1], [0, 1, 2]]
    # Window 1: each send waits for the one before it.
    deps = [s.deps for s in p.ranks[0] if s.op == "send"]
    assert deps == [[], [0], [1]]
    # In place: rank 0 receives block 1 from rank 1 only after sending its own block 1.
    r = next(s for s in p.ranks[0] if s.op == "recv" and s.peer == 1)
    assert (r.offset, r.bytes) == (4, 4) and r.deps == [0]


@pytest.mark.parametrize("servers, gpus", [(1, 4), (2, 2), (3, 4), (2, 8), (4, 1)])
@pytest.mark.parametrize("chunk", [None, 5])
def test_hierarchical_hand_counts(servers, gpus, chunk):
    n = servers * gpus
    blk = 12
    groups = [list(range(a * gpus, (a + 1) * gpus)) for a in range(servers)]
    p = hierarchical_alltoall(groups, blk * n, chunk)
    report = verify(p)
    # Phase 1: (g-1) local peers x s blocks each; phase 2: (s-1) messages of g blocks.
    assert report.bytes_sent == [blk * ((gpus - 1) * servers + gpus * (servers - 1))] * n
    # Across servers only GPUs of the same local index talk, g blocks per server pair.
    fabric = {}
    for r, steps in enumerate(p.ranks):
        for s in steps:
            if s.op == "send" and s.peer // gpus != r // gpus:
                assert s.peer % gpus == r % gpus
                fabric[(r, s.peer)] = fabric.get((r, s.peer), 0) + s.bytes
    assert len(fabric) == n * (servers - 1)
    assert set(fabric.values()) <= {gpus * blk}


def test_hierarchical_refuses_uneven_servers_and_interleaved_ranks():
    with pytest.raises(AlltoallError, match="same number of GPUs on every server"):
        hierarchical_alltoall([[0, 1, 2], [3, 4]], 60)
    with pytest.raises(AlltoallError, match="server after server"):
        hierarchical_alltoall([[0, 2], [1, 3]], 40)


def test_a_buffer_not_divisible_into_blocks_is_refused():
    with pytest.raises(InputError, match=r"size_bytes: an all-to-all over 3 ranks .* 10 bytes is not a multiple of 3 "
                                         r"\(give e.g. 9 or 12\)"):
        direct_alltoall(3, 10)
    with pytest.raises(InputError, match="window: must be a positive number"):
        direct_alltoall(2, 10, window=0)


def test_the_core_reader_reads_an_alltoall_and_refuses_odd_buffers():
    import json

    from fabriclab.collectives.plan import Plan

    p = direct_alltoall(4, 64)
    assert Plan.from_json(p.to_json()).to_json() == p.to_json()
    d = p.to_dict()
    d["size_bytes"] = 66
    with pytest.raises(ValueError, match=r"size_bytes 66 does not split into nranks \(4\) equal blocks"):
        Plan.from_json(json.dumps(d))

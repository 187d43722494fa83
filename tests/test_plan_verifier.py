"""The verifier accepts hand-made correct plans and rejects hand-made broken
ones with the right reason."""

import pytest

from fabriclab.collectives.plan import Plan
from fabriclab.collectives.verify import PlanError, verify


def two_rank_allreduce():
    # Each rank sends its whole buffer to the other, then sums in what it receives.
    p = Plan.empty("allreduce", 2, 10)
    s0 = p.send(0, 1, 0, 10)
    s1 = p.send(1, 0, 0, 10)
    p.recv(1, 0, 0, 10, reduce=True, deps=[s1])
    p.recv(0, 1, 0, 10, reduce=True, deps=[s0])
    return p


def test_exchange_without_ordering_is_a_race():
    p = Plan.empty("allreduce", 2, 10)
    p.transfer(0, 1, 0, 10, reduce=True)
    p.transfer(1, 0, 0, 10, reduce=True)  # rank 1 may send before or after its receive
    with pytest.raises(PlanError, match="race at rank 1"):
        verify(p)


def test_hand_made_allreduce_and_broadcast_verify():
    verify(two_rank_allreduce())
    b = Plan.empty("broadcast", 3, 8, root=1)
    _, got = b.transfer(1, 0, 0, 8, reduce=False)
    b.transfer(0, 2, 0, 8, reduce=False, send_deps=[got])
    verify(b)


def test_missing_contribution_is_reported():
    p = Plan.empty("allreduce", 3, 10)
    _, r = p.transfer(0, 1, 0, 10, reduce=True)
    p.transfer(1, 0, 0, 10, reduce=False, send_deps=[r])  # rank 2 never contributes
    with pytest.raises(PlanError, match="expected"):
        verify(p)


def test_double_counting_is_reported():
    p = Plan.empty("allreduce", 2, 10)
    s, r = p.transfer(0, 1, 0, 10, reduce=True)
    # Rank 1 sends the sum back and rank 0 reduces it in: rank 0 counted twice.
    p.transfer(1, 0, 0, 10, reduce=True, send_deps=[r])
    with pytest.raises(PlanError, match="double counting"):
        verify(p)


def test_deadlock_is_reported():
    p = Plan.empty("allreduce", 2, 10)
    r0 = p.recv(0, 1, 0, 10, reduce=True)
    p.send(0, 1, 0, 10, deps=[r0])  # rank 0 sends only after receiving
    r1 = p.recv(1, 0, 0, 10, reduce=True)
    p.send(1, 0, 0, 10, deps=[r1])  # and so does rank 1
    with pytest.raises(PlanError, match="deadlock"):
        verify(p)


def test_receive_without_send_is_reported():
    p = two_rank_allreduce()
    p.recv(0, 1, 0, 10, reduce=True)
    with pytest.raises(PlanError, match="sends 1 messages to rank 0, which receives 2"):
        verify(p)


def test_mismatched_ranges_are_reported():
    p = Plan.empty("allreduce", 2, 10)
    p.send(0, 1, 0, 10)
    p.recv(1, 0, 0, 5, reduce=True)
    with pytest.raises(PlanError, match="carries"):
        verify(p)


def test_race_between_send_and_overwrite_is_reported():
    # Rank 1 forwards its buffer to rank 2 while a copy from rank 0 may overwrite it.
    p = Plan.empty("broadcast", 3, 4, root=0)
    p.transfer(0, 1, 0, 4, reduce=False)
    p.transfer(1, 2, 0, 4, reduce=False)  # no dependency on the receive above
    with pytest.raises(PlanError, match="does not hold|race"):
        verify(p)


def test_unordered_reductions_into_the_same_bytes_are_a_race():
    p = Plan.empty("reduce", 3, 4, root=0)
    p.transfer(1, 0, 0, 4, reduce=True)
    p.transfer(2, 0, 0, 4, reduce=True)  # both reductions into rank 0's bytes, unordered
    with pytest.raises(PlanError, match="race"):
        verify(p)
    q = Plan.empty("reduce", 3, 4, root=0)
    _, r = q.transfer(1, 0, 0, 4, reduce=True)
    q.transfer(2, 0, 0, 4, reduce=True, recv_deps=[r])
    verify(q)


def test_dependency_on_a_later_step_is_rejected():
    p = Plan.empty("allreduce", 2, 10)
    p.send(0, 1, 0, 10, deps=[3])
    with pytest.raises(PlanError, match="not an earlier step"):
        verify(p)


def test_json_round_trip():
    p = two_rank_allreduce()
    q = Plan.from_json(p.to_json())
    assert q.to_dict() == p.to_dict()
    verify(q)


def two_rank_alltoall(dep: bool = True, at: int = 4):
    # Rank 0 sends its block 1 ([4, 8)) to rank 1, which keeps it as its block 0;
    # rank 1's block 0 goes to rank 0's block 1. Each receive waits for its rank's send
    # of the block it overwrites.
    p = Plan.empty("alltoall", 2, 8)
    s0 = p.send(0, 1, 4, 4)
    s1 = p.send(1, 0, 0, 4)
    p.recv(0, 1, at, 4, reduce=False, deps=[s0] if dep else [])
    p.recv(1, 0, 0, 4, reduce=False, deps=[s1] if dep else [])
    return p


def test_hand_made_alltoall_verifies():
    r = verify(two_rank_alltoall())
    assert r.bytes_sent == [4, 4]  # (n-1)/n of 8 bytes each


def test_alltoall_block_in_the_wrong_place_is_reported():
    with pytest.raises(PlanError, match=r"rank 0 ends with bytes \[0, 4\) holding rank 1's input bytes \[0, 4\), "
                                        r"expected rank 0's bytes \[0, 4\)"):
        verify(two_rank_alltoall(at=0))


def test_alltoall_receive_before_send_of_the_same_block_is_a_race():
    with pytest.raises(PlanError, match="race at rank 0 on bytes"):
        verify(two_rank_alltoall(dep=False))


def test_alltoall_half_blocks_carry_their_cuts_across_messages():
    # Rank 0's block 1 goes in two halves, rank 1 receives them into block 0:
    # the cut at 6 on the sender is the cut at 2 on the receiver.
    p = Plan.empty("alltoall", 2, 8)
    a = p.send(0, 1, 4, 2)
    b = p.send(0, 1, 6, 2)
    s1 = p.send(1, 0, 0, 4)
    p.recv(1, 0, 0, 2, reduce=False, deps=[s1])
    p.recv(1, 0, 2, 2, reduce=False, deps=[s1])
    p.recv(0, 1, 4, 4, reduce=False, deps=[a, b])
    verify(p)
    # The halves swapped at the receiver: reported at the byte range.
    p.ranks[1][1].offset, p.ranks[1][2].offset = 2, 0
    with pytest.raises(PlanError, match=r"rank 1 ends with bytes \[0, 2\) holding rank 0's input bytes \[6, 8\)"):
        verify(p)


def test_alltoall_refuses_reduction_mismatched_lengths_and_odd_buffers():
    p = two_rank_alltoall()
    p.ranks[0][1].reduce = True
    with pytest.raises(PlanError, match="an alltoall does not reduce"):
        verify(p)
    p = two_rank_alltoall()
    p.ranks[0][1].bytes = 3
    with pytest.raises(PlanError, match="carries 4 bytes but the receive .* expects 3"):
        verify(p)
    p = two_rank_alltoall()
    p.size_bytes = 9
    with pytest.raises(PlanError, match="size_bytes: .* 9 bytes is not a multiple of 2"):
        verify(p)

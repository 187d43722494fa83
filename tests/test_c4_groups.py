"""C4D with communicator groups (ccl.parquet's ``group`` column, schema 3):
each group's ops are diagnosed on their own ranks and rhythm. A hand-built
job (test_c4_faults.hand_ring: a 4-rank ring "dp0" on h0..h3, op k at
k x 10 ms) plus a 2-rank group "tp0" on h0 and h1, one exchange 5 ms after
each ring op."""

import pandas as pd

from fabriclab.systems.c4.detector import diagnose
from test_c4_confirm import stall
from test_c4_faults import hand_ring, message_rows


def job(ops=12, tp_stuck=None):
    ccl, view = hand_ring(ops)
    rows = []
    for k in range(ops if tp_stuck is None else tp_stuck + 1):
        t0 = k * 10_000_000 + 5_000_000
        msgs = message_rows(100 + k, t0, 0, 1, 0, t0, t0 + 100_000) + message_rows(100 + k, t0, 1, 0, 0, t0, t0 + 100_000)
        # From op tp_stuck on, rank 1 of tp0 never joins: nothing of it, and the group stops.
        rows += [m for m in msgs if k != tp_stuck or m["rank"] == 0 and m["kind"] == "send"]
    tp = pd.DataFrame(rows)
    tp["host"] = tp["rank"].map({0: "h0", 1: "h1"})
    return ccl, tp, view


def test_groups_let_c4d_read_past_a_small_groups_op():
    # Op 8 of the ring stalls on h2 -> h3 and h3 -> h0 (test_c4_confirm: C4D names h3).
    ccl, tp, view = job()
    slow = stall(ccl, 8, [(2, 3), (3, 0)])
    # Read as one communicator, the TP op at 5 ms never completes (ranks 2 and 3
    # never join it): C4D stops there, too early for a rhythm, and misses the stall.
    assert diagnose(pd.concat([slow, tp], ignore_index=True), view, 10**15) is None
    both = pd.concat([slow.assign(group="dp0"), tp.assign(group="tp0")], ignore_index=True)
    a = diagnose(both, view, 10**15)
    assert (a.syndrome, a.component, a.op, a.group) == ("comm_slow", "h3", 8, "dp0")


def test_with_groups_each_group_is_healthy():
    ccl, tp, view = job()
    both = pd.concat([ccl.assign(group="dp0"), tp.assign(group="tp0")], ignore_index=True)
    assert diagnose(both, view, 10**15) is None
    # Ops without a group are the job's world, as before the column existed.
    assert diagnose(pd.concat([ccl.assign(group=None), tp.assign(group="tp0")], ignore_index=True), view, 10**15) \
        is None


def test_a_hang_inside_a_group_names_the_group():
    ccl, tp, view = job(tp_stuck=8)
    both = pd.concat([ccl.assign(group="dp0"), tp.assign(group="tp0")], ignore_index=True)
    a = diagnose(both, view, 10**15)
    # Op 108 of tp0: rank 1 never joined (the ring's ranks 2 and 3 are not in the group).
    assert (a.syndrome, a.component, a.op, a.group) == ("noncomm_hang", "train:1", 108, "tp0")

"""The simulator's collectives in the runtime's telemetry schema (ccl.parquet,
docs/telemetry.md): the same columns and types as the runtime writes, and
times checked against what the engine recorded independently (messages.parquet)
and against the costs given in the scenario."""

import pyarrow.parquet as pq
import pytest

from conftest import star_scenario
from fabriclab import simulate
from fabriclab.runtime import Communicator
from fabriclab.runtime.launch import free_port

OVERHEAD_PS, REDUCE_BPS = 7_000_000, 80_000_000_000  # 7 us per send; 10 GB/s of sums


@pytest.fixture(scope="module")
def run():
    s = star_scenario(4, "10Gbps", "2us", backend="packet", collectives=[
        {"name": "ar", "planner": "ring", "op": "allreduce", "size_bytes": 1_000_000, "ranks": 4,
         "send_overhead_ps": OVERHEAD_PS, "reduce_bps": REDUCE_BPS},
        {"name": "ag", "planner": "ring", "op": "allgather", "size_bytes": 40_000, "ranks": 3, "hosts": [3, 1, 2],
         "start_ps": 50_000_000, "send_overhead_ps": OVERHEAD_PS, "reduce_bps": REDUCE_BPS}])
    return simulate(s)


def test_columns_are_the_documented_ones(run):
    import re
    from pathlib import Path

    doc = (Path(__file__).parent.parent / "docs" / "telemetry.md").read_text()
    doc = doc.split("## Probe telemetry")[0]  # ccl.parquet's part
    names = []
    for cell in re.findall(r"^\| (`[^|]+`) \|", doc, re.M):
        names += re.findall(r"`(\w+)`", cell)
    documented = set(names) - {"column"}
    assert set(run.ccl.columns) == documented


def test_a_cut_run_keeps_time_zero_and_nulls_only_what_never_happened():
    # Sends leave at once (no overhead): the first steps start and send at t = 0 exactly.
    # stop_ps cuts the 4-rank ring after its first messages.
    s = star_scenario(4, "10Gbps", "2us", backend="packet", stop_ps=30_000_000, collectives=[
        {"name": "ar", "planner": "ring", "op": "allreduce", "size_bytes": 4_000_000, "ranks": 4,
         "send_overhead_ps": 0}])
    r = simulate(s)
    c = r.ccl
    first = c[(c.kind == "send") & (c.seq == 0)]
    assert len(first) == 4
    assert (first.post_mono_ns == 0).all() and (first.send_start_mono_ns == 0).all() and (first.send_queue_ns == 0).all()
    # 1 MB per message at 10 Gbit/s takes over 800 us: nothing has arrived by 30 us.
    assert first.send_end_mono_ns.isna().all()
    assert c[c.kind == "recv"].recv_arrival_mono_ns.isna().all()
    # Steps that never started have no post time.
    assert c.post_mono_ns.isna().any()
    assert r.summary["collectives"]["ar"]["end_ps"] is None


def test_schema_is_the_runtimes(run, tmp_path):
    with Communicator(0, 1, "127.0.0.1", free_port(), "t", telemetry=True) as c:
        import numpy as np

        c.allreduce(np.ones(3, np.float32))
        c.write_telemetry(tmp_path / "rt.parquet")
    rt = pq.read_schema(tmp_path / "rt.parquet")
    run.write(tmp_path / "out")
    sim = pq.read_schema(tmp_path / "out" / "ccl.parquet")
    assert sim.names == rt.names and sim.types == rt.types
    assert sim.metadata[b"source"] == b"simulator" and rt.metadata[b"source"] == b"runtime"
    assert sim.metadata[b"fabriclab_telemetry_schema"] == rt.metadata[b"fabriclab_telemetry_schema"]


def test_rows_follow_the_plan_and_the_engines_messages(run):
    ccl, steps, msgs = run.ccl, run.steps, run.messages
    # A ring allreduce over 4 ranks: 2 x 3 sends and as many receives per rank; allgather over 3: 2 + 2 per rank.
    assert len(ccl) == 4 * 12 + 3 * 4 == len(steps)
    assert dict(ccl.groupby("op_id").collective.first()) == {0: "allreduce", 1: "allgather"}
    assert set(ccl.algorithm) == {"ring"} and set(ccl.stream) == {0} and ccl.dtype.isna().all()
    # Every byte sent is received: per op, the sends' bytes equal the receives' bytes.
    by = ccl.groupby(["op_id", "kind"]).bytes.sum()
    assert by[0, "send"] == by[0, "recv"] == 2 * 3 * 1_000_000 // 4 * 4 and by[1, "send"] == by[1, "recv"]
    sends, recvs = ccl[ccl.kind == "send"], ccl[ccl.kind == "recv"]
    # Each send leaves one send overhead after it was posted.
    assert (sends.send_queue_ns == OVERHEAD_PS // 1000).all()
    assert (sends.send_start_mono_ns - sends.post_mono_ns).between(OVERHEAD_PS // 1000 - 1, OVERHEAD_PS // 1000).all()
    # The k-th send of a pair is the k-th receive: the receive's data arrives when the send completes,
    # which is when the engine saw the message end (messages.parquet, recorded by the engine, not the app).
    pair = sends.merge(recvs, left_on=["op_id", "rank", "peer", "seq"], right_on=["op_id", "peer", "rank", "seq"],
                       suffixes=("_s", "_r"))
    assert len(pair) == len(sends) == len(recvs)
    assert (pair.bytes_s == pair.bytes_r).all() and (pair.offset_bytes_s == pair.offset_bytes_r).all()
    assert (pair.send_end_mono_ns_s == pair.recv_arrival_mono_ns_r).all()
    # A collective's message is tagged (rank << 32) | step and its app is the collective's name.
    m = msgs[msgs.app.isin(["ar", "ag"])].assign(op_id=lambda d: d.app.map({"ar": 0, "ag": 1}),
                                                  rank=lambda d: d.tag // 2**32, step=lambda d: d.tag % 2**32)
    seen = pair.merge(m, left_on=["op_id", "rank_s", "step_s"], right_on=["op_id", "rank", "step"])
    assert len(seen) == len(pair)
    assert (seen.end_ps // 1000 == seen.recv_arrival_mono_ns_r).all()
    assert (seen.start_ps // 1000 == seen.send_start_mono_ns_s).all()
    # A reducing receive is done bytes x 8 / reduce_bps after both its post and its data; a copy at once.
    ready = recvs[["post_mono_ns", "recv_arrival_mono_ns"]].max(axis=1)
    cost_ns = (recvs.bytes * 8 * 10**12 // REDUCE_BPS) // 1000
    lag = recvs.recv_done_mono_ns - ready
    assert ((lag - cost_ns.where(recvs.reduce, 0)).abs() <= 1).all()
    assert recvs.reduce.any() and (~recvs.reduce).any()
    # The wait is how long a posted receive waited for data.
    assert (recvs.recv_wait_ns == (recvs.recv_arrival_mono_ns - recvs.post_mono_ns).clip(lower=0)).all()
    # No host clocks in a simulation: both clocks hold simulated time; steps.parquet agrees.
    assert (ccl.post_real_ns == ccl.post_mono_ns).all()
    merged = ccl.merge(steps.assign(op_id=steps.collective.map({"ar": 0, "ag": 1})), on=["op_id", "rank", "step"])
    assert (merged.post_mono_ns == merged.start_ps // 1000).all()
    # The allgather ran on hosts [3, 1, 2] from 50 us: nothing of it before.
    assert ccl[ccl.op_id == 1].post_mono_ns.min() == 50_000


def test_group_column_names_each_collectives_communicator_group(tmp_path):
    # A direct alltoall over 4 hosts in group "ep0" beside an allreduce without one:
    # every row carries its op's group (null: none); each rank sends and receives 3
    # blocks of 250 kB, 3/4 of its 1 MB buffer.
    s = star_scenario(4, "10Gbps", "2us", backend="flow", collectives=[
        {"name": "a2a", "planner": "direct", "op": "alltoall", "size_bytes": 1_000_000, "group": "ep0"},
        {"name": "ar", "planner": "ring", "op": "allreduce", "size_bytes": 4_000, "ranks": 2}])
    c = simulate(s).ccl
    assert c[c.op_id == 0].group.eq("ep0").all() and c[c.op_id == 1].group.isna().all()
    a = c[c.op_id == 0]
    assert set(a.collective) == {"alltoall"} and set(a.algorithm) == {"direct"}
    assert a.groupby(["rank", "kind"]).bytes.sum().tolist() == [750_000] * 8
    assert set(a.bytes) == {250_000}
    with Communicator(0, 1, "127.0.0.1", free_port(), "t", telemetry=True, group="tp3") as comm:
        import numpy as np

        comm.allreduce(np.ones(3, np.float32))
        assert len(comm.telemetry.table()) == 0  # one rank: no messages
    with pytest.raises(ValueError, match="^group: must be a name"):
        Communicator(0, 1, "127.0.0.1", free_port(), "t", group="")


def test_a_collectives_alltoall_not_divisible_into_blocks_names_size_bytes():
    from fabriclab.scenario.base import ScenarioError

    s = star_scenario(4, "10Gbps", "2us", backend="flow", collectives=[
        {"name": "a2a", "planner": "direct", "op": "alltoall", "size_bytes": 1_000_003}])
    with pytest.raises(ScenarioError, match=r"^collectives\[0\]\.size_bytes: an all-to-all over 4 ranks"):
        simulate(s)

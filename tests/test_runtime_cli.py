"""`fabriclab launch` and `fabriclab runtime bench` end to end, and the
telemetry table's schema and values."""

from __future__ import annotations

import re
import sys
import threading
import time

import numpy as np
import pyarrow.parquet as pq

from fabriclab.runtime import Communicator
from fabriclab.runtime.launch import free_port
from fabriclab.runtime.telemetry import COLUMNS

PY = sys.executable
# size, count, type, redop, root, then time, algbw, busbw, #wrong out of place (6-9) and in place (10-13)
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)" + r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)" * 2 + r"\s*$")


def test_launch_sets_torchrun_variables(cli):
    # one write per rank (atomic on a pipe), so lines of different ranks do not interleave
    code = ("import os, sys; e = os.environ; sys.stdout.write(' '.join(['R', e['RANK'], e['WORLD_SIZE'], "
            "e['LOCAL_RANK'], e['MASTER_ADDR'], str(len(e['FABRICLAB_TOKEN'])), e['MASTER_PORT']]) + '\\n'); "
            "sys.stdout.flush()")
    port = free_port()
    r = cli("launch", "-n", "3", "--master-port", str(port), "--", PY, "-c", code)
    assert r.returncode == 0, r.stderr
    lines = sorted(x for x in r.stdout.splitlines() if x.startswith("R "))
    assert lines == [f"R {i} 3 {i} 127.0.0.1 32 {port}" for i in range(3)]


def test_launch_fails_and_stops_the_others(cli):
    code = "import os, sys, time; r = int(os.environ['RANK']); time.sleep(0.2 if r == 1 else 60); sys.exit(5)"
    t0 = time.monotonic()
    r = cli("launch", "-n", "3", "--", PY, "-c", code)
    assert r.returncode == 5
    assert "rank 1 exited with code 5; stopping the other ranks" in r.stderr
    assert time.monotonic() - t0 < 20  # the sleepers were stopped, not waited for


def test_launch_errors_name_the_option(cli):
    r = cli("launch", "-n", "0", "--", PY, "-c", "pass")
    assert r.returncode == 2 and "error: -n: " in r.stderr and "Traceback" not in r.stderr
    r = cli("launch", "-n", "2")
    assert r.returncode == 2 and "error: CMD: " in r.stderr
    r = cli("launch", "-n", "2", "--", "/nonexistent/prog")
    assert r.returncode == 2 and "error: CMD: cannot run" in r.stderr
    r = cli("runtime", "bench", "--op", "broadcast", "--algo", "direct", "-n", "2")
    assert r.returncode == 2 and "error: --algo: direct supports allreduce only" in r.stderr
    r = cli("runtime", "probe", "-n", "2", "--repeats", "0")
    assert r.returncode == 2 and "error: --repeats: must be within 1..100, got 0" in r.stderr


def test_bench_refuses_a_telemetry_folder_it_could_not_make_before_running(cli, tmp_path):
    (tmp_path / "afile").write_text("x")
    t0 = time.monotonic()
    r = cli("runtime", "bench", "--sizes", "1M", "--iters", "50", "-n", "2", "--telemetry", str(tmp_path / "afile" / "sub"))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: --telemetry: cannot create "), r.stderr
    assert "is a file, not a folder" in r.stderr
    assert time.monotonic() - t0 < 10  # refused up front: no rank was started
    assert (tmp_path / "afile").read_text() == "x"


def test_bench_table_busbw_is_the_formula_on_the_printed_time(cli, tmp_path):
    for op, n, factor in (("allreduce", 3, lambda n: 2 * (n - 1) / n), ("allgather", 2, lambda n: (n - 1) / n)):
        csv = tmp_path / f"{op}.csv"
        r = cli("runtime", "bench", "--op", op, "-n", str(n), "--sizes", "8:256K", "--factor", "32",
                "--iters", "3", "--warmup", "1", "--csv", str(csv))
        assert r.returncode == 0, r.stderr
        rows = [ROW.match(x) for x in r.stdout.splitlines() if ROW.match(x)]
        assert [int(m.group(1)) for m in rows] == [8, 256, 8192, 262144]
        busbws = []
        for m in rows:
            size, count = int(m.group(1)), int(m.group(2))
            assert count == size // 4 and m.group(3) == "float"
            for g in (6, 10):  # out of place, in place
                t_us, algbw, busbw, wrong = float(m.group(g)), float(m.group(g + 1)), float(m.group(g + 2)), int(m.group(g + 3))
                assert wrong == 0
                assert abs(algbw - size / (t_us * 1e-6) / 1e9) <= 0.005 + 1e-9
                assert abs(busbw - size / (t_us * 1e-6) / 1e9 * factor(n)) <= 0.005 + 1e-9
                busbws.append(busbw)
        avg = float(re.search(r"# Avg bus bandwidth\s*:\s*([\d.]+)", r.stdout).group(1))
        assert abs(avg - sum(busbws) / len(busbws)) < 1e-4  # nccl-tests averages both placements
        assert "# Out of bounds values : 0 OK" in r.stdout
        lines = csv.read_text().splitlines()
        assert lines[0].startswith("op,algorithm,nranks,size_bytes") and len(lines) == 1 + 2 * 4
        assert [x.split(",")[7] for x in lines[1:3]] == ["out-of-place", "in-place"]


def test_bench_writes_every_ranks_telemetry(cli, tmp_path):
    r = cli("runtime", "bench", "-n", "2", "--sizes", "64", "--iters", "2", "--warmup", "1",
            "--telemetry", str(tmp_path / "new" / "out"))  # a folder that does not exist yet is created
    assert r.returncode == 0, r.stderr
    t = pq.read_table(tmp_path / "new" / "out" / "ccl.parquet").to_pandas()
    assert list(t.columns) == COLUMNS
    # ring allreduce of 16 floats on 2 ranks: per op and rank, 2 sends and 2 receives of 32 bytes (half each);
    # 4 such ops per placement: the checked run, 1 warm-up, 2 timed; out of place and in place
    # (the barrier's one-int allreduce has 4-byte messages)
    ar = t[t.bytes == 32]
    assert sorted(set(ar["rank"])) == [0, 1] and len(ar) == 2 * 4 * 4 * 2
    assert set(ar.collective) == {"allreduce"} and set(ar.algorithm) == {"ring"}


def test_telemetry_rows_and_parquet_schema(tmp_path):
    port = free_port()
    comms = [None, None]

    def make(r):
        comms[r] = Communicator(r, 2, "127.0.0.1", port, "t", telemetry=True)

    ts = [threading.Thread(target=make, args=(r,)) for r in (0, 1)]
    [t.start() for t in ts]
    [t.join(30) for t in ts]

    def work(r):
        comms[r].allreduce(np.ones(10, np.float32))  # ring, 2 ranks: 2 sends + 2 receives per rank
        comms[r].broadcast(np.ones(3, np.int32), root=0)  # a chain: one message 0 -> 1
        comms[r].write_telemetry(tmp_path / f"ccl{r}.parquet")

    ts = [threading.Thread(target=work, args=(r,)) for r in (0, 1)]
    [t.start() for t in ts]
    [t.join(30) for t in ts]
    t0 = pq.read_table(tmp_path / "ccl0.parquet").to_pandas()
    t1 = pq.read_table(tmp_path / "ccl1.parquet").to_pandas()
    assert list(t0.columns) == COLUMNS
    assert len(t0) == 5 and len(t1) == 5
    ar = t0[t0.op_id == 0]
    assert sorted(ar.kind) == ["recv", "recv", "send", "send"] and set(ar.collective) == {"allreduce"}
    assert set(ar.bytes) == {20} and set(ar.peer) == {1}
    b0, b1 = t0[t0.op_id == 1], t1[t1.op_id == 1]
    assert list(b0.kind) == ["send"] and list(b1.kind) == ["recv"] and int(b1.bytes.iloc[0]) == 12
    s = b0.iloc[0]
    assert s.post_mono_ns <= s.send_start_mono_ns <= s.send_end_mono_ns
    assert s.send_queue_ns == s.send_start_mono_ns - s.post_mono_ns and np.isnan(s.recv_wait_ns)
    v = b1.iloc[0]
    assert v.recv_done_mono_ns >= v.recv_arrival_mono_ns and np.isnan(v.send_start_mono_ns)
    assert v.recv_wait_ns == max(0, v.recv_arrival_mono_ns - v.post_mono_ns)
    # CLOCK_REALTIME beside CLOCK_MONOTONIC: same durations within scheduling noise
    assert abs((v.recv_done_real_ns - v.post_real_ns) - (v.recv_done_mono_ns - v.post_mono_ns)) < 5e6
    assert abs(v.recv_done_real_ns / 1e9 - time.time()) < 60
    for c in comms:
        c.close()


def test_alltoall_bench_busbw_is_n_minus_one_over_n(cli):
    # 4 ranks: busbw = algbw x 3/4 (nccl-tests' all-to-all factor), every block checked against numpy.
    r = cli("runtime", "bench", "--op", "alltoall", "-n", "4", "--sizes", "64:64K", "--factor", "32",
            "--iters", "2", "--warmup", "1")
    assert r.returncode == 0, r.stderr
    assert "alltoall, algo direct" in r.stdout
    rows = [ROW.match(x) for x in r.stdout.splitlines() if ROW.match(x)]
    assert [int(m.group(1)) for m in rows] == [64, 2048, 65536]
    for m in rows:
        size = int(m.group(1))
        assert m.group(4) == "none"
        for g in (6, 10):
            t_us, algbw, busbw, wrong = float(m.group(g)), float(m.group(g + 1)), float(m.group(g + 2)), int(m.group(g + 3))
            assert wrong == 0
            assert abs(algbw - size / (t_us * 1e-6) / 1e9) <= 0.005 + 1e-9
            assert abs(busbw - size / (t_us * 1e-6) / 1e9 * 3 / 4) <= 0.005 + 1e-9


def test_alltoall_bench_bad_input(cli):
    r = cli("runtime", "bench", "--op", "alltoall", "-n", "3", "--sizes", "64")
    assert r.returncode == 2 and "--sizes: an all-to-all over 3 ranks" in r.stderr, r.stderr
    r = cli("runtime", "bench", "--op", "alltoall", "--algo", "ring", "-n", "2", "--sizes", "64")
    assert r.returncode == 2 and "--algo: alltoall runs with direct" in r.stderr, r.stderr


def test_alltoall_array_not_divisible_is_refused_naming_the_array():
    import pytest

    from fabriclab.runtime.errors import RuntimeInputError
    from fabriclab.runtime.plans import plan_json

    with pytest.raises(RuntimeInputError, match="array: an all-to-all over 4 ranks .* 10 elements is not a multiple of 4"):
        plan_json("alltoall", "direct", 4, 10, 4)


def test_a_communicators_group_is_in_its_telemetry(tmp_path):
    port = free_port()
    comms = [None, None]

    def make(r):
        comms[r] = Communicator(r, 2, "127.0.0.1", port, "t", telemetry=True, group="ep0")

    ts = [threading.Thread(target=make, args=(r,)) for r in (0, 1)]
    [t.start() for t in ts]
    [t.join(30) for t in ts]
    outs = [np.arange(4, dtype=np.int32) + 10 * r for r in (0, 1)]

    def work(r):
        comms[r].alltoall(outs[r])  # rank r's block 1-r goes over: one message each way
        comms[r].write_telemetry(tmp_path / f"ccl{r}.parquet")

    ts = [threading.Thread(target=work, args=(r,)) for r in (0, 1)]
    [t.start() for t in ts]
    [t.join(30) for t in ts]
    assert outs[0].tolist() == [0, 1, 10, 11] and outs[1].tolist() == [2, 3, 12, 13]
    t0 = pq.read_table(tmp_path / "ccl0.parquet")
    assert t0.schema.metadata[b"fabriclab_telemetry_schema"] == b"3"
    d = t0.to_pandas()
    assert list(d.columns) == COLUMNS and set(d.group) == {"ep0"} and set(d.collective) == {"alltoall"}
    # Rank 0 sends its block 1 ([8, 16)) and receives rank 1's block 0 into the same place.
    assert sorted(zip(d.kind, d.offset_bytes, d.bytes)) == [("recv", 8, 8), ("send", 8, 8)]
    for c in comms:
        c.close()

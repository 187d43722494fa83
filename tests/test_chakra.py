"""Chakra execution traces (docs/llm.md, "Chakra traces"): traces written
here byte by byte in protobuf's wire format (varint-framed GlobalMetadata
then Node messages, field numbers from Chakra's et_def.proto), run on a
two-host star whose times follow in closed form; bad traces refused with
exit 2 naming the rank and node."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from fabriclab import simulate
from fabriclab.errors import InputError
from fabriclab.scenario.model import Scenario

PY = str(Path(__file__).resolve().parents[1] / "python")
B = 100 * 10**9  # link rate, bit/s
RED = 300 * 8 * 10**9  # trace_jobs' default reduction rate, bit/s
COMP, SEND, RECV, COLL, MEM_LOAD = 4, 5, 6, 7, 2  # NodeType
ALL_REDUCE, BARRIER = 0, 9  # CollectiveCommType


def varint(x: int) -> bytes:
    out = bytearray()
    while True:
        b, x = x & 0x7F, x >> 7
        out.append(b | (0x80 if x else 0))
        if not x:
            return bytes(out)


def key(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def ld(field: int, payload: bytes) -> bytes:  # a length-delimited field
    return key(field, 2) + varint(len(payload)) + payload


def attr(name: str, *, i64: int | None = None, u64: int | None = None, s: str | None = None,
         b: bool | None = None) -> bytes:
    body = ld(1, name.encode())
    if i64 is not None:
        body += key(9, 0) + varint(i64)  # int64_val
    if u64 is not None:
        body += key(13, 0) + varint(u64)  # uint64_val
    if s is not None:
        body += ld(29, s.encode())  # string_val
    if b is not None:
        body += key(27, 0) + varint(int(b))  # bool_val
    return body


def node(nid: int, name: str, typ: int, deps=(), dur_us: int = 0, attrs=(), ctrl=()) -> bytes:
    body = key(1, 0) + varint(nid) + ld(2, name.encode()) + key(3, 0) + varint(typ)
    if ctrl:
        body += ld(4, b"".join(varint(d) for d in ctrl))  # packed ctrl_deps
    if deps:
        body += ld(5, b"".join(varint(d) for d in deps))  # packed data_deps
    if dur_us:
        body += key(7, 0) + varint(dur_us)
    for a in attrs:
        body += ld(10, a)
    return body


def write_trace(prefix: Path, ranks: list[list[bytes]]) -> None:
    meta = ld(1, b"0.0.4")  # GlobalMetadata.version
    for r, nodes in enumerate(ranks):
        Path(f"{prefix}.{r}.et").write_bytes(b"".join(varint(len(m)) + m for m in [meta, *nodes]))


def allreduce(nid, size, deps, pg=None, comm_type=ALL_REDUCE):
    a = [attr("comm_type", i64=comm_type), attr("comm_size", i64=size)] + ([attr("pg_name", s=pg)] if pg else [])
    return node(nid, "nccl:all_reduce", COLL, deps, attrs=a)


def _scenario(tmp_path, job: dict, hosts=2) -> Scenario:
    s = Scenario.from_dict({"backend": "flow", "flow_model": "fluid", "seed": 1,
                            "topology": {"kind": "star", "hosts": hosts, "link_rate_bps": B, "link_delay_ps": 0},
                            "trace_jobs": [{"path": "t/job", **job}]})
    s._base_dir = tmp_path
    return s


def wire_bytes(size):  # payload plus headers per 1460-byte segment (as tests/test_collective_sim.py)
    full, rest = divmod(size, 1460)
    return full * 1538 + (max(rest + 58, 64) + 20 if rest else 0)


def three_node(tmp_path, a_us=(100, 300), b_us=50, size=8 << 20):
    (tmp_path / "t").mkdir(exist_ok=True)
    write_trace(tmp_path / "t" / "job", [[node(1, "fwd", COMP, dur_us=a), allreduce(2, size, [1]),
                                          node(3, "step", COMP, [2], dur_us=b_us)] for a in a_us])


def test_three_node_trace_takes_the_hand_computed_critical_path(tmp_path):
    # Rank r: compute A_r, an allreduce of S bytes, compute B. A 2-rank ring allreduce: each rank sends its
    # half (w on the wire), reduces the half it receives (rho), then sends the reduced half (w). Equal A:
    # A + 2 w + rho + B.
    size = 8 << 20
    w = wire_bytes(size // 2) * 8 / B * 1e12
    rho = size // 2 * 8 / RED * 1e12
    three_node(tmp_path, (100, 100), 50, size)
    res = simulate(_scenario(tmp_path, {}))
    assert res.summary["trace_jobs"]["trace"]["iteration_times_ps"][0] == pytest.approx(
        100e6 + 2 * w + rho + 50e6, rel=1e-4)
    c = res.ccl
    assert c[c.kind == "send"].bytes.sum() == 2 * 2 * size // 2  # 2 ranks x 2 steps x S/2
    assert "llm_jobs" not in res.summary


def test_a_late_rank_holds_the_collective_by_hand(tmp_path):
    # A0 = 100 us, A1 = 300 us. Rank 0's first half leaves at A0 and is reduced on rank 1 at t1 = A0 + w + rho,
    # when rank 1 starts its second send while its first (begun at A1) has done p = t1 - A1 alone: the two share
    # rank 1's link, so the first ends at t1 + 2 (w - p). Rank 0 reduces it (rho) and sends its reduced half (w).
    size, a0, a1, b_us = 8 << 20, 100e6, 300e6, 50
    w = wire_bytes(size // 2) * 8 / B * 1e12
    rho = size // 2 * 8 / RED * 1e12
    three_node(tmp_path, (100, 300), b_us, size)
    res = simulate(_scenario(tmp_path, {}))
    t1 = a0 + w + rho
    expect = t1 + 2 * (w - (t1 - a1)) + rho + w + b_us * 1e6
    assert res.summary["trace_jobs"]["trace"]["iteration_times_ps"][0] == pytest.approx(expect, rel=1e-4)
    tl = res.timeline
    assert sorted(tl.kind.unique()) == ["allreduce", "compute"]
    # Node ids as the timeline's index; rank 0's allreduce begins when its compute ends.
    ar0 = tl[(tl.worker == 0) & (tl.kind == "allreduce")].iloc[0]
    assert ar0["index"] == 2 and ar0.start_ps == 100 * 10**6


def test_send_and_receive_pair_across_ranks(tmp_path):
    # Rank 0 computes 200 us then sends S bytes to rank 1, whose compute waits for them: 200 us + S on the
    # wire + 70 us.
    size = 1 << 20
    (tmp_path / "t").mkdir()
    send = [attr("comm_dst", i64=1), attr("comm_tag", i64=7), attr("comm_size", i64=size)]
    recv = [attr("comm_src", i64=0), attr("comm_tag", i64=7), attr("comm_size", i64=size)]
    write_trace(tmp_path / "t" / "job", [[node(1, "c", COMP, dur_us=200), node(2, "send", SEND, [1], attrs=send)],
                                         [node(5, "recv", RECV, attrs=recv), node(6, "c", COMP, [5], dur_us=70)]])
    res = simulate(_scenario(tmp_path, {}))
    expect = 200e6 + wire_bytes(size) * 8 / B * 1e12 + 70e6
    ends = res.jobs.groupby("worker").end_ps.max()
    assert ends[1] == pytest.approx(expect, rel=1e-4)
    # As chakra's PyTorch converter writes them: no comm_src / comm_dst, a pg_name of the two ranks instead.
    send, recv = (attr("pg_name", s="pp"), attr("comm_size", i64=size)), (attr("pg_name", s="pp"),)
    write_trace(tmp_path / "t" / "job", [[node(1, "c", COMP, dur_us=200), node(2, "send", SEND, [1], attrs=send)],
                                         [node(5, "recv", RECV, attrs=recv), node(6, "c", COMP, [5], dur_us=70)]])
    res = simulate(_scenario(tmp_path, {"groups": {"pp": [0, 1]}}))
    assert res.jobs.groupby("worker").end_ps.max()[1] == ends[1]


def test_json_and_gzip_forms_run_the_same_as_the_wire_form(tmp_path):
    three_node(tmp_path)
    wire = simulate(_scenario(tmp_path, {})).summary["trace_jobs"]["trace"]["iteration_times_ps"]
    for f in (tmp_path / "t").glob("*.et"):
        f.write_bytes(gzip.compress(f.read_bytes()))
    assert simulate(_scenario(tmp_path, {})).summary["trace_jobs"]["trace"]["iteration_times_ps"] == wire
    for f in (tmp_path / "t").glob("*.et"):
        f.unlink()
    for r, a in enumerate((100, 300)):  # Chakra's jsonizer form: protobuf JSON objects one after another
        objs = [{"version": "0.0.4"},
                {"id": "1", "name": "fwd", "type": "COMP_NODE", "durationMicros": str(a)},
                {"id": "2", "name": "ar", "type": "COMM_COLL_NODE", "dataDeps": ["1"],
                 "attr": [{"name": "comm_type", "int64Val": "0"}, {"name": "comm_size", "int64Val": str(8 << 20)}]},
                {"id": "3", "name": "step", "type": "COMP_NODE", "dataDeps": ["2"], "durationMicros": "50"}]
        (tmp_path / "t" / f"job.{r}.json").write_text("\n".join(json.dumps(o, indent=1) for o in objs))
    assert simulate(_scenario(tmp_path, {})).summary["trace_jobs"]["trace"]["iteration_times_ps"] == wire


def test_cpu_ops_pass_their_dependencies_through_unless_serial(tmp_path):
    # A CPU op of 1 ms and a collective's host-side launch of 0.2 ms (a COMM_COLL_NODE marked is_cpu_op, as
    # older converters wrote it) between A and the allreduce: skipped, the step is the three-node one;
    # serial, 1.2 ms more.
    (tmp_path / "t").mkdir()
    cpu = attr("is_cpu_op", b=True)
    write_trace(tmp_path / "t" / "job", [[node(1, "fwd", COMP, dur_us=100), node(2, "cpu", COMP, [1], 1000, [cpu]),
                                          node(3, "c10d::allreduce_", COLL, [2], 200, [cpu]),
                                          allreduce(4, 8 << 20, [3]), node(5, "step", COMP, [4], dur_us=50)]] * 2)
    skip = simulate(_scenario(tmp_path, {})).summary["trace_jobs"]["trace"]["iteration_times_ps"][0]
    serial = simulate(_scenario(tmp_path, {"cpu_ops": "serial"})).summary["trace_jobs"]["trace"]
    assert serial["iteration_times_ps"][0] - skip == pytest.approx(1200e6, rel=1e-6)
    three_node(tmp_path, (100, 100), 50, 8 << 20)
    assert skip == simulate(_scenario(tmp_path, {})).summary["trace_jobs"]["trace"]["iteration_times_ps"][0]


def test_skipped_cpu_ops_keep_the_gpu_launch_order(tmp_path):
    # The converter's shape: GPU nodes depend only on the CPU operators that launched them, and those only on
    # earlier CPU operators. CPU op 1 launches kernel K (300 us); CPU op 3 (after 1) launches the allreduce 4 and,
    # after it, kernel 5 (100 us). With CPU ops skipped nothing orders the GPU nodes but their launch: the
    # allreduce waits for K (launched before it: starts at 300 us), kernel 5 follows K on the one stream (300 to
    # 400 us, beside the allreduce), and the step is 300 us + 2 w + rho (not 2 w + rho from t = 0).
    (tmp_path / "t").mkdir()
    size, cpu = 8 << 20, attr("is_cpu_op", b=True)
    w, rho = wire_bytes(size // 2) * 8 / B * 1e12, size // 2 * 8 / RED * 1e12
    write_trace(tmp_path / "t" / "job", [[node(1, "aten::mm", COMP, dur_us=10, attrs=[cpu]),
                                          node(2, "gemm", COMP, [1], 300), node(3, "c10d::allreduce_", COMP, [1], 10,
                                                                                [cpu]),
                                          allreduce(4, size, [3]), node(5, "copy", COMP, [3], 100)]] * 2)
    res = simulate(_scenario(tmp_path, {}))
    tl = res.timeline
    assert list(tl[tl.kind == "allreduce"].start_ps) == [300 * 10**6] * 2
    assert list(tl[tl["index"] == 5].start_ps) == [300 * 10**6] * 2
    assert res.summary["trace_jobs"]["trace"]["iteration_times_ps"][0] == pytest.approx(300e6 + 2 * w + rho,
                                                                                        rel=1e-4)


def test_kernels_chain_per_stream(tmp_path):
    # Rank 0 receives S bytes (rank 1 sends them after 200 us of compute); kernel 2 (100 us) needs them, and
    # kernel 3 (50 us), launched after it, does not. On one stream kernel 3 waits for kernel 2 (starts at
    # 200 us + S on the wire + 100 us); on streams 1 and 2 it runs at once (starts at 0).
    size = 1 << 20
    (tmp_path / "t").mkdir()
    arrive = 200e6 + wire_bytes(size) * 8 / B * 1e12
    for streams, k3_start in ((None, arrive + 100e6), ((1, 2), 0)):
        st = [[attr("stream", i64=x)] for x in streams] if streams else [[], []]
        recv = node(1, "recv", RECV, attrs=[attr("comm_src", i64=1), attr("comm_size", i64=size)])
        send = node(2, "send", SEND, [1], attrs=[attr("comm_dst", i64=0), attr("comm_size", i64=size)])
        write_trace(tmp_path / "t" / "job", [[recv, node(2, "k2", COMP, [1], 100, st[0]),
                                              node(3, "k3", COMP, (), 50, st[1])],
                                             [node(1, "c", COMP, dur_us=200), send]])
        tl = simulate(_scenario(tmp_path, {})).timeline
        r0 = tl[tl.worker == 0].set_index("index")
        assert r0.start_ps[2] == pytest.approx(arrive, rel=1e-4)
        assert r0.start_ps[3] == pytest.approx(k3_start, rel=1e-4, abs=1)


def test_control_dependencies_order_only_when_asked(tmp_path):
    # An allreduce (launched first: id 1) that only a control dependency ties to compute A (500 us, id 2), then
    # B (50 us) after it. By data_deps alone the allreduce runs beside A (2 w + rho > 500 us); with ctrl_deps it
    # waits: 500 us more. A control dependency on a node absent from the file is refused only when honoured.
    (tmp_path / "t").mkdir()
    size = 8 << 20
    w, rho = wire_bytes(size // 2) * 8 / B * 1e12, size // 2 * 8 / RED * 1e12
    ar = node(1, "ar", COLL, attrs=[attr("comm_type", i64=ALL_REDUCE), attr("comm_size", i64=size)], ctrl=[2])
    write_trace(tmp_path / "t" / "job", [[ar, node(2, "a", COMP, dur_us=500), node(3, "b", COMP, [1], 50)]] * 2)
    t = {c: simulate(_scenario(tmp_path, {"ctrl_deps": c})).summary["trace_jobs"]["trace"]["iteration_times_ps"][0]
         for c in (False, True)}
    assert t[False] == pytest.approx(2 * w + rho + 50e6, rel=1e-4)
    assert t[True] == pytest.approx(500e6 + 2 * w + rho + 50e6, rel=1e-4)
    write_trace(tmp_path / "t" / "job", [[node(1, "a", COMP, dur_us=5, ctrl=[99])]] * 2)
    simulate(_scenario(tmp_path, {}))
    with pytest.raises(InputError, match=r"rank 0 \(job.0.et\): node 1 \('a'\) has a control dependency on node 99"):
        simulate(_scenario(tmp_path, {"ctrl_deps": True}))


def test_process_groups_name_their_ranks(tmp_path):
    # Four ranks; pg "a" = ranks 0, 1 and pg "b" = 2, 3: two 2-rank allreduces side by side, each as above.
    (tmp_path / "t").mkdir()
    write_trace(tmp_path / "t" / "job", [[node(1, "c", COMP, dur_us=100), allreduce(2, 8 << 20, [1], pg="ab"[r // 2])]
                                         for r in range(4)])
    res = simulate(_scenario(tmp_path, {"groups": {"a": [0, 1], "b": [2, 3]}}, hosts=4))
    half = 4 << 20
    expect = 100e6 + 2 * wire_bytes(half) * 8 / B * 1e12 + half * 8 / RED * 1e12
    assert res.summary["trace_jobs"]["trace"]["iteration_times_ps"][0] == pytest.approx(expect, rel=1e-4)
    # Each group named by its pg_name, in groups.parquet and on its collective's ccl.parquet rows.
    assert dict(zip(res.groups.name, res.groups.ranks)) == {"a": "0 1", "b": "2 3"}
    assert set(res.groups.label) == {"a", "b"}
    assert set(zip(res.ccl.group, res.ccl.host)) == {("a", "h0"), ("a", "h1"), ("b", "h2"), ("b", "h3")}


def _cli(tmp_path, job_toml: str = "", hosts: int = 2, out="out"):
    (tmp_path / "s.toml").write_text(f'[topology]\nkind = "star"\nhosts = {hosts}\n\n[[trace_jobs]]\n'
                                     f'path = "t/job"\n{job_toml}\n')
    return subprocess.run([sys.executable, "-m", "fabriclab.cli", "run", str(tmp_path / "s.toml"), "--out",
                           str(tmp_path / out)], capture_output=True, text=True, env={"PYTHONPATH": PY},
                          check=False, cwd=tmp_path)


def _bad(tmp_path, ranks, needles, job_toml=""):
    (tmp_path / "t").mkdir()
    write_trace(tmp_path / "t" / "job", ranks)
    r = _cli(tmp_path, job_toml)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    for n in needles:
        assert n in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_missing_dependency_exits_2_naming_the_node(tmp_path):
    ok = [node(1, "a", COMP, dur_us=1)]
    _bad(tmp_path, [ok, [node(1, "a", COMP, dur_us=1), node(4, "b", COMP, [3], dur_us=1)]],
         ["trace_jobs[0]", "rank 1", "node 4", "node 3"])


def test_unknown_collective_exits_2_naming_the_node(tmp_path):
    _bad(tmp_path, [[allreduce(9, 1024, [], comm_type=c)] for c in (BARRIER, BARRIER)],
         ["rank 0", "node 9", "BARRIER"])


@pytest.mark.parametrize("case, needles", [
    ("recv_without_send", ["rank 1", "node 5", "without its send"]),
    ("no_peer", ["rank 0", "node 2", "comm_dst"]),
    ("size_mismatch", ["rank 1", "node 2", "1024 bytes", "2048 bytes"]),
    ("unknown_group", ["node 2", "'tp'", "groups.tp"]),
    ("memory_node", ["node 1", "MEM_LOAD_NODE"]),
    ("string_size", ["node 2", "comm_size must be an integer"]),
    ("cycle", ["node 1", "cycle"]),
    ("deadlock", ["rank 0 (job.0.et): node 5 ('recv') can never run", "circle"]),
])
def test_what_cannot_be_honoured_exits_2(tmp_path, case, needles):
    recv = node(5, "recv", RECV, attrs=[attr("comm_src", i64=0), attr("comm_size", i64=64)])
    send_to = lambda d, nid=2, deps=(): node(nid, "send", SEND, deps,
                                             attrs=[attr("comm_dst", i64=d), attr("comm_size", i64=64)])
    recv_from = lambda s, nid=5, deps=(): node(nid, "recv", RECV, deps,
                                               attrs=[attr("comm_src", i64=s), attr("comm_size", i64=64)])
    ranks = {
        "recv_without_send": [[node(1, "a", COMP, dur_us=1)], [recv]],
        "no_peer": [[node(2, "send", SEND, attrs=[attr("comm_size", i64=64)])], [recv]],
        "size_mismatch": [[allreduce(2, 2048, [])], [allreduce(2, 1024, [])]],
        "unknown_group": [[allreduce(2, 1024, [], pg="tp")]] * 2,
        "memory_node": [[node(1, "load", MEM_LOAD)]] * 2,
        "string_size": [[node(2, "ar", COLL, attrs=[attr("comm_type", i64=0), attr("comm_size", s="1MB")])]] * 2,
        "cycle": [[node(1, "a", COMP, [2], dur_us=1), node(2, "b", COMP, [1], dur_us=1)]] * 2,
        # Each rank receives before it sends to the other.
        "deadlock": [[recv_from(1), send_to(1, deps=[5])], [recv_from(0), send_to(0, deps=[5])]],
    }[case]
    _bad(tmp_path, ranks, needles)


def test_same_trace_same_bytes(tmp_path):
    three_node(tmp_path)
    assert _cli(tmp_path, out="a").returncode == 0
    assert _cli(tmp_path, out="b").returncode == 0
    for name in ("jobs.parquet", "timeline.parquet", "ccl.parquet", "groups.parquet", "summary.json"):
        a, b = (tmp_path / o / name for o in ("a", "b"))
        if name == "summary.json":  # wall-clock fields aside
            da, db = (json.loads(p.read_text()) for p in (a, b))
            assert da["trace_jobs"] == db["trace_jobs"]
        else:
            assert a.read_bytes() == b.read_bytes(), name


def test_trace_show_counts_nodes_and_names_the_groups(tmp_path):
    (tmp_path / "t").mkdir()
    write_trace(tmp_path / "t" / "job", [[node(1, "c", COMP, dur_us=100), allreduce(2, 4096, [1], pg="dp"),
                                          allreduce(3, 1024, [2], pg="dp"), allreduce(4, 512, [3])]] * 2)
    r = subprocess.run([sys.executable, "-m", "fabriclab.cli", "trace", "show", str(tmp_path / "t" / "job")],
                       capture_output=True, text=True, env={"PYTHONPATH": PY, "COLUMNS": "200"}, check=False)
    assert r.returncode == 0, r.stderr
    assert "2 ranks" in r.stdout and r.stdout.count("COMM_COLL_NODE 3") == 2 and r.stdout.count("COMP_NODE 1") == 2
    assert r.stdout.count("ALL_REDUCE dp: 2, 5,120 B") == 2 and r.stdout.count("ALL_REDUCE -: 1, 512 B") == 2
    assert "process groups named: dp" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "fabriclab.cli", "trace", "show", str(tmp_path / "nothing")],
                         capture_output=True, text=True, env={"PYTHONPATH": PY}, check=False)
    assert bad.returncode == 2 and "nothing.0.et" in bad.stderr and "Traceback" not in bad.stderr


def test_each_collective_sends_its_closed_form_bytes(tmp_path):
    # Three ranks, one collective of each kind fabriclab runs (comm_type codes of Chakra's schema), S bytes.
    # Bytes sent by all ranks together: ring allreduce 2 (n - 1) S; ring allgather and reduce-scatter, direct
    # all-to-all (n - 1) S (each rank (n - 1)/n of S); chain broadcast and reduce (n - 1) S (one S per hop).
    n, size = 3, 3 << 20
    codes = {"allreduce": 0, "reduce": 1, "allgather": 2, "broadcast": 5, "alltoall": 6, "reduce_scatter": 7}
    (tmp_path / "t").mkdir()
    write_trace(tmp_path / "t" / "job", [[allreduce(10 + k, size, [10 + k - 1] if k else [], comm_type=c)
                                          for k, c in enumerate(codes.values())]] * n)
    res = simulate(_scenario(tmp_path, {}, hosts=n))
    sent = res.ccl[res.ccl.kind == "send"].groupby("collective").bytes.sum().to_dict()
    assert sent == {"allreduce": 2 * (n - 1) * size, **{op: (n - 1) * size for op in codes if op != "allreduce"}}
    assert sorted(res.timeline.kind.unique()) == sorted(codes)


def test_roofline_times_nodes_with_num_ops(tmp_path):
    # A GEMM of 2e9 operations on 1e8 bytes, traced at 7 us: replayed, 7 us; at 1 TFLOP/s, 2 ms; with memory at
    # 0.8 Tbit/s (1 ms for the bytes) still 2 ms; at 0.16 Tbit/s the bytes take 5 ms.
    (tmp_path / "t").mkdir()
    gemm = node(1, "gemm", COMP, dur_us=7, attrs=[attr("num_ops", i64=2 * 10**9), attr("tensor_size", u64=10**8)])
    write_trace(tmp_path / "t" / "job", [[gemm]] * 2)

    def step(**kw):
        return simulate(_scenario(tmp_path, kw)).summary["trace_jobs"]["trace"]["iteration_times_ps"][0]

    assert step() == 7 * 10**6
    assert step(peak_flops=1e12) == 2 * 10**9
    assert step(peak_flops=1e12, memory_bps=8 * 10**11) == 2 * 10**9
    assert step(peak_flops=1e12, memory_bps=16 * 10**10) == 5 * 10**9


def test_a_trace_runs_beside_an_llm_job(tmp_path):
    # Both lower onto graph jobs of one run: each summary section holds its own job, and a trace job alone on
    # hosts 2, 3 (a star: no link shared with the LLM job on hosts 0, 1) takes its three-node time.
    three_node(tmp_path, (100, 100), 50, 8 << 20)
    llm = {"name": "gpt", "model": "custom", "hosts": [0, 1], "dp": 2, "micro_batches": 1,
           "shape": {"hidden": 64, "layers": 2, "heads": 4, "ffn_hidden": 256, "vocab": 128, "seq_len": 16}}
    s = Scenario.from_dict({"backend": "flow", "flow_model": "fluid", "seed": 1,
                            "topology": {"kind": "star", "hosts": 4, "link_rate_bps": B, "link_delay_ps": 0},
                            "llm_jobs": [llm], "trace_jobs": [{"path": "t/job", "hosts": [2, 3]}]})
    s._base_dir = tmp_path
    res = simulate(s)
    assert list(res.summary["llm_jobs"]) == ["gpt"] and list(res.summary["trace_jobs"]) == ["trace"]
    w, rho = wire_bytes(4 << 20) * 8 / B * 1e12, (4 << 20) * 8 / RED * 1e12
    assert res.summary["trace_jobs"]["trace"]["iteration_times_ps"][0] == pytest.approx(100e6 + 2 * w + rho + 50e6,
                                                                                        rel=1e-4)
    assert set(res.jobs.job) == {"gpt", "trace"}
    assert set(res.ccl[res.ccl.collective == "allreduce"].host) >= {"h2", "h3"}


def test_a_trace_runs_on_the_packet_backend(tmp_path):
    # The three-node trace packet by packet: each rank sends its two halves (S bytes in all, counted on
    # ccl.parquet), and the step cannot beat the payload at line rate: A + 2 (S/2) / B + B_compute.
    size = 8 << 20
    three_node(tmp_path, (100, 100), 50, size)
    s = _scenario(tmp_path, {})
    s = Scenario.from_dict({**s.model_dump(by_alias=True, exclude_unset=True), "backend": "packet"})
    s._base_dir = tmp_path
    res = simulate(s)
    c = res.ccl
    assert c[c.kind == "send"].groupby("host").bytes.sum().to_dict() == {"h0": size, "h1": size}
    step = res.summary["trace_jobs"]["trace"]["iteration_times_ps"][0]
    assert step >= 100e6 + 2 * (size // 2) * 8 / B * 1e12 + 50e6
    tl = res.timeline
    ar_end = tl[tl.kind == "allreduce"].groupby("worker").end_ps.max()
    b_start = tl[tl["index"] == 3].set_index("worker").start_ps
    assert (b_start == ar_end).all()


def test_group_names_follow_the_registered_apps_only(tmp_path):
    # An LLM job (TP 2: groups "tp0", "tp1"; DP 2: "dp0", "dp1", numbered by their index) beside a traced job
    # (pg "a" and "b", named by their pg_name). The graph apps are the registry's (sim.apps.APPS), handed to the
    # collection: a GraphApp subclass merely defined, here one claiming the LLM jobs and naming groups by label
    # alone, changes nothing (found through GraphApp.__subclasses__(), it made "tp" of "tp0" and "tp1").
    from fabriclab.sim.apps.graph import GraphApp

    class Unregistered(GraphApp):
        numbered_groups = False

        def jobs(self, s):
            return s.llm_jobs

    (tmp_path / "t").mkdir()
    write_trace(tmp_path / "t" / "job", [[node(1, "c", COMP, dur_us=10), allreduce(2, 1 << 16, [1], pg="ab"[r // 2])]
                                         for r in range(4)])
    s = Scenario.from_dict({"backend": "flow", "flow_model": "fluid", "seed": 1,
                            "topology": {"kind": "star", "hosts": 4, "link_rate_bps": B, "link_delay_ps": 0},
                            "trace_jobs": [{"path": "t/job", "groups": {"a": [0, 1], "b": [2, 3]}}],
                            "llm_jobs": [{"name": "llm", "model": "custom", "tp": 2, "dp": 2, "micro_batches": 1,
                                          "shape": {"hidden": 8, "layers": 1, "heads": 2, "ffn_hidden": 32,
                                                    "vocab": 16, "seq_len": 4}}]})
    s._base_dir = tmp_path
    assert Unregistered in GraphApp.__subclasses__()
    g = simulate(s).groups
    names = {job: sorted(g.name[g.job == job]) for job in ("llm", "trace")}
    assert names == {"llm": ["dp0", "dp1", "tp0", "tp1"], "trace": ["a", "b"]}

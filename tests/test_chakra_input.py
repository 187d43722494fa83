"""Chakra traces as the reader meets them (docs/llm.md, "Chakra traces"):
each scalar attribute type hand-encoded in protobuf's wire format, and
what cannot be read or honoured refused with exit 2 naming the job, rank,
file and node (traces written byte by byte, as in tests/test_chakra.py)."""

from __future__ import annotations

import gzip
import json
import struct

import pytest
from fabriclab import simulate
from fabriclab.sim.apps.chakra import read_rank
from test_chakra import (
    COMP,
    RECV,
    SEND,
    B,
    _bad,
    _cli,
    _scenario,
    allreduce,
    attr,
    key,
    ld,
    node,
    varint,
    wire_bytes,
    write_trace,
)


def raw_attr(name: str, body: bytes) -> bytes:
    return ld(1, name.encode()) + body


def zigzag(x: int) -> int:
    return (x << 1) ^ (x >> 63)


# AttributeProto's integer members (et_def.proto): field number and the value's encoding, by hand.
SCALARS = {
    "int32_val": lambda v: key(7, 0) + varint(v & (2**64 - 1)),  # negative int32: sign-extended to 10 bytes
    "int64_val": lambda v: key(9, 0) + varint(v & (2**64 - 1)),
    "uint32_val": lambda v: key(11, 0) + varint(v),
    "uint64_val": lambda v: key(13, 0) + varint(v),
    "sint32_val": lambda v: key(15, 0) + varint(zigzag(v)),
    "sint64_val": lambda v: key(17, 0) + varint(zigzag(v)),
    "fixed32_val": lambda v: key(19, 5) + struct.pack("<I", v),
    "fixed64_val": lambda v: key(21, 1) + struct.pack("<Q", v),
    "sfixed32_val": lambda v: key(23, 5) + struct.pack("<i", v),
    "sfixed64_val": lambda v: key(25, 1) + struct.pack("<q", v),
}
SIGNED = {"int32_val", "int64_val", "sint32_val", "sint64_val", "sfixed32_val", "sfixed64_val"}


@pytest.mark.parametrize("kind", sorted(SCALARS))
def test_each_integer_attribute_type_reads_its_value(tmp_path, kind):
    values = [0, 1, 300, 2**31 - 1] + ([-1, -300, -(2**31)] if kind in SIGNED else [2**32 - 1])
    attrs = [raw_attr(f"a{k}", SCALARS[kind](v)) for k, v in enumerate(values)]
    write_trace(tmp_path / "job", [[node(1, "n", COMP, attrs=attrs)]])
    (nd,) = read_rank(tmp_path / "job.0.et")
    assert nd.attrs == {f"a{k}": v for k, v in enumerate(values)}


def test_other_scalar_types_read_their_value(tmp_path):
    attrs = [raw_attr("d", key(3, 1) + struct.pack("<d", 2.5)), raw_attr("f", key(5, 5) + struct.pack("<f", 0.5)),
             raw_attr("b", key(27, 0) + varint(1)), raw_attr("s", ld(29, b"dp0")), raw_attr("y", ld(31, b"\x00\x01")),
             raw_attr("dims", ld(28, ld(1, bytes([1, 0, 1]))))]  # bool_list: packed bools
    write_trace(tmp_path / "job", [[node(1, "n", COMP, attrs=attrs)]])
    (nd,) = read_rank(tmp_path / "job.0.et")
    assert nd.attrs == {"d": 2.5, "f": 0.5, "b": True, "s": "dp0", "y": b"\x00\x01", "dims": [True, False, True]}


def test_send_and_receive_with_int32_attributes_as_astra_sim_reads_them(tmp_path):
    # comm_src, comm_dst and comm_tag as int32_val (ASTRA-sim's feeder reads them so), comm_size as uint64_val:
    # rank 0 computes 200 us and sends S bytes; rank 1 computes 70 us after they arrive.
    size, i32, u64 = 1 << 20, SCALARS["int32_val"], SCALARS["uint64_val"]
    (tmp_path / "t").mkdir()
    send = [raw_attr("comm_dst", i32(1)), raw_attr("comm_tag", i32(3)), raw_attr("comm_size", u64(size))]
    recv = [raw_attr("comm_src", i32(0)), raw_attr("comm_tag", i32(3)), raw_attr("comm_size", u64(size))]
    write_trace(tmp_path / "t" / "job", [[node(1, "c", COMP, dur_us=200), node(2, "send", SEND, [1], attrs=send)],
                                         [node(5, "recv", RECV, attrs=recv), node(6, "c", COMP, [5], dur_us=70)]])
    res = simulate(_scenario(tmp_path, {}))
    assert res.jobs.groupby("worker").end_ps.max()[1] == pytest.approx(
        200e6 + wire_bytes(size) * 8 / B * 1e12 + 70e6, rel=1e-4)


def _run(tmp_path, needles, job_toml=""):
    r = _cli(tmp_path, job_toml)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    for n in needles:
        assert n in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_a_corrupt_gzip_file_exits_2_naming_the_rank(tmp_path):
    # A gzip header, then a deflate stream whose first block has the invalid block type 3: zlib's error.
    (tmp_path / "t").mkdir()
    write_trace(tmp_path / "t" / "job", [[node(1, "a", COMP, dur_us=1)]] * 2)
    (tmp_path / "t" / "job.1.et").write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 30)
    _run(tmp_path, ["trace_jobs[0].path: rank 1 (job.1.et)", "cannot read"])
    (tmp_path / "t" / "job.1.et").write_bytes(gzip.compress(b"\x05abc")[:-9])  # cut off
    _run(tmp_path, ["trace_jobs[0].path: rank 1 (job.1.et)"])


def _json(tmp_path, objs_per_rank):
    (tmp_path / "t").mkdir()
    for r, objs in enumerate(objs_per_rank):
        (tmp_path / "t" / f"job.{r}.json").write_text("\n".join(json.dumps(o) for o in objs))


def test_json_without_its_metadata_object_exits_2(tmp_path):
    n = {"id": "1", "name": "a", "type": "COMP_NODE", "durationMicros": "5"}
    _json(tmp_path, [[n, {**n, "id": "2"}]] * 2)
    _run(tmp_path, ["rank 0 (job.0.json)", "JSON object 0 is not Chakra's GlobalMetadata", "durationMicros"])


def test_json_unknown_node_type_name_exits_2(tmp_path):
    _json(tmp_path, [[{"version": "0.0.4"}, {"id": "1", "name": "a", "type": "FUTURE_NODE"}]] * 2)
    _run(tmp_path, ["rank 0 (job.0.json)", "JSON object 1", "FUTURE_NODE", "NodeType"])


@pytest.mark.parametrize("code, name", [(8, "STORAGE_NODE"), (9, "BATCH_NODE"), (10, "CHECKPOINT_NODE")])
def test_newer_node_types_are_refused_by_name(tmp_path, code, name):
    _bad(tmp_path, [[node(4, "x", code)]] * 2, ["rank 0 (job.0.et): node 4 ('x')", f"{name} cannot be honoured"])


def test_a_gap_in_the_rank_files_names_the_missing_file(tmp_path):
    (tmp_path / "t").mkdir()
    write_trace(tmp_path / "t" / "job", [[node(1, "a", COMP, dur_us=1)]] * 3)
    (tmp_path / "t" / "job.1.et").unlink()
    _run(tmp_path, ["trace_jobs[0].path", "job.1.et is missing", "job.2.et"])


def test_a_duration_past_the_core_s_range_exits_2(tmp_path):
    _bad(tmp_path, [[node(7, "long", COMP, dur_us=2**63)]] * 2, ["rank 0 (job.0.et): node 7 ('long')",
                                                               f"duration_micros {2**63}"])


LIST = raw_attr("comm_size", ld(10, ld(1, varint(64))))  # int64_list (a list type the reader does not decode)


@pytest.mark.parametrize("case, needles", [
    ("involved_dim", ["node 2", "involved_dim [True, False]"]),
    ("duplicate_id", ["rank 0 (job.0.et)", "node id 3 appears twice"]),
    ("id_above_u32", ["node 4294967296", "ids above 4294967295"]),
    ("fewer_collectives", ["rank 0 (job.0.et): node 3", "collective 2", "rank 1 joins only 1"]),
    ("list_size", ["node 2", "comm_size must be an integer; got a list"]),
    ("double_size", ["node 2", "comm_size must be an integer; got 64.0"]),
    ("zero_size", ["node 2", "needs comm_size, a positive number of bytes; got 0"]),
    ("group_rank", ["trace_jobs[0].groups.g", "rank 5", "0..1"]),
])
def test_more_that_cannot_be_honoured_exits_2(tmp_path, case, needles):
    dims = raw_attr("involved_dim", ld(28, ld(1, bytes([1, 0]))))
    coll = lambda *a: node(2, "ar", 7, attrs=[attr("comm_type", i64=0), *a])
    ranks, toml = {
        "involved_dim": ([[coll(attr("comm_size", i64=64), dims)]] * 2, ""),
        "duplicate_id": ([[node(3, "a", COMP), node(3, "b", COMP)]] * 2, ""),
        "id_above_u32": ([[node(2**32, "a", COMP)]] * 2, ""),
        "fewer_collectives": ([[allreduce(2, 64, []), allreduce(3, 64, [2])], [allreduce(2, 64, [])]], ""),
        "list_size": ([[coll(LIST)]] * 2, ""),
        "double_size": ([[coll(raw_attr("comm_size", key(3, 1) + struct.pack("<d", 64.0)))]] * 2, ""),
        "zero_size": ([[allreduce(2, 0, [])]] * 2, ""),
        "group_rank": ([[allreduce(2, 64, [], pg="g")]] * 2, "groups = { g = [0, 5] }"),
    }[case]
    _bad(tmp_path, ranks, needles, toml)


def test_sends_pair_with_receives_by_tag(tmp_path):
    # Rank 0 sends S1 with tag 1, then S2 with tag 2; rank 1 receives tag 2 first, then tag 1, then computes
    # 70 us. Paired within each tag (not by order alone) the trace runs: both messages cross rank 0's link one
    # after the other (or sharing it: the same last byte), so rank 1 ends at (S1 + S2 on the wire) + 70 us.
    s1, s2 = 1 << 20, 3 << 20
    msg = lambda t, nid, peer, size, tag: node(
        nid, t, SEND if t == "send" else RECV, attrs=[attr("comm_dst" if t == "send" else "comm_src", i64=peer),
                                                     attr("comm_tag", i64=tag), attr("comm_size", i64=size)])
    (tmp_path / "t").mkdir()
    write_trace(tmp_path / "t" / "job", [[msg("send", 1, 1, s1, 1), msg("send", 2, 1, s2, 2)],
                                         [msg("recv", 5, 0, s2, 2), msg("recv", 6, 0, s1, 1),
                                          node(7, "c", COMP, [6], dur_us=70)]])
    res = simulate(_scenario(tmp_path, {}))
    expect = (wire_bytes(s1) + wire_bytes(s2)) * 8 / B * 1e12 + 70e6
    assert res.jobs.groupby("worker").end_ps.max()[1] == pytest.approx(expect, rel=1e-4)


def test_a_run_reads_each_rank_once_and_a_changed_file_again(tmp_path, monkeypatch):
    # The estimate and the lowering share the parsed ranks through the job's configuration, not a module cache:
    # one read per rank per run; a rewritten file is read afresh by the same scenario object.
    from fabriclab.sim.apps import trace

    reads = []
    real = trace.read_rank
    monkeypatch.setattr(trace, "read_rank", lambda f, where=None: reads.append(f.name) or real(f, where))
    (tmp_path / "t").mkdir()
    write_trace(tmp_path / "t" / "job", [[node(1, "a", COMP, dur_us=10)]] * 2)
    s = _scenario(tmp_path, {})
    assert simulate(s).summary["trace_jobs"]["trace"]["iteration_times_ps"] == [10 * 10**6]
    assert sorted(reads) == ["job.0.et", "job.1.et"]
    write_trace(tmp_path / "t" / "job", [[node(1, "a", COMP, dur_us=300)]] * 2)  # a 2-byte varint: a new size
    assert simulate(s).summary["trace_jobs"]["trace"]["iteration_times_ps"] == [300 * 10**6]
    assert len(reads) == 4

"""A reader for MLCommons Chakra execution traces (the format ASTRA-sim
consumes): one file per rank, ``<prefix>.<rank>.et``, holding a
``GlobalMetadata`` message and then ``Node`` messages, each preceded by its
length as a varint; gzip-compressed files are read too. Chakra's JSON form
(its jsonizer's output: the same messages as protobuf JSON, one object
after another) is accepted from ``<prefix>.<rank>.json``.

The messages are described here from Chakra's public schema
(schema/protobuf/et_def.proto, package ChakraProtoMsg; field numbers and
enum values as published) and decoded with protobuf's own runtime; what a
node means is the lowering's business (``fabriclab.sim.apps.trace``).
Fields not described here (inputs, outputs, list attributes other than
bool_list) are skipped as unknown fields."""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ...scenario.base import ScenarioError

# ChakraProtoMsg.NodeType and CollectiveCommType (et_def.proto).
NODE_TYPES = ("INVALID_NODE", "METADATA_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE", "COMP_NODE",
              "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE", "STORAGE_NODE", "BATCH_NODE",
              "CHECKPOINT_NODE")
COMM_TYPES = ("ALL_REDUCE", "REDUCE", "ALL_GATHER", "GATHER", "SCATTER", "BROADCAST", "ALL_TO_ALL",
              "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER")

# AttributeProto's scalar members of its `value` oneof: field number, name, descriptor type.
_SCALARS = [(3, "double_val", 1), (5, "float_val", 2), (7, "int32_val", 5), (9, "int64_val", 3),
            (11, "uint32_val", 13), (13, "uint64_val", 4), (15, "sint32_val", 17), (17, "sint64_val", 18),
            (19, "fixed32_val", 7), (21, "fixed64_val", 6), (23, "sfixed32_val", 15), (25, "sfixed64_val", 16),
            (27, "bool_val", 8), (29, "string_val", 9), (31, "bytes_val", 12)]
_BOOL_LIST = 28  # bool_list (BoolList): involved_dim in ASTRA-sim's traces


@dataclass
class TraceNode:
    id: int
    name: str
    type: str
    data_deps: list[int]
    ctrl_deps: list[int]
    duration_micros: int
    attrs: dict = field(default_factory=dict)


@lru_cache(maxsize=1)
def _classes():
    """The Node and GlobalMetadata message classes, built from descriptors."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="fabriclab_chakra.proto", package="fabriclab_chakra",
                                           syntax="proto3")
    enum = f.enum_type.add(name="NodeType")
    for i, n in enumerate(NODE_TYPES):
        enum.value.add(name=n, number=i)
    bools = f.message_type.add(name="BoolList")
    bools.field.add(name="values", number=1, type=F.TYPE_BOOL, label=F.LABEL_REPEATED)
    attr = f.message_type.add(name="AttributeProto")
    attr.oneof_decl.add(name="value")
    attr.field.add(name="name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    for num, name, typ in _SCALARS:
        attr.field.add(name=name, number=num, type=typ, label=F.LABEL_OPTIONAL, oneof_index=0)
    attr.field.add(name="bool_list", number=_BOOL_LIST, type=F.TYPE_MESSAGE, type_name=".fabriclab_chakra.BoolList",
                   label=F.LABEL_OPTIONAL, oneof_index=0)
    meta = f.message_type.add(name="GlobalMetadata")
    meta.field.add(name="version", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    meta.field.add(name="attr", number=2, type=F.TYPE_MESSAGE, type_name=".fabriclab_chakra.AttributeProto",
                   label=F.LABEL_REPEATED)
    node = f.message_type.add(name="Node")
    for num, name, typ, label in [(1, "id", F.TYPE_UINT64, F.LABEL_OPTIONAL), (2, "name", F.TYPE_STRING, F.LABEL_OPTIONAL),
                                  (4, "ctrl_deps", F.TYPE_UINT64, F.LABEL_REPEATED),
                                  (5, "data_deps", F.TYPE_UINT64, F.LABEL_REPEATED),
                                  (6, "start_time_micros", F.TYPE_UINT64, F.LABEL_OPTIONAL),
                                  (7, "duration_micros", F.TYPE_UINT64, F.LABEL_OPTIONAL)]:
        node.field.add(name=name, number=num, type=typ, label=label)
    node.field.add(name="type", number=3, type=F.TYPE_ENUM, type_name=".fabriclab_chakra.NodeType",
                   label=F.LABEL_OPTIONAL)
    node.field.add(name="attr", number=10, type=F.TYPE_MESSAGE, type_name=".fabriclab_chakra.AttributeProto",
                   label=F.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    get = message_factory.GetMessageClass
    return get(pool.FindMessageTypeByName("fabriclab_chakra.Node")), \
        get(pool.FindMessageTypeByName("fabriclab_chakra.GlobalMetadata"))


def _varint(buf: bytes, pos: int, where: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ScenarioError(f"{where}: a message's length is cut off or malformed at byte {pos}")
        b = buf[pos]
        value |= (b & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not b & 0x80:
            return value, pos


def _frames(buf: bytes, where: str):
    pos = 0
    while pos < len(buf):
        n, pos = _varint(buf, pos, where)
        if pos + n > len(buf):
            raise ScenarioError(f"{where}: a message of {n} bytes at byte {pos} runs past the file's end "
                                f"({len(buf)} bytes)")
        yield buf[pos:pos + n]
        pos += n


class Unread:
    """An attribute of a type this reader does not decode (a list other than bool_list)."""

    def __repr__(self) -> str:
        return "a list (a type this reader does not decode)"


def _attrs(msg, where: str) -> dict:
    out = {}
    for a in msg.attr:
        kind = a.WhichOneof("value")
        if kind is None:
            out[a.name] = Unread()  # refused where the lowering needs the attribute
            continue
        v = getattr(a, kind)
        out[a.name] = list(v.values) if kind == "bool_list" else v
    return out


def _node(msg, where: str) -> TraceNode:
    t = msg.type
    return TraceNode(id=msg.id, name=msg.name, type=NODE_TYPES[t] if 0 <= t < len(NODE_TYPES) else f"type {t}",
                     data_deps=list(msg.data_deps), ctrl_deps=list(msg.ctrl_deps),
                     duration_micros=msg.duration_micros, attrs=_attrs(msg, where))


def read_rank(path: Path, where: str | None = None) -> list[TraceNode]:
    """One rank's nodes, in the file's order; errors start with ``where`` (default: the path)."""
    import gzip
    import zlib

    from google.protobuf.message import DecodeError

    Node, Meta = _classes()
    where = where or str(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise ScenarioError(f"{where}: cannot read the trace ({e})") from None
    if path.suffix == ".json":
        return _read_json(raw, where)
    frames = _frames(raw, where)
    try:
        Meta.FromString(next(frames))
    except StopIteration:
        raise ScenarioError(f"{where}: empty; a Chakra trace starts with its GlobalMetadata message") from None
    except DecodeError as e:
        raise ScenarioError(f"{where}: the first message is not Chakra's GlobalMetadata ({e})") from None
    out = []
    for k, b in enumerate(frames):
        try:
            out.append(_node(Node.FromString(b), where))
        except DecodeError as e:
            raise ScenarioError(f"{where}: message {k + 1} is not a Chakra Node ({e})") from None
    return out


def _read_json(raw: bytes, where: str) -> list[TraceNode]:
    """Chakra's JSON form: the GlobalMetadata object, then one object per node."""
    import json

    from google.protobuf import json_format

    Node, _ = _classes()
    text, dec, pos, objs = raw.decode("utf-8", "replace"), json.JSONDecoder(), 0, []
    try:
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos == len(text):
                break
            obj, pos = dec.raw_decode(text, pos)
            objs.append(obj)
    except json.JSONDecodeError as e:
        raise ScenarioError(f"{where}: not Chakra's JSON form ({e})") from None
    if not objs:
        raise ScenarioError(f"{where}: empty; Chakra's JSON form starts with its GlobalMetadata object")
    if not isinstance(objs[0], dict) or not set(objs[0]) <= {"version", "attr"}:
        got = sorted(objs[0]) if isinstance(objs[0], dict) else f"a {type(objs[0]).__name__}"
        raise ScenarioError(f"{where}: JSON object 0 is not Chakra's GlobalMetadata (keys version, attr); got "
                            f"{got}")
    out = []
    for k, obj in enumerate(objs[1:], 1):
        try:
            if not isinstance(obj, dict):
                raise json_format.ParseError(f"a {type(obj).__name__}, not an object")
            t = obj.get("type", 0)
            if not (t in NODE_TYPES or isinstance(t, int) and not isinstance(t, bool)):
                raise json_format.ParseError(f"type {t!r} is not one of Chakra's NodeType names "
                                             f"({', '.join(NODE_TYPES)})")
            # Unknown fields (inputs, outputs, ...) are skipped; unknown enum names were refused above.
            out.append(_node(json_format.ParseDict(obj, Node(), ignore_unknown_fields=True), where))
        except json_format.ParseError as e:
            raise ScenarioError(f"{where}: JSON object {k} is not a Chakra Node ({e})") from None
    return out


def rank_files(prefix: Path, where: str) -> list[Path]:
    """``<prefix>.0.et``, ``<prefix>.1.et``, ... (or ``.json``), as many as there are from rank 0 on; a gap
    (a higher rank's file without a lower one's) is refused naming the missing file."""
    for ext in (".et", ".json"):
        files = []
        while (p := prefix.parent / f"{prefix.name}.{len(files)}{ext}").is_file():
            files.append(p)
        if files:
            head, n = f"{prefix.name}.", len(files)
            later = [int(r) for f in prefix.parent.glob(f"{glob.escape(head)}*{ext}")
                     if (r := f.name[len(head):-len(ext)]).isdigit() and int(r) > n]
            if later:
                raise ScenarioError(f"{where}: {prefix.name}.{n}{ext} is missing, but rank {min(later)}'s file "
                                    f"{prefix.name}.{min(later)}{ext} is there; a trace has one file per rank "
                                    f"0..{max(later)}")
            return files
    raise ScenarioError(f"{where}: no trace files {prefix}.0.et (or {prefix}.0.json), {prefix}.1.et, ... found; "
                        f"give the prefix of the per-rank files")


def write_rank(path: Path, nodes: list[TraceNode], version: str = "0.0.4") -> None:
    """Writes one rank's trace in the wire form ``read_rank`` reads (for examples and tools): integer
    attributes as int64_val, booleans as bool_val, strings as string_val."""
    Node, Meta = _classes()
    out = [Meta(version=version).SerializeToString()]
    for nd in nodes:
        m = Node(id=nd.id, name=nd.name, type=NODE_TYPES.index(nd.type), data_deps=nd.data_deps,
                 ctrl_deps=nd.ctrl_deps, duration_micros=nd.duration_micros)
        for k, v in nd.attrs.items():
            kind = "bool_val" if isinstance(v, bool) else "int64_val" if isinstance(v, int) else "string_val"
            m.attr.add(name=k, **{kind: v})
        out.append(m.SerializeToString())
    path.write_bytes(b"".join(_encode_varint(len(b)) + b for b in out))


def _encode_varint(x: int) -> bytes:
    out = bytearray()
    while True:
        b, x = x & 0x7F, x >> 7
        out.append(b | (0x80 if x else 0))
        if not x:
            return bytes(out)


def describe(prefix: Path) -> list[dict]:
    """Per rank: its file, nodes by type (``is_cpu_op`` ones apart), and its collectives per
    (comm_type, pg_name) as [count, bytes], what ``[[trace_jobs]]``' groups must name."""
    out = []
    for r, f in enumerate(rank_files(prefix, str(prefix))):
        types: dict[str, int] = {}
        colls: dict[tuple, list] = {}
        for nd in read_rank(f):
            a = nd.attrs
            kind = nd.type + (" (cpu)" if a.get("is_cpu_op") else "")
            types[kind] = types.get(kind, 0) + 1
            if nd.type == "COMM_COLL_NODE" and not a.get("is_cpu_op"):
                ct = a.get("comm_type")
                name = COMM_TYPES[ct] if isinstance(ct, int) and 0 <= ct < len(COMM_TYPES) else f"comm_type {ct}"
                c = colls.setdefault((name, a.get("pg_name", "")), [0, 0])
                c[0] += 1
                size = a.get("comm_size", 0)
                c[1] += size if isinstance(size, int) else 0
        out.append({"rank": r, "file": f.name, "types": dict(sorted(types.items())),
                    "collectives": dict(sorted(colls.items()))})
    return out

"""probes.parquet: the one schema of probe records, written by the simulator
and by the real agent, read by the estimator (docs/clockwork.md, "The probe
records").

One row per probe packet. Probes go in coded pairs: two probes from ``src`` to
``dst`` sent a short spacing apart, with the same ``pair`` id (unique per
``src``) and ``seq`` 0 then 1. An echo is a probe pair in the reverse
direction, a pair of its own.

=============  =================  ==================================================
column         type               meaning
=============  =================  ==================================================
src            string             the sending host
dst            string             the receiving host
pair           uint64             the coded pair's id, unique per src
seq            uint8              0 or 1: the probe's place within its pair
tx_ns          int64              send time on the sender's clock, ns
rx_ns          int64              receive time on the receiver's clock, ns
true_tx_ps     uint64, nullable   true send time, ps (where known: the simulator)
true_rx_ps     uint64, nullable   true receive time, ps
=============  =================  ==================================================

The true times are the true instants at which the clocks were read for tx_ns and rx_ns, so that
``tx_ns`` is the sender's clock at ``true_tx_ps`` (rounded to ns), and likewise for rx. Timestamp
noise is then the gap between those instants and the probe's true departure and arrival, which the
records need not carry; a score against truth is exact whatever the noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import InputError

SCHEMA = pa.schema([
    pa.field("src", pa.string(), nullable=False),
    pa.field("dst", pa.string(), nullable=False),
    pa.field("pair", pa.uint64(), nullable=False),
    pa.field("seq", pa.uint8(), nullable=False),
    pa.field("tx_ns", pa.int64(), nullable=False),
    pa.field("rx_ns", pa.int64(), nullable=False),
    pa.field("true_tx_ps", pa.uint64(), nullable=True),
    pa.field("true_rx_ps", pa.uint64(), nullable=True),
])
REQUIRED = ("src", "dst", "pair", "seq", "tx_ns", "rx_ns")
TRUTH = ("true_tx_ps", "true_rx_ps")


class ProbeFileError(InputError):
    """A probe file that does not follow the schema."""


@dataclass
class Probes:
    """The probe records as arrays, grouped into coded pairs.

    ``hosts`` are the host names in sorted order; every other array has one
    entry per coded pair (index 0 and 1: the pair's two probes)."""

    hosts: list[str]
    src: np.ndarray        # int32 index into hosts
    dst: np.ndarray        # int32
    tx0_ns: np.ndarray     # int64, seq 0
    tx1_ns: np.ndarray
    rx0_ns: np.ndarray
    rx1_ns: np.ndarray
    true_tx0_ps: Optional[np.ndarray] = None  # float64 where every row carries truth, else None
    true_rx0_ps: Optional[np.ndarray] = None
    true_tx1_ps: Optional[np.ndarray] = None
    true_rx1_ps: Optional[np.ndarray] = None

    @property
    def has_truth(self) -> bool:
        return self.true_tx0_ps is not None


def table(src, dst, pair, seq, tx_ns, rx_ns, true_tx_ps=None, true_rx_ps=None) -> pa.Table:
    """An Arrow table in the schema from column sequences (true times may be None)."""
    n = len(tx_ns)
    cols = [pa.array(src, pa.string()), pa.array(dst, pa.string()), pa.array(pair, pa.uint64()),
            pa.array(seq, pa.uint8()), pa.array(tx_ns, pa.int64()), pa.array(rx_ns, pa.int64())]
    for t in (true_tx_ps, true_rx_ps):
        cols.append(pa.nulls(n, pa.uint64()) if t is None else pa.array(t, pa.uint64()))
    return pa.Table.from_arrays(cols, schema=SCHEMA)


def write(t: pa.Table, path: Path) -> None:
    """Writes a table in the schema (string columns may be dictionary-encoded)."""
    pq.write_table(t, str(path))


def _types_ok(field: pa.Field, want: pa.DataType) -> bool:
    """The exact type; a string column may also be large or dictionary-encoded (the same Parquet type)."""
    t = field.type
    if want == pa.string() and pa.types.is_dictionary(t):
        t = t.value_type
    return t == want or (want == pa.string() and t == pa.large_string())


def read(path: Path) -> Probes:
    """Reads and validates probes.parquet; every departure from the schema is a
    :class:`ProbeFileError` naming the column (and the row where one is at fault)."""
    path = Path(path)
    if not path.exists():
        raise ProbeFileError(f"probes: no such file: {path}")
    if path.is_dir():
        raise ProbeFileError(f"probes: {path} is a folder, not a Parquet file")
    try:
        schema = pq.read_schema(str(path))
    except (pa.ArrowException, OSError) as e:
        raise ProbeFileError(f"probes: {path} is not a readable Parquet file ({e})") from None
    names = set(schema.names)
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise ProbeFileError(f"probes: {path} lacks the column(s) {', '.join(missing)}; a probe file has "
                             f"{', '.join(SCHEMA.names)} (docs/clockwork.md)")
    for f in SCHEMA:
        if f.name in names and not _types_ok(schema.field(f.name), f.type):
            raise ProbeFileError(f"probes: column {f.name} has type {schema.field(f.name).type}; "
                                 f"it must be {f.type} (docs/clockwork.md)")
    cols = [c for c in SCHEMA.names if c in names]
    try:
        t = pq.read_table(str(path), columns=cols, read_dictionary=["src", "dst"])
    except (pa.ArrowException, OSError) as e:
        raise ProbeFileError(f"probes: cannot read the rows of {path} ({e})") from None
    if t.num_rows == 0:
        raise ProbeFileError(f"probes: {path} holds no rows")
    for c in REQUIRED:
        nulls = t.column(c).null_count
        if nulls:
            row = int(np.flatnonzero(t.column(c).is_null().to_numpy(zero_copy_only=False))[0])
            raise ProbeFileError(f"probes: column {c} is empty (null) at row {row}; only true_tx_ps and "
                                 f"true_rx_ps may be null")
    return _from_table(t)


def _codes(col: pa.ChunkedArray, hosts: np.ndarray) -> np.ndarray:
    d = col.combine_chunks()
    if not pa.types.is_dictionary(d.type):
        d = d.dictionary_encode()
    names = np.asarray(d.dictionary.to_pylist(), dtype=object)
    return np.searchsorted(hosts, names).astype(np.int32)[d.indices.to_numpy()]


def _order_by_src_pair(src: np.ndarray, pair: np.ndarray, hosts: int) -> Optional[np.ndarray]:
    """Row order sorted by (src, pair), stable; None when the rows are in that order already (as
    fabriclab's writers put them: the fast path). Pair ids too large to share one 64-bit key with the
    host fall back to a two-key sort."""
    bits = max(1, int(hosts - 1).bit_length())
    if pair.size and int(pair.max()) < (1 << (63 - bits)):
        key = (src.astype(np.int64) << (63 - bits)) | pair.astype(np.int64)
        if np.all(key[1:] >= key[:-1]):
            return None
        return np.argsort(key, kind="stable")
    return np.lexsort((pair, src))


def _couples(s_src: np.ndarray, s_pair: np.ndarray) -> bool:
    """Sorted by (src, pair): are the rows couples of one (src, pair) each, at even positions?"""
    n = len(s_src)
    return (n % 2 == 0 and np.array_equal(s_src[0::2], s_src[1::2]) and np.array_equal(s_pair[0::2], s_pair[1::2])
            and not np.any((s_src[1:-1:2] == s_src[2::2]) & (s_pair[1:-1:2] == s_pair[2::2])))


def _refuse_bad_group(s_src, s_pair, order, src, pair, hosts) -> None:
    """The first (src, pair) that has not exactly two rows, named by its first row."""
    n = len(s_src)
    same_next = np.zeros(n, dtype=bool)
    same_next[:-1] = (s_src[1:] == s_src[:-1]) & (s_pair[1:] == s_pair[:-1])
    first = np.ones(n, dtype=bool)
    first[1:] = ~same_next[:-1]
    starts = np.flatnonzero(first)
    group_size = np.diff(np.append(starts, n))
    g = np.flatnonzero(group_size != 2)[0]
    r = int(starts[g] if order is None else order[starts[g]])
    what = "one probe only" if group_size[g] == 1 else f"{group_size[g]} probes"
    raise ProbeFileError(f"probes: row {r}: pair {int(pair[r])} from {hosts[src[r]]} has {what}; a coded "
                         f"pair has exactly two probes, seq 0 and seq 1")


def from_simulation(df) -> Probes:
    """A simulated run's probes table (``Results.probes``, pandas) as Probes,
    keeping the coded pairs whose two probes both arrived: a run's stop cuts
    the last pairs in flight, which the reader would refuse as pairs of one."""
    df = df[df.groupby(["src", "pair"]).seq.transform("size") == 2]
    return _from_table(pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False))


def _from_table(t: pa.Table) -> Probes:
    def dict_names(c):
        d = t.column(c).combine_chunks()
        return d.dictionary.to_pylist() if pa.types.is_dictionary(d.type) else d.unique().to_pylist()

    hosts = np.array(sorted(set(dict_names("src")) | set(dict_names("dst"))), dtype=object)
    src = _codes(t.column("src"), hosts)
    dst = _codes(t.column("dst"), hosts)
    pair = t.column("pair").to_numpy()
    seq = t.column("seq").to_numpy()
    tx = t.column("tx_ns").to_numpy()
    rx = t.column("rx_ns").to_numpy()
    bad = np.flatnonzero(seq > 1)
    if bad.size:
        raise ProbeFileError(f"probes: column seq is {int(seq[bad[0]])} at row {int(bad[0])}; it must be 0 or 1 "
                             f"(the probe's place in its coded pair)")
    selfs = np.flatnonzero(src == dst)
    if selfs.size:
        r = int(selfs[0])
        raise ProbeFileError(f"probes: row {r} has src = dst = {hosts[src[r]]}; a probe goes to another host")
    # Sorted by (src, pair), a well-formed file is a run of couples of rows of one (src, pair).
    order = _order_by_src_pair(src, pair, len(hosts))
    s_src, s_pair = (src, pair) if order is None else (src[order], pair[order])
    if not _couples(s_src, s_pair):
        _refuse_bad_group(s_src, s_pair, order, src, pair, hosts)
    if order is None and np.all(seq[0::2] == 0) and np.all(seq[1::2] == 1):
        i0, i1 = slice(0, None, 2), slice(1, None, 2)   # the fast path: views, no gathering
    else:
        rows = np.arange(len(src)) if order is None else order
        i0, i1 = rows[0::2], rows[1::2]
        swap = seq[i0] > seq[i1]
        i0, i1 = np.where(swap, i1, i0), np.where(swap, i0, i1)
        dup = np.flatnonzero(seq[i0] == seq[i1])
        if dup.size:
            r = int(i1[dup[0]])
            raise ProbeFileError(f"probes: row {r}: pair {int(pair[r])} from {hosts[src[r]]} has seq "
                                 f"{int(seq[r])} twice; a coded pair has one probe with seq 0 and one with seq 1")
    split = np.flatnonzero(dst[i0] != dst[i1])
    if split.size:
        r = int(np.arange(len(src))[i1][split[0]])
        raise ProbeFileError(f"probes: row {r}: pair {int(pair[r])} from {hosts[src[r]]} goes to two hosts "
                             f"({hosts[dst[i0][split[0]]]} and {hosts[dst[r]]}); both probes of a pair go to one dst")
    p = Probes(hosts=list(hosts), src=src[i0], dst=dst[i0], tx0_ns=tx[i0], tx1_ns=tx[i1], rx0_ns=rx[i0],
               rx1_ns=rx[i1])
    if all(c in t.column_names for c in TRUTH) and all(t.column(c).null_count == 0 for c in TRUTH):
        ttx = t.column("true_tx_ps").to_numpy().astype(np.float64)
        trx = t.column("true_rx_ps").to_numpy().astype(np.float64)
        p.true_tx0_ps, p.true_tx1_ps, p.true_rx0_ps, p.true_rx1_ps = ttx[i0], ttx[i1], trx[i0], trx[i1]
    return p

"""Results of a run: Arrow/pandas tables of flows and links, a summary, and
atomic writing of the output folder."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    # pandas only when a caller asks for a DataFrame: `fabriclab run` needs none (issue 13).
    import pandas as pd

from ._toml import tomllib  # noqa: F401  (symmetry with writing)

# Flow-size buckets of the summary: the seeds call flows under 100 KB small
# and over 10 MB large (DCTCP paper, ETH thesis); the rest is medium.
SMALL_MAX_BYTES = 100_000
LARGE_MIN_BYTES = 10_000_000
BUCKETS = (
    ("small", lambda s: s < SMALL_MAX_BYTES),
    ("medium", lambda s: (s >= SMALL_MAX_BYTES) & (s <= LARGE_MIN_BYTES)),
    ("large", lambda s: s > LARGE_MIN_BYTES),
)

FLOW_SCHEMA = pa.schema([
    ("flow_id", pa.uint32()), ("src", pa.uint32()), ("dst", pa.uint32()), ("size_bytes", pa.uint64()),
    ("class", pa.uint8()), ("tag", pa.string()), ("start_ps", pa.uint64()), ("end_ps", pa.uint64()),
    ("fct_ps", pa.uint64()), ("ideal_fct_ps", pa.uint64()), ("slowdown", pa.float64()), ("retransmits", pa.uint64()),
])

LINK_SCHEMA = pa.schema([
    ("link_id", pa.uint32()), ("src_node", pa.string()), ("dst_node", pa.string()), ("rate_bps", pa.uint64()),
    ("bytes", pa.uint64()), ("packets", pa.uint64()), ("utilization", pa.float64()), ("drops", pa.uint64()),
    ("ecn_marks", pa.uint64()), ("max_queue_bytes", pa.uint64()), ("mean_queue_bytes", pa.float64()),
    ("pause_frames_sent", pa.uint64()), ("paused_ps", pa.uint64()),
])

MESSAGE_SCHEMA = pa.schema([
    ("msg_id", pa.uint32()), ("app", pa.string()), ("tag", pa.uint64()), ("src", pa.uint32()), ("dst", pa.uint32()),
    ("src_node", pa.string()), ("dst_node", pa.string()), ("size_bytes", pa.uint64()), ("class", pa.uint8()),
    ("start_ps", pa.uint64()), ("first_byte_ps", pa.uint64()), ("end_ps", pa.uint64()), ("fct_ps", pa.uint64()),
    ("retransmits", pa.uint64()), ("cnps", pa.uint64()), ("path", pa.string()), ("reroutes", pa.uint32()),
    ("route_lost", pa.bool_()),
])

QUEUE_SCHEMA = pa.schema([
    ("time_ps", pa.uint64()), ("link_id", pa.uint32()), ("src_node", pa.string()), ("dst_node", pa.string()),
    ("band", pa.uint8()), ("queue_bytes", pa.uint64()), ("tx_bytes", pa.uint64()), ("drops", pa.uint64()),
    ("ecn_marks", pa.uint64()), ("paused", pa.bool_()),
])


def messages_table(cols: dict) -> pa.Table:
    """messages.parquet: one row per message (see docs/scenario.md, Outputs)."""
    start = np.asarray(cols["start_ps"], dtype=np.uint64)
    done = np.array([e is not None for e in cols["end_ps"]], dtype=bool)
    end = np.array([0 if e is None else e for e in cols["end_ps"]], dtype=np.uint64)
    fct = np.where(done, end - start, 0).astype(np.uint64)
    return pa.Table.from_arrays([arrow_numbers(fct, f.type, done) if f.name == "fct_ps" else arrow_column(cols[f.name], f.type)
                                 for f in MESSAGE_SCHEMA], schema=MESSAGE_SCHEMA)


CLASS_SCHEMA = pa.schema([
    ("time_ps", pa.uint64()), ("link_id", pa.uint32()), ("src_node", pa.string()), ("dst_node", pa.string()),
    ("class", pa.uint8()), ("tx_bytes", pa.uint64()),
])


def classes_table(cols: dict) -> pa.Table:
    """classes.parquet: per sample, port and traffic class, the class's
    cumulative transmitted wire bytes, where they changed since the previous sample."""
    return pa.table({k: pa.array(cols[k], CLASS_SCHEMA.field(k).type) for k in CLASS_SCHEMA.names},
                    schema=CLASS_SCHEMA)


def queues_table(cols: dict) -> pa.Table:
    """queues.parquet: per sample and port band, the queue and the band's
    cumulative transmitted bytes, drops and marks, and whether it was paused."""
    data = dict(cols, paused=np.asarray(cols["paused"], dtype=bool))
    return pa.table({k: pa.array(data[k], QUEUE_SCHEMA.field(k).type) for k in QUEUE_SCHEMA.names},
                    schema=QUEUE_SCHEMA)


# Arrays built from their buffers: pyarrow imports pandas on its first
# `pa.array` (to check for pandas objects), about a third of `fabriclab
# run`'s start-up; flows and links tables, written on every run, avoid it
# (issue 13). Other tables use `pa.array`.
def _valid_bitmap(valid: np.ndarray | None, n: int) -> tuple[pa.Buffer | None, int]:
    if valid is None or valid.all():
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), int(n - valid.sum())


def arrow_numbers(values, typ: pa.DataType, valid: np.ndarray | None = None) -> pa.Array:
    """A fixed-width numeric Arrow array from a sequence or numpy array
    (null where ``valid`` is False)."""
    data = np.ascontiguousarray(np.frombuffer(values, np.uint8) if isinstance(values, bytes) else values,
                                dtype=typ.to_pandas_dtype())
    n = len(data)
    if typ == pa.bool_():
        data = np.packbits(data, bitorder="little")
    bitmap, nulls = _valid_bitmap(valid, n)
    return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(data)], null_count=nulls)


def arrow_column(values, typ: pa.DataType) -> pa.Array:
    """An Arrow array of ``typ`` from the core's list (None: a null)."""
    if typ == pa.string():
        return arrow_strings(values)
    if isinstance(values, list) and None in values:
        valid = np.array([v is not None for v in values], dtype=bool)
        return arrow_numbers([0 if v is None else v for v in values], typ, valid)
    return arrow_numbers(values, typ)


def arrow_strings(values: list) -> pa.Array:
    """A UTF-8 string Arrow array from a list of str (None: a null)."""
    if any(v is None for v in values):
        return pa.array(values, pa.string())
    enc = [v.encode() for v in values]
    offsets = np.zeros(len(enc) + 1, dtype=np.int32)
    np.cumsum([len(b) for b in enc], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(enc), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(enc))])


def flow_columns(cols: dict) -> dict:
    """The flows table's columns as numpy arrays (the core's lists converted
    once), ``done`` marking finished flows; fct_ps and slowdown are 0 and NaN
    where unfinished."""
    done = np.array([e is not None for e in cols["end_ps"]], dtype=bool)
    start = np.asarray(cols["start_ps"], dtype=np.uint64)
    ideal = np.asarray(cols["ideal_fct_ps"], dtype=np.uint64)
    end = np.array([0 if e is None else e for e in cols["end_ps"]], dtype=np.uint64)
    fct = np.where(done, end - start, 0).astype(np.uint64)
    cls = cols["class"]
    return {
        "flow_id": np.asarray(cols["flow_id"], dtype=np.uint32), "src": np.asarray(cols["src"], dtype=np.uint32),
        "dst": np.asarray(cols["dst"], dtype=np.uint32), "size_bytes": np.asarray(cols["size_bytes"], dtype=np.uint64),
        "class": np.frombuffer(cls, np.uint8) if isinstance(cls, bytes) else np.asarray(cls, dtype=np.uint8),
        "tag": cols["tag"], "start_ps": start, "end_ps": end, "fct_ps": fct, "ideal_fct_ps": ideal,
        "slowdown": np.where(done, fct / np.maximum(ideal, 1), np.nan),
        "retransmits": np.asarray(cols["retransmits"], dtype=np.uint64), "done": done,
    }


def flows_arrow(c: dict) -> pa.Table:
    """flows.parquet from :func:`flow_columns`."""
    nullable = ("end_ps", "fct_ps", "slowdown")
    return pa.Table.from_arrays([
        arrow_strings(c[f.name]) if f.name == "tag" else
        arrow_numbers(c[f.name], f.type, c["done"] if f.name in nullable else None)
        for f in FLOW_SCHEMA], schema=FLOW_SCHEMA)


def flows_table(cols: dict) -> pa.Table:
    return flows_arrow(flow_columns(cols))


def link_columns(cols: dict, duration_ps: int) -> dict:
    """The links table's columns as numpy arrays (names: lists of str)."""
    c = {f.name: cols[f.name] if f.type == pa.string() else np.asarray(cols[f.name], dtype=f.type.to_pandas_dtype())
         for f in LINK_SCHEMA if f.name != "utilization"}
    b = np.asarray(cols["bytes"], dtype=np.float64)
    r = np.asarray(cols["rate_bps"], dtype=np.float64)
    c["utilization"] = b * 8 / (r * duration_ps / 1e12) if duration_ps > 0 else np.zeros_like(b)
    return c


def links_arrow(c: dict) -> pa.Table:
    """links.parquet from :func:`link_columns`."""
    return pa.Table.from_arrays([arrow_strings(c[f.name]) if f.type == pa.string() else arrow_numbers(c[f.name], f.type)
                                 for f in LINK_SCHEMA], schema=LINK_SCHEMA)


def links_table(cols: dict, duration_ps: int) -> pa.Table:
    return links_arrow(link_columns(cols, duration_ps))


def fct_stats(df: pd.DataFrame) -> dict:
    """FCT statistics of finished flows (a flows DataFrame); see :func:`fct_stats_of`."""
    return fct_stats_of(df["fct_ps"].to_numpy(dtype=np.float64, na_value=np.nan),
                        df["slowdown"].to_numpy(dtype=np.float64, na_value=np.nan))


def fct_stats_of(fct_ps: np.ndarray, slowdown: np.ndarray) -> dict:
    """FCT statistics of finished flows, from per-flow FCTs and slowdowns
    (float64, NaN where unfinished); percentiles by linear interpolation
    between order statistics (numpy's default)."""
    done = ~np.isnan(fct_ps)
    out = {"flows": int(len(fct_ps)), "finished": int(done.sum())}
    if done.any():
        fct = fct_ps[done]
        slow = slowdown[done]
        out.update({
            "fct_mean_ps": float(fct.mean()),
            "fct_p50_ps": float(np.percentile(fct, 50)),
            "fct_p99_ps": float(np.percentile(fct, 99)),
            "fct_p999_ps": float(np.percentile(fct, 99.9)),
            "slowdown_mean": float(slow.mean()),
            "slowdown_p99": float(np.percentile(slow, 99)),
        })
    return out



@dataclass
class Results:
    """What a run produced. ``flows`` and ``links`` are pandas DataFrames."""

    flows_arrow: pa.Table
    links_arrow: pa.Table
    summary: dict
    resolved: dict = field(repr=False, default_factory=dict)
    jobs_arrow: pa.Table | None = None
    timeline_arrow: pa.Table | None = None
    messages_arrow: pa.Table | None = None
    queues_arrow: pa.Table | None = None
    classes_arrow: pa.Table | None = None
    steps_arrow: pa.Table | None = None
    ccl_arrow: pa.Table | None = None
    # Ground truth of the scenario's [[faults]] (faults.parquet, docs/c4.md).
    faults_arrow: pa.Table | None = None
    # In-network aggregation: every worker's counts (aggregation.parquet) and
    # the accelerators' buffer occupancy over time (accelerators.parquet).
    aggregation_arrow: pa.Table | None = None
    accelerators_arrow: pa.Table | None = None
    # Functional aggregation: every value of every result a worker received.
    aggregation_values_arrow: pa.Table | None = None

    @property
    def flows(self) -> pd.DataFrame:
        return self.flows_arrow.to_pandas()

    @property
    def links(self) -> pd.DataFrame:
        return self.links_arrow.to_pandas()

    @property
    def jobs(self) -> pd.DataFrame | None:
        return None if self.jobs_arrow is None else self.jobs_arrow.to_pandas()

    @property
    def timeline(self) -> pd.DataFrame | None:
        return None if self.timeline_arrow is None else self.timeline_arrow.to_pandas()

    @property
    def messages(self) -> pd.DataFrame | None:
        return None if self.messages_arrow is None else self.messages_arrow.to_pandas()

    @property
    def steps(self) -> pd.DataFrame | None:
        return None if self.steps_arrow is None else self.steps_arrow.to_pandas()

    @property
    def ccl(self) -> pd.DataFrame | None:
        """The collectives' messages in the runtime's telemetry schema (docs/telemetry.md)."""
        return None if self.ccl_arrow is None else self.ccl_arrow.to_pandas()

    @property
    def aggregation(self) -> pd.DataFrame | None:
        return None if self.aggregation_arrow is None else self.aggregation_arrow.to_pandas()

    @property
    def aggregation_values(self) -> pd.DataFrame | None:
        return None if self.aggregation_values_arrow is None else self.aggregation_values_arrow.to_pandas()

    @property
    def accelerators(self) -> pd.DataFrame | None:
        return None if self.accelerators_arrow is None else self.accelerators_arrow.to_pandas()

    @property
    def classes(self) -> pd.DataFrame | None:
        """Per-class transmitted bytes of every port over time (classes.parquet)."""
        return None if self.classes_arrow is None else self.classes_arrow.to_pandas()

    @property
    def queues(self) -> pd.DataFrame | None:
        return None if self.queues_arrow is None else self.queues_arrow.to_pandas()

    def write(self, out_dir: str | Path, force: bool = False) -> Path:
        """Writes flows.parquet, links.parquet, summary.json and
        scenario.resolved.toml atomically (see :class:`OutputFolder`)."""
        with OutputFolder(Path(out_dir), force) as folder:
            self.write_into(folder.staging)
        return Path(out_dir)

    def write_into(self, folder: Path) -> None:
        """Writes the result files into an existing folder."""
        import tomli_w

        outputs = self.resolved.get("outputs", {})
        if outputs.get("flows", True):
            pq.write_table(self.flows_arrow, folder / "flows.parquet")
        if outputs.get("links", True):
            pq.write_table(self.links_arrow, folder / "links.parquet")
        if self.jobs_arrow is not None:
            pq.write_table(self.jobs_arrow, folder / "jobs.parquet")
            pq.write_table(self.timeline_arrow, folder / "timeline.parquet")
        if self.messages_arrow is not None:
            pq.write_table(self.messages_arrow, folder / "messages.parquet")
        if self.queues_arrow is not None:
            pq.write_table(self.queues_arrow, folder / "queues.parquet")
        if self.classes_arrow is not None:
            pq.write_table(self.classes_arrow, folder / "classes.parquet")
        if self.steps_arrow is not None:
            pq.write_table(self.steps_arrow, folder / "steps.parquet")
        if self.ccl_arrow is not None:
            pq.write_table(self.ccl_arrow, folder / "ccl.parquet")
        if self.faults_arrow is not None:
            pq.write_table(self.faults_arrow, folder / "faults.parquet")
        if self.aggregation_arrow is not None:
            pq.write_table(self.aggregation_arrow, folder / "aggregation.parquet")
        if self.accelerators_arrow is not None:
            pq.write_table(self.accelerators_arrow, folder / "accelerators.parquet")
        if self.aggregation_values_arrow is not None:
            pq.write_table(self.aggregation_values_arrow, folder / "aggregation_values.parquet")
        (folder / "summary.json").write_text(json.dumps(self.summary, indent=2, sort_keys=True) + "\n")
        (folder / "scenario.resolved.toml").write_text(tomli_w.dumps(self.resolved))


class OutputFolder:
    """An output folder claimed before a run and filled atomically.

    Entering checks ``out`` (not a file; empty or absent unless ``force``;
    neither the current folder, nor one holding it or any of ``inputs``),
    creates its missing parents and a temporary sibling ``.NAME.tmp-*``
    (``staging``), so an unwritable place fails before any work. Leaving
    normally renames the staging folder into place (with ``force``, the old
    folder is moved aside first and put back if that fails); leaving by an
    exception removes everything it created. Errors name ``option``."""

    def __init__(self, out: Path, force: bool = False, inputs: tuple[Path, ...] = (), option: str = "--out"):
        self.out, self.force, self.inputs, self.option = Path(out), force, inputs, option
        self.staging: Path | None = None
        self._made: list[Path] = []

    def __enter__(self) -> "OutputFolder":
        from .errors import InputError

        out, opt = self.out, self.option
        if out.exists() and not out.is_dir():
            raise InputError(f"{opt}: {out} exists and is not a folder")
        if out.is_dir() and any(out.iterdir()) and not self.force:
            raise InputError(f"{opt}: {out} is not empty (use --force to replace it)")
        where = out.resolve()
        for p in (Path.cwd(), *self.inputs):
            p = Path(p).resolve()
            if p == where or where in p.parents:
                what = "the current folder" if p == Path.cwd().resolve() else f"the input {p}"
                raise InputError(f"{opt}: {out} is or holds {what}; replacing it would delete it: choose another folder")
        # Create the missing parents, remembering them so that a failure removes them again.
        missing = [a for a in reversed(where.parents) if not a.exists()]
        blocker = next((a for a in where.parents if a.exists()), None)
        if blocker is not None and not blocker.is_dir():
            raise InputError(f"{opt}: cannot create {out}: {blocker} is a file, not a folder")
        try:
            for a in missing:
                a.mkdir()
                self._made.append(a)
            self.staging = Path(tempfile.mkdtemp(prefix=f".{where.name}.tmp-", dir=where.parent))
            self.staging.chmod(0o755)
        except OSError as e:
            self._cleanup()
            raise InputError(f"{opt}: cannot create {out}: {e.strerror or e}") from None
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            self._cleanup()
            return False
        try:
            self._commit()
        except BaseException:
            self._cleanup()
            raise
        return False

    def _commit(self) -> None:
        out = self.out.resolve()
        if not out.exists():
            os.replace(self.staging, out)
            return
        trash = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        os.replace(out, trash / "old")
        try:
            os.replace(self.staging, out)
        except BaseException:
            os.replace(trash / "old", out)  # put the old results back
            trash.rmdir()
            raise
        shutil.rmtree(trash, ignore_errors=True)

    def _cleanup(self) -> None:
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
        for a in reversed(self._made):
            try:
                a.rmdir()
            except OSError:
                pass

"""Results of a run: Arrow/pandas tables of flows and links, a summary, and
atomic writing of the output folder. Nothing here imports numpy or pyarrow
at import time: flows.parquet and links.parquet come from the core as
Parquet bytes and are written as they are; pyarrow reads them only when a
caller asks for a table (issue 13)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # pyarrow and pandas only when a caller asks for a table: `fabriclab run` needs neither (issue 13).
    import pandas as pd
    import pyarrow as pa

from ..util.toml import tomllib  # noqa: F401  (symmetry with writing)

# Flow-size buckets of the summary: the seeds call flows under 100 KB small
# and over 10 MB large (DCTCP paper, ETH thesis); the rest is medium.
SMALL_MAX_BYTES = 100_000
LARGE_MIN_BYTES = 10_000_000
BUCKETS = (
    ("small", lambda s: s < SMALL_MAX_BYTES),
    ("medium", lambda s: (s >= SMALL_MAX_BYTES) & (s <= LARGE_MIN_BYTES)),
    ("large", lambda s: s > LARGE_MIN_BYTES),
)


def fct_stats(df: pd.DataFrame) -> dict:
    """FCT statistics of finished flows (a flows DataFrame), as in
    summary.json: the core computes both (fabriclab-io's `stats`: numpy's
    mean and linear percentiles)."""
    import numpy as np

    from .._core import fct_stats as core_fct_stats

    return core_fct_stats(df["fct_ps"].to_numpy(dtype=np.float64, na_value=np.nan).tolist(),
                          df["slowdown"].to_numpy(dtype=np.float64, na_value=np.nan).tolist())


def read_parquet_bytes(data: bytes) -> pa.Table:
    """A Parquet file held in memory as an Arrow table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pq.read_table(pa.BufferReader(data))


class CoreTable:
    """A table the core handed over as a Parquet file's bytes (the field
    ``<name>_parquet``), read with pyarrow on first use. Assigning a table
    (or None) replaces the bytes: :meth:`Results.write` then writes what the
    caller holds (with pyarrow), or no file for None."""

    def __set_name__(self, owner, attr: str) -> None:
        self.field = attr.removesuffix("_arrow") + "_parquet"
        self.cache = "_" + attr

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        if self.cache not in obj.__dict__:
            data = getattr(obj, self.field)
            obj.__dict__[self.cache] = None if data is None else read_parquet_bytes(data)
        return obj.__dict__[self.cache]

    def __set__(self, obj, table) -> None:
        obj.__dict__[self.cache] = table
        setattr(obj, self.field, None)


@dataclass
class Results:
    """What a run produced. ``flows`` and ``links`` are pandas DataFrames;
    ``flows_parquet`` and ``links_parquet`` the files' bytes, as the core
    encoded them."""

    flows_parquet: bytes = field(repr=False)
    links_parquet: bytes = field(repr=False)
    summary: dict
    resolved: dict = field(repr=False, default_factory=dict)
    # The core's messages, queue samples and per-class port bytes, as Parquet files' bytes.
    messages_parquet: bytes | None = field(default=None, repr=False)
    queues_parquet: bytes | None = field(default=None, repr=False)
    classes_parquet: bytes | None = field(default=None, repr=False)
    # The apps' tables by file name (<name>.parquet), as each app's collect made
    # them (fabriclab.sim.apps): jobs, timeline, steps, ccl, faults,
    # aggregation, accelerators, aggregation_values, clocks, probes, ...; and
    # every name the run's apps may make, so that res.<name> is None when
    # this run made none (res.jobs without [[jobs]]).
    tables: dict = field(default_factory=dict, repr=False)
    table_names: tuple = ()

    flows_arrow = CoreTable()
    links_arrow = CoreTable()
    messages_arrow = CoreTable()
    queues_arrow = CoreTable()
    classes_arrow = CoreTable()

    def __getattr__(self, name: str):
        # An app's table: res.<name>_arrow (Arrow) or res.<name> (pandas), None
        # when this run made none.
        base = name.removesuffix("_arrow")
        if base in self.__dict__.get("tables", {}) or base in self.__dict__.get("table_names", ()):
            t = self.__dict__["tables"].get(base)
            return t if name.endswith("_arrow") or t is None else t.to_pandas()
        raise AttributeError(f"'Results' object has no attribute {name!r}")

    @property
    def flows(self) -> pd.DataFrame:
        return self.flows_arrow.to_pandas()

    @property
    def links(self) -> pd.DataFrame:
        return self.links_arrow.to_pandas()

    @property
    def messages(self) -> pd.DataFrame | None:
        return None if self.messages_arrow is None else self.messages_arrow.to_pandas()

    @property
    def classes(self) -> pd.DataFrame | None:
        """Per-class transmitted bytes of every port over time (classes.parquet)."""
        return None if self.classes_arrow is None else self.classes_arrow.to_pandas()

    @property
    def queues(self) -> pd.DataFrame | None:
        return None if self.queues_arrow is None else self.queues_arrow.to_pandas()

    def write(self, out_dir: str | Path, force: bool = False) -> Path:
        """Writes flows.parquet, links.parquet, the other tables the run
        has, summary.json and scenario.resolved.toml atomically (see
        :class:`OutputFolder`)."""
        with OutputFolder(Path(out_dir), force) as folder:
            self.write_into(folder.staging)
        return Path(out_dir)

    def write_into(self, folder: Path) -> None:
        """Writes the result files into an existing folder."""
        import tomli_w

        outputs = self.resolved.get("outputs", {})
        tables = {}
        for name in ("flows", "links", "messages", "queues", "classes"):
            if not outputs.get(name, True):
                continue
            data = getattr(self, f"{name}_parquet")
            if data is not None:
                (folder / f"{name}.parquet").write_bytes(data)
            else:  # a table the caller assigned, if any
                tables[name] = self.__dict__.get(f"_{name}_arrow")
        tables |= self.tables
        if any(t is not None for t in tables.values()):
            import pyarrow.parquet as pq

            for name, table in tables.items():
                if table is not None:
                    pq.write_table(table, folder / f"{name}.parquet")
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
    exception removes everything it created. Errors name ``option``.

    A process killed outright (SIGKILL, a power cut) cannot remove its
    staging folder, so each holds a marker file (``MARKER``: host, pid and
    the process's start time) until it is renamed into place; entering
    removes the staging folders beside ``out`` whose marker names a process
    of this host that no longer runs, and lists them in ``stale_removed``.
    A folder without a readable marker, or of a process still running, or
    of another host, is left alone."""

    MARKER = ".fabriclab-staging"

    def __init__(self, out: Path, force: bool = False, inputs: tuple[Path, ...] = (), option: str = "--out"):
        self.out, self.force, self.inputs, self.option = Path(out), force, inputs, option
        self.staging: Path | None = None
        self._made: list[Path] = []
        self.stale_removed: list[tuple[Path, int]] = []  # (folder, the pid that made it)

    def __enter__(self) -> "OutputFolder":
        from ..errors import InputError

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
            self._remove_stale(where)
            self.staging = Path(tempfile.mkdtemp(prefix=f".{where.name}.tmp-", dir=where.parent))
            self.staging.chmod(0o755)
            (self.staging / self.MARKER).write_text(json.dumps(_this_process()) + "\n")
        except OSError as e:
            self._cleanup()
            raise InputError(f"{opt}: cannot create {out}: {e.strerror or e}") from None
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            self._cleanup()
            return False
        import signal

        # The rename into place is not interrupted: a signal that ends the run (SIGINT, SIGTERM, SIGHUP)
        # is held until it is done, and acts then (on the old results or the new, never half of either).
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        try:
            self._commit()
        except BaseException:
            self._cleanup()
            raise
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return False

    def _remove_stale(self, where: Path) -> None:
        """Removes the staging folders of ``where`` that a fabriclab process
        of this host made and left when it died (see the class)."""
        for d in where.parent.glob(f".{glob.escape(where.name)}.tmp-*"):
            try:
                if d.is_symlink() or not d.is_dir():
                    continue
                made_by = json.loads((d / self.MARKER).read_text())
                if not isinstance(made_by, dict) or not isinstance(made_by.get("pid"), int):
                    continue
            except (OSError, ValueError):
                continue  # not ours, or unreadable: left alone
            if made_by.get("host") != _this_process()["host"] or _still_running(made_by):
                continue
            shutil.rmtree(d, ignore_errors=True)
            if not d.exists():
                self.stale_removed.append((d, made_by["pid"]))

    def _commit(self) -> None:
        (self.staging / self.MARKER).unlink(missing_ok=True)
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


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of process ``pid`` from /proc/PID/stat (its 3rd
    and 22nd fields; the start in clock ticks since boot), or None where
    /proc cannot tell. A pid reused by a later process has another start time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # after the command name, which may hold spaces
    return (fields[0], fields[19]) if len(fields) > 19 else None


def _this_process() -> dict:
    import socket

    stat = _proc_stat(os.getpid())
    return {"host": socket.gethostname(), "pid": os.getpid(), "start": stat and stat[1]}


def _still_running(made_by: dict) -> bool:
    """Whether the process a staging marker names still runs (then its folder is not stale)."""
    pid = made_by["pid"]
    if pid <= 0:
        return True  # not a process's id: left alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it runs, as another user
        return True
    stat = _proc_stat(pid)
    if stat is None or made_by.get("start") is None:
        return True
    state, start = stat
    return state != "Z" and start == made_by["start"]  # a zombie has ended; another start time: the pid was reused

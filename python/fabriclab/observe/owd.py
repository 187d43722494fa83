"""One-way delays of collective messages (docs/clockwork.md, "One-way delays").

Every message of ``ccl.parquet`` (a send row matched with its receive row)
gets a one-way delay: the receive's arrival on the receiver's corrected clock
minus the send's start on the sender's corrected clock. The clocks are
corrected with an estimator's ``clocks.parquet`` (``fabriclab clock
estimate``): each reading is moved to the reference's clock with the offset
and drift of the window that holds it. Without clocks, the readings are used
as they are. The delay is split into a base (the least delay of its
connection, src host -> dst host) and an excess (queueing); the sender-side
delay (post to send start, on the sender's own clock) goes beside it. Where
the run is simulated the mono columns are true time, so the true delay and
the estimate's error are given too. ``owd.parquet``'s schema is in
docs/telemetry.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError

__all__ = ["OwdError", "Owd", "compute", "rank_hosts", "read_ccl", "read_clocks", "run", "SCHEMA_COLUMNS"]

CCL_COLUMNS = ("op_id", "collective", "rank", "peer", "kind", "seq", "stream", "bytes", "post_mono_ns",
               "send_start_mono_ns", "send_start_real_ns", "recv_arrival_mono_ns", "recv_arrival_real_ns")
CLOCK_COLUMNS = ("window", "window_mid_ns", "host", "method", "reference", "offset_ns", "drift_ppm")
SCHEMA_COLUMNS = ("op_id", "collective", "src_rank", "dst_rank", "src", "dst", "seq", "stream", "bytes",
                  "send_start_ns", "recv_arrival_ns", "owd_ns", "base_ns", "excess_ns", "sender_delay_ns",
                  "send_window", "recv_window", "true_owd_ns", "error_ns")


class OwdError(InputError):
    """Bad input to the one-way delays: exit 2, naming what is wrong."""


@dataclass
class Owd:
    table: pd.DataFrame
    corrected: bool
    method: str | None = None
    reference: str | None = None
    source: str | None = None
    notes: list[str] = field(default_factory=list)

    def metadata(self) -> dict[str, str]:
        return {"fabriclab_owd_schema": "1", "source": self.source or "unknown",
                "clocks": "corrected" if self.corrected else "uncorrected",
                "method": self.method or "", "reference": self.reference or ""}


# ------------------------------------------------------------------ inputs

def read_ccl(run_dir: Path) -> tuple[pd.DataFrame, str | None]:
    """``RUN_DIR/ccl.parquet`` and its ``source`` (runtime or simulator)."""
    import pyarrow.parquet as pq

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise OwdError(f"owd: {run_dir} is not a folder (give a run folder holding ccl.parquet)")
    path = run_dir / "ccl.parquet"
    if not path.is_file():
        raise OwdError(f"owd: {run_dir} has no ccl.parquet (the collective telemetry: a run with [[collectives]] "
                       f"or [[jobs]], or `fabriclab runtime bench --telemetry`)")
    try:
        t = pq.read_table(path)
    except Exception as e:  # pyarrow raises many kinds
        raise OwdError(f"owd: {path} cannot be read ({type(e).__name__}); is it a fabriclab ccl.parquet?") from None
    missing = [c for c in CCL_COLUMNS if c not in t.column_names]
    if missing:
        raise OwdError(f"owd: {path} lacks the column(s) {', '.join(missing)} (schema: docs/telemetry.md)")
    meta = t.schema.metadata or {}
    source = meta.get(b"source", b"").decode() or None
    # nullable integers stay integers: through float64 a CLOCK_REALTIME reading (1.8e18 ns) would lose its
    # last 8 bits (256 ns steps)
    import pyarrow as pa

    ints = {pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype(), pa.uint64(): pd.UInt64Dtype()}
    return t.to_pandas(types_mapper=ints.get), source


def read_clocks(path: Path) -> pd.DataFrame:
    """An estimator's clocks table (docs/clockwork.md, "Output")."""
    path = Path(path)
    if not path.is_file():
        raise OwdError(f"owd: --clocks: {path} does not exist")
    try:
        d = pd.read_parquet(path)
    except Exception as e:
        raise OwdError(f"owd: --clocks: {path} cannot be read ({type(e).__name__}); is it fabriclab clock "
                       f"estimate's output?") from None
    missing = [c for c in CLOCK_COLUMNS if c not in d.columns]
    if missing:
        hint = (" (this looks like the simulator's ground truth, host/offset_ps/drift_ppm; give `fabriclab clock "
                "estimate`'s output)") if "offset_ps" in d.columns else ""
        raise OwdError(f"owd: --clocks: {path} lacks the column(s) {', '.join(missing)}{hint}")
    bad = d[["window_mid_ns", "offset_ns", "drift_ppm"]].isna().any(axis=1)
    if bad.any():
        r = d[bad].iloc[0]
        raise OwdError(f"owd: --clocks: {path}: host {r['host']} window {r['window']} has no offset or drift")
    import pyarrow.parquet as pq

    # the hosts' clock reading that window_mid_ns 0 stands for (a joined probes file's stamp origin)
    meta = pq.read_schema(str(path)).metadata or {}
    d.attrs["stamp_origin_ns"] = int(meta.get(b"fabriclab.clock.stamp_origin_ns", b"0"))
    return d


def rank_hosts(run_dir: Path, ccl: pd.DataFrame, names: list[str] | None = None
               ) -> tuple[dict[tuple[int, int], str], list[str]]:
    """(op_id, rank) -> host name. Rows that name their host (the ``host``
    column: every row the simulator writes, collectives' and training jobs')
    are placed by it. Without it, a simulated run's ``[[collectives]]`` entry
    places rank r on ``hosts[r]`` (default host r) of the resolved scenario's
    topology (a ccl.parquet written before the column existed); any other op
    (the runtime's) puts rank r on ``names[r]`` when given (``--hosts``), else
    its ranks are named ``rank<r>``."""
    notes = []
    mapping: dict[tuple[int, int], str] = {}
    if "host" in ccl.columns:
        named = ccl[ccl["host"].notna()]
        for (o, r), h in named.groupby(["op_id", "rank"], sort=False)["host"].first().items():
            mapping[(int(o), int(r))] = str(h)
    ops = sorted(int(o) for o in pd.unique(ccl["op_id"]))
    unmapped = [o for o in ops if not any(k[0] == o for k in mapping)]
    scen = Path(run_dir) / "scenario.resolved.toml"
    if unmapped and scen.is_file():
        from ..scenario import Scenario

        s = Scenario.load(scen)
        t = s.build_topology()
        topo_names = [t.nodes[h]["name"] for h in t.hosts]
        for i, c in enumerate(s.collectives):
            if i not in unmapped:
                continue
            ranks = sorted(int(r) for r in pd.unique(ccl.loc[ccl["op_id"] == i, "rank"]))
            for r in ranks:
                h = c.hosts[r] if c.hosts is not None else r
                if 0 <= h < len(topo_names):
                    mapping[(i, r)] = topo_names[h]
        unmapped = [o for o in ops if not any(k[0] == o for k in mapping)]
    if unmapped and names:
        for o in unmapped:
            for r in sorted(int(r) for r in pd.unique(ccl.loc[ccl["op_id"] == o, "rank"])):
                if r >= len(names):
                    raise OwdError(f"owd: --hosts names {len(names)} hosts, but op {o} has rank {r}; give one "
                                   f"host per rank, rank 0 first")
                mapping[(o, r)] = names[r]
        notes.append(f"ops {unmapped[:5]}{' ...' if len(unmapped) > 5 else ''}: rank r on --hosts' r-th host")
    elif unmapped:
        notes.append(f"ops {unmapped[:5]}{' ...' if len(unmapped) > 5 else ''}: rank to host map unknown (the "
                     f"runtime's ops), hosts named rank<r>; give --hosts")
    return mapping, notes


# ------------------------------------------------------------------ clock correction

def _correct(host: np.ndarray, reading: np.ndarray, clocks: pd.DataFrame, what: str):
    """Each reading (int64 ns of its host's clock) on the reference's clock, as (window mid, float ns after it,
    window index): r = mid + (c - mid - offset) / (1 + drift), with the offset and drift of the window whose
    reference-time span holds r (its bounds halfway between window middles; the first and last windows
    extend outwards)."""
    mid_out = np.zeros(len(reading), dtype=np.int64)
    frac_out = np.zeros(len(reading), dtype=np.float64)
    win_out = np.zeros(len(reading), dtype=np.int64)
    for h in np.unique(host):
        sel = host == h
        w = clocks[clocks["host"] == h].sort_values("window_mid_ns")
        if w.empty:
            raise OwdError(f"owd: --clocks has no row for host {h}, which {what} (its hosts: "
                           f"{', '.join(sorted(map(str, pd.unique(clocks['host']))))})")
        mids = w["window_mid_ns"].to_numpy(dtype=np.int64)
        offs = w["offset_ns"].to_numpy(dtype=np.float64)
        rates = 1.0 + w["drift_ppm"].to_numpy(dtype=np.float64) * 1e-6
        wins = w["window"].to_numpy(dtype=np.int64)
        bounds = mids[:-1] + (mids[1:] - mids[:-1]) // 2
        c = reading[sel]
        k = np.searchsorted(bounds, c - np.rint(offs[0]).astype(np.int64), side="right")
        for _ in range(2):  # place by the reading moved with its window's offset, then again with the result
            frac = ((c - mids[k]).astype(np.float64) - offs[k]) / rates[k]
            r_approx = mids[k] + np.rint(frac).astype(np.int64)
            k = np.searchsorted(bounds, r_approx, side="right")
        frac = ((c - mids[k]).astype(np.float64) - offs[k]) / rates[k]
        mid_out[sel], frac_out[sel], win_out[sel] = mids[k], frac, wins[k]
    return mid_out, frac_out, win_out


# ------------------------------------------------------------------ the delays

def compute(ccl: pd.DataFrame, hosts: dict[tuple[int, int], str], clocks: pd.DataFrame | None = None,
            method: str | None = None, source: str | None = None, clock: str = "real",
            true_real: bool = False) -> Owd:
    """The one-way delay of every message whose send started and whose receive arrived.

    ``clock``: which of ccl.parquet's readings are the hosts' clocks: ``real`` (``*_real_ns``) or ``mono``
    (``*_mono_ns``: in the runtime, each host's CLOCK_MONOTONIC, which a time namespace moves). With
    ``true_real`` the ``*_real_ns`` readings are taken as true time (one machine: every rank read one
    CLOCK_REALTIME, as in a cluster-in-a-box), so the runtime's rows get a true OWD and an error too."""
    if clock not in ("real", "mono"):
        raise OwdError(f"owd: --clock {clock!r}: give real or mono")
    if source == "simulator" and clock == "mono":
        raise OwdError("owd: --clock mono: a simulated run's *_mono_ns columns are true time, not the hosts' clocks")
    notes: list[str] = []
    send = ccl[ccl["kind"] == "send"]
    recv = ccl[ccl["kind"] == "recv"]
    s = pd.DataFrame({"op_id": send["op_id"].astype(np.int64), "collective": send["collective"],
                      "src_rank": send["rank"].astype(np.int64), "dst_rank": send["peer"].astype(np.int64),
                      "seq": send["seq"].astype(np.int64), "stream": send["stream"], "bytes": send["bytes"],
                      "post_mono": send["post_mono_ns"], "send_mono": send["send_start_mono_ns"],
                      "send_real": send["send_start_real_ns"]})
    r = pd.DataFrame({"op_id": recv["op_id"].astype(np.int64), "src_rank": recv["peer"].astype(np.int64),
                      "dst_rank": recv["rank"].astype(np.int64), "seq": recv["seq"].astype(np.int64),
                      "arr_mono": recv["recv_arrival_mono_ns"], "arr_real": recv["recv_arrival_real_ns"]})
    key = ["op_id", "src_rank", "dst_rank", "seq"]
    for rows, kind in ((s, "send"), (r, "recv")):
        dup = rows.duplicated(key)
        if dup.any():
            d = rows[dup].iloc[0]
            raise OwdError(f"owd: ccl.parquet has two {kind} rows of op {d['op_id']} from rank {d['src_rank']} to "
                           f"rank {d['dst_rank']} with seq {d['seq']}; seq must number a rank pair's messages")
    m = s.merge(r, on=key, how="inner")
    done = m["send_real"].notna() & m["arr_real"].notna()
    if (~done).any():
        notes.append(f"{int((~done).sum())} messages without a send start or an arrival (unfinished) left out")
    m = m[done].reset_index(drop=True)
    unmatched = len(s) - len(m) - int((~done).sum())
    if unmatched:
        notes.append(f"{unmatched} sends with no matching receive row left out")
    if m.empty:
        raise OwdError("owd: ccl.parquet holds no message with both a send start and a receive arrival")

    def host(op, rank):
        return [hosts.get((int(o), int(k)), f"rank{int(k)}") for o, k in zip(op, rank)]

    m["src"] = host(m["op_id"], m["src_rank"])
    m["dst"] = host(m["op_id"], m["dst_rank"])
    send_real = m[f"send_{clock}"].to_numpy(dtype=np.int64)
    arr_real = m[f"arr_{clock}"].to_numpy(dtype=np.int64)
    reference = None
    if clocks is not None:
        methods = sorted(map(str, pd.unique(clocks["method"])))
        if method is None:
            method = "huygens" if "huygens" in methods else (methods[0] if len(methods) == 1 else None)
            if method is None:
                raise OwdError(f"owd: --clocks holds the methods {', '.join(methods)}; choose one with --method")
        if method not in methods:
            raise OwdError(f"owd: --method {method}: --clocks holds only {', '.join(methods)}")
        c = clocks[clocks["method"] == method]
        reference = str(c["reference"].iloc[0])
        origin = int(clocks.attrs.get("stamp_origin_ns", 0))
        sm, sf, sw = _correct(m["src"].to_numpy(dtype=object), send_real - origin, c, "sent messages")
        am, af, aw = _correct(m["dst"].to_numpy(dtype=object), arr_real - origin, c, "received messages")
        sm, am = sm + origin, am + origin
        owd = (am - sm).astype(np.float64) + (af - sf)
        m["send_start_ns"] = sm + np.rint(sf).astype(np.int64)
        m["recv_arrival_ns"] = am + np.rint(af).astype(np.int64)
        m["send_window"], m["recv_window"] = sw, aw
    else:
        owd = (arr_real - send_real).astype(np.float64)
        m["send_start_ns"], m["recv_arrival_ns"] = send_real, arr_real
        m["send_window"] = m["recv_window"] = pd.array([pd.NA] * len(m), dtype="Int64")
        notes.append("clocks uncorrected (no --clocks): each delay includes the receiver's minus the sender's "
                     "clock offset")
    m["owd_ns"] = owd
    m["base_ns"] = m.groupby(["src", "dst"])["owd_ns"].transform("min")
    m["excess_ns"] = m["owd_ns"] - m["base_ns"]
    m["sender_delay_ns"] = (m["send_mono"] - m["post_mono"]).astype("Int64")
    if source == "simulator" or true_real:
        t = "mono" if source == "simulator" else "real"
        m["true_owd_ns"] = (m[f"arr_{t}"] - m[f"send_{t}"]).astype("Int64")
        m["error_ns"] = m["owd_ns"] - m["true_owd_ns"].astype(np.float64)
    else:
        m["true_owd_ns"] = pd.array([pd.NA] * len(m), dtype="Int64")
        m["error_ns"] = np.nan
    out = m[list(SCHEMA_COLUMNS)].sort_values(["op_id", "src", "dst", "seq"], kind="stable").reset_index(drop=True)
    return Owd(out, clocks is not None, method, reference, source, notes)


def connections(t: pd.DataFrame) -> pd.DataFrame:
    """Per connection (src, dst): messages, base, median and p99 excess, median sender delay, p99 |error|."""
    g = t.groupby(["src", "dst"], sort=True)
    d = pd.DataFrame({"messages": g.size(), "base_ns": g["base_ns"].min(),
                      "excess_p50_ns": g["excess_ns"].median(), "excess_p99_ns": g["excess_ns"].quantile(0.99),
                      "sender_delay_p50_ns": g["sender_delay_ns"].median(),
                      "abs_error_p99_ns": g["error_ns"].apply(lambda e: e.abs().quantile(0.99))})
    return d.reset_index()


# ------------------------------------------------------------------ the command

def write(o: Owd, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.Table.from_pandas(o.table, preserve_index=False)
    types = {"op_id": pa.int64(), "collective": pa.string(), "src_rank": pa.int32(), "dst_rank": pa.int32(),
             "src": pa.string(), "dst": pa.string(), "seq": pa.int32(), "stream": pa.int32(), "bytes": pa.int64(),
             "send_start_ns": pa.int64(), "recv_arrival_ns": pa.int64(), "owd_ns": pa.float64(),
             "base_ns": pa.float64(), "excess_ns": pa.float64(), "sender_delay_ns": pa.int64(),
             "send_window": pa.int64(), "recv_window": pa.int64(), "true_owd_ns": pa.int64(),
             "error_ns": pa.float64()}
    schema = pa.schema([(c, types[c]) for c in SCHEMA_COLUMNS],
                       metadata={k.encode(): v.encode() for k, v in o.metadata().items()})
    pq.write_table(t.select(list(SCHEMA_COLUMNS)).cast(schema), str(path))


def run(run_dir: Path, clocks_path: Path | None = None, out: Path | None = None, method: str | None = None,
        timelines: int = 6, hosts: list[str] | None = None, clock: str = "real",
        true_real: bool = False) -> tuple[Owd, list[Path]]:
    """``fabriclab owd``: owd.parquet, owd_matrix.png and owd_timeline.png in ``out`` (default: the run folder)."""
    ccl, source = read_ccl(run_dir)
    clocks = read_clocks(clocks_path) if clocks_path is not None else None
    out = Path(out) if out is not None else Path(run_dir)
    if out.exists() and not out.is_dir():
        raise OwdError(f"owd: --out: {out} is a file; give a folder")
    rank_map, notes = rank_hosts(run_dir, ccl, hosts)
    o = compute(ccl, rank_map, clocks, method, source, clock, true_real)
    o.notes[:0] = notes
    out.mkdir(parents=True, exist_ok=True)
    from .report import plots

    written = [out / "owd.parquet"]
    write(o, written[0])
    for name, png in (("owd_matrix.png", plots.owd_matrix(o.table)),
                      ("owd_timeline.png", plots.owd_timeline(o.table, timelines))):
        if png is not None:
            (out / name).write_bytes(png)
            written.append(out / name)
    return o, written

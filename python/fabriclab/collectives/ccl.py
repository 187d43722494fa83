"""The collective telemetry table, ``ccl.parquet`` (docs/telemetry.md): one
schema for the runtime's measurements and the simulator's collectives, so
the same analysis runs on both. One row per message as one rank saw it."""

from __future__ import annotations

SCHEMA_VERSION = 3
COLUMNS = [
    "op_id", "collective", "algorithm", "group", "dtype", "rank", "host", "peer", "step", "kind", "seq", "offset_bytes",
    "bytes", "stream", "reduce",
    "post_mono_ns", "send_start_mono_ns", "send_end_mono_ns", "recv_arrival_mono_ns", "recv_done_mono_ns",
    "post_real_ns", "send_start_real_ns", "send_end_real_ns", "recv_arrival_real_ns", "recv_done_real_ns",
    "send_queue_ns", "recv_wait_ns",
]
SOURCES = ("runtime", "simulator")
# The instants of a row, each a mono and a real column.
TIMES = ("post", "send_start", "send_end", "recv_arrival", "recv_done")


def schema(source: str):
    import pyarrow as pa

    if source not in SOURCES:
        raise ValueError(f"source: {source!r} is not one of {', '.join(SOURCES)}")
    types = {c: pa.int64() for c in COLUMNS}
    types.update({c: pa.string() for c in ("collective", "algorithm", "group", "dtype", "host", "kind")})
    types["reduce"] = pa.bool_()
    for c in ("rank", "peer", "step", "seq", "stream"):
        types[c] = pa.int32()
    return pa.schema([(c, types[c]) for c in COLUMNS],
                     metadata={"fabriclab_telemetry_schema": str(SCHEMA_VERSION), "source": source})


def table(rows: dict, source: str):
    """``rows``: a list per column of :data:`COLUMNS` (None for null)."""
    import pyarrow as pa

    s = schema(source)
    return pa.table({f.name: pa.array(rows[f.name], type=f.type) for f in s}, schema=s)


def from_simulation(collectives: dict, steps: dict, host_clock=None, host_names=None, groups=None):
    """The simulator's collectives as ccl rows. ``collectives`` and ``steps`` are the
    core's tables: one row per collective (name, op, algorithm), one per plan step
    (rank, step, op, peer, seq, offset_bytes, bytes, reduce, start_ps, end_ps,
    data_ps). Each collective is one op; op_id is its index in the scenario.

    Mono columns hold simulated (true) nanoseconds (picoseconds // 1000);
    real columns too, or, with ``host_clock`` (the scenario's host clocks,
    ``Collected.host_clock``), the row's host's clock at that instant. ``host``
    is the row's host's name from ``host_names`` (by host index), else null. A send posts at the step's
    start, starts when its message leaves (after the send overhead) and ends
    when the message has arrived (the simulator has no kernel buffer to hand
    it to); a receive's arrival is its message's, and it is done when its
    step completes (after the reduction). Steps that never ran keep nulls.
    ``groups``: the communicator group of each collective by name (e.g.
    "tp0"); null for a collective without one."""
    index = {name: i for i, name in enumerate(collectives["collective"])}
    meta = {name: (op, algo) for name, op, algo in
            zip(collectives["collective"], collectives["op"], collectives["algorithm"])}
    rows: dict[str, list] = {c: [] for c in COLUMNS}
    real_ps: dict[str, list] = {w: [] for w in TIMES}
    n = len(steps["rank"])
    for k in range(n):
        name = steps["collective"][k]
        send = steps["op"][k] == "send"
        start, end, data = steps["start_ps"][k], steps["end_ps"][k], steps["data_ps"][k]
        post = None if start is None else start // 1000
        done = None if end is None else end // 1000
        moved = None if data is None else data // 1000
        rows["op_id"].append(index[name])
        rows["collective"].append(meta[name][0] or None)
        rows["algorithm"].append(meta[name][1] or None)
        rows["group"].append((groups or {}).get(name))
        rows["dtype"].append(None)
        for c, col in (("rank", "rank"), ("peer", "peer"), ("step", "step"), ("seq", "seq"),
                       ("offset_bytes", "offset_bytes"), ("bytes", "bytes")):
            rows[c].append(steps[col][k])
        rows["host"].append(None if host_names is None else host_names[steps["host"][k]])
        rows["kind"].append("send" if send else "recv")
        rows["stream"].append(0)
        rows["reduce"].append(bool(steps["reduce"][k]) and not send)
        times = {"post": post, "send_start": moved if send else None, "send_end": done if send else None,
                 "recv_arrival": None if send else moved, "recv_done": None if send else done}
        for what, v in times.items():
            rows[f"{what}_mono_ns"].append(v)
            rows[f"{what}_real_ns"].append(v)
        ps = {"post": start, "send_start": data if send else None, "send_end": end if send else None,
              "recv_arrival": None if send else data, "recv_done": None if send else end}
        for what, v in ps.items():
            real_ps[what].append(v)
        rows["send_queue_ns"].append(moved - post if send and moved is not None and post is not None else None)
        rows["recv_wait_ns"].append(max(0, moved - post) if not send and moved is not None and post is not None
                                    else None)
    if host_clock is not None:
        for what, v in real_ps.items():
            rows[f"{what}_real_ns"] = host_clock(list(steps["host"]), v)
    return table(rows, "simulator")


def from_jobs(job_ccl: dict, algorithms: dict[str, str], first_op: int, host_clock=None, host_names=None):
    """The training jobs' allreduces as ccl rows (the core's ``job_ccl`` table:
    one row per message as one rank saw it, times in picoseconds). Jobs in the
    order of their first row; each job's allreduces are ops numbered on from
    ``first_op``, job after job, in the order the job started them (then the
    fusions some ranks joined but that never started). ``algorithms``: the
    job's allreduce (ring, tree, ...) by job name. ``group``: the table's
    ``group`` column when it has one (a job's communicator group per row),
    else null. ``seq`` counts a rank's
    steps with the same peer and kind in the op; ``offset_bytes`` is null (a
    job's messages are partitions of a fusion, not ranges of one buffer).
    With ``host_clock``, real columns hold the row's host's clock, and with
    ``host_names`` the ``host`` column names it (as in :func:`from_simulation`)."""
    import numpy as np
    import pandas as pd

    d = pd.DataFrame(job_ccl)
    rows: dict[str, list] = {c: [] for c in COLUMNS}
    if d.empty:
        return table(rows, "simulator")
    op_id = np.zeros(len(d), dtype=np.int64)
    base = first_op
    for job in pd.unique(d["job"]):
        sel = (d["job"] == job).to_numpy()
        op_id[sel] = base + d.loc[sel, "op"].to_numpy(dtype=np.int64)
        base += int(d.loc[sel, "op"].max()) + 1
    d["op_id"] = op_id
    d["seq"] = d.sort_values(["op_id", "rank", "peer", "kind", "step"]).groupby(
        ["op_id", "rank", "peer", "kind"]).cumcount()
    ns = {c: d[c].astype("Int64") // 1000 for c in ("post_ps", "start_ps", "end_ps")}
    send = (d["kind"] == "send").to_numpy()

    def pick(mask, s):
        return s.where(mask, pd.NA)

    times = {"post": ns["post_ps"], "send_start": pick(send, ns["start_ps"]),
             "send_end": pick(send, ns["end_ps"]), "recv_arrival": pick(~send, ns["start_ps"]),
             "recv_done": pick(~send, ns["end_ps"])}
    cols = {"op_id": d["op_id"], "collective": ["allreduce"] * len(d),
            "algorithm": [algorithms.get(j, a) for j, a in zip(d["job"], d["algorithm"])],
            "group": list(d["group"]) if "group" in d else [None] * len(d),
            "dtype": [None] * len(d), "rank": d["rank"],
            "host": [None] * len(d) if host_names is None else [host_names[int(h)] for h in d["host"]],
            "peer": d["peer"], "step": d["step"], "kind": d["kind"],
            "seq": d["seq"], "offset_bytes": [None] * len(d), "bytes": d["bytes"], "stream": [0] * len(d),
            "reduce": (d["reduce"] != 0) & ~send}
    for what, v in times.items():
        cols[f"{what}_mono_ns"] = v
        cols[f"{what}_real_ns"] = v
    if host_clock is not None:
        ps = {c: d[c].astype("Int64") for c in ("post_ps", "start_ps", "end_ps")}
        at = {"post": ps["post_ps"], "send_start": pick(send, ps["start_ps"]), "send_end": pick(send, ps["end_ps"]),
              "recv_arrival": pick(~send, ps["start_ps"]), "recv_done": pick(~send, ps["end_ps"])}
        hosts = [int(h) for h in d["host"]]
        for what, v in at.items():
            cols[f"{what}_real_ns"] = pd.Series(host_clock(hosts, _values(v)), dtype="Int64")
    cols["send_queue_ns"] = pick(send, times["send_start"] - times["post"])
    cols["recv_wait_ns"] = pick(~send, (times["recv_arrival"] - times["post"]).clip(lower=0))
    import pyarrow as pa

    s = schema("simulator")
    return pa.table({f.name: pa.array(_values(cols[f.name]), type=f.type) for f in s}, schema=s)


def _values(v):
    """A column as a list with None for missing values."""
    import pandas as pd

    if isinstance(v, pd.Series):
        return [None if x is pd.NA else x for x in v.astype(object).where(v.notna(), None)]
    return list(v)

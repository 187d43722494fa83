"""Per-message telemetry as a table: the ``ccl.parquet`` schema of
docs/telemetry.md (fabriclab.collectives.ccl, shared with the simulator), one row per
message a rank sent or received."""

from __future__ import annotations

import json

from ..collectives.ccl import COLUMNS, table


class Telemetry:
    """Rows gathered by a communicator; bounded by what the caller keeps before writing."""

    def __init__(self):
        self.chunks: list[dict] = []
        self._meta: dict[str, tuple[str, str]] = {}

    def add(self, cols: dict, plan_text: str, dtype: str, group: str | None = None) -> None:
        if not cols["op_id"]:
            return
        meta = self._meta.get(plan_text)
        if meta is None:
            d = json.loads(plan_text)
            meta = self._meta[plan_text] = (d["collective"], d.get("algorithm", ""))
            if len(self._meta) > 64:
                self._meta.pop(next(iter(self._meta)))
        n = len(cols["op_id"])
        self.chunks.append({**cols, "collective": [meta[0]] * n, "algorithm": [meta[1]] * n, "dtype": [dtype] * n,
                            "group": [group] * n})

    def table(self):
        rows: dict[str, list] = {c: [] for c in COLUMNS}
        for ch in self.chunks:
            is_send = [k == "send" for k in ch["kind"]]
            for c in ("op_id", "collective", "algorithm", "group", "dtype", "rank", "peer", "step", "kind", "seq",
                      "offset_bytes", "bytes", "stream", "reduce"):
                rows[c] += ch[c]
            rows["host"] += [None] * len(ch["op_id"])
            for clock in ("mono", "real"):
                rows[f"post_{clock}_ns"] += ch[f"post_{clock}_ns"]
                st, en = ch[f"start_{clock}_ns"], ch[f"end_{clock}_ns"]
                rows[f"send_start_{clock}_ns"] += [v if s else None for v, s in zip(st, is_send)]
                rows[f"send_end_{clock}_ns"] += [v if s else None for v, s in zip(en, is_send)]
                rows[f"recv_arrival_{clock}_ns"] += [None if s else v for v, s in zip(st, is_send)]
                rows[f"recv_done_{clock}_ns"] += [None if s else v for v, s in zip(en, is_send)]
            rows["send_queue_ns"] += [w if s else None for w, s in zip(ch["wait_ns"], is_send)]
            rows["recv_wait_ns"] += [None if s else w for w, s in zip(ch["wait_ns"], is_send)]
        return table(rows, "runtime")

    def write(self, path) -> None:
        import pyarrow.parquet as pq

        pq.write_table(self.table(), path)
        self.chunks.clear()

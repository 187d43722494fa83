"""Two baselines on the same runs as C4D (docs/c4.md).

- ``watchdog``: NCCL's watchdog as PyTorch arms it: an op unfinished a
  fixed ``TIMEOUT_PS`` after its first event fires an alarm naming no
  component (PyTorch's default is 10 minutes; 1 s here, so that it can fire
  within our runs at all).
- ``outlier``: per-rank iteration times (jobs.parquet): after three
  iterations, a rank whose iteration time exceeds its own median by more
  than max(10 %, 6 robust standard deviations) is named as slow
  (non-communication slow) at the end of that iteration.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .detector import Alarm, _robust_sd

TIMEOUT_PS = 10**12


def watchdog(ccl: pd.DataFrame, run_end_ps: int) -> Alarm | None:
    for op_id, rows in sorted(ccl.groupby("op_id"), key=lambda kv: kv[1]["post_mono_ns"].min()):
        start = int(rows["post_mono_ns"].min()) * 1000
        done = rows["send_end_mono_ns"].where(rows["kind"] == "send", rows["recv_done_mono_ns"])
        if done.isna().any() or len(rows["rank"].unique()) < rows["rank"].max() + 1:
            t = start + TIMEOUT_PS
            return Alarm(t, "hang", None, None, int(op_id)) if t <= run_end_ps else None
    return None


def outlier(jobs: pd.DataFrame, name: str) -> Alarm | None:
    j = jobs[(jobs["job"] == name) & jobs["iteration_time_ps"].notna()]
    t = j.pivot(index="iteration", columns="worker", values="iteration_time_ps").sort_index()
    ends = j.pivot(index="iteration", columns="worker", values="end_ps").sort_index()
    for i in range(4, len(t)):
        hist = t.iloc[1:i]
        if len(hist) < 3:
            continue
        cur = t.iloc[i]
        for w in cur.sort_values(ascending=False).index:
            h = hist[w].to_numpy(dtype=float)
            base = float(np.median(h))
            if cur[w] > base * max(1.10, 1 + 6 * _robust_sd(h) / base):
                return Alarm(int(ends.iloc[i].max()), "noncomm_slow", "rank", f"{name}:{int(w)}", i)
    return None

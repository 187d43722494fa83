"""``fabriclab reproduce c4-recovery``: detection, isolation and restart
(C4 section 3.1, figure 3) on seeded jobs with one fault each, under C4D
with automatic isolation and under the watchdog with people diagnosing;
each run's measured four-part downtime beside what the Table 3 model
(``fabriclab/systems/c4/downtime.py``) predicts for the same error and parameters
(docs/c4-recovery.md)."""

from __future__ import annotations

import random
import time
from pathlib import Path

from . import downtime as dt
from ...util.parallel import map_runs
from .repro_diagnosis import HOSTS_PER_LEAF, leaf_spine_job

MS, S = 10**9, 10**12
KINDS = ("crash", "hang", "compute_slow", "link_down_host")
ITERATIONS, CHECKPOINT_EVERY = 40, 10
# The paper's checkpoints: "approximately every 10 iterations" (section 2),
# in memory (Gemini); the write is taken as a blocking pause of half an
# iteration's compute (an assumption: the paper gives no figure).
CHECKPOINT_PS = 2 * MS
COMPUTE_PS = 4 * MS
# Table 1's kind for each injected fault (its manual diagnosis time in
# downtime.py): a crashed GPU process (CUDA error), a hung one (NCCL
# timeout), a slowed GPU (ECC/NVLink), a dead host link (ACK timeout).
TABLE1_KIND = {"crash": "CUDA Error", "hang": "NCCL Timeout", "compute_slow": "ECC/NVLink Error",
               "link_down_host": "ACK Timeout"}
PRACTICES = {"c4d": dt.PRACTICES["c4d"], "watchdog": dt.PRACTICES["june-2023"]}


def scenario(i: int, quick: bool, detector: str) -> tuple[dict, dict]:
    """Scenario ``i`` under ``detector`` and its label."""
    rng = random.Random(2000 + i)
    kind = KINDS[i % len(KINDS)]
    n = 8 if quick else rng.choice((8, 16))
    leaves = n // HOSTS_PER_LEAF + 1  # a leaf more for the spares
    hosts = rng.sample(range(n + HOSTS_PER_LEAF - 1), n)
    rank = rng.randrange(n)
    # After 12 to 28 iterations, as the job runs them: x measured iterations
    # and the checkpoint pauses taken before iteration x.
    x = rng.uniform(12, 28)
    kinds = {k.name: k for k in dt.TABLE1}
    practice = PRACTICES[detector]
    f = {"kind": kind, "at_ps": 0}
    if kind in ("crash", "hang"):
        f["rank"] = rank
    elif kind == "compute_slow":
        f.update(rank=rank, factor=2.0)
    else:
        h = hosts[rank]
        f.update(kind="link_down", link=[f"h{h}", f"leaf{h // HOSTS_PER_LEAF}"])
    # The diagnosis benchmark's cluster and job, with checkpoints.
    s = leaf_spine_job(f"c4-recovery-{i}-{detector}", 100 + i, leaves, hosts, COMPUTE_PS, ITERATIONS,
                       checkpoint_iterations=CHECKPOINT_EVERY, checkpoint_ps=CHECKPOINT_PS)
    s["faults"] = [f]
    s["outputs"]["messages"] = detector == "c4d"
    s["recovery"] = {"detector": detector, "isolation_ps": int((practice.auto_isolation_s or 0) * S),
                     "manual_diagnosis_ps": int(kinds[TABLE1_KIND[kind]].manual_diagnosis_s * S),
                     "reinit_ps": int(practice.reinit_s * S)}
    f["at_ps"] = at_ps = int(x * iteration_ps(s)) + int(x) // CHECKPOINT_EVERY * CHECKPOINT_PS
    return s, {"scenario": i, "detector": detector, "kind": kind, "ranks": n, "fault_ps": at_ps}


def iteration_ps(s: dict, iterations: int = 5) -> float:
    """The median iteration time of scenario ``s``'s job without faults or
    checkpoints, from a short plain run of its first iterations."""
    from ...api import simulate
    from ...scenario.model import Scenario

    d = {k: v for k, v in s.items() if k not in ("faults", "recovery")}
    job = {k: v for k, v in s["jobs"][0].items() if k not in ("checkpoint_iterations", "checkpoint_ps")}
    d["jobs"] = [job | {"iterations": iterations}]
    d["outputs"] = {"flows": False, "links": False, "messages": False}
    ends = simulate(Scenario.from_dict(d)).jobs.groupby("iteration").end_ps.max().sort_index()
    return float(ends.diff().dropna().median())


def run_one(args) -> dict:
    i, quick, detector = args
    from .detector import HANG_PERIODS
    from .recovery import simulate
    from ...scenario.model import Scenario

    s, label = scenario(i, quick, detector)
    t0 = time.perf_counter()
    res = simulate(Scenario.from_dict(s))
    wall = time.perf_counter() - t0
    r = res.summary["recovery"]
    out = dict(label, outcome=r["outcome"], cycles=r["cycles"], wall_s=round(wall, 2))
    cyc = res.recovery_arrow.to_pylist()
    c = cyc[0] if cyc else None
    out.update(correct=None if c is None else c["correct"], syndrome=None if c is None else c["syndrome"],
               diagnosis=None if c is None else c["diagnosis"])
    for p in dt.PARTS:
        out[f"sim_{p}_s"] = r["downtime_ps"][p] / S
    out["sim_total_s"] = r["downtime_ps"]["total"] / S
    # The model's parameters, from the same run: the checkpoint interval as
    # the job kept it (productive time between checkpoints: ten iterations
    # and a pause), the iteration time before the fault, and the detectors'
    # nominal latencies: the watchdog's timeout; C4D's hang timer
    # (HANG_PERIODS periods) for hangs, two late iterations for a straggler.
    seg1 = res.segments[0]
    ends = seg1.jobs.groupby("iteration").end_ps.max().sort_index()
    ends = ends[ends < label["fault_ps"]].diff().dropna()
    it_s = float(ends.median()) / S if len(ends) else COMPUTE_PS / S
    interval_s = CHECKPOINT_EVERY * it_s + CHECKPOINT_PS / S
    rec = s["recovery"]
    if detector == "watchdog":
        det_s = 1.0
    else:
        det_s = (2 if label["kind"] == "compute_slow" else HANG_PERIODS) * it_s
    kind = TABLE1_KIND[label["kind"]]
    practice = dt.Practice(f"{detector}-as-run", 1.0, interval_s, det_s, rec["reinit_ps"] / S,
                           None if detector == "watchdog" else rec["isolation_ps"] / S,
                           tuple(dt.ErrorKind(k.name, k.share, 1.0, rec["manual_diagnosis_ps"] / S if k.name == kind
                                              else k.manual_diagnosis_s) for k in dt.TABLE1))
    at_s = (label["fault_ps"] - s["jobs"][0].get("start_ps", 0)) / S
    model = dt.account(practice, [dt.Error(at_s, kind, True)], at_s)
    for p in dt.PARTS:
        out[f"model_{p}_s"] = model["seconds"][p]
    out["model_total_s"] = model["seconds"]["total"]
    out["useful_s"] = r["useful_ps"] / S
    out["iteration_s"] = it_s
    return out


def run(out_dir: Path, quick: bool = False, workers: int = 2) -> dict:
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    count = len(KINDS) if quick else 3 * len(KINDS)
    t0 = time.perf_counter()
    args = [(i, quick, d) for i in range(count) for d in ("c4d", "watchdog")]
    rows = map_runs(run_one, args, workers)
    df = pd.DataFrame(rows)
    df.to_csv(out_dir / "runs.csv", index=False)
    table = []
    for (det, kind), g in df.groupby(["detector", "kind"]):
        row = {"detector": det, "kind": kind, "runs": len(g), "detected": int((g.cycles > 0).sum()),
               "correct": int(g.correct.fillna(False).astype(bool).sum())}
        for p in (*dt.PARTS, "total"):
            row[f"sim_{p}_s"] = float(g[f"sim_{p}_s"].mean())
            row[f"model_{p}_s"] = float(g[f"model_{p}_s"].mean())
        table.append(row)
    t = pd.DataFrame(table)
    t.to_csv(out_dir / "split.csv", index=False)
    return {"runs": len(df), "wall_s": round(time.perf_counter() - t0, 1),
            "by_detector_and_kind": t.round(4).to_dict(orient="records"),
            "paper_table3_percent": dt.PAPER_TABLE3}

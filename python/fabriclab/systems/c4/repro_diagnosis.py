"""``fabriclab reproduce c4-diagnosis``: C4D's detection and diagnosis
(C4 section 3.1) on seeded scenarios with one labelled fault or none, alone
and with the probes' evidence (C4D + probes, c4/probes.py), against two
baselines (docs/c4.md)."""

from __future__ import annotations

import math
import random
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from .baselines import outlier, watchdog
from .detector import Alarm, JobView, diagnose, job_view
from ...scenario.faults import SYNDROME, link_name
from .probes import APP as PROBE_APP
from .probes import blame, localise, probe_flows, probe_load
from ...util.parallel import map_runs

HOSTS_PER_LEAF, SPINES, RATE = 4, 2, 10_000_000_000
KINDS = ("crash", "hang", "compute_slow", "link_rate", "link_loss", "link_down_host", "link_down_spine",
         "flapping", "pcie_slow")
PUBLISHED = {"Minder (precision, F1, detection)": "0.904, 0.893, 3.6 s", "Greyhound (accuracy)": "> 99 %"}
MS = 10**9
# Probes every 2 ms (docs/c4.md, "C4D + probes"): a flapping link's down half
# (2-10 ms) holds at least one probe round.
PROBE_PERIOD_PS = 2 * MS


SEED_BASE = 1000  # the anchor of the simulation seeds, and --quick's range
# The full benchmark's default range: the blind held-out 200 of the eighth
# pass (a switch's fabric links as one suspect place), run once after its
# rules were frozen (docs/reproductions.md). 1000-1199, 3000-3199, 4000-4199,
# 7000-7199 and 8000-8199, held out by earlier passes, have been seen (the
# sixth to eighth passes studied the late diagnoses of the last three), so
# they are no longer blind. Nor is 9000-9199 since the ninth pass developed
# on it; that pass's fresh ranges are 37000, 41000 and 52000 (docs/c4.md).
HELD_OUT_BASE = 9000


# A fault-free iteration of the benchmark's job (ps), by allreduce and ranks,
# measured (docs/c4.md, "Fault timing"): the median interval between the ends
# of consecutive iterations before the fault, median over the fourth pass's
# 150 development runs (seeds 5000-5149, with probes; per (algorithm, ranks)
# 1 to 36 runs, each within 3.5 % of the median; with and without tenants
# within 0.7 %, so pooled). Iteration k ends at about (k + 1) x this (the
# offset, median per row: -0.4 to 0.4 ms), so a fault at u x this, u in
# [7, 9), comes after 7 or 8 iterations whatever the job's size. The closed
# form of the earlier passes (compute, the ring's bytes at the link rate, 20 us
# per round, x 1.5) put big rings' faults after 12-15 and trees' after 4-7.
ITERATION_PS = {"ring": {8: 8_341 * 10**6, 16: 8_637 * 10**6, 32: 7_878 * 10**6, 64: 8_340 * 10**6,
                         128: 9_096 * 10**6},
                "tree": {8: 12_754 * 10**6, 16: 15_600 * 10**6, 32: 19_047 * 10**6, 64: 22_258 * 10**6,
                         128: 25_618 * 10**6}}


def leaf_spine_job(name: str, seed: int, leaves: int, hosts: list[int], compute_ps: int, iterations: int,
                   **job) -> dict:
    """The C4 benchmarks' cluster and job (docs/c4.md): ``leaves`` leaves of
    HOSTS_PER_LEAF hosts under SPINES spines, 10 Gbit/s host links and fabric
    links of twice that (oversubscription 0.5), and one job named ``train`` on
    ``hosts``: a 2 MB model in 4 layers, 2 % compute jitter, ending the run;
    ``job`` adds or replaces job fields."""
    return {"name": name, "seed": seed,
            "topology": {"kind": "leaf_spine", "leaves": leaves, "hosts_per_leaf": HOSTS_PER_LEAF, "spines": SPINES,
                         "link_rate_bps": RATE, "oversubscription": 0.5},
            "routing": {"convergence_ps": MS},
            # RDMA keeps its rate between iterations: an RTO above the compute
            # gap keeps TCP from slow-starting every op (RFC 5681 restart after idle).
            "transport": {"min_rto_ps": 10 * MS, "initial_rto_ps": 10 * MS},
            "jobs": [{"name": "train", "workers": hosts, "profile": "resnet50", "layers": 4, "model_bytes": 2_000_000,
                      "compute_ps": compute_ps, "fusion_bytes": 8_000_000, "iterations": iterations, "jitter": 0.02,
                      "end_run": True, **job}],
            "outputs": {"flows": False, "links": False}}


def scenario(i: int, quick: bool = False, seed_base: int = SEED_BASE) -> tuple[dict, dict]:
    """Scenario ``i`` (a dict for Scenario.from_dict) and its label, drawn
    from seed ``seed_base`` + i (the held-out benchmark: HELD_OUT_BASE; the
    detector was developed on 5000 and 6000, docs/c4.md)."""
    rng = random.Random(seed_base + i)
    n = 8 if quick else rng.choices((8, 16, 32, 64, 128), (0.35, 0.35, 0.18, 0.08, 0.04))[0]
    # Two leaves more than the job needs: hosts for other tenants' traffic.
    leaves = math.ceil(n / HOSTS_PER_LEAF) + 2
    hosts = rng.sample(range(leaves * HOSTS_PER_LEAF), n)
    algo = rng.choice(("ring", "tree"))
    background = rng.random() < 0.5
    kind = None if i % 10 == 0 else KINDS[i % len(KINDS)]
    # The fault after 7 to 9 of the job's fault-free iterations (ITERATION_PS).
    est_ps = ITERATION_PS[algo][n]
    at_ps = int(rng.uniform(7, 9) * est_ps)
    iterations = 16
    stop_ps = at_ps + 2 * 10**12
    s = leaf_spine_job(f"c4-{i}", seed_base - SEED_BASE + i + 1, leaves, hosts, 4 * MS, iterations,
                       allreduce="ring" if algo == "ring" else "tree")
    s["stop_ps"] = stop_ps
    # Probes until three times the job's 16 fault-free iterations (the job
    # ends the run before).
    s["flows"] = probe_flows(leaves, HOSTS_PER_LEAF, SPINES, hosts, PROBE_PERIOD_PS, MS, int(3 * iterations * est_ps))
    if background:
        # Other tenants: the hosts the job does not use, sharing the fabric's
        # links with it (a job's servers are its own, as in C4's clusters).
        others = sorted(set(range(leaves * HOSTS_PER_LEAF)) - set(hosts))
        s["traffic"] = [{"load": 0.3, "cdf": "websearch", "duration_ps": at_ps + 300 * MS, "hosts": others}]
    host = f"h{rng.choice(hosts)}"
    leaf = f"leaf{int(host[1:]) // HOSTS_PER_LEAF}"
    spine_link = [f"leaf{rng.randrange(leaves)}", f"spine{rng.randrange(SPINES)}"]
    sev = None
    f = None
    if kind in ("crash", "hang"):
        f = {"kind": kind, "rank": rng.randrange(n)}
    elif kind == "compute_slow":
        sev = round(rng.uniform(1.3, 3.0), 2)
        f = {"kind": kind, "rank": rng.randrange(n), "factor": sev}
    elif kind == "link_rate":
        sev = round(rng.uniform(1.3, 4.0), 2)
        f = {"kind": "link_degraded", "link": rng.choice(([host, leaf], spine_link)), "factor": sev}
    elif kind == "link_loss":
        sev = round(10 ** rng.uniform(-3, -1.5), 4)
        f = {"kind": "link_degraded", "link": rng.choice(([host, leaf], spine_link)), "loss": sev}
    elif kind == "link_down_host":
        f = {"kind": "link_down", "link": [host, leaf]}
    elif kind == "link_down_spine":
        f = {"kind": "link_down", "link": spine_link}
    elif kind == "flapping":
        sev = rng.randint(4, 20) * MS
        f = {"kind": "flapping", "link": rng.choice(([host, leaf], spine_link)), "period_ps": sev,
             "until_ps": stop_ps}
    elif kind == "pcie_slow":
        sev = round(rng.uniform(1.3, 4.0), 2)
        f = {"kind": "pcie_slow", "host": host, "factor": sev}
    if f is not None:
        f["at_ps"] = at_ps
        s["faults"] = [f]
    expected = None if f is None else SYNDROME[f["kind"]]
    if kind == "link_down_spine":
        expected = "comm_slow"  # rerouted over the other spine after convergence
    if kind == "flapping":
        expected = "comm_slow_or_hang"
    label = {"scenario": i, "ranks": n, "algorithm": algo, "background": background, "kind": kind or "none",
             "severity": sev, "at_ps": at_ps if f else None, "expected": expected, "hosts": hosts,
             "component": None if f is None else _component(f)}
    return s, label


def _component(f: dict) -> str:
    if f["kind"] in ("crash", "hang", "compute_slow"):
        return f"train:{f['rank']}"
    if f["kind"] == "pcie_slow":
        return f["host"]
    return link_name(*f["link"])


def matches(truth: str, diag: str | None) -> bool:
    """A diagnosed component names the fault's: the same, or a host and
    its own access link (their symptoms are one: both directions of the host)."""
    if diag is None:
        return False
    if truth == diag:
        return True
    t, d = set(truth.split("-")), set(diag.split("-"))
    return any(x.startswith("h") and x[1:].isdigit() for x in t & d) and (len(t) == 1 or len(d) == 1)


def run_one(args) -> dict:
    i, quick, seed_base = args
    s, label, sim = simulate_one(i, quick, seed_base)
    return evaluate(s, label, sim)


def simulate_one(i: int, quick: bool, seed_base: int) -> tuple[dict, dict, dict]:
    """Scenario ``i`` run: its job's telemetry, messages and iterations, and
    whether its fault was observable (:func:`_observable`)."""
    from ...api import simulate
    from ...scenario.model import Scenario

    s, label = scenario(i, quick, seed_base)
    t0 = time.perf_counter()
    r = simulate(Scenario.from_dict(s))
    wall = time.perf_counter() - t0
    effective = True
    if label["component"] and "-" in label["component"]:  # a link
        effective = _observable(s, r.messages, label)
    return s, label, {"ccl": r.ccl, "messages": r.messages, "probes": r.messages[r.messages.app == PROBE_APP],
                      "jobs": r.jobs, "effective": effective, "wall_s": wall}


def evaluate(s: dict, label: dict, sim: dict) -> dict:
    """The three detectors on one run, scored against its label."""
    ccl, msgs, jobs = sim["ccl"], sim["messages"], sim["jobs"]
    view = job_view("train", [f"h{h}" for h in label["hosts"]], msgs)
    stop = s["stop_ps"]
    c4 = diagnose(ccl, view, stop)
    c4p = with_probes(diagnose(ccl, view, stop, prober(sim["probes"], view)), sim["probes"], view)
    wd = watchdog(ccl, stop)
    ol = outlier(jobs, "train")
    it = jobs[jobs.iteration >= 1].iteration_time_ps.median()
    ends = jobs[jobs.job == "train"].groupby("iteration").end_ps.max()
    after_end = label["at_ps"] is not None and finished_by(jobs, label["at_ps"], s["jobs"][0]["iterations"],
                                                           len(s["jobs"][0]["workers"]))
    effective = sim["effective"] and not after_end
    out = dict(label, hosts=None, effective=effective, after_end=after_end, iteration_ps=float(it),
               wall_s=sim["wall_s"],
               probe_load=probe_load(s["flows"], PROBE_PERIOD_PS, RATE))
    for name, a in (("c4d", c4), ("c4d_probes", c4p), ("watchdog", wd), ("outlier", ol)):
        out[f"{name}_time_ps"] = None if a is None else a.time_ps
        out[f"{name}_syndrome"] = None if a is None else a.syndrome
        out[f"{name}_component"] = None if a is None else a.component
        ok_time = a is not None and label["at_ps"] is not None and a.time_ps >= label["at_ps"]
        out[f"{name}_detected"] = bool(ok_time)
        # Iterations that ended (at every worker) after the fault and by the
        # alarm (telemetry has nanoseconds: 1 ns of slack).
        out[f"{name}_latency_iterations"] = (int(((ends > label["at_ps"]) & (ends <= a.time_ps + 1000)).sum())
                                              if ok_time else None)
        out[f"{name}_correct"] = bool(ok_time and _syndrome_ok(a.syndrome, label["expected"])
                                      and matches(label["component"], a.component))
    return out


def prober(probes: pd.DataFrame, view: JobView):
    """The probes' verdict for the C4D master (C4D + probes): the link
    :func:`blame` names among the links the job's messages crossed."""
    job_links = view.links()
    return lambda t, period: blame(probes, t, period, job_links)


def finished_by(jobs: pd.DataFrame, at_ps: int, iterations: int, workers: int, job: str = "train") -> bool:
    """Whether every one of the job's ``workers`` had run all its
    ``iterations`` by ``at_ps``: a fault that begins after that cannot change
    the job (nothing of it runs any more), so it is not observable, whatever
    its kind, and the run is fault-free to every detector. (A job a fault
    halted did not finish: some worker has no end, or no row, for its last
    iteration.)"""
    j = jobs[jobs.job == job]
    last = j[j.iteration == iterations - 1]
    return bool(last.worker.nunique() == workers and last.end_ps.notna().all() and last.end_ps.max() <= at_ps)


def with_probes(a: Alarm | None, probes: pd.DataFrame, view: JobView) -> Alarm | None:
    """C4D + probes: a communication alarm's component chosen by the probes'
    evidence around it among the links the job crossed (c4/probes.py);
    other alarms, alarms the probes do not explain and alarms whose own
    link explains the probes too, as C4D raised them."""
    if a is None or a.syndrome not in ("comm_slow", "comm_hang"):
        return a
    job_links = view.links()
    own = set(view.host_links.get(a.component, ())) | {a.component}
    v = localise(probes, a.time_ps, a.period_ps, job_links, own)
    if v is None or v.link in own:
        return a
    return replace(a, component_kind="link", component=v.link, pattern=f"{a.pattern}; probes")


def _observable(s: dict, msgs: pd.DataFrame, label: dict) -> bool:
    """Whether a fault on a fabric link changed the job at all: in a twin
    run without the fault (same seed), the job's messages that crossed the
    link after the fault began, compared with the same messages (same tag)
    in the faulty run: observable if one never arrived or their median
    time grew by 10 % or more. A link the job never crossed, or whose spare
    capacity absorbed the fault, is not observable: no detector can name
    it, so the run is left out of recall (and counted)."""
    from ...api import simulate
    from ...scenario.model import Scenario

    twin = dict(s)
    twin.pop("faults")
    # The same run up to shortly after the fault (a prefix of the full one).
    twin["stop_ps"] = label["at_ps"] + 100 * MS
    twin["jobs"] = [dict(twin["jobs"][0], end_run=False)]
    ok = simulate(Scenario.from_dict(twin)).messages
    a, b = label["component"].split("-")
    ok = ok[(ok.app == "train") & (ok.start_ps >= label["at_ps"] - 50 * MS) & ok.end_ps.notna()
            & ok.path.str.contains(f"{a} > {b}|{b} > {a}", regex=True)]
    if ok.empty:
        return False
    got = msgs[msgs.app == "train"].set_index("tag").reindex(ok["tag"].to_numpy())
    if got.end_ps.isna().any():
        return True
    return bool(((got.fct_ps.to_numpy() / ok.fct_ps.to_numpy())).astype(float).mean() >= 1.10)


def _syndrome_ok(got: str, expected: str) -> bool:
    """A flapping port shows as communication slow or, when its flaps
    outpace TCP's retransmission timer, as a communication hang."""
    return got == expected or (expected == "comm_slow_or_hang" and got in ("comm_slow", "comm_hang"))


def score(df: pd.DataFrame, det: str) -> pd.DataFrame:
    """Precision, recall, F1 per fault kind and overall; latency; false alarms.
    A run whose fault began after its job had finished is fault-free to every
    detector: its alarms are false ones."""
    rows = []
    faulty = df[(df.kind != "none") & df.effective]
    free = df[(df.kind == "none") | df.after_end]
    for kind, g in list(faulty.groupby("kind")) + [("overall", faulty)]:
        alarms = g[f"{det}_time_ps"].notna().sum()
        correct = g[f"{det}_correct"].sum()
        if kind == "overall":
            alarms += free[f"{det}_time_ps"].notna().sum()
        p = correct / alarms if alarms else float("nan")
        r = correct / len(g) if len(g) else float("nan")
        f1 = 2 * p * r / (p + r) if p + r > 0 else float("nan")
        lat = (g[f"{det}_time_ps"] - g.at_ps)[g[f"{det}_detected"]]
        lat_it = g[f"{det}_latency_iterations"][g[f"{det}_detected"]]
        rows.append({"detector": det, "kind": kind, "runs": len(g), "alarms": int(alarms), "correct": int(correct),
                     "precision": p, "recall": r, "f1": f1,
                     "latency_iterations_median": lat_it.median(), "latency_iterations_max": lat_it.max(),
                     "latency_s_median": lat.median() / 1e12, "latency_s_max": lat.max() / 1e12})
    rows.append({"detector": det, "kind": "fault-free (false-alarm rate)", "runs": len(free),
                 "alarms": int(free[f"{det}_time_ps"].notna().sum()),
                 "precision": float("nan"), "recall": float("nan"),
                 "f1": free[f"{det}_time_ps"].notna().mean() if len(free) else float("nan")})
    return pd.DataFrame(rows)


def run(out_dir: Path, quick: bool = False, scenarios: int | None = None, workers: int = 2,
        seed_base: int | None = None) -> dict:
    """The diagnosis benchmark; ``seed_base`` None: SEED_BASE with ``quick``, else HELD_OUT_BASE."""
    if seed_base is None:
        seed_base = SEED_BASE if quick else HELD_OUT_BASE
    out_dir.mkdir(parents=True, exist_ok=True)
    count = scenarios or (10 if quick else 200)
    t0 = time.perf_counter()
    args = [(i, quick, seed_base) for i in range(count)]
    res = map_runs(run_one, args, workers)
    df = pd.DataFrame(res)
    df.to_parquet(out_dir / "runs.parquet")
    table = pd.concat([score(df, d) for d in ("c4d", "c4d_probes", "watchdog", "outlier")])
    table.to_csv(out_dir / "scores.csv", index=False)
    wall = time.perf_counter() - t0
    out = {"scenarios": count, "seed_base": seed_base, "wall_s": round(wall, 1),
           "not_effective": int((~df.effective).sum())}
    for det in ("c4d", "c4d_probes"):
        ov = table[(table.detector == det) & (table.kind == "overall")].iloc[0]
        free = table[(table.detector == det) & (table.kind.str.startswith("fault-free"))].iloc[0]
        out[f"{det}_overall"] = {"precision": ov.precision, "recall": ov.recall, "f1": ov.f1,
                                 "latency_iterations_median": ov.latency_iterations_median}
        out[f"{det}_false_alarm_rate"] = free.f1
    # The probes' share of the busiest link direction (a leaf's first host link).
    out["probe_load_max"] = float(df.probe_load.max())
    return dict(out, published_reference=PUBLISHED, scores=table.to_dict(orient="records"))

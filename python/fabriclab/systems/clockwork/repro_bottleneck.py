"""``fabriclab reproduce bottleneck``: bottleneck naming from one-way delays
(issue 26) scored on seeded, labelled simulated cases (docs/clockwork.md,
"Bottleneck identification"; numbers in docs/reproductions.md).

Every case is one simulation of the same job on the same fabric with one
cause (or none) drawn from its seed; the label comes from how the case was
built, never from the detector.

- Fabric: a leaf-spine of 4 leaves x 4 hosts under 2 spines, 10 Gbit/s host
  links and 20 Gbit/s leaf-spine links (non-blocking), 1 us links; hosts'
  NICs share fairly between connections (``[host_queue]`` fq, as Linux's
  default qdisc does), switch ports FIFO.
- Job: 8 ranks, two on each leaf (hosts and rank order drawn), 8 ring
  allreduces of 2 MB, one every 8 ms, alternately clockwise and
  counter-clockwise (as NCCL's rings go both ways), so each host sends to
  and receives from two peers.
- Ambient load on every case: other tenants' web-search flows among the 8
  hosts not in the job, at a load drawn from 0-20 %.
- The cause starts at the start of an op drawn from 0-3:
  - ``link_slow``: a leaf-spine link drawn at random runs at 20 Gbit/s / F,
    F drawn from 6-16 (``[[link_events]]`` ``rate``): label link;
  - ``link_tenants``: two other tenants' bulk flows pinned across one
    direction of a leaf-spine link (two hosts of its leaf up through it, or
    two hosts of other leaves down through it into its leaf's two free
    hosts): label link;
  - ``sending_host``: a noisy co-located VM: 2-3 other tenants' bulk flows
    leaving one job host's NIC (the rank's messages queue at the host's
    egress): label sending host;
  - ``receiving_host``: 2-3 other tenants' bulk flows into one job host
    (the queue at its switch port): label receiving host;
  - ``none``: the ambient load only.
  A ``[cloud]`` co-located VM (its hypervisor's queue) would be one more
  branch of :func:`case` and :func:`scenario`, which take the cause as data;
  not added: first tries are in docs/clockwork.md ("Bottleneck
  identification", Limits).
- Clocks: true time (the simulator's ccl real columns equal true time without
  ``[clocks]``) for every case; a subset (``CLOCK_EVERY``-th case) is run
  again with ``[clocks]`` (the defaults: offsets N(0, 100 us), drifts
  N(0, 6 ppm)) and ``[probes]``, its clocks estimated by Huygens
  (``fabriclab clock estimate``'s ``estimate``) and named from the corrected
  delays, beside the same run's true delays.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

import numpy as np

from ...util.parallel import map_runs

MS = 10**9
LEAVES, PER_LEAF, SPINES = 4, 4, 2
OPS, GAP_MS, SIZE = 8, 8, 2_000_000
CAUSES = ("link_slow", "link_tenants", "sending_host", "receiving_host", "none")
KIND = {"link_slow": "link", "link_tenants": "link", "sending_host": "sending_host",
        "receiving_host": "receiving_host", "none": "none"}
CASES_PER_CAUSE = 24
QUICK_PER_CAUSE = 2
CLOCK_EVERY = 6
SEED = 0
BULK = 2_000_000_000


def case(i: int, seed: int = SEED) -> dict:
    """Case ``i``: its cause (round robin over CAUSES), the draws, and its label."""
    cause = CAUSES[i % len(CAUSES)]
    rng = np.random.default_rng([seed, i])
    job = []
    for lf in range(LEAVES):
        job += [int(h) for h in rng.choice(range(lf * PER_LEAF, (lf + 1) * PER_LEAF), 2, replace=False)]
    job = [int(h) for h in rng.permutation(job)]
    others = [h for h in range(LEAVES * PER_LEAF) if h not in job]
    c = {"i": i, "cause": cause, "job": job, "load": float(rng.uniform(0, 0.2)),
         "start_op": int(rng.integers(0, 4)), "flows": [], "event": None}
    leaf = lambda h: h // PER_LEAF  # noqa: E731
    if cause == "link_slow":
        lf, sp = int(rng.integers(LEAVES)), int(rng.integers(SPINES))
        c["event"] = {"link": [f"leaf{lf}", f"spine{sp}"], "rate_bps": int(20e9 / rng.uniform(6, 16))}
        c["label"] = ("link", f"leaf{lf}-spine{sp}")
    elif cause == "link_tenants":
        lf, sp = int(rng.integers(LEAVES)), int(rng.integers(SPINES))
        mine = [h for h in others if leaf(h) == lf]
        far_leaves = [x for x in range(LEAVES) if x != lf]
        far = [int(rng.choice([h for h in others if leaf(h) == x])) for x in rng.choice(far_leaves, 2, replace=False)]
        up = bool(rng.integers(2))
        for a, b in zip(mine, far):
            s, d = (a, b) if up else (b, a)
            c["flows"].append({"src": s, "dst": d, "path": [f"h{s}", f"leaf{leaf(s)}", f"spine{sp}",
                                                            f"leaf{leaf(d)}", f"h{d}"]})
        c["label"] = ("link", f"leaf{lf}-spine{sp}")
    elif cause in ("sending_host", "receiving_host"):
        x = int(rng.choice(job))
        peers = [int(h) for h in rng.choice(others, int(rng.integers(2, 4)), replace=False)]
        c["flows"] = [{"src": x, "dst": p} if cause == "sending_host" else {"src": p, "dst": x} for p in peers]
        c["label"] = (cause, f"h{x}")
    else:
        c["label"] = ("none", None)
    return c


def scenario(c: dict, clocks: bool = False) -> dict:
    """The scenario of case ``c`` (``clocks``: with [clocks] and [probes])."""
    start = MS
    t_fault = start + c["start_op"] * GAP_MS * MS
    end = start + OPS * GAP_MS * MS
    coll = [{"name": f"ar{k}", "planner": "ring", "size_bytes": SIZE, "start_ps": start + k * GAP_MS * MS,
             "hosts": c["job"] if k % 2 == 0 else c["job"][::-1]} for k in range(OPS)]
    others = [h for h in range(LEAVES * PER_LEAF) if h not in c["job"]]
    s = {"name": f"bottleneck-{c['i']}-{c['cause']}", "seed": c["i"] + 1,
         "topology": {"kind": "leaf_spine", "leaves": LEAVES, "hosts_per_leaf": PER_LEAF, "spines": SPINES,
                      "link_rate_bps": "10Gbps", "spine_link_rate_bps": "20Gbps"},
         "host_queue": {"discipline": "fq", "limit_packets": "off", "ecn_threshold_packets": "off"},
         "collectives": coll, "stop_ps": end + 40 * MS, "outputs": {"flows": False, "links": False}}
    if c["load"] > 0.01:
        s["traffic"] = [{"load": c["load"], "cdf": "websearch", "duration_ps": end, "hosts": others}]
    if c["flows"]:
        s["flows"] = [{**f, "size_bytes": BULK, "start_ps": t_fault} for f in c["flows"]]
    if c["event"]:
        s["link_events"] = [{"at_ps": t_fault, "action": "rate", **c["event"]}]
    if clocks:
        s["clocks"] = {"stamping": "nic"}
        s["probes"] = {"peers": 5, "pair_every_ps": 2 * MS, "spacing_ps": 5_000_000, "duration_ps": end + 20 * MS}
    return s


def _verdict(t, routes) -> dict:
    from .bottleneck import identify

    v, ev = identify(t, routes)
    return {"kind": v.kind, "component": v.component, "confidence": v.confidence, "reason": v.reason,
            "top": ev.head(4).round(3).to_dict("records")}


def simulate_case(c: dict, clocks: bool = False) -> dict:
    """Simulates case ``c`` and names its bottleneck: from the true delays and, with ``clocks``, also from
    the delays corrected by Huygens' estimate."""
    from ...observe import owd as ow
    from ...scenario.model import Scenario
    from ...sim.pipeline import simulate
    from .bottleneck import message_routes

    t0 = time.perf_counter()
    s = scenario(c, clocks)
    res = simulate(Scenario.from_dict(s))
    hosts = {(k, r): f"h{h}" for k, col in enumerate(s["collectives"]) for r, h in enumerate(col["hosts"])}
    names = [col["name"] for col in s["collectives"]]
    out = {"case": c}
    if clocks:
        from ...observe.clock import estimate as est
        from ...observe.clock import probes as pr

        p = pr.from_simulation(res.probes)
        e = est.estimate(p, methods=("huygens",), window_s=(s["stop_ps"] / 1e12), pure_bound_ns=300.0,
                         drop_short_edges=True, robust=True)
        o = ow.compute(res.ccl, hosts, e.clocks.to_pandas(), "huygens", "simulator")
        t = o.table
        routes = message_routes(names, res.ccl, res.messages, t)
        out["estimated"] = _verdict(t, routes)
        out["owd_abs_error_p99_ns"] = float(t["error_ns"].abs().quantile(0.99))
        t = t.assign(owd_ns=t["true_owd_ns"].astype(float))
    else:
        t = ow.compute(res.ccl, hosts, None, None, "simulator").table
        routes = message_routes(names, res.ccl, res.messages, t)
    out["true"] = _verdict(t, routes)
    out["wall_s"] = time.perf_counter() - t0
    return out


def _one(args):
    return simulate_case(*args)


def score(rows: list[dict], key: str) -> dict:
    """Per verdict class and overall: precision and recall of (kind, component) against the labels."""
    out = {}
    for k in ("link", "sending_host", "receiving_host", "none"):
        truth = [r for r in rows if r["case"]["label"][0] == k]
        said = [r for r in rows if r[key]["kind"] == k]
        right = lambda r: (r[key]["kind"], r[key]["component"]) == tuple(r["case"]["label"])  # noqa: E731
        out[k] = {"cases": len(truth), "named": len(said),
                  "precision": sum(map(right, said)) / len(said) if said else None,
                  "recall": sum(map(right, truth)) / len(truth) if truth else None}
    ok = [(r[key]["kind"], r[key]["component"]) == tuple(r["case"]["label"]) for r in rows]
    ps = [v["precision"] for v in out.values() if v["precision"] is not None]
    rs = [v["recall"] for v in out.values() if v["recall"] is not None]
    out["overall"] = {"cases": len(rows), "accuracy": float(np.mean(ok)) if ok else None,
                      "macro_precision": float(np.mean(ps)) if ps else None,
                      "macro_recall": float(np.mean(rs)) if rs else None}
    return out


FIELDS = ("case", "cause", "label_kind", "label_component", "clocks", "kind", "component", "confidence", "right",
          "owd_abs_error_p99_ns")


def run(out_dir: Path, quick: bool = False, workers: int = 1, seed: int = SEED) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    n = (QUICK_PER_CAUSE if quick else CASES_PER_CAUSE) * len(CAUSES)
    cases = [case(i, seed) for i in range(n)]
    clocked = cases[:: CLOCK_EVERY] if not quick else cases[:1]
    jobs = [(c, False) for c in cases] + [(c, True) for c in clocked]
    res = map_runs(_one, jobs, workers)
    plain, timed = res[: len(cases)], res[len(cases):]
    rows = []
    for r in plain + timed:
        keys = [("true", "true")] if "estimated" not in r else [("true", "true (clocked run)"),
                                                                 ("estimated", "huygens")]
        for key, name in keys:
            c, v = r["case"], r[key]
            rows.append({"case": c["i"], "cause": c["cause"], "label_kind": c["label"][0],
                         "label_component": c["label"][1] or "", "clocks": name, "kind": v["kind"],
                         "component": v["component"] or "", "confidence": round(v["confidence"], 4),
                         "right": (v["kind"], v["component"]) == tuple(c["label"]),
                         "owd_abs_error_p99_ns": round(r["owd_abs_error_p99_ns"], 1) if key == "estimated" else ""})
    with open(out_dir / "bottleneck_cases.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    by_cause = {k: float(np.mean([(r["true"]["kind"], r["true"]["component"]) == tuple(r["case"]["label"])
                                  for r in plain if r["case"]["cause"] == k])) for k in CAUSES}
    agree = [r["estimated"] == r["true"] or (r["estimated"]["kind"], r["estimated"]["component"])
             == (r["true"]["kind"], r["true"]["component"]) for r in timed]
    summary = {"cases": len(cases), "true_clocks": score(plain, "true"), "recall_by_cause": by_cause,
               "clocked": {"cases": len(timed), "true": score(timed, "true"), "estimated": score(timed, "estimated"),
                           "same_verdict": float(np.mean(agree)) if agree else None,
                           "owd_abs_error_p99_ns": {
                               "median": float(np.median([r["owd_abs_error_p99_ns"] for r in timed])) if timed else None,
                               "max": max((r["owd_abs_error_p99_ns"] for r in timed), default=None)}},
               "sim_wall_s_sum": float(sum(r["wall_s"] for r in res)), "wall_s": time.perf_counter() - t0,
               "quick": quick}
    return summary

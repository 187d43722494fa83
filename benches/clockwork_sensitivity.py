"""Which cloud conditions would give the Clockwork talk's gains? A
sensitivity study of ``fabriclab reproduce clockwork-nccl`` (issue 27;
docs/clockwork-control.md, "What would give the talk's gains").

    python benches/clockwork_sensitivity.py [--out clockwork_sensitivity.json] [--only NAME ...]
        [--seeds 0 1 2] [--runs 3] [--size-mib 8] [--gap-ms 250]
    python benches/clockwork_sensitivity.py --table-from clockwork_sensitivity.json [MORE.json ...]

The reproduction's three configurations (cloud-assigned, Clockwork-chosen,
chosen + Packet Rocket) under one changed condition at a time from its
defaults (``repro_nccl``'s own functions: nothing here models the cloud),
at a reduced size: 3 seeded clouds x 3 all-reduce tasks of 8 MiB (the
reproduction: 5 tasks of 16 MiB). A condition that changes only Packet
Rocket reuses the default condition's assigned and chosen runs; one that
changes the cloud reselects (the selection measures the changed cloud).
Writes every run and a summary per condition to ``--out`` (after each
condition, so an interrupted sweep keeps what it did) and prints a table.
Deterministic per seed: the wall times are kept apart (``wall_s``)."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from fabriclab.systems.clockwork import repro_nccl as N

CONFIGS = ("assigned", "chosen", "chosen_rocket")
RTT_MS = 10**9  # ps per ms
QUEUE_100 = {"limit_packets": 100}
# name -> what changes (priority order: the brief's a-g). Keys: cloud ([cloud] fields), margin, transport,
# queue (the switches' [queue]), t_rtt (T in base RTTs), clock (Packet Rocket's), only (the configurations
# that differ from the default condition's).
CONDITIONS = {
    "default": {},
    "T 0.5 RTT": {"t_rtt": 0.5, "only": ("chosen_rocket",)},
    "T 2 RTT": {"t_rtt": 2.0, "only": ("chosen_rocket",)},
    "T 4 RTT": {"t_rtt": 4.0, "only": ("chosen_rocket",)},
    "estimated clocks": {"clock": "estimated", "only": ("chosen_rocket",)},
    "min RTO 10 ms": {"transport": {"min_rto_ps": 10 * RTT_MS}},
    "min RTO 200 ms": {"transport": {"min_rto_ps": 200 * RTT_MS}},
    "hypervisor queue 100": {"cloud": {"hypervisor_queue": {"limit_packets": 100, "ecn_threshold_packets": None}}},
    "switch queues 100": {"queue": QUEUE_100},
    "oversubscription 2:1": {"fabric": {"oversubscription": 2.0}},
    "oversubscription 4:1": {"fabric": {"oversubscription": 4.0}},
    "neighbour_load 0.3": {"cloud": {"neighbour_load": 0.3}},
    "neighbour_load 1.0": {"cloud": {"neighbour_load": 1.0}},
    "busy_share 0.25": {"cloud": {"busy_share": 0.25}},
    "busy_share 1.0": {"cloud": {"busy_share": 1.0}},
    "occupancy 0.25": {"cloud": {"occupancy": 0.25}},
    "occupancy 1.0": {"cloud": {"occupancy": 1.0}},
    "margin 8": {"margin": 8},
    "margin 12": {"margin": 12},
    "NIC 6.4 Gbit/s": {"fabric": {"link_rate_bps": 2 * N.VM_CAP_BPS}},
    # Linux's loss recovery as the transport now models it: SACK (RFC 6675) with its 200 ms minimum RTO.
    "SACK, min RTO 200 ms": {"transport": {"sack": True, "min_rto_ps": 200 * RTT_MS}},
    "SACK, min RTO 200 ms, margin 12": {"transport": {"sack": True, "min_rto_ps": 200 * RTT_MS}, "margin": 12},
}


def cloud_changes(spec: dict) -> dict:
    """The condition's ``[cloud]`` changes, its fabric's merged into the reproduction's fabric."""
    c = dict(spec.get("cloud", {}))
    if "fabric" in spec:
        c["fabric"] = {**N.cloud(0)["cloud"]["fabric"], **spec["fabric"]}
    return c


def run_config(seed: int, spec: dict, cl: dict, config: str, runs: int, size: int, gap_ms: int) -> dict:
    cc = cloud_changes(spec)
    hosts = cl["assigned"] if config == "assigned" else cl["chosen"]
    rocket = config == "chosen_rocket"
    t = None
    if rocket and "t_rtt" in spec:
        t = round(spec["t_rtt"] * N.threshold_ps(N.cloud(seed, **cc)))
    r = N.tasks(seed, hosts, cl["pool"], runs=runs, size=size, gap_ms=gap_ms, rocket=rocket, threshold=t,
                rocket_clock=spec.get("clock", "ideal") if rocket else "ideal", transport=spec.get("transport"),
                queue=spec.get("queue"), detail=True, **cc)
    r["threshold_ps"] = (t if t is not None else N.threshold_ps(N.cloud(seed, **cc))) if rocket else None
    return r


def change_interval(ms: list[float], base_ms: list[float], draws: int = 2000) -> list[float]:
    """A 90 % bootstrap interval of the median's change against ``base_ms``'s
    (%; tasks resampled within each configuration; seeded, so deterministic)."""
    rng = np.random.default_rng(0)
    a, b = np.asarray(ms), np.asarray(base_ms)
    ra = np.median(rng.choice(a, (draws, len(a))), axis=1)
    rb = np.median(rng.choice(b, (draws, len(b))), axis=1)
    lo, hi = np.percentile((ra / rb - 1) * 100, [5, 95])
    return [round(float(lo), 1), round(float(hi), 1)]


def summarise(runs: dict[str, list[dict]], truth: list[dict]) -> dict:
    out = {}
    for k, rs in runs.items():
        s = N.stats([x for r in rs for x in r["ms"]])
        s["mean_ms"] = float(np.mean([x for r in rs for x in r["ms"]]))
        s["drops"] = sum(r["drops"] for r in rs)
        s["drops_by_place"] = {p: sum(r["drops_by_place"][p] for r in rs) for p in rs[0]["drops_by_place"]}
        s["tenant_retransmits"] = sum(r["tenant_retransmits"] for r in rs)
        s["overlapped"] = sum(r["overlapped"] for r in rs)
        s["pauses"] = sum((r.get("packet_rocket") or {}).get("pauses", 0) for r in rs)
        out[k] = s
    base = out["assigned"]["median_ms"]
    base_ms = [x for r in runs["assigned"] for x in r["ms"]]
    for k, s in out.items():
        s["change_pct"] = N.change_pct(s["median_ms"], base)
        s["change_mean_pct"] = N.change_pct(s["mean_ms"], out["assigned"]["mean_ms"])
        s["change_interval_pct"] = change_interval([x for r in runs[k] for x in r["ms"]], base_ms)
    for k in ("assigned", "chosen"):
        out[k]["sharing_a_machine"] = sum(t[f"{k}_truth"]["sharing_a_machine"] for t in truth)
        out[k]["on_busy_machines"] = sum(t[f"{k}_truth"]["on_busy_machines"] for t in truth)
    return out


def row(name: str, s: dict) -> str:
    a, c, r = s["assigned"], s["chosen"], s["chosen_rocket"]

    def ch(x):
        lo, hi = x["change_interval_pct"]
        return f"{x['change_pct']:+6.1f} [{lo:+.0f},{hi:+.0f}] {x['change_mean_pct']:+6.1f}"

    return (f"{name:<21} {a['median_ms']:5.1f} {a['mean_ms']:5.1f} | {ch(c)} | {ch(r)} | "
            f"{a['iqr_ms']:4.1f}/{c['iqr_ms']:4.1f}/{r['iqr_ms']:4.1f} | "
            f"{a['max_ms']:5.1f}/{c['max_ms']:5.1f}/{r['max_ms']:5.1f} | "
            f"{a['tenant_retransmits']}/{c['tenant_retransmits']}/{r['tenant_retransmits']} | "
            f"{a['drops']}/{c['drops']}/{r['drops']} | {r['pauses']} | "
            f"{a['sharing_a_machine']}/{c['sharing_a_machine']} | {a['on_busy_machines']}/{c['on_busy_machines']}")


HEADER = ("condition             assigned    | chosen: change %         | + Packet Rocket          | IQR ms"
          "         | max ms            | tenant rexmit | fabric drops a/c/r | pauses | shared | busy\n"
          "                      median mean | median [90 % CI] mean    | median [90 % CI] mean    | a/c/r"
          "          | a/c/r             | a/c/r         |                    |        | a/c    | a/c")


def summary_of(runs: dict[str, list[dict]], truth: list[dict]) -> dict:
    """:func:`summarise`, or the runs whose tasks outlasted their run."""
    bad = [f"{k}: {r['unfinished']}" for k, rs in runs.items() for r in rs if "unfinished" in r]
    return {"unfinished": bad} if bad else summarise(runs, truth)


def line(name: str, s: dict) -> str:
    if "unfinished" in s:
        return f"{name:<21} not summarised, a task outlasted its run: " + "; ".join(s["unfinished"])
    return row(name, s)


def reprint(paths: list[str]) -> None:
    """The table of saved sweeps, in order, their summaries recomputed from their runs."""
    print(HEADER)
    for path in paths:
        with open(path) as f:
            d = json.load(f)
        for name, c in d["conditions"].items():
            print(line(name, summary_of(c["runs"], c["clusters"])), f"[{d['wall_s'][name]:.0f} s]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="clockwork_sensitivity.json")
    ap.add_argument("--only", nargs="*", default=None, help="condition names (default: all, in order)")
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--size-mib", type=int, default=8)
    ap.add_argument("--gap-ms", type=int, default=250)
    ap.add_argument("--table-from", nargs="*", default=None, help="print the table of saved sweeps (JSON) and stop")
    a = ap.parse_args()
    if a.table_from:
        return reprint(a.table_from)
    names = a.only or list(CONDITIONS)
    bad = [n for n in names if n not in CONDITIONS]
    if bad:
        raise SystemExit(f"--only: unknown conditions {bad}; known: {list(CONDITIONS)}")
    if "default" not in names and any(CONDITIONS[n].get("only") for n in names):
        names = ["default"] + names
    size = a.size_mib << 20
    out = {"seeds": a.seeds, "runs_per_cluster": a.runs, "size_bytes": size, "gap_ms": a.gap_ms,
           "conditions": {}, "wall_s": {}}
    done: dict[str, dict] = {}
    print(HEADER, flush=True)
    for name in names:
        spec = CONDITIONS[name]
        t0 = time.perf_counter()
        runs = {k: [] for k in CONFIGS}
        truth = []
        for seed in a.seeds:
            cl = N.clusters(seed, margin=spec.get("margin", N.MARGIN), **cloud_changes(spec))
            truth.append({k: cl[k] for k in ("seed", "pool", "assigned", "chosen", "assigned_truth", "chosen_truth")})
            for k in CONFIGS:
                if "only" in spec and k not in spec["only"]:
                    r = next(x for x in done["default"]["runs"][k] if x["seed"] == seed)
                else:
                    try:
                        r = run_config(seed, spec, cl, k, a.runs, size, a.gap_ms)
                    except RuntimeError as e:  # a task outlasted the run (repro_nccl.tasks): say so, go on
                        r = {"unfinished": str(e)}
                    r["seed"] = seed
                runs[k].append(r)
        s = summary_of(runs, truth)
        done[name] = {"spec": spec, "clusters": truth, "runs": runs, "summary": s}
        out["conditions"][name] = done[name]
        out["wall_s"][name] = round(time.perf_counter() - t0, 1)
        with open(a.out, "w") as f:
            json.dump(out, f, default=float, indent=1)
        print(line(name, s), f"[{out['wall_s'][name]:.0f} s]", flush=True)


if __name__ == "__main__":
    main()

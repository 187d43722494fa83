"""Flow backend against the packet backend, per flow-size bucket: runs each
scenario on the packet backend and on the flow backend (each flow model
asked for) with a few seeds, and prints the ratio flow / packet of the FCT
distributions' p50 and p99 per bucket (flows pooled over the seeds) and the
speed ratio (the core's wall time, summed over the seeds). Not a test; run
it by hand:

    python benches/flow_fidelity.py [--seeds 1,2,3] [--models tcp,fluid] [--json out.json]
        [--packet-cache DIR]

With --packet-cache, each packet-backend run (the reference: its FCTs do
not depend on the flow backend) is saved there once and read back on later
runs of this script (its wall time as measured when it ran: speed ratios
then compare two sittings; say so when quoting them).

Buckets: < 100 KB, 100 KB - 10 MB, > 10 MB (message size). The issue's
target: p50 within 15 % and p99 within 25 % of the packet backend.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

import fabriclab
from fabriclab import Scenario


def leaf_spine(load: float, spines: int, oversubscription: float, seed: int) -> Scenario:
    return Scenario.from_dict({
        "name": f"ls-{load}", "seed": seed,
        "topology": {"kind": "leaf_spine", "leaves": 4, "hosts_per_leaf": 8, "spines": spines,
                     "oversubscription": oversubscription, "link_delay_ps": "1us"},
        "traffic": [{"load": load, "duration_ps": "100ms"}],
    })


SCENARIOS = {
    "default (star 8 x 10G, 10 us links, websearch 40 %, 4 s)": lambda seed: Scenario.default().replace(seed=seed),
    "leaf-spine 4x8, 2 spines, 2:1, websearch 30 %, 100 ms": lambda seed: leaf_spine(0.3, 2, 2.0, seed),
    "leaf-spine 4x8, 4 spines, 1:1, websearch 60 %, 100 ms": lambda seed: leaf_spine(0.6, 4, 1.0, seed),
}

BUCKETS = (("< 100 KB", 0, 100_000), ("100 KB - 10 MB", 100_000, 10_000_000), ("> 10 MB", 10_000_000, None))


def run(s: Scenario):
    r = fabriclab.simulate(s)
    f = r.flows
    f = f[f["fct_ps"].notna()]
    return f[["size_bytes", "fct_ps"]].to_numpy(dtype=float), r.summary["performance"]["wall_time_s"]


def run_packet(s: Scenario, cache: str | None, key: str):
    """The packet backend's run of `s`, from `cache` when it holds `key`."""
    path = os.path.join(cache, key + ".npz") if cache else None
    if path and os.path.exists(path):
        z = np.load(path)
        return z["fct"], float(z["wall"])
    a, w = run(s)
    if path:
        os.makedirs(cache, exist_ok=True)
        np.savez(path, fct=a, wall=w)
    return a, w


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--models", default="tcp,fluid")
    ap.add_argument("--only", default=None, help="run only scenarios whose name contains this")
    ap.add_argument("--json", default=None)
    ap.add_argument("--packet-cache", default=None, help="directory of saved packet-backend runs")
    args = ap.parse_args()
    seeds = [int(x) for x in args.seeds.split(",")]
    models = args.models.split(",")
    out = []
    for index, (name, make) in enumerate(SCENARIOS.items()):
        if args.only and args.only not in name:
            continue
        fcts = {k: [] for k in ["packet", *models]}
        wall = {k: 0.0 for k in fcts}
        for seed in seeds:
            # Alternately, in one sitting: packet, then each flow model, per seed.
            base = make(seed)
            a, w = run_packet(base.replace(backend="packet"), args.packet_cache, f"s{index}-seed{seed}")
            fcts["packet"].append(a)
            wall["packet"] += w
            for m in models:
                a, w = run(base.replace(backend="flow", flow_model=m))
                fcts[m].append(a)
                wall[m] += w
        print(f"\n{name}  (seeds {args.seeds})")
        print(f"  {'bucket':16s} {'flows':>7s} {'p50 pkt (us)':>12s} {'p99 pkt (us)':>12s}"
              + "".join(f" {'p50 ' + m:>10s} {'p99 ' + m:>10s}" for m in models))
        for label, lo, hi in BUCKETS:
            row = {"scenario": name, "bucket": label}
            q = {}
            for k, parts in fcts.items():
                a = np.concatenate(parts)
                sel = a[(a[:, 0] >= lo) & ((a[:, 0] < hi) if hi else True)][:, 1]
                q[k] = (np.percentile(sel, 50), np.percentile(sel, 99), len(sel)) if len(sel) else None
            if q["packet"] is None:
                continue
            p50, p99, n = q["packet"]
            row.update(flows=n, p50_packet_us=p50 / 1e6, p99_packet_us=p99 / 1e6)
            cells = ""
            for m in models:
                r50, r99 = q[m][0] / p50, q[m][1] / p99
                row[f"p50_ratio_{m}"], row[f"p99_ratio_{m}"] = r50, r99
                cells += f" {r50:10.2f} {r99:10.2f}"
            print(f"  {label:16s} {n:7d} {p50 / 1e6:12.1f} {p99 / 1e6:12.1f}{cells}")
            out.append(row)
        for m in models:
            print(f"  speed: packet {wall['packet']:.2f} s, flow/{m} {wall[m]:.3f} s: "
                  f"{wall['packet'] / wall[m]:.0f} x")
            out.append({"scenario": name, "speed_model": m, "packet_s": wall["packet"], "flow_s": wall[m]})
    meta = {"machine": platform.machine(), "python": platform.python_version(), "date": time.strftime("%Y-%m-%d"),
            "fabriclab": fabriclab.__version__}
    print(json.dumps(meta))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": out}, f, indent=2)


if __name__ == "__main__":
    main()

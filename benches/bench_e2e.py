"""End-to-end benchmark: runs fixed scenarios on both backends and prints
simulated events per second and wall time. Not a test; run it by hand:

    python benches/bench_e2e.py [--repeat 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import fabriclab
from fabriclab import Scenario

SCENARIOS = {
    "default (star 8 x 10G, websearch 40%, 4 s)": lambda: Scenario.default(),
    "leaf-spine 4x8, 2 spines, 2:1, websearch 50%, 200 ms": lambda: Scenario.from_dict({
        "name": "ls", "topology": {"kind": "leaf_spine", "leaves": 4, "hosts_per_leaf": 8, "spines": 2,
                                   "oversubscription": 2.0, "link_delay_ps": "1us"},
        "traffic": [{"load": 0.5, "duration_ps": "200ms"}],
    }),
    "fat-tree k=8 (128 hosts), websearch 30%, 50 ms": lambda: Scenario.from_dict({
        "name": "ft", "topology": {"kind": "fat_tree", "k": 8, "link_delay_ps": "1us"},
        "traffic": [{"load": 0.3, "duration_ps": "50ms"}],
    }),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    for name, make in SCENARIOS.items():
        walls = {}
        for backend in ("packet", "flow"):
            s = make().replace(backend=backend)
            best = None
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                r = fabriclab.simulate(s)
                wall = time.perf_counter() - t0
                core = r.summary["performance"]["wall_time_s"]
                if best is None or core < best[1]:
                    best = (wall, core, r.summary["events"], r.summary["flows_total"])
            wall, core, events, flows = best
            walls[backend] = core
            rows.append({"scenario": name, "backend": backend, "flows": flows, "events": events,
                         "core_wall_s": core, "total_wall_s": wall, "events_per_s": events / core})
            print(f"{name:55s} {backend:6s} flows={flows:7d} events={events:11d} "
                  f"core={core:7.3f}s total={wall:7.3f}s  {events / core / 1e6:6.2f} M events/s")
        print(f"{'':55s} flow backend speed-up over packet: {walls['packet'] / walls['flow']:.0f}x")
    meta = {"machine": platform.machine(), "python": platform.python_version(), "date": time.strftime("%Y-%m-%d"),
            "fabriclab": fabriclab.__version__}
    print(json.dumps(meta))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()

"""Benchmark: building large fabrics (topology, routing tables, simulator)
and the CLI's start-up. Each case runs in its own process so its peak
resident memory is its own. Not a test; run it by hand:

    python benches/bench_topology.py [--ks 16,32,48,64]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time

CASE = """
import json, resource, sys, time
t0 = time.perf_counter()
from fabriclab import Scenario
from fabriclab.sim.pipeline import build_simulator
s = Scenario.from_dict({"topology": {"kind": "fat_tree", "k": %d}})
t1 = time.perf_counter()
build_simulator(s, "off")
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "build_s": t2 - t1,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ks", default="16,32,48,64")
    args = ap.parse_args()
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print(f"{'fat-tree k':>10} {'hosts':>7} {'build (s)':>10} {'peak RSS (MiB)':>15}")
    for k in map(int, args.ks.split(",")):
        r = subprocess.run([sys.executable, "-c", CASE % k], capture_output=True, text=True, check=True)
        m = json.loads(r.stdout)
        print(f"{k:>10} {k**3 // 4:>7} {m['build_s']:>10.2f} {m['peak_rss_mib']:>15.0f}")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import fabriclab.cli.main"], check=True)
    print(f"import fabriclab.cli.main: {time.perf_counter() - t0:.2f} s (whole process)")


if __name__ == "__main__":
    main()

"""Cluster selection's first measurement (docs/performance.md, "Cluster
selection"): python benches/cloud_select.py [SEED ...] (default 0-9)."""

import json
import sys

from fabriclab.systems.clockwork import select_bench as b
from fabriclab.util.parallel import map_runs

if __name__ == "__main__":
    seeds = [int(x) for x in sys.argv[1:]] or list(range(10))
    results = map_runs(b.one, seeds, 1)
    with open("cloud_select.json", "w") as f:
        json.dump(results, f, default=float)
    print(b.summarise(results))

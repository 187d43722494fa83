"""Cluster selection's first measurement (docs/performance.md, "Cluster
selection"): python benches/cloud_select.py [SEED ...] (default 0 1 2)."""

import json
import sys

from fabriclab.systems.clockwork import select_bench as b
from fabriclab.util.parallel import map_runs

if __name__ == "__main__":
    seeds = [int(x) for x in sys.argv[1:]] or [0, 1, 2]
    results = map_runs(b.one, seeds, 1)
    print(json.dumps([{k: v for k, v in r.items()} for r in results], default=float))
    print(b.summarise(results))

"""The packet backend's congestion controls side by side (issue 27): one
scenario run with ``transport.cc`` = newreno, dctcp and cubic, same seeds;
prints FCT p50 / p99 per size bucket, drops and the core's wall time. Not a
test; run it by hand:

    python benches/bench_cc.py [--scenario benches/star8_dctcp.toml] [--seeds 1 2 3]

The default scenario is the packet core's profiling case: 8 hosts on one
10 Gbit/s switch, 250-packet queues marking at 64 packets (ECN-capable
packets only: DCTCP's; NewReno and CUBIC are not ECN-capable and see drops),
web-search background at 40 % load for 200 ms.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import fabriclab
from fabriclab.scenario.model import Scenario

HERE = Path(__file__).resolve().parent
BUCKETS = (("< 100 KB", 0, 100_000), ("100 KB - 1 MB", 100_000, 1_000_000), (">= 1 MB", 1_000_000, None))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default=str(HERE / "star8_dctcp.toml"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--ccs", nargs="+", default=["newreno", "dctcp", "cubic"])
    a = ap.parse_args()
    base = Scenario.load(a.scenario)
    print(f"{'cc':8} {'bucket':14} {'flows':>6} {'p50 us':>9} {'p99 us':>9}  drops  core s")
    for cc in a.ccs:
        fct, size, drops, wall = [], [], 0, 0.0
        for seed in a.seeds:
            s = base.replace(seed=seed, transport=base.transport.model_copy(update={"cc": cc}))
            r = fabriclab.simulate(s)
            fct.append(r.flows["fct_ps"].to_numpy(dtype=float))
            size.append(r.flows["size_bytes"].to_numpy())
            drops += int(r.links["drops"].sum())
            wall += r.summary["performance"]["wall_time_s"]
        fct, size = np.concatenate(fct) / 1e6, np.concatenate(size)
        for name, lo, hi in BUCKETS:
            m = (size >= lo) & (size < hi if hi else True)
            p50, p99 = np.percentile(fct[m], [50, 99])
            print(f"{cc:8} {name:14} {m.sum():6d} {p50:9.1f} {p99:9.1f}  {drops:5d}  {wall:6.2f}")


if __name__ == "__main__":
    main()

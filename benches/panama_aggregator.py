"""The software aggregator's throughput (docs/performance.md, "PANAMA's
software aggregator"): `fabriclab panama bench-aggregator` for several
vector sizes, each repeated, printed as a table of medians.

    python benches/panama_aggregator.py [--repeat 3] [--workers 4] [--trees 4]
"""

import argparse
import statistics

from fabriclab.systems.panama.aggregator import bench


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--trees", type=int, default=4)
    ap.add_argument("--window", type=int, default=8)
    a = ap.parse_args()
    print("| floats/packet | packets/worker | packets in/s | gradient Gbit/s | results/s | runs |")
    print("|---:|---:|---:|---:|---:|---:|")
    for floats, packets in ((256, 20000), (2048, 5000), (8192, 2000)):
        runs = [bench(a.workers, a.trees, packets, floats, a.window) for _ in range(a.repeat)]
        bad = sum(w["wrong"] + w["timeouts"] for r in runs for w in r["workers"])
        med = {k: statistics.median(r[k] for r in runs) for k in ("packets_per_s", "gradient_gbps", "results_per_s")}
        print(f"| {floats} | {packets} | {med['packets_per_s']:,.0f} | {med['gradient_gbps']:.2f} | "
              f"{med['results_per_s']:,.0f} | {a.repeat}{'' if not bad else f' ({bad} wrong or timed out)'} |")


if __name__ == "__main__":
    main()

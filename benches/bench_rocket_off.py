"""Packet Rocket off: the packet core's speed and output against another
build (issue 27: "with Packet Rocket off, the packet core's speed is
unchanged"), the two alternating in one sitting.

    python benches/bench_rocket_off.py OTHER_PYTHON_DIR [--rounds 5] [--scenario benches/star8_dctcp.toml]

Each round runs the scenario once with this checkout's ``python/`` and once
with ``OTHER_PYTHON_DIR`` (e.g. main's ``/work/main/python``), each in a
fresh process, and reads the run's own wall time (summary.json's
``performance.wall_time_s``: the core's run, without start-up). It prints
each round, the median ratio (this / other), and whether flows.parquet and
links.parquet are byte-identical between the two."""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MINE = HERE.parent / "python"
CHILD = """
import hashlib, json, sys
from fabriclab.scenario.model import Scenario
from fabriclab.sim.pipeline import simulate
r = simulate(Scenario.load(sys.argv[1]))
print(json.dumps({"wall_s": r.summary["performance"]["wall_time_s"], "events": r.summary["events"],
                  "flows": hashlib.sha256(r.flows_parquet).hexdigest(),
                  "links": hashlib.sha256(r.links_parquet).hexdigest()}))
"""


def once(pythonpath: Path, scenario: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, scenario], env={"PYTHONPATH": str(pythonpath)},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("other", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scenario", default=str(HERE / "star8_dctcp.toml"))
    a = ap.parse_args()
    ratios, same, totals = [], True, [0.0, 0.0]
    for i in range(a.rounds):
        mine, other = once(MINE, a.scenario), once(a.other, a.scenario)
        same &= mine["flows"] == other["flows"] and mine["links"] == other["links"]
        ratios.append(mine["wall_s"] / other["wall_s"])
        totals[0] += mine["wall_s"]
        totals[1] += other["wall_s"]
        print(f"round {i}: this {mine['wall_s']:.3f} s, other {other['wall_s']:.3f} s, "
              f"ratio {ratios[-1]:.3f}, events {mine['events']} / {other['events']}", flush=True)
    print(f"median ratio {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}), "
          f"total {totals[0]:.2f} s / {totals[1]:.2f} s = {totals[0] / totals[1]:.3f}; "
          f"outputs byte-identical: {same}")


if __name__ == "__main__":
    main()

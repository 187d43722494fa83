"""Start-up time of the command line: wall time of `fabriclab --help` and
`fabriclab validate SCENARIO`, each run `--runs` times in fresh processes
(best and median), like hyperfine without its dependency.

    python benches/bench_startup.py                      # this checkout's python/
    python benches/bench_startup.py --tree /tmp/old/python --tree python   # alternate two trees

With several `--tree`s the runs alternate between them (tree 1, tree 2,
tree 1, ...) so that both see the same load on a shared machine. A
benchmark, not a test: nothing is asserted."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COMMANDS = {
    "--help": ["--help"],
    "validate": ["validate", str(ROOT / "examples" / "horovod_websearch.toml")],
}


def _once(tree: str, args: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=tree)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "fabriclab.cli", *args], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{tree}: fabriclab {' '.join(args)} exited {r.returncode}: {r.stderr.decode()[-500:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", help="a python/ folder holding fabriclab (repeatable)")
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    trees = a.tree or [str(ROOT / "python")]
    print(f"{'command':<10} {'tree':<40} {'best (s)':>9} {'median (s)':>11}")
    for name, args in COMMANDS.items():
        times: dict[str, list[float]] = {t: [] for t in trees}
        for t in trees:  # warm the file cache and .pyc files
            _once(t, args)
        for _ in range(a.runs):
            for t in trees:
                times[t].append(_once(t, args))
        for t in trees:
            print(f"{name:<10} {t[-40:]:<40} {min(times[t]):>9.3f} {statistics.median(times[t]):>11.3f}")


if __name__ == "__main__":
    main()

"""Start-up time of the command line: wall time of `fabriclab --help`,
`fabriclab validate SCENARIO` and `fabriclab run --quiet` of a tiny scenario
(4 hosts, 200 us of traffic: the run is almost all start-up and writing),
each run `--runs` times in fresh processes (best and median, wall and CPU),
like hyperfine without its dependency. `--pyc` first compiles each tree's
bytecode (as an installed package has it; this machine sets
PYTHONDONTWRITEBYTECODE, so a source tree is otherwise compiled at every start).

    python benches/bench_startup.py                      # this checkout's python/
    python benches/bench_startup.py --tree /tmp/old/python --tree python   # alternate two trees

With several `--tree`s the runs alternate between them (tree 1, tree 2,
tree 1, ...) so that both see the same load on a shared machine.

    python benches/bench_startup.py --phases /tmp/star04/scenario.toml --tree OLD --tree NEW --runs 7 --pyc

`--phases SCENARIO` instead prints where a run's CPU time goes (median per
phase of fresh processes, trees alternating): the steps of `fabriclab run`
done one after the other in one thread (a run that builds tables with
numpy and pyarrow imports them on a thread while the core runs; since
2026-11-27 a run with only flows and links imports neither, and before that
the results module imported both), each step's CPU time
(`time.process_time`, user + system) from the process's own start. A
benchmark, not a test: nothing is asserted."""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TMP = Path(tempfile.mkdtemp(prefix="bench-startup-"))
TINY = TMP / "tiny.toml"
TINY.write_text('[topology]\nkind = "star"\nhosts = 4\n\n[[traffic]]\nload = 0.2\nduration_ps = "200us"\n')

COMMANDS = {
    "--help": ["--help"],
    "validate": ["validate", str(ROOT / "examples" / "horovod_websearch.toml")],
    "run": ["run", str(TINY), "--out", str(TMP / "out"), "--force", "--quiet"],
}


def _once(tree: str, args: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system) time of one fresh process."""
    env = dict(os.environ, PYTHONPATH=tree)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "fabriclab.cli", *args], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{tree}: fabriclab {' '.join(args)} exited {r.returncode}: {r.stderr.decode()[-500:]}")
    return wall, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime


# A run's steps, timed in a fresh process (argv: scenario, output folder).
PHASES = r"""
import json, sys, time
cpu = time.process_time
marks = [("interpreter and site", cpu())]
def mark(name): marks.append((name, cpu()))
from pathlib import Path
from fabriclab.cli import commands
if hasattr(commands, "default_blas_threads"):
    commands.default_blas_threads()
import pydantic; mark("pydantic")
from fabriclab.scenario.model import Scenario; mark("scenario schema (import)")
s = Scenario.load(Path(sys.argv[1])); mark("read and validate the scenario")
from fabriclab.sim import engine, pipeline
sim, _ = pipeline.resolve_and_build(s); mark("resolve, build the simulator")
while sim.run_until(engine.U64_MAX): pass
mark("core run")
from fabriclab.sim import results; mark("results module (before 2026-11-27: numpy, pyarrow)")
res = pipeline.collect_results(s, sim, 1.0); mark("summary and tables")
out = Path(sys.argv[2]); out.mkdir(exist_ok=True)
res.write_into(out); mark("write Parquet, summary, resolved scenario")
print(json.dumps(marks))
"""


def phases(trees: list[str], scenario: str, runs: int) -> None:
    """Median CPU time of each step of a run, per tree (see PHASES)."""
    got: dict[str, list[list[tuple[str, float]]]] = {t: [] for t in trees}
    for i in range(runs + 1):  # the first round warms the file cache
        for t in trees:
            r = subprocess.run([sys.executable, "-c", PHASES, scenario, str(TMP / "phases")],
                               env=dict(os.environ, PYTHONPATH=t), capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"{t}: {r.stderr[-800:]}")
            if i:
                got[t].append(json.loads(r.stdout.strip().splitlines()[-1]))
    names = [n for n, _ in got[trees[0]][0]]
    print(f"load average {os.getloadavg()[0]:.1f}; CPU (s), median of {runs}")
    print("| phase | " + " | ".join(t[-30:] for t in trees) + " |")
    print("|---|" + "---:|" * len(trees))
    for k, name in enumerate(names):
        cells = []
        for t in trees:
            steps = [m[k][1] - (m[k - 1][1] if k else 0.0) for m in got[t]]
            cells.append(f"{statistics.median(steps):.3f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("| total | " + " | ".join(f"{statistics.median([m[-1][1] for m in got[t]]):.3f}" for t in trees) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", help="a python/ folder holding fabriclab (repeatable)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--pyc", action="store_true", help="compile each tree's bytecode first")
    ap.add_argument("--phases", metavar="SCENARIO", help="CPU time of each step of a run of SCENARIO instead")
    a = ap.parse_args()
    trees = a.tree or [str(ROOT / "python")]
    if a.pyc:
        for t in trees:
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(t) / "fabriclab")], check=True,
                           env=dict(os.environ, PYTHONDONTWRITEBYTECODE=""))
    if a.phases:
        phases(trees, a.phases, a.runs)
        return
    print(f"{'command':<10} {'tree':<40} {'best (s)':>9} {'median (s)':>11} {'CPU best':>9} {'CPU median':>11}")
    for name, args in COMMANDS.items():
        times: dict[str, list[tuple[float, float]]] = {t: [] for t in trees}
        for t in trees:  # warm the file cache
            _once(t, args)
        for _ in range(a.runs):
            for t in trees:
                times[t].append(_once(t, args))
        for t in trees:
            wall = [w for w, _ in times[t]]
            cpu = [c for _, c in times[t]]
            print(f"{name:<10} {t[-40:]:<40} {min(wall):>9.3f} {statistics.median(wall):>11.3f} "
                  f"{min(cpu):>9.3f} {statistics.median(cpu):>11.3f}")


if __name__ == "__main__":
    main()

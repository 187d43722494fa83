"""Whole-process wall times of ns-3 and of `fabriclab run` from one or more
source trees on one flow list, alternating in one sitting (issue 13).

    python benches/ns3/flows.py --out /tmp/star04 --topology star --load 0.4 --duration 200ms
    python benches/sitting_vs_ns3.py /tmp/star04 --tree before=/tmp/old/python --tree after=python --rounds 3

Each round runs ns-3 (benches/ns3/build/dc, from benches/ns3/install.sh) and
then every tree's `python -m fabriclab.cli run --quiet` (PYTHONPATH=tree),
`--repeat` times, the trees alternating;
prints per command the best and median process time, the best core time
(summary.json's wall_time_s) and ns-3's `Simulator::Run` time, and the ratios
of ns-3's best to each tree's best; also each command's best and median CPU time (user +
system, which a loaded machine inflates less than wall time) and the load
average at the start of each round. `--pyc` first compiles every tree's
bytecode (this machine sets PYTHONDONTWRITEBYTECODE: a source tree is
otherwise compiled at every start, which an installed package is not).
A benchmark, not a test.
"""

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

HERE = Path(__file__).resolve().parent


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """Wall time, CPU time (user + system) and stdout of one process."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return wall, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, p.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", type=Path, help="folder written by benches/ns3/flows.py")
    ap.add_argument("--tree", action="append", required=True, help="NAME=PYTHONPATH of a fabriclab tree")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1,
                    help="fabriclab runs per tree and round, the trees alternating (more samples, one ns-3 run)")
    ap.add_argument("--ns3", type=Path, default=HERE / "ns3" / "build" / "dc")
    ap.add_argument("--pyc", action="store_true", help="compile each tree's bytecode first")
    a = ap.parse_args()
    trees = [t.split("=", 1) for t in a.tree]
    if a.pyc:
        for _, path in trees:
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(path) / "fabriclab")], check=True,
                           env=dict(os.environ, PYTHONDONTWRITEBYTECODE=""))
    out = Path(tempfile.mkdtemp(prefix="sitting-"))
    times: dict[str, list[float]] = {"ns-3": []}
    inner: dict[str, list[float]] = {"ns-3": []}
    cpu: dict[str, list[float]] = {"ns-3": []}
    for r in range(a.rounds):
        load = os.getloadavg()[0]
        wall, used, stdout = timed([str(a.ns3), f"--case={a.case / 'case.txt'}", f"--out={out / 'ns3.csv'}",
                              f"--links={out / 'ns3_links.csv'}"])
        info = json.loads([ln for ln in stdout.splitlines() if ln.startswith("{")][-1])
        times["ns-3"].append(wall)
        cpu["ns-3"].append(used)
        inner["ns-3"].append(info.get("run_wall_s", info.get("wall_s", float("nan"))))
        for _ in range(a.repeat):
            for name, path in trees:
                env = dict(os.environ, PYTHONPATH=path)
                dest = out / name
                wall, used, _ = timed([sys.executable, "-m", "fabriclab.cli", "run", str(a.case / "scenario.toml"),
                                       "--out", str(dest), "--force", "--quiet"], env)
                core = json.loads((dest / "summary.json").read_text())["performance"]["wall_time_s"]
                times.setdefault(name, []).append(wall)
                cpu.setdefault(name, []).append(used)
                inner.setdefault(name, []).append(core)
        print(f"round {r + 1} (load {load:.1f}): "
              + ", ".join(f"{k} {v[-1]:.2f} s (CPU {cpu[k][-1]:.3f})" for k, v in times.items()), flush=True)
    ns3 = min(times["ns-3"])
    ns3_run = min(inner["ns-3"])
    ns3_cpu = min(cpu["ns-3"])
    ns3_cpu_med = statistics.median(cpu["ns-3"])
    print("\n| command | process best / median (s) | CPU best / median (s) | core or Run best (s) "
          "| ns-3 / it, process | CPU best | CPU median | core |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for k, v in times.items():
        best, med, core, used = min(v), statistics.median(v), min(inner[k]), min(cpu[k])
        used_med = statistics.median(cpu[k])
        ratio = "" if k == "ns-3" else f"{ns3 / best:.1f}"
        cratio = "" if k == "ns-3" else f"{ns3_run / core:.0f}"
        uratio = "" if k == "ns-3" else f"{ns3_cpu / used:.1f}"
        umratio = "" if k == "ns-3" else f"{ns3_cpu_med / used_med:.1f}"
        print(f"| {k} | {best:.2f} / {med:.2f} | {used:.3f} / {used_med:.3f} | {core:.3f} | {ratio} | {uratio} "
              f"| {umratio} | {cratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

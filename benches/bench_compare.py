"""Before/after benchmark: the packet-backend scenarios of bench_e2e.py run
by two builds of fabriclab, alternately in one sitting (this machine is
shared and noisy), plus the current build with the probes on (queue
sampling every 10 us). Not a test; run it by hand:

    python benches/bench_compare.py --base /path/to/old/python [--rounds 3]

``--base`` is the ``python`` folder of another checkout with its built
extension (e.g. ``git archive <commit>`` then ``cargo build --release -p
fabriclab-py --features pyo3/extension-module`` and copying the library to
``python/fabriclab/_core.abi3.so``). Prints the best core wall time of each
and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CURRENT = str(HERE.parent / "python")

RUN = r"""
import json, sys
sys.path.insert(0, HERE)
from bench_e2e import SCENARIOS
import fabriclab
name, probes = sys.argv[1], sys.argv[2] == "1"
s = SCENARIOS[name]().replace(backend="packet")
if probes:
    s = s.replace(outputs={"queues_every_ps": 10_000_000})
r = fabriclab.simulate(s)
print(json.dumps({"wall": r.summary["performance"]["wall_time_s"], "events": r.summary["events"],
                  "file": fabriclab.__file__}))
"""


def run(pythonpath: str, name: str, probes: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=pythonpath)
    code = RUN.replace("HERE", repr(str(HERE)))
    out = subprocess.run([sys.executable, "-c", code, name, "1" if probes else "0"], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="python folder of the build to compare against")
    ap.add_argument("--current", default=CURRENT, help="python folder of the build under test (default: this checkout)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from bench_e2e import SCENARIOS

    for name in SCENARIOS:
        best: dict[str, dict] = {}
        for _ in range(args.rounds):
            for label, path, probes in (("base", args.base, False), ("current", args.current, False),
                                        ("current+probes", args.current, True)):
                r = run(path, name, probes)
                if label not in best or r["wall"] < best[label]["wall"]:
                    best[label] = r
        b, c, p = best["base"], best["current"], best["current+probes"]
        same = "same events" if b["events"] == c["events"] else f"events differ: {b['events']} vs {c['events']}"
        print(f"{name:55s} base {b['wall']:6.2f}s  current {c['wall']:6.2f}s ({c['wall'] / b['wall']:.3f}x)  "
              f"+probes {p['wall']:6.2f}s ({p['wall'] / c['wall']:.3f}x)  {same}", flush=True)


if __name__ == "__main__":
    main()

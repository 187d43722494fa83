"""Cluster selection in the cluster-in-a-box with the real runtime (issue 27, "Reproduce the talk", last
bullet): a [cloud] box of 8 tenant VMs over 4 physical machines (2 each), one machine also carrying
noisy neighbours; the runtime bench's ring allreduce on M of them, for

  (a) cloud-assigned: the first M VMs in the cloud's placement order (a fixed pick, as a provider that
      hands over M VMs and a tenant that runs on all of them);
  (b) Clockwork-chosen: `fabriclab cluster select --vms M` on the 8 (the probe mesh, idle then load
      rounds), in the ring order it prints;
  (c) chosen + Packet Rocket: (b) with `--packet-rocket-threshold-us T` passed to `fabriclab runtime bench`
      (`--packet-rocket-us T`), when the runtime has that option (it is being built on another branch);
      else (c) is reported as not run.

The configurations run alternately, `--reps` times each; every run is one `fabriclab runtime bench`
(`--iters` timed allreduces of `--size`, after one warm-up), whose out-of-place time is one sample.
Reported: the median and the min-max of the samples per configuration and the median's ratio to (a).
Not a test (root; a few minutes); run it by hand:

    sudo python benches/bench_box_select.py [--vms 6] [--reps 5] [--size 2M] [--iters 3] [--name rbs]
        [--packet-rocket-us T] [--json out.json]

Results: docs/performance.md ("Cluster selection in the box") and docs/clockwork-control.md ("Selection in the
box").
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "python")] + ([os.environ["PYTHONPATH"]]
                                                                              if os.environ.get("PYTHONPATH") else []))}
CAP_MBPS, NIC_MBPS = 50, 60
# Machines 0..3 (of 6 on one leaf) with 2 tenant VMs each, in placement order vm0..vm7; machine 1's two other
# slots hold other tenants' VMs that send Poisson bursts out at half their cap on average (50 Mbit/s offered
# to the 60 Mbit/s NIC that vm2 and vm3 send through, 100 while both burst). Other tenants' VMs on quiet machines are not built.
SCENARIO = textwrap.dedent(f"""
    seed = 1
    [transport]
    cc = "newreno"
    [queue]
    ecn_threshold_packets = "off"
    [cloud]
    vms_per_host = 4
    vm_egress_bps = "{CAP_MBPS}Mbps"
    vm_link_delay_ps = "0us"
    tenant_vms = 8
    tenant_machines = [0, 0, 1, 1, 2, 2, 3, 3]
    busy_machines = [1]
    occupancy = 1.0
    neighbour_load = 0.5
    [cloud.fabric]
    kind = "leaf_spine"
    leaves = 1
    hosts_per_leaf = 4
    spines = 1
    link_rate_bps = "{NIC_MBPS}Mbps"
    link_delay_ps = "0us"
""")


def fl(*args, timeout=600, check=True):
    r = subprocess.run([sys.executable, "-m", "fabriclab.cli", *args], capture_output=True, text=True, env=ENV,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise SystemExit(f"fabriclab {' '.join(args)} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    return r


def rocket_option() -> str | None:
    h = fl("runtime", "bench", "--help").stdout
    return "--packet-rocket-threshold-us" if "--packet-rocket-threshold-us" in h else None


def bench_once(name: str, labels: list[str], size: str, iters: int, extra: list[str]) -> float:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "b.csv"
        fl("runtime", "bench", "--cluster", f"{name}:{','.join(labels)}", "-n", str(len(labels)), "--sizes",
           f"{size}:{size}", "--iters", str(iters), "--warmup", "1", "--csv", str(out), *extra)
        rows = [r for r in csv.DictReader(out.open()) if r["placement"] == "out-of-place"]
        return float(rows[0]["time_us"]) / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vms", type=int, default=6)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--size", default="2M")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--name", default="rbs")
    ap.add_argument("--packet-rocket-us", type=float, default=None)
    ap.add_argument("--keep", action="store_true", help="Leave the box up afterwards.")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        sc = Path(d) / "cloud8.toml"
        sc.write_text(SCENARIO)
        fl("cluster", "down", "--name", a.name, check=False)
        fl("cluster", "up", str(sc), "--name", a.name)
        try:
            t = time.time()
            sel = fl("cluster", "select", "--name", a.name, "--vms", str(a.vms), "--out", str(Path(d) / "sel"))
            select_s = time.time() - t
            print(sel.stdout)
            chosen = json.loads((Path(d) / "sel" / "selection.json").read_text())
            configs = {"cloud-assigned": ([f"vm{i}" for i in range(a.vms)], []),
                       "clockwork-chosen": (chosen["labels"], [])}
            opt = rocket_option()
            rocket_note = None
            if a.packet_rocket_us is not None and opt:
                configs["chosen + packet rocket"] = (chosen["labels"], [opt, str(a.packet_rocket_us)])
            elif a.packet_rocket_us is not None:
                rocket_note = "not run: this runtime's bench has no --packet-rocket-threshold-us yet"
            times: dict[str, list[float]] = {k: [] for k in configs}
            for rep in range(a.reps):
                for k, (labels, extra) in configs.items():
                    times[k].append(bench_once(a.name, labels, a.size, a.iters, extra))
                    print(f"rep {rep} {k:<24} {times[k][-1]:9.1f} ms", flush=True)
        finally:
            if not a.keep:
                fl("cluster", "down", "--name", a.name, check=False)
    base = float(np.median(times["cloud-assigned"]))
    res = {"machine": f"{platform.node()} ({os.cpu_count()} cores), kernel {platform.release()}",
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "vms": a.vms, "pool": 8, "size": a.size,
           "iters": a.iters, "reps": a.reps, "select_s": round(select_s, 1), "chosen": chosen["labels"],
           "rejected": {r["vm"]: r["reason"] for r in chosen["table"] if r["verdict"] == "rejected"},
           "groups": chosen["groups"], "packet_rocket": rocket_note or (a.packet_rocket_us and "run"),
           "configs": {}}
    print(f"\n{'configuration':<24} {'hosts':<34} {'median ms':>10} {'min':>9} {'max':>9} {'vs (a)':>8}")
    for k, v in times.items():
        med = float(np.median(v))
        res["configs"][k] = {"hosts": configs[k][0], "times_ms": v, "median_ms": med, "min_ms": min(v),
                             "max_ms": max(v), "ratio": med / base}
        print(f"{k:<24} {','.join(configs[k][0]):<34} {med:>10.1f} {min(v):>9.1f} {max(v):>9.1f} "
              f"{med / base - 1:>+8.1%}")
    if rocket_note:
        print(f"chosen + packet rocket: {rocket_note}")
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()

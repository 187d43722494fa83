"""The talk's question with the hypervisor's CPU (issue 27;
docs/clockwork-control.md, "Reproducing the talk"): does colocation now cost
the ring, and does selection gain?

    python benches/cloud_hypervisor.py [--seeds 0 1 2] [--runs 2] [--size-mib 1] [--gap-ms 300]
                                       [--pps 333333 999999] [--busy-share X] [--workers 1]
                                       [--out cloud_hypervisor.json]

Per cloud seed, clockwork-nccl's clusters (``repro_nccl.clusters``: the
assigned set and the set its selection chose, the selection's probes run in
the cloud without a CPU, as the reproduction's) and its three
configurations (assigned, chosen, chosen + Packet Rocket) run without a CPU
and with each of ``--pps`` ([cloud] hypervisor_pps on every machine). (A
selection in the cloud with the CPU fails at 333,333 pps: its probes get too
few pure pairs, and the estimator refuses the unconnected probe graph.) The
reproduction's own defaults are untouched; this only calls its pieces with
a smaller task, more room between tasks (a CPU-bound task is slower) and
the CPU. Prints the median task time of each configuration and its change
against assigned, per CPU setting; a configuration whose task was not done
two gaps after its start (the run's end) counts its runs as infinite
(``error`` in the JSON)."""

import argparse
import json
import time

import numpy as np
from fabriclab.systems.clockwork import repro_nccl as r
from fabriclab.util.parallel import map_runs

MIB = 1 << 20
# Andromeda's fast path: a 300 ns per-packet budget (A. Colyer's summary, on one reserved core;
# unverified, docs/scenario.md [cloud] hypervisor_pps).
PER_PACKET_NS = 300


def one(args) -> list[dict]:
    seed, pps_list, runs, size, gap_ms, busy_share = args
    cl = r.clusters(seed)
    rows = []
    for pps in pps_list:
        t0 = time.perf_counter()
        extra = {} if pps is None else {"hypervisor_pps": pps}
        if busy_share is not None:
            extra["busy_share"] = busy_share
        out = {"seed": seed, "pps": pps, "assigned": cl["assigned"], "chosen": cl["chosen"],
               "assigned_truth": cl["assigned_truth"], "chosen_truth": cl["chosen_truth"]}
        for name, hosts, rocket in (("assigned_runs", cl["assigned"], False), ("chosen_runs", cl["chosen"], False),
                                    ("chosen_rocket_runs", cl["chosen"], True)):
            try:
                out[name] = r.tasks(seed, hosts, cl["pool"], runs=runs, size=size, gap_ms=gap_ms, rocket=rocket,
                                    **extra)
            except RuntimeError as e:  # a task not done two gaps after its start: slower than that, counted inf
                out[name] = {"ms": [float("inf")] * runs, "drops": None, "overlapped": runs, "error": str(e)}
        out["wall_s"] = round(time.perf_counter() - t0, 1)
        rows.append(out)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--size-mib", type=int, default=1)
    ap.add_argument("--gap-ms", type=int, default=300)
    # 1 / 300 ns = 3.33 Mpps, scaled by 1/10 as the reproduction's rates; and 3x it.
    sourced = 10**9 // PER_PACKET_NS // r.SCALE
    ap.add_argument("--pps", type=int, nargs="+", default=[sourced, 3 * sourced])
    # The tasks' clouds with this busy_share (0: no neighbour sends; the clusters are still those chosen
    # in the reproduction's cloud).
    ap.add_argument("--busy-share", type=float, default=None)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default="cloud_hypervisor.json")
    a = ap.parse_args()
    settings = (None, *a.pps)
    jobs = [(s, settings, a.runs, a.size_mib * MIB, a.gap_ms, a.busy_share) for s in a.seeds]
    res = [row for rows in map_runs(one, jobs, a.workers) for row in rows]
    with open(a.out, "w") as f:
        json.dump(res, f, default=float, indent=1)
    for p in settings:
        rows = [x for x in res if x["pps"] == p]
        med = {k: float(np.median([m for x in rows for m in x[f"{k}_runs"]["ms"]]))
               for k in ("assigned", "chosen", "chosen_rocket")}
        print(f"hypervisor_pps {p}: " + ", ".join(
            f"{k} {v:.1f} ms ({(v / med['assigned'] - 1) * 100:+.1f} %, drops "
            f"{[x[k + '_runs']['drops'] for x in rows]}, "
            f"overlapped {sum(x[k + '_runs']['overlapped'] for x in rows)})"
            for k, v in med.items()))
        for x in rows:
            print(f"  seed {x['seed']}: assigned {x['assigned_truth']} "
                  f"{np.round(x['assigned_runs']['ms'], 1).tolist()}, chosen {x['chosen_truth']} "
                  f"{np.round(x['chosen_runs']['ms'], 1).tolist()}, chosen+rocket "
                  f"{np.round(x['chosen_rocket_runs']['ms'], 1).tolist()} ({x['wall_s']} s)")


if __name__ == "__main__":
    main()

"""A first measurement of cluster selection (issue 27; docs/clockwork-control.md,
"Cluster selection"; numbers in docs/performance.md): on seeded clouds, ring
allreduces on the VMs the cloud assigned against those `select` kept.

Per seed: the tenant asks for M + margin VMs (``POOL``); ``select`` measures
them and keeps M. The baseline is M of the pool drawn uniformly (seeded), in
host order: the placement draws slots uniformly, so a uniform M-subset of the
pool is placed as M VMs asked for directly would be. Each set then runs
``RUNS`` ring allreduces of ``SIZE_BYTES``, one after another (``GAP_MS``
apart) under the same neighbours' traffic (same seed, same cloud), packet
backend; the completion time of each is read from ``summary.json``."""

from __future__ import annotations

import random
import time

import numpy as np

MS = 10**9
M = 8
MARGIN = 4
RUNS = 5
SIZE_BYTES = 16 << 20
GAP_MS = 300


def cloud(seed: int) -> dict:
    """A leaf-spine of 4 ToRs x 4 machines under 2 spines, 4 VM slots each,
    rates scaled from the defaults by 1/10 (NICs 10 Gbit/s, VMs 3.2 Gbit/s),
    other tenants on half the slots left, half of their machines busy at
    80 % of their VMs' caps."""
    return {"seed": seed, "cloud": {
        "fabric": {"kind": "leaf_spine", "leaves": 4, "hosts_per_leaf": 4, "spines": 2, "link_rate_bps": "10Gbps"},
        "vms_per_host": 4, "vm_egress_bps": "3.2Gbps", "occupancy": 0.5, "neighbour_load": 0.8}}


def allreduces(seed: int, hosts: list[int], pool: int, runs: int = RUNS, size: int = SIZE_BYTES) -> list[float]:
    """Completion times (ms) of ``runs`` ring allreduces on ``hosts``."""
    from ...scenario.model import Scenario
    from ...sim.pipeline import simulate

    d = cloud(seed)
    end = (20 + runs * GAP_MS) * MS
    d["cloud"].update(tenant_vms=pool, neighbour_duration_ps=end)
    d["stop_ps"] = end
    d["collectives"] = [{"name": f"ar{k}", "planner": "ring", "op": "allreduce", "size_bytes": size,
                         "hosts": hosts, "start_ps": (20 + k * GAP_MS) * MS} for k in range(runs)]
    d["outputs"] = {"flows": False, "links": False, "messages": False}
    res = simulate(Scenario.from_dict(d))
    out = []
    for k in range(runs):
        c = res.summary["collectives"][f"ar{k}"]
        dur = c["duration_ps"]
        if dur is None or dur > GAP_MS * MS:
            raise RuntimeError(f"allreduce {k} of seed {seed} did not finish within {GAP_MS} ms")
        out.append(dur / MS)
    return out


def one(seed: int, m: int = M, margin: int = MARGIN, runs: int = RUNS) -> dict:
    from ...scenario.model import Scenario
    from . import select as sel

    t0 = time.perf_counter()
    meas, s = sel.select(Scenario.from_dict(cloud(seed)), m, margin)
    pool = m + margin
    base = sorted(random.Random(seed).sample(range(pool), m))
    t_base = allreduces(seed, base, pool, runs)
    t_sel = allreduces(seed, s.hosts, pool, runs)
    t_kept = allreduces(seed, sorted(s.hosts), pool, runs)  # the same VMs in host order: who, without the order
    truth = Scenario.from_dict({**cloud(seed), "cloud": {**cloud(seed)["cloud"], "tenant_vms": pool}}).build_cloud()
    busy = set(truth.busy)

    def facts(hosts):
        ms = [truth.machine[h] for h in hosts]
        return {"shared": len(ms) - len(set(ms)), "busy": sum(x in busy for x in ms)}

    return {"seed": seed, "baseline": base, "selected": s.hosts, "baseline_ms": t_base, "selected_ms": t_sel,
            "kept_host_order_ms": t_kept,
            "baseline_truth": facts(base), "selected_truth": facts(s.hosts), "groups": meas.groups,
            "objective": s.objective, "wall_s": time.perf_counter() - t0}


def summarise(results: list[dict]) -> str:
    lines = ["seed  assigned: shared busy  median ms  spread ms | selected: shared busy  median ms  spread ms | change"]
    for r in results:
        b, s = np.array(r["baseline_ms"]), np.array(r["selected_ms"])
        lines.append(f"{r['seed']:>4}  {r['baseline_truth']['shared']:>16} {r['baseline_truth']['busy']:>4} "
                     f"{np.median(b):>10.1f} {b.max() - b.min():>10.1f} | {r['selected_truth']['shared']:>16} "
                     f"{r['selected_truth']['busy']:>4} {np.median(s):>10.1f} {s.max() - s.min():>10.1f} | "
                     f"{(np.median(s) / np.median(b) - 1) * 100:+.1f} % (host order {np.median(r['kept_host_order_ms']):.1f} ms)")
    b = np.concatenate([r["baseline_ms"] for r in results])
    for key, label in (("selected_ms", "selected, ring order"), ("kept_host_order_ms", "selected, host order")):
        s = np.concatenate([r[key] for r in results])
        lines.append(f"all: assigned median {np.median(b):.1f} ms (p10-p90 {np.percentile(b, 10):.1f}-"
                     f"{np.percentile(b, 90):.1f}); {label} {np.median(s):.1f} ms ({np.percentile(s, 10):.1f}-"
                     f"{np.percentile(s, 90):.1f}): {(np.median(s) / np.median(b) - 1) * 100:+.1f} %")
    return "\n".join(lines)

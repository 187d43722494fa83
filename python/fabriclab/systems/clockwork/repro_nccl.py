"""``fabriclab reproduce clockwork-nccl``: the Clockwork talk's nccl-tests
figures (seed 000; issue 27; docs/clockwork-control.md, "Reproducing the talk";
numbers in docs/reproductions.md).

The talk: 16 GCP VMs x 2 V100 (NVLink between a VM's two GPUs, TCP between
VMs); 3 clusters of each type, the all-reduce task 5 times on each; against
a cloud-assigned cluster, a Clockwork-chosen one cuts the median time by
33 %, chosen + Packet Rocket by 61 % (TCP throughput 2.6x), with much less
variance; Packet Rocket alone, on a chosen cluster, cuts four NCCL tasks by
31-41 %.

The model (each choice is stated in docs/clockwork-control.md with its reason):

- **The cloud** (``[cloud]``): per cluster a seeded cloud, a leaf-spine of
  8 ToRs x 4 machines under 2 spines, 4 VM slots per machine, rates scaled
  from GCP's by 1/10 to keep packets few (NICs 10 Gbit/s, VMs capped at
  3.2 Gbit/s), other tenants on half the slots left, half of their machines
  busy at 80 % of their caps (as ``benches/cloud_select.py``).
- **Three configurations per cloud seed.** The tenant asks for 16 + 4 VMs
  (the pool). *Cloud-assigned*: 16 of the pool drawn uniformly (seeded),
  placed as 16 asked for directly would be. *Clockwork-chosen*: the 16 that
  ``select`` keeps, in its ring order. *Chosen + Packet Rocket*: the same
  VMs with ``[transport] packet_rocket_threshold_ps`` set (below) on the
  tenant's VMs only (``packet_rocket_hosts``: the other tenants' senders
  run without it, as in the talk); it runs once the packet backend has the
  field (:func:`rocket_available`).
- **A VM is a 2-GPU server; the all-reduce is hierarchical:** (1) the two
  GPUs reduce-scatter over NVLink (each sends the other half of the buffer),
  (2) each GPU all-reduces its half across the 16 VMs in a ring over TCP:
  two rings at once, one per GPU, as the talk's "two NCCL connections per
  node", sharing the VM's egress, (3) the two GPUs all-gather over NVLink.
  Stages (1) and (3) are closed forms (:func:`nvlink_ps`); (2) is simulated
  (packet backend, TCP CUBIC, Linux's default on cloud VMs).
- **A task** is one such all-reduce of ``SIZE_BYTES`` (the talk gives no
  size; nccl-tests averages its iterations, which this single larger op
  stands for); the ``RUNS`` tasks of a cluster run one after another,
  ``GAP_MS`` apart, under the same neighbours' traffic.
"""

from __future__ import annotations

import json
import random
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...util.parallel import map_runs

MS = 10**9
US = 10**6
VMS = 16
MARGIN = 4
GPUS_PER_VM = 2
CLOUDS = 3
RUNS = 5
QUICK_CLOUDS = 1
QUICK_RUNS = 2
SIZE_BYTES = 16 << 20
QUICK_SIZE_BYTES = 4 << 20
GAP_MS = 250
QUICK_GAP_MS = 150
# Rates scaled from GCP's by 1/10 (docs/clockwork-control.md): NICs, per-VM caps and NVLink alike,
# so the NVLink stages keep their share of a task.
SCALE = 10
NIC_BPS = 100 * 10**9 // SCALE
VM_CAP_BPS = 32 * 10**9 // SCALE
# One NVLink 2.0 link between the VM's two V100s: 25 GB/s each way (NVIDIA's V100 figure;
# the number of links between a GCP VM's two GPUs is *unverified*).
NVLINK_BPS = 200 * 10**9 // SCALE
# Packet Rocket alone: the talk's four NCCL tasks (all-reduce, all-gather, reduce-scatter and a
# fourth it does not name: broadcast, nccl-tests' next test), 3 trials each with and without.
TASKS = ("allreduce", "allgather", "reduce_scatter", "broadcast")
ALONE_TRIALS = 3
QUICK_ALONE_TRIALS = 1
MSS_WIRE_BYTES = 1500
TALK = {"chosen_change_pct": -33.0, "chosen_rocket_change_pct": -61.0, "throughput_x": 2.6,
        "rocket_alone_change_pct": [-41.0, -31.0]}


def cloud(seed: int, **changes) -> dict:
    """Cloud ``seed``'s scenario (``changes`` replace fields of its
    ``[cloud]``, for tests)."""
    return {"seed": seed, "transport": {"cc": "cubic"}, "cloud": {
        "fabric": {"kind": "leaf_spine", "leaves": 8, "hosts_per_leaf": 4, "spines": 2, "link_rate_bps": NIC_BPS},
        "vms_per_host": 4, "vm_egress_bps": VM_CAP_BPS, "occupancy": 0.5, "neighbour_load": 0.8, **changes}}


def nvlink_ps(op: str, size_bytes: int, nvlink_bps: int = NVLINK_BPS) -> int:
    """The NVLink stages of a task on a 2-GPU VM: each is one exchange of
    half the buffer between the two GPUs, both ways at once; an all-reduce
    has two (reduce-scatter before the rings, all-gather after), the other
    tasks one."""
    if op not in TASKS:
        raise ValueError(f"op: {op!r} is not one of {', '.join(TASKS)}")
    stages = 2 if op == "allreduce" else 1
    return stages * (size_bytes // GPUS_PER_VM) * 8 * 10**12 // nvlink_bps


def base_owd_ps(c: dict) -> int:
    """The base one-way delay between two VMs under different ToRs (the
    longest VM-to-VM path): six links' delays plus one full frame's
    serialisation on each (the VM's cap, the NIC, the spine links)."""
    from ...scenario.topology import leaf_spine_uplink_bps

    f = c["cloud"]["fabric"]
    nic = f["link_rate_bps"]
    spine = leaf_spine_uplink_bps(f["hosts_per_leaf"], f["spines"], nic, f.get("oversubscription", 1.0))
    vm = c["cloud"]["vm_egress_bps"]
    bits = MSS_WIRE_BYTES * 8 * 10**12
    delays = 2 * 1 * US + 4 * f.get("link_delay_ps", 1 * US)
    return delays + 2 * (bits // vm) + 2 * (bits // nic) + 2 * (bits // spine)


def threshold_ps(c: dict) -> int:
    """Packet Rocket's T: one base RTT (2 x the base OWD) above the path's
    base OWD, i.e. a standing queue of one bandwidth-delay product at the
    bottleneck before a pause: the classic buffer that keeps a lone TCP flow
    busy through its decrease (docs/clockwork-control.md gives the reasoning)."""
    return 2 * base_owd_ps(c)


def rocket_available() -> bool:
    """Whether the scenario has Packet Rocket's field (issue 27's packet
    backend work)."""
    from ...scenario.fabric import TransportConfig

    return "packet_rocket_threshold_ps" in TransportConfig.model_fields


ROCKET_CLOCKS = ("ideal", "estimated")


def tasks(seed: int, hosts: list[int], pool: int, op: str = "allreduce", runs: int = RUNS,
          size: int = SIZE_BYTES, gap_ms: int = GAP_MS, rocket: bool = False, threshold: int | None = None,
          rocket_clock: str = "ideal", transport: dict | None = None, queue: dict | None = None,
          detail: bool = False, **cloud_changes) -> dict:
    """``runs`` tasks of ``op`` on ``hosts`` (ring order), one after another:
    per task, two rings (one per GPU) of half the buffer each, started
    together; its time is the later ring's plus the NVLink stages.

    For what-ifs (``benches/clockwork_sensitivity.py``); the defaults are the
    reproduction's: ``threshold`` Packet Rocket's T in ps (None:
    :func:`threshold_ps`); ``rocket_clock`` "ideal" or "estimated" (the
    hosts' ``[clocks]`` at their defaults, corrected by the calibration pass
    that :func:`fabriclab.simulate` runs first); ``transport`` and ``queue``
    fields replacing the scenario's ``[transport]`` and ``[queue]`` (the
    switches' queues); ``detail`` adds the drops by where they happened and
    the tenant's retransmissions (:func:`drop_places`)."""
    from ...collectives.rings import chain_broadcast
    from ...scenario.model import CollectiveConfig, Scenario

    if rocket_clock not in ROCKET_CLOCKS:
        raise ValueError(f"rocket_clock: {rocket_clock!r} is not one of {', '.join(ROCKET_CLOCKS)}")
    d = cloud(seed, **cloud_changes)
    end = (20 + runs * gap_ms) * MS
    d["cloud"].update(tenant_vms=pool, neighbour_duration_ps=end)
    d["stop_ps"] = end + 2 * gap_ms * MS
    d["transport"].update(transport or {})
    if queue is not None:
        d["queue"] = queue
    if rocket:
        # On the tenant's VMs only (hosts 0..pool-1): the other tenants do not run Packet Rocket.
        d["transport"].update(packet_rocket_threshold_ps=threshold_ps(d) if threshold is None else threshold,
                              packet_rocket_clock=rocket_clock, packet_rocket_hosts=list(range(pool)))
        if rocket_clock == "estimated":
            d["clocks"] = {"stamping": "nic"}
    half = size // GPUS_PER_VM
    starts = [(20 + k * gap_ms) * MS for k in range(runs)]
    names = [[f"t{k}g{g}" for g in range(GPUS_PER_VM)] for k in range(runs)]
    if op != "broadcast":
        d["collectives"] = [{"name": names[k][g], "planner": "ring", "op": op, "size_bytes": half, "hosts": hosts,
                             "start_ps": starts[k]} for k in range(runs) for g in range(GPUS_PER_VM)]
    d["outputs"] = {"flows": detail, "links": detail, "messages": False}
    s = Scenario.from_dict(d)
    if op == "broadcast":
        # A chain from the first VM, as NCCL's ring broadcast, pipelined in chunks of 1/n of the
        # buffer (the ring all-reduce's chunk).
        chunk = -(-half // len(hosts))
        for k in range(runs):
            for g in range(GPUS_PER_VM):
                plan = chain_broadcast(len(hosts), half, 0, chunk_bytes=chunk)
                s.collectives.append(CollectiveConfig.of_plan(plan, hosts, name=names[k][g], start_ps=starts[k]))
    if d["transport"].get("packet_rocket_clock") == "estimated":
        from ...api import simulate
    else:
        from ...sim.pipeline import simulate
    res = simulate(s)
    col = res.summary["collectives"]
    nv = nvlink_ps(op, size)
    out, late = [], 0
    for k in range(runs):
        durs = [col[n]["duration_ps"] for n in names[k]]
        if any(x is None for x in durs):
            raise RuntimeError(f"cloud {seed}: task {k} ({op}) did not finish by the end of the run")
        late += max(durs) > gap_ms * MS
        out.append((max(durs) + nv) / MS)
    r = {"ms": out, "overlapped": late, "drops": res.summary["links"]["drops"],
         "retransmits": res.summary["retransmits"]}
    if detail:
        r.update(drop_places(res.links, res.flows, pool))
        r["packet_rocket"] = res.summary.get("packet_rocket")
        if "packet_rocket_calibration" in res.summary:
            r["calibration"] = res.summary["packet_rocket_calibration"]
    return r


def drop_places(links, flows, pool: int) -> dict:
    """Where a cloud run's packets were dropped, by the queue's place
    (:mod:`fabriclab.scenario.cloud`'s names): ``vm`` a VM's own egress
    (``vm*`` to its machine), ``hypervisor`` a machine's queue toward its
    ToR (``pm*`` to a switch), ``to_vm`` a machine's port to a VM, and
    ``fabric`` the switches' ports; and the retransmissions of the tenant's
    flows (sent by hosts 0..pool-1) against everyone's."""
    src, dst = links["src_node"].astype(str), links["dst_node"].astype(str)
    place = np.where(src.str.startswith("vm"), "vm",
                     np.where(src.str.startswith("pm"), np.where(dst.str.startswith("vm"), "to_vm", "hypervisor"),
                              "fabric"))
    drops = {p: int(links["drops"][place == p].sum()) for p in ("vm", "hypervisor", "to_vm", "fabric")}
    tenant = flows["src"] < pool
    return {"drops_by_place": drops, "tenant_retransmits": int(flows["retransmits"][tenant].sum()),
            "tenant_flows": int(tenant.sum())}


def clusters(seed: int, vms: int = VMS, margin: int = MARGIN, **cloud_changes) -> dict:
    """The cloud-assigned and the Clockwork-chosen cluster of cloud ``seed``
    (``cloud_changes`` replace fields of its ``[cloud]``; host indices in ring
    order) and the placement's truth about each (cached: clockwork-nccl and
    clockwork-ray share the clouds)."""
    return _clusters(seed, vms, margin, json.dumps(cloud_changes, sort_keys=True))


@lru_cache(maxsize=8)
def _clusters(seed: int, vms: int, margin: int, changes: str) -> dict:
    from ...scenario.model import Scenario
    from . import select as sel

    c = cloud(seed, **json.loads(changes))
    meas, s = sel.select(Scenario.from_dict(c), vms, margin)
    pool = vms + margin
    assigned = sorted(random.Random(seed).sample(range(pool), vms))
    truth = Scenario.from_dict({**c, "cloud": {**c["cloud"], "tenant_vms": pool}}).build_cloud()
    busy = set(truth.busy)

    def facts(hosts):
        ms = [truth.machine[h] for h in hosts]
        return {"sharing_a_machine": len(ms) - len(set(ms)), "on_busy_machines": sum(x in busy for x in ms)}

    return {"seed": seed, "pool": pool, "assigned": assigned, "chosen": s.hosts,
            "assigned_truth": facts(assigned), "chosen_truth": facts(s.hosts)}


def one_cloud(args) -> dict:
    seed, runs, size, gap_ms, rocket = args
    t0 = time.perf_counter()
    cl = clusters(seed)
    r = {**cl, "assigned_runs": tasks(seed, cl["assigned"], cl["pool"], runs=runs, size=size, gap_ms=gap_ms),
         "chosen_runs": tasks(seed, cl["chosen"], cl["pool"], runs=runs, size=size, gap_ms=gap_ms)}
    if rocket:
        r["chosen_rocket_runs"] = tasks(seed, cl["chosen"], cl["pool"], runs=runs, size=size, gap_ms=gap_ms,
                                        rocket=True)
    r["wall_s"] = round(time.perf_counter() - t0, 1)
    return r


def one_alone(args) -> dict:
    """Packet Rocket alone on one chosen cluster: ``trials`` of ``op`` with
    and without it."""
    seed, hosts, pool, op, trials, size, gap_ms = args
    return {"op": op, "off": tasks(seed, hosts, pool, op, trials, size, gap_ms),
            "on": tasks(seed, hosts, pool, op, trials, size, gap_ms, rocket=True)}


def stats(ms: list[float]) -> dict:
    a = np.asarray(ms, dtype=float)
    return {"runs": len(a), "median_ms": float(np.median(a)), "p25_ms": float(np.percentile(a, 25)),
            "p75_ms": float(np.percentile(a, 75)), "iqr_ms": float(np.percentile(a, 75) - np.percentile(a, 25)),
            "min_ms": float(a.min()), "max_ms": float(a.max())}


def change_pct(ours: float, base: float) -> float:
    return round((ours / base - 1) * 100, 2)


def summarise(per_cloud: list[dict], alone: list[dict], rocket: bool, size: int) -> dict:
    keys = ["assigned", "chosen"] + (["chosen_rocket"] if rocket else [])
    configs = {k: stats([x for r in per_cloud for x in r[f"{k}_runs"]["ms"]]) for k in keys}
    base = configs["assigned"]["median_ms"]
    for k in keys:
        configs[k]["change_pct"] = change_pct(configs[k]["median_ms"], base)
        configs[k]["throughput_x"] = round(base / configs[k]["median_ms"], 3)
        configs[k]["drops"] = sum(r[f"{k}_runs"]["drops"] for r in per_cloud)
        configs[k]["overlapped"] = sum(r[f"{k}_runs"]["overlapped"] for r in per_cloud)
    out = {"talk": TALK, "size_bytes": size, "nvlink_ms": nvlink_ps("allreduce", size) / MS,
           "threshold_ps": threshold_ps(cloud(0)) if rocket else None, "configs": configs,
           "per_cloud": [{"seed": r["seed"], "assigned": r["assigned"], "chosen": r["chosen"],
                          "assigned_truth": r["assigned_truth"], "chosen_truth": r["chosen_truth"],
                          **{f"{k}_ms": r[f"{k}_runs"]["ms"] for k in keys}} for r in per_cloud]}
    if not rocket:
        out["chosen_rocket"] = ("not run: the packet backend has no Packet Rocket yet "
                                "([transport] packet_rocket_threshold_ps)")
    else:
        out["rocket_alone"] = {a["op"]: {"off": stats(a["off"]["ms"]), "on": stats(a["on"]["ms"]),
                                         "change_pct": change_pct(float(np.median(a["on"]["ms"])),
                                                                  float(np.median(a["off"]["ms"]))),
                                         "drops_off": a["off"]["drops"], "drops_on": a["on"]["drops"]}
                               for a in alone}
    return out


def run(out_dir: Path, quick: bool = False, workers: int = 1, first_seed: int = 0) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    n, runs = (QUICK_CLOUDS, QUICK_RUNS) if quick else (CLOUDS, RUNS)
    size, gap = (QUICK_SIZE_BYTES, QUICK_GAP_MS) if quick else (SIZE_BYTES, GAP_MS)
    rocket = rocket_available()
    per_cloud = map_runs(one_cloud, [(first_seed + i, runs, size, gap, rocket) for i in range(n)], workers)
    alone = []
    if rocket:
        c0 = per_cloud[0]
        trials = QUICK_ALONE_TRIALS if quick else ALONE_TRIALS
        alone = map_runs(one_alone, [(c0["seed"], c0["chosen"], c0["pool"], op, trials, size, gap) for op in TASKS],
                         workers)
    summary = summarise(per_cloud, alone, rocket, size)
    summary["clouds"], summary["runs_per_cluster"] = n, runs
    summary["wall_s"] = round(time.perf_counter() - t0, 1)
    (out_dir / "clockwork_nccl_runs.json").write_text(json.dumps(per_cloud, default=float, indent=1) + "\n")
    print(table(summary))
    return summary


def config_rows(s: dict, talk: dict) -> list[str]:
    """The three configurations' rows of a summary's table (clockwork-nccl's and clockwork-ray's)."""
    rows = [f"{k:<16} {c['median_ms']:>10.1f} {c['iqr_ms']:>8.1f} {c['min_ms']:>6.1f}-{c['max_ms']:<7.1f}"
            f" {c['change_pct']:>+8.1f} %  {talk[k]}" for k, c in s["configs"].items()]
    if "chosen_rocket" in s:
        rows.append(f"chosen_rocket: {s['chosen_rocket']}")
    return rows


def table(s: dict) -> str:
    talk = {"assigned": "", "chosen": "-33 %", "chosen_rocket": "-61 % (2.6x)"}
    lines = [f"clockwork-nccl: {s['clouds']} clouds x {s['runs_per_cluster']} all-reduce tasks of "
             f"{s['size_bytes'] >> 20} MiB per configuration (16 VMs x 2 GPUs, TCP CUBIC, rates 1/{SCALE})",
             "configuration      median ms   IQR ms   min-max ms     change   talk"]
    lines += config_rows(s, talk)
    for op, a in s.get("rocket_alone", {}).items():
        lines.append(f"Packet Rocket alone, {op}: {a['off']['median_ms']:.1f} -> {a['on']['median_ms']:.1f} ms "
                     f"({a['change_pct']:+.1f} %; talk -31 to -41 %)")
    return "\n".join(lines)

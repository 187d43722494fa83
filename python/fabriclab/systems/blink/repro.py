"""Reproduction of Blink (Wang et al., MLSys'20 talk, seed 003): packed
spanning trees versus NCCL's rings.

1. DGX-1V, every allocation of 3 to 8 GPUs: broadcast and allreduce,
   rings (NCCL: NVLink rings when a Hamiltonian cycle exists, else PCIe)
   versus Blink's packed trees; speedup = ring time / trees time.
2. DGX-2, 16 GPUs: allreduce with one-hop trees versus a ring over sizes.
3. Two DGX-1V servers, a 3 + 5 allocation, NICs of 40, 100, 400 Gbit/s:
   Blink's three-phase allreduce versus one ring across both servers.

Every run uses the flow backend and the same chunk choices for both sides
(the fastest of a few chunk sizes, as Blink tunes its chunk size and NCCL
its protocol).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pandas as pd

from ...collectives.algos import Allocation, make_plan
from ...sim.plans import run_plan
from ...scenario.gpus import gpu_cluster, gpu_server

PAPER = {
    "dgx1v_broadcast": "up to 6x, geo-mean 2x",
    "dgx1v_allreduce": "up to 8x, geo-mean 2x",
    "dgx2_allreduce": "up to 3.5x throughput, up to 3.32x lower latency",
}


def _best_time(algo, op, alloc, size, chunks):
    best = None
    for ch in chunks:
        if ch is not None and ch >= size:
            continue
        t = run_plan(make_plan(algo, op, alloc, size, ch, 0), alloc.topo, alloc.rank_hosts).time_ps
        best = t if best is None else min(best, t)
    return best


def dgx1v_allocations(size: int, quick: bool, progress=None) -> pd.DataFrame:
    topo = gpu_server("dgx1v")
    allocs = [list(c) for k in range(3, 9) for c in itertools.combinations(range(8), k)]
    if quick:
        allocs = allocs[::15] + [list(range(8))]
    chunks = (1 << 20,) if quick else (256 << 10, 1 << 20, 4 << 20)
    rows = []
    for gpus in allocs:
        alloc = Allocation(topo, gpus)
        for op in ("broadcast", "allreduce"):
            ring = _best_time("ring", op, alloc, size, chunks)
            trees = _best_time("trees", op, alloc, size, chunks)
            rows.append({"gpus": ",".join(map(str, gpus)), "ngpus": len(gpus), "op": op, "size_bytes": size,
                         "ring_time_ps": ring, "trees_time_ps": trees, "speedup": ring / trees})
        if progress:
            progress()
    return pd.DataFrame(rows)


def dgx2_sizes(quick: bool) -> pd.DataFrame:
    topo = gpu_server("dgx2")
    alloc = Allocation(topo, list(range(16)))
    sizes = [2**k for k in range(10, 31, 4 if quick else 2)]
    rows = []
    for s in sizes:
        # Chunks that cut each rank's shard into 2..64 pieces (plans stay small).
        shard = s // 16
        chunks = (None,) + tuple(c for c in (64 << 10, 256 << 10, 1 << 20, 4 << 20) if 2 * c <= shard <= 64 * c)
        ring = _best_time("ring", "allreduce", alloc, s, chunks)
        trees = _best_time("trees", "allreduce", alloc, s, chunks)
        rows.append({"size_bytes": s, "ring_time_ps": ring, "onehop_time_ps": trees,
                     "ring_algbw_GBps": s / ring * 1e3, "onehop_algbw_GBps": s / trees * 1e3,
                     "speedup": ring / trees})
    return pd.DataFrame(rows)


def two_servers(size: int, quick: bool) -> pd.DataFrame:
    rows = []
    for nic_gbps in (40, 100, 400):
        topo = gpu_cluster("dgx1v", 2, nic_gbps * 10**9)
        alloc = Allocation(topo, [0, 1, 2, 8, 9, 10, 11, 12])  # 3 + 5
        chunks = (1 << 20,) if quick else (1 << 20, 4 << 20)
        ring = _best_time("ring", "allreduce", alloc, size, chunks)
        hier = _best_time("hierarchical", "allreduce", alloc, size, chunks)
        rows.append({"nic_gbps": nic_gbps, "size_bytes": size, "ring_time_ps": ring, "three_phase_time_ps": hier,
                     "speedup": ring / hier})
    return pd.DataFrame(rows)


def geomean(x) -> float:
    x = list(x)
    return math.exp(sum(math.log(v) for v in x) / len(x))


def plot(alloc_df: pd.DataFrame, dgx2_df: pd.DataFrame, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    for ax, op in zip(axes[:2], ("broadcast", "allreduce")):
        d = alloc_df[alloc_df.op == op].reset_index(drop=True)
        colors = plt.get_cmap("viridis")((d.ngpus - 3) / 5)
        ax.bar(range(len(d)), d.speedup, color=colors, width=1.0)
        ax.axhline(1, color="k", lw=0.8)
        ax.axhline(geomean(d.speedup), color="tab:red", ls="--", lw=1, label=f"geo-mean {geomean(d.speedup):.2f}x")
        ax.set_title(f"DGX-1V {op}: trees vs rings, every 3-8 GPU allocation")
        ax.set_xlabel("allocation (sorted by GPU count, then ids; colour = GPU count)")
        ax.set_ylabel("speedup (ring time / trees time)")
        ax.legend()
    ax = axes[2]
    ax.plot(dgx2_df.size_bytes, dgx2_df.ring_algbw_GBps, "o-", label="ring")
    ax.plot(dgx2_df.size_bytes, dgx2_df.onehop_algbw_GBps, "s-", label="one-hop trees")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("algorithm bandwidth (GB/s)")
    ax.set_title("DGX-2, 16-GPU allreduce")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def run(out_dir: Path, quick: bool = False, size: int = 128 << 20, progress=None) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    a = dgx1v_allocations(size, quick, progress)
    b = dgx2_sizes(quick)
    c = two_servers(size, quick)
    a.to_csv(out_dir / "dgx1v_allocations.csv", index=False)
    b.to_csv(out_dir / "dgx2_allreduce.csv", index=False)
    c.to_csv(out_dir / "two_servers_3plus5.csv", index=False)
    plot(a, b, out_dir / "blink.png")
    summary = {}
    for op in ("broadcast", "allreduce"):
        d = a[a.op == op]
        summary[f"dgx1v_{op}"] = {"allocations": int(len(d)), "geomean_speedup": geomean(d.speedup),
                                  "max_speedup": float(d.speedup.max()), "min_speedup": float(d.speedup.min()),
                                  "best_allocation": d.loc[d.speedup.idxmax(), "gpus"], "paper": PAPER[f"dgx1v_{op}"]}
    summary["dgx2_allreduce"] = {"max_speedup": float(b.speedup.max()), "speedup_at_smallest": float(b.speedup.iloc[0]),
                                 "speedup_at_largest": float(b.speedup.iloc[-1]), "paper": PAPER["dgx2_allreduce"]}
    summary["two_servers_3plus5"] = {f"{int(r.nic_gbps)}G": float(r.speedup) for r in c.itertuples()}
    return summary

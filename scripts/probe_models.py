"""The probe's two graph models for real (docs/performance.md): measure the
pair matrix once, pack allreduce trees with the NIC model and with the pair
model, then time allreduces along each, alternating (nic, pairs, nic, ...),
so both see the same machine load. Run under the launcher:

    fabriclab launch --cluster nicbox -n 4 -- python scripts/probe_models.py --size 4M --rounds 5

Every rank runs the same plans, each after a barrier, and times its own
run; the time of a run is the slowest rank's (a rank's sends complete into
socket buffers before the receiver has the data, so the root alone can
finish faster than the data crosses the bottleneck). Rank 0 prints a JSON
summary: the matrix, both packings, every time, the medians, the time each
packing rate predicts, and the ratio pairs / nic."""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from fabriclab.collectives.metrics import parse_size
from fabriclab.runtime.comm import Communicator
from fabriclab.runtime.probe import measure, plan_from_probe


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="4M", help="allreduce bytes (int32 elements)")
    ap.add_argument("--bytes", default="2M", help="bytes of each one-way bandwidth probe")
    ap.add_argument("--pings", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5, help="alternations nic, pairs")
    ap.add_argument("--chunk", default="256K")
    a = ap.parse_args()
    c = Communicator.from_env()
    size = parse_size(a.size, "--size")
    m = measure(c, parse_size(a.bytes, "--bytes"), a.pings)
    count = size // 4
    plans, out = {}, {"matrix_bps": m.bw_bps, "size_bytes": 4 * count, "packings": {}, "times_s": {}}
    for model in ("nic", "pairs"):
        text, p = plan_from_probe(m, "allreduce", count, 4, 0, parse_size(a.chunk, "--chunk"), model)
        plans[model] = text
        out["packings"][model] = {"rate_bps": p.rate_bps, "rates_bps": list(p.rates_bps), "trees": p.trees,
                                  "predicted_s": 8 * 4 * count / p.rate_bps}
        out["times_s"][model] = []
    want = (np.arange(count) % 7 * c.world_size + c.world_size * (c.world_size - 1) // 2).astype(np.int32)
    wrong = 0
    for _ in range(a.rounds):
        for model in ("nic", "pairs"):
            x = (np.arange(count) % 7 + c.rank).astype(np.int32)
            c.barrier()
            t0 = time.perf_counter()
            c.run_plan(plans[model], x)
            t = np.zeros(c.world_size)
            t[c.rank] = time.perf_counter() - t0
            c.allreduce(t)
            out["times_s"][model].append(float(t.max()))
            wrong += int((x != want).sum())
    w = np.array([wrong], np.int64)
    c.allreduce(w)
    out["wrong_elements"] = int(w[0])
    out["median_s"] = {k: statistics.median(v) for k, v in out["times_s"].items()}
    out["ratio_pairs_over_nic"] = out["median_s"]["pairs"] / out["median_s"]["nic"]
    c.barrier()
    if c.rank == 0:
        print(json.dumps(out, indent=1, default=str))
    c.close()


if __name__ == "__main__":
    main()

"""`fabriclab runtime probe`: Blink's start-up probe run on local ranks (or
in the box), its TreeGen packings planned on the measurements, one
allreduce along the probed trees checked, and the report's text. The
measurement and the planning are in ``probe.py``."""

from __future__ import annotations

import json
import time

from .comm import Communicator
from .errors import RuntimeInputError
from ..collectives.nicgraph import PATH_SLACK
from .probe import MODELS, PING_BYTES, Measurements, measure, nic_loads, plan_from_probe, probe_graph


def packing_text(res: dict) -> str:
    """The probe's TreeGen summary: the NIC estimates, each op's trees with
    their rates and the total, the busiest resource of the NIC model under
    those trees (over 100 % means the pair model promised more than the
    NICs carry), and the allreduce run along the trees."""
    from ..collectives.nicgraph import nic_estimates

    m = Measurements.from_dict(res["measurements"])
    up, down = nic_estimates(m.bw_bps)
    paths = sorted(r for r in probe_graph(m, "broadcast", "nic").graph["resources"] if r.startswith("pair"))
    lines = ["# NIC estimates (Mbit/s), host: uplink/downlink  "
             + "  ".join(f"{i}: {up[i] / 1e6:.1f}/{down[i] / 1e6:.1f}" for i in range(m.n)),
             f"# pairs limited by their path (> {PATH_SLACK:.0%} below both NICs): {', '.join(paths) or 'none'}"]
    for op, p in res["packings"].items():
        lines.append(f"# TreeGen, {op}: root {p['root']}, {len(p['trees'])} tree(s), "
                     f"total {p['rate_bps'] / 1e6:.1f} Mbit/s, {res['model']} model")
        for t, r in zip(p["trees"], p["rates_bps"]):
            edges = ", ".join(f"{u}->{v}" for v, u in sorted((int(k), u) for k, u in t.items()) if u is not None)
            lines.append(f"  {r / 1e6:8.1f} Mbit/s  {edges}")
        name, (load, cap) = max(p["nic_loads"].items(), key=lambda kv: kv[1][0] / kv[1][1])
        line = f"  busiest under the NIC model: {name}, {load / 1e6:.1f} of {cap / 1e6:.1f} Mbit/s ({load / cap:.0%})"
        if load > cap * (1 + 1e-6):
            line += f": these trees carry at most {p['rate_bps'] * cap / load / 1e6:.1f} Mbit/s in all"
        lines.append(line)
    a = res["packings"]["allreduce"]
    size = res["allreduce_bytes"]
    lines.append(f"# allreduce of {size / (1 << 20):g} MiB along the probed trees: {res['allreduce_s'] * 1e3:.1f} ms, "
                 f"{res['allreduce_wrong']} wrong elements (the packing rate predicts "
                 f"{8 * size / a['rate_bps'] * 1e3:.1f} ms)")
    return "\n".join(lines)


def worker(spec: dict, out: str) -> None:
    """`fabriclab runtime probe`'s rank: measure, plan, check the plan on the
    probed trees with one allreduce, and (rank 0) write the results."""
    import numpy as np


    c = Communicator.from_env()
    m = measure(c, spec["nbytes"], spec["pings"], spec["repeats"])
    count = spec["count"]
    result = {"measurements": m.to_dict(), "model": spec["model"], "packings": {}, "allreduce_bytes": 4 * count}
    for op in ("broadcast", "allreduce"):
        text, p = plan_from_probe(m, op, count, 4, spec["root"], spec["chunk_bytes"], spec["model"])
        result["packings"][op] = {"root": p.root, "rate_bps": p.rate_bps, "rates_bps": p.rates_bps,
                                  "trees": [{str(k): v for k, v in t.items()} for t in p.trees],
                                  "nic_loads": {r: list(v) for r, v in sorted(nic_loads(m, op, p).items())}}
        if op == "allreduce":  # every rank planned the same: run it once and check the sum
            x = (np.arange(count) % 7 + c.rank).astype(np.int32)
            c.barrier()
            t0 = time.perf_counter()
            c.run_plan(text, x)
            took = np.zeros(c.world_size)
            took[c.rank] = time.perf_counter() - t0
            c.allreduce(took)  # the slowest rank's time: the root's sends can end in socket buffers
            result["allreduce_s"] = float(took.max())
            want = (np.arange(count) % 7 * c.world_size + c.world_size * (c.world_size - 1) // 2).astype(np.int32)
            wrong = np.array([int((x != want).sum())], np.int64)
            c.allreduce(wrong)
            result["allreduce_wrong"] = int(wrong[0])
    if c.rank == 0:
        with open(out, "w") as f:
            json.dump(result, f)
    c.close()


def run_probe(n: int, cluster: str | None = None, nbytes: int = 4 << 20, pings: int = 10, root: int = 0,
              master_port: int | None = None, count: int = 1 << 20, chunk_bytes: int = 256 << 10,
              model: str = "nic", repeats: int = 3) -> dict:
    import sys
    import tempfile
    from pathlib import Path

    from .errors import RuntimeFailure
    from .launch import launch

    if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= 64:
        raise RuntimeInputError(f"-n: must be within 2..64 ranks, got {n!r}")
    if not PING_BYTES <= nbytes <= 1 << 30:
        raise RuntimeInputError(f"--bytes: must be within 8..1G, got {nbytes}")
    if not 1 <= pings <= 10_000:
        raise RuntimeInputError(f"--pings: must be within 1..10000, got {pings}")
    if not 1 <= repeats <= 100:
        raise RuntimeInputError(f"--repeats: must be within 1..100, got {repeats}")
    if not 0 <= root < n:
        raise RuntimeInputError(f"--root: must be a rank within 0..{n - 1}, got {root}")
    if model not in MODELS:
        raise RuntimeInputError(f"--model: must be 'nic' (hosts behind a switch) or 'pairs' (dedicated links), "
                                f"got {model!r}")
    spec = {"nbytes": nbytes, "pings": pings, "repeats": repeats, "root": root, "count": count, "chunk_bytes": chunk_bytes,
            "model": model}
    with tempfile.TemporaryDirectory(prefix="fabriclab-probe-") as d:
        out = str(Path(d, "probe.json"))
        cmd = [sys.executable, "-c", "import sys, json; from fabriclab.runtime.probe_cmd import worker; "
               "worker(json.loads(sys.argv[1]), sys.argv[2])", json.dumps(spec), out]
        rc = launch(n, cmd, master_port=master_port, cluster=cluster)
        if rc != 0:
            raise RuntimeFailure(f"probe: a rank failed (exit code {rc}); its error is printed above", "probe")
        return json.loads(Path(out).read_text())

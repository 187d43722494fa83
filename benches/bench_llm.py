"""LLM job scale benchmark (issue 30's targets): one iteration of a GPT-3
175B-shaped job at TP 8 x PP 8 x DP 16 on 1,024 GPUs on the flow backend,
and a 128-GPU job (TP 8 x PP 4 x DP 4) on the packet backend. Prints the
wall time, the simulated iteration, the graph's size and the events. Not a
test; run it by hand:

    python benches/bench_llm.py [--case flow1024|packet128] [--micro-batches 16] [--layers-per-node 1]
"""

from __future__ import annotations

import argparse
import json
import platform
import time

from fabriclab import Scenario, simulate
from fabriclab.sim.pipeline import core_spec


def scenario(case: str, m: int, lpn: int, flow_model: str = "tcp") -> Scenario:
    if case == "flow1024":
        # 128 DGX-like servers (8 GPUs, 8 x 400G NICs), 16 leaves of 8 servers, 16 spines (non-blocking).
        topo = {"kind": "gpu_cluster", "leaves": 16, "servers_per_leaf": 8, "gpus_per_server": 8, "spines": 16}
        job = {"model": "gpt3-175b", "tp": 8, "pp": 8, "dp": 16, "gpu": "a100"}
        backend = "flow"
    else:
        topo = {"kind": "gpu_cluster", "leaves": 4, "servers_per_leaf": 4, "gpus_per_server": 8, "spines": 4}
        # GPT-3 350M's shape on 512-token sequences: the TP allreduces (1 MB buffers) stay within what a
        # packet-level run of minutes can carry (about 10^4 packets each).
        job = {"model": "gpt3-350m", "shape": {"seq_len": 512}, "tp": 8, "pp": 4, "dp": 4, "gpu": "a100"}
        backend = "packet"
    job.update(name="llm", micro_batches=m, layers_per_node=lpn, telemetry=False, end_run=True)
    return Scenario.from_dict({"name": f"llm-{case}", "backend": backend, "flow_model": flow_model,
                               "topology": topo, "llm_jobs": [job]})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="flow1024", choices=["flow1024", "packet128"])
    ap.add_argument("--micro-batches", type=int, default=16)
    ap.add_argument("--layers-per-node", type=int, default=1)
    ap.add_argument("--flow-model", default="tcp", choices=["tcp", "fluid"])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    s = scenario(args.case, args.micro_batches, args.layers_per_node, args.flow_model)
    g = core_spec(s)["graph_jobs"][0]
    nodes = sum(len(g["programs"][r["program"]]) for r in g["ranks"])
    t0 = time.perf_counter()
    res = simulate(s)
    wall = time.perf_counter() - t0
    j = res.summary["llm_jobs"]["llm"]
    row = {"case": args.case, "flow_model": args.flow_model, "micro_batches": args.micro_batches, "layers_per_node": args.layers_per_node,
           "ranks": len(g["ranks"]), "node_runs": nodes, "wall_s": round(wall, 1),
           "iteration_ms": j["iteration_times_ps"][0] / 1e9, "compute_fraction": j["compute_fraction"]["mean"],
           "events": res.summary["events"], "flows": res.summary["flows_total"], "machine": platform.node()}
    print(json.dumps(row))
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()

"""Calibration of the flow backend against the packet backend for a DCTCP
newcomer: a flow of S bytes joins N long flows (200 MB each) into h0 of a
star at 10 ms; prints both backends' FCTs and their ratio. Not a test; run
it by hand (docs/performance.md, the flow backend's pass 4):

    python benches/flow_newcomer.py
"""

from __future__ import annotations

import fabriclab
from fabriclab import Scenario

START_MS = 10


def fct_us(backend: str, n: int, size_bytes: int) -> float:
    flows = [{"src": i + 1, "dst": 0, "size_bytes": 200_000_000, "start_ps": 0} for i in range(n)]
    flows.append({"src": n + 1, "dst": 0, "size_bytes": size_bytes, "start_ps": START_MS * 10**9})
    s = Scenario.from_dict({"name": "newcomer", "seed": 1, "backend": backend,
                            "topology": {"kind": "star", "hosts": n + 2},
                            "flows": flows, "stop_ps": (START_MS + 30) * 10**9})
    return float(fabriclab.simulate(s).flows["fct_ps"].iloc[-1]) / 1e6


def main() -> None:
    for n in (1, 2, 4):
        for size in (30_000, 100_000, 300_000, 1_000_000, 3_000_000):
            p, f = fct_us("packet", n, size), fct_us("flow", n, size)
            print(f"N={n} size={size:>9d}  packet {p:9.1f} us  flow {f:9.1f} us  ratio {f / p:.2f}", flush=True)


if __name__ == "__main__":
    main()

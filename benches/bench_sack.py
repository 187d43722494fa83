"""SACK against NewReno's recovery on docs/clockwork-control.md's "A limit
of the transport" case (issue 27): one 50 MB flow, 10 Gbit/s into a
1 Gbit/s bottleneck, 10 us links each way (54.27 us base RTT), a 60-packet
drop-tail buffer; CUBIC (fast convergence off, as that section) and
NewReno, ``transport.sack`` off and on, at 1 ms and 200 ms minimum RTO.
Prints drops at the bottleneck, retransmissions, timeouts' cost (the FCT)
and the core's wall time. With ``--profiling``, instead: the packet core's
profiling scenario (benches/star8_dctcp.toml, seeds 1-3 pooled) per cc with
SACK off and on: drops, retransmissions, small-flow and all-flow FCT p99.
Not a test; run it by hand:

    python benches/bench_sack.py [--size-bytes 50000000] [--ccs cubic newreno] [--min-rto-ms 1 200]
    python benches/bench_sack.py --profiling [--ccs newreno cubic dctcp]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import fabriclab
import numpy as np
from fabriclab.scenario.model import Scenario

HERE = Path(__file__).resolve().parent


def dumbbell(topo: Path, cc: str, sack: bool, min_rto_ps: int, size_bytes: int) -> Scenario:
    topo.write_text(
        'nodes = [{name = "h0", kind = "host"}, {name = "h1", kind = "host"}, {name = "s0", kind = "switch"}]\n'
        'links = [{a = "h0", b = "s0", rate_bps = 10000000000, delay_ps = 10000000},\n'
        '         {a = "s0", b = "h1", rate_bps = 1000000000, delay_ps = 10000000}]\n')
    return Scenario.from_dict({
        "name": "sack", "topology": {"kind": "file", "path": str(topo)},
        "queue": {"limit_packets": 60, "ecn_threshold_packets": None},
        "transport": {"cc": cc, "cubic_fast_convergence": False, "min_rto_ps": min_rto_ps,
                      "initial_rto_ps": max(min_rto_ps, 1_000_000_000), "sack": sack},
        "flows": [{"src": 0, "dst": 1, "size_bytes": size_bytes}]})


def profiling(ccs: list[str]) -> None:
    base = Scenario.load(HERE / "star8_dctcp.toml")
    print(f"{'cc':8} {'sack':>5} {'flows':>6} {'small p99 us':>13} {'all p99 us':>11} {'drops':>7} {'retx':>7}")
    for cc in ccs:
        for sack in (False, True):
            fct, size, drops, retx = [], [], 0, 0
            for seed in (1, 2, 3):
                s = base.replace(seed=seed, transport=base.transport.model_copy(update={"cc": cc, "sack": sack}))
                r = fabriclab.simulate(s)
                fct.append(r.flows["fct_ps"].to_numpy(dtype=float))
                size.append(r.flows["size_bytes"].to_numpy())
                drops += int(r.links["drops"].sum())
                retx += r.summary["retransmits"]
            fct, size = np.concatenate(fct) / 1e6, np.concatenate(size)
            print(f"{cc:8} {sack!s:>5} {len(fct):6d} {np.percentile(fct[size < 100_000], 99):13.1f} "
                  f"{np.percentile(fct, 99):11.1f} {drops:7d} {retx:7d}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-bytes", type=int, default=50_000_000)
    ap.add_argument("--ccs", nargs="+", default=["cubic", "newreno"])
    ap.add_argument("--min-rto-ms", type=float, nargs="+", default=[1, 200])
    ap.add_argument("--profiling", action="store_true")
    a = ap.parse_args()
    if a.profiling:
        return profiling(a.ccs if a.ccs != ["cubic", "newreno"] else ["newreno", "cubic", "dctcp"])
    print(f"{'cc':8} {'min RTO':>8} {'sack':>5} {'drops':>7} {'retx':>7} {'FCT ms':>9} {'goodput Mb/s':>13} {'core s':>7}")
    with tempfile.TemporaryDirectory() as d:
        for cc in a.ccs:
            for rto_ms in a.min_rto_ms:
                for sack in (False, True):
                    s = dumbbell(Path(d) / "topo.toml", cc, sack, int(rto_ms * 1e9), a.size_bytes)
                    r = fabriclab.simulate(s)
                    fct_ps = int(r.flows["fct_ps"].iloc[0])
                    drops = int(r.links["drops"].sum())
                    wall = r.summary["performance"]["wall_time_s"]
                    print(f"{cc:8} {rto_ms:6g}ms {sack!s:>5} {drops:7d} {r.summary['retransmits']:7d} "
                          f"{fct_ps / 1e9:9.2f} {a.size_bytes * 8 / (fct_ps / 1e12) / 1e6:13.1f} {wall:7.2f}")


if __name__ == "__main__":
    main()

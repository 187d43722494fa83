"""Renders docs/performance.md's ns-3 tables from run_all.sh's results.

Usage: python benches/ns3/table.py runs/ns3. Reads every point's compare.json
(fabriclab without the handshake against ns-3 from connection set-up) and
compare-handshake.json (both with it, from the flow's start) and prints the
FCT table, with each ratio checked against issue 13's targets (p50 within
10 %, p99 within 20 %, mean slowdown within 15 %), and the speed and port tables.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

POINTS = [("star-dctcp-0.2", "star, DCTCP, 0.2"), ("star-dctcp-0.4", "star, DCTCP, 0.4"),
          ("star-dctcp-0.6", "star, DCTCP, 0.6"), ("leafspine-dctcp-0.3", "leaf-spine, DCTCP, 0.3"),
          ("leafspine-dctcp-0.6", "leaf-spine, DCTCP, 0.6"), ("star-newreno-0.4", "star, NewReno drop-tail, 0.4"),
          ("star-dctcp-prio-0.6", "star, DCTCP, 2 prio bands, 0.6")]
TARGET = {"p50_us": 0.10, "p99_us": 0.20, "slowdown_mean": 0.15}


def cell(b: dict, key: str) -> str:
    r = b["fabriclab"][key] / b["ns3"][key]
    return f"{r:.2f}" if abs(r - 1) <= TARGET[key] else f"**{r:.2f}**"


def main(root: Path) -> None:
    print("| point | bucket | flows | p50 fl / ns-3 (us) | p50 | p99 fl / ns-3 (us) | p99 | slowdown fl / ns-3 | slowdown "
          "| with handshake: p50 | p99 | slowdown |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    speed, ports = [], []
    for d, name in POINTS:
        if not (root / d / "compare.json").exists():
            continue
        plain = json.loads((root / d / "compare.json").read_text())
        hs = json.loads((root / d / "compare-handshake.json").read_text())
        for bucket, b in plain["buckets"].items():
            f, n, h = b["fabriclab"], b["ns3"], hs["buckets"][bucket]
            print(f"| {name} | {bucket} | {f['flows']} | {f['p50_us']:,.0f} / {n['p50_us']:,.0f} | {cell(b, 'p50_us')} "
                  f"| {f['p99_us']:,.0f} / {n['p99_us']:,.0f} | {cell(b, 'p99_us')} "
                  f"| {f['slowdown_mean']:.2f} / {n['slowdown_mean']:.2f} | {cell(b, 'slowdown_mean')} "
                  f"| {cell(h, 'p50_us')} | {cell(h, 'p99_us')} | {cell(h, 'slowdown_mean')} |")
        w = plain["wall"]
        speed.append(f"| {name} | {plain['flows']} | {w['ns3_process_s']:.1f} | {w['ns3_run_s']:.1f} | {w['ns3_events']:,} "
                     f"| {w['fabriclab_process_s']:.2f} | {w['fabriclab_core_s']:.2f} | {w['fabriclab_events']:,} "
                     f"| {w['ns3_process_s'] / w['fabriclab_process_s']:.1f} | {w['ns3_run_s'] / w['fabriclab_core_s']:.0f} |")
        p = plain["ports"]
        ports.append(f"| {name} | {p['fabriclab']['switch_marks']:,} / {p['fabriclab']['host_marks']:,} "
                     f"| {p['ns3']['switch_marks']:,} / {p['ns3']['host_marks']:,} "
                     f"| {p['fabriclab']['switch_drops']:,} / {p['fabriclab']['host_drops']:,} "
                     f"| {p['ns3']['switch_drops']:,} / {p['ns3']['host_drops']:,} | {p['port_packets_rel_diff']:.2%} |")
    print("\n| point | flows | ns-3 process (s) | ns-3 Run (s) | ns-3 events | fabriclab run (s) | fabriclab core (s) "
          "| fabriclab events | ns-3 / fabriclab process | core |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(speed))
    print("\n| point | ECN marks switch / host, fabriclab | ns-3 | drops switch / host, fabriclab | ns-3 "
          "| per-port packets, sum abs diff / total |")
    print("|---|---:|---:|---:|---:|---:|")
    print("\n".join(ports))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/ns3"))

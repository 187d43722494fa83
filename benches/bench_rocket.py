"""A first incast sweep with and without Packet Rocket (issue 27).

    python benches/bench_rocket.py [--n 8 16 32 64] [--cc newreno dctcp cubic] [--threshold-us 5]
                                   [--flow-bytes 1000000] [--buffer-packets 250] [--out DIR]

N senders to one receiver on a 10 Gbit/s star (2 us links). Each path's
base one-way delay is learnt first (one segment per sender, 20 us apart,
no queue), then at 1 ms every sender sends `--flow-bytes` at once. Queues:
`--buffer-packets` drop-tail, DCTCP marking at 64 (as the packet core's
profiling scenario, benches/star8_dctcp.toml). Per point: the burst flows'
p99 completion time, the last one's (the request's completion), drops, the
receiver port's largest queue, goodput over the request, and Packet
Rocket's pauses. Prints a Markdown table; with --out, also rocket.csv."""

import argparse
import csv
from pathlib import Path

from fabriclab import simulate
from fabriclab.scenario.model import Scenario

BURST_PS = 1_000_000_000


def point(n, cc, threshold_ps, flow_bytes, buffer_packets):
    warm = [{"src": i, "dst": n, "size_bytes": 1460, "start_ps": i * 20_000_000} for i in range(n)]
    burst = [{"src": i, "dst": n, "size_bytes": flow_bytes, "start_ps": BURST_PS} for i in range(n)]
    raw = {"name": f"incast-{n}-{cc}", "seed": 1,
           "topology": {"kind": "star", "hosts": n + 1, "link_rate_bps": "10Gbps", "link_delay_ps": "2us"},
           "queue": {"limit_packets": buffer_packets, "ecn_threshold_packets": 64 if cc == "dctcp" else None},
           "transport": {"cc": cc, "packet_rocket_threshold_ps": threshold_ps},
           "flows": warm + burst}
    r = simulate(Scenario.from_dict(raw))
    f = r.flows[r.flows.start_ps == BURST_PS]
    links = r.links
    to_rx = links[links.dst_node == f"h{n}"]
    done_ps = int(f.end_ps.max()) - BURST_PS
    pr = r.summary.get("packet_rocket") or {}
    return {"n": n, "cc": cc, "rocket": threshold_ps is not None,
            "p99_fct_us": round(float(f.fct_ps.quantile(0.99)) / 1e6, 1),
            "request_us": round(done_ps / 1e6, 1),
            "drops": int(r.summary["links"]["drops"]), "retransmits": int(f.retransmits.sum()),
            "max_queue_packets": round(int(to_rx.max_queue_bytes.max()) / 1538, 1),
            "goodput_gbps": round(n * flow_bytes * 8 / done_ps * 1e3, 2),
            "pauses": pr.get("pauses", 0), "paused_us": round(pr.get("paused_ps", 0) / 1e6, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--cc", nargs="+", default=["newreno", "dctcp", "cubic"])
    ap.add_argument("--threshold-us", type=float, default=5.0)
    ap.add_argument("--flow-bytes", type=int, default=1_000_000)
    ap.add_argument("--buffer-packets", type=int, default=250)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    rows = []
    cols = ["n", "cc", "rocket", "p99_fct_us", "request_us", "drops", "retransmits", "max_queue_packets",
            "goodput_gbps", "pauses", "paused_us"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for n in a.n:
        for cc in a.cc:
            for t in (None, round(a.threshold_us * 1e6)):
                row = point(n, cc, t, a.flow_bytes, a.buffer_packets)
                rows.append(row)
                print("| " + " | ".join(str(row[c]) for c in cols) + " |", flush=True)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        with open(a.out / "rocket.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()

"""What the live refit costs as a job runs (review_rtable B1): the agent's flush (the part that blocks its
probe loop, and the whole-file write) and one refit (``rocket_table.halves_table``), after H seconds of
history. Synthetic records in the agent's own row format: 4 hosts, each probing 3 peers at 100 pairs/s
(1,200 rows per host per second), emulated clocks 0/+80/-60/+40 ppm. No root, no network.

    PYTHONPATH=python python benches/bench_live_refit_cost.py --history-s 60 300
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from fabriclab.observe.clock import agent as ag
from fabriclab.observe.clock import rocket_table as rt

DRIFTS = [0.0, 80.0, -60.0, 40.0]


def agents(history_s: float, rate_hz: float = 100.0) -> list[ag.Agent]:
    names = [f"h{i}" for i in range(4)]
    t0 = (time.time_ns() // 10**9) * 10**9
    out = []
    for i, n in enumerate(names):
        a = ag.Agent(name=n, listen=("127.0.0.1", 1), peers=[], duration_s=history_s,
                     clock=ag.EmulatedClock(offset_ns=1000 * i, drift_ppm=DRIFTS[i], epoch_ns=t0))
        out.append(a)
    pair = 0
    for k in range(int(history_s * rate_hz)):
        t = t0 + int(k * 1e9 / rate_hz)
        for i, a in enumerate(out):
            for j in range(4):
                if j == i:
                    continue
                for seq in (0, 1):
                    ts = t + 1000 * i + 20_000 * seq
                    a.tx.append((names[j], pair, seq, ts))
                    out[j].rx.append((a.name, pair, seq, ts + 30_000))
                pair += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--history-s", type=float, nargs="+", default=[60.0, 300.0])
    a = ap.parse_args()
    for h in a.history_s:
        hosts = agents(h)
        with tempfile.TemporaryDirectory() as d:
            res = {"history_s": h, "rows_per_host": len(hosts[0].tx) + len(hosts[0].rx)}
            if hasattr(ag, "HalfFlusher"):
                # as the agent runs: a flush every second of the history, the loop's share timed
                f = ag.HalfFlusher(hosts[0], Path(d) / "h0.half.parquet")
                whole_tx, whole_rx = hosts[0].tx, hosts[0].rx
                hosts[0].tx, hosts[0].rx = whole_tx[:0], whole_rx[:0]
                step_tx, step_rx = len(whole_tx) / h, len(whole_rx) / h
                loop = []
                for s in range(1, int(h) + 1):
                    hosts[0].tx = whole_tx[:round(s * step_tx)]
                    hosts[0].rx = whole_rx[:round(s * step_rx)]
                    f.wait()
                    t = time.perf_counter()
                    f.flush()
                    loop.append(time.perf_counter() - t)
                t = time.perf_counter()
                f.wait()
                res["flush_loop_s_last"] = loop[-1]
                res["flush_loop_s_first"] = loop[0]
                res["flush_loop_s_max_after_first"] = max(loop[1:])
                t = time.perf_counter()
                f.flush()
                f.wait()
                res["flush_write_s_last"] = time.perf_counter() - t
            else:
                t = time.perf_counter()
                ag.write_half(hosts[0], Path(d) / "h0.half.parquet")
                res["flush_loop_s_last"] = time.perf_counter() - t
            for x in hosts:
                ag.write_half(x, Path(d) / f"{x.name}.half.parquet")
            names = [x.name for x in hosts]
            # warm: the estimator's first-use cost (a 10 s span; the code before review_rtable had no span)
            rt.halves_table(Path(d), names, Path(d) / "t.json", *([10.0] if hasattr(rt, "LIVE_SPAN_S") else []))
            t = time.perf_counter()
            info = rt.halves_table(Path(d), names, Path(d) / "t.json")
            res["refit_whole_s"] = time.perf_counter() - t
            res["refit_whole_probes"] = info["probes"]
            if hasattr(rt, "LIVE_SPAN_S"):   # the live refit's trailing span (watch's default)
                t = time.perf_counter()
                info = rt.halves_table(Path(d), names, Path(d) / "t.json", rt.LIVE_SPAN_S)
                res["refit_span_s"] = time.perf_counter() - t
                res["refit_span_probes"] = info["probes"]
            print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()

"""Packet Rocket's simulator measurements (issue 27): incast, web-search
background, and what clock sync error costs. Not a test; run it by hand:

    python benches/bench_rocket.py incast [--n 8 16 32 64] [--cc ...] [--threshold-us 5]
                                          [--flow-bytes 1000000] [--buffer-packets 250]
    python benches/bench_rocket.py background [--load 0.4 0.8] [--cc ...] [--seeds 1 2 3] [--ms 200]
    python benches/bench_rocket.py clocks [--n 16 32] [--cc newreno cubic] [--load 0.6] [--seeds 1]
                                          [--ms 20] [--drift-ppm 6]
    python benches/bench_rocket.py calibration [--n 16 32 127] [--seeds 1 2 3 4] [--drift-ppm 6]
    (incast and background: [--ignore ended|extend|during], the pause's ignore rule)
    (each: [--out DIR] also writes rocket_<kind>.csv)

**incast**: N senders to one receiver on a 10 Gbit/s star (2 us links).
Each path's base one-way delay is learnt first (one segment per sender,
20 us apart, no queue), then at 1 ms every sender sends `--flow-bytes` at
once. Queues: `--buffer-packets` drop-tail, marking at 64 for DCTCP. DCQCN
runs as RoCE needs it: a lossless class (PFC on class 0, default
thresholds), no buffer limit, marking at 64. Per point: the burst flows'
p99 completion time, the last one's (the request's completion), drops,
PFC pause frames, the receiver port's largest queue, goodput over the
request, and Packet Rocket's pauses.

**background**: the packet core's profiling scenario
(benches/star8_dctcp.toml: 8 hosts on a 10 Gbit/s switch, 10 us links,
250-packet drop-tail queues marking at 64 for DCTCP) at each web-search
load, `--ms` of arrivals, each seed; DCQCN again with PFC and no limit.
Per point (flows of all seeds pooled): p99 FCT of small (< 100 KB) flows
and of all flows, p99 slowdown, drops, PFC frames, the largest switch-port
queue, and goodput (bytes of all flows over the last one's end).

**clocks**: what sync error costs. Each incast (`--n`) and background
load (`--load`) per `--cc`, with `[clocks]` at its defaults (seeded draws:
offsets N(0, 100 us), drift N(0, `--drift-ppm`, default 6 ppm), wander,
NIC stamps): Packet Rocket off, then on ideal clocks, on ideal clocks
with T 1 ps and 25 ns higher (perturbation controls), on estimated ones
(the calibration pass: the default probe mesh alone, or "loaded" beside
the run's own load, fabriclab's estimator, its table applied;
`cal_err_max_ns` is the estimate's largest offset error against the
truth, `cal_drift_err_max_ppm` its largest drift error: the one that does
not cancel) and on the raw host clocks.

**calibration**: the estimated clocks' pass alone on a 10 Gbit/s star of
N + 1 hosts (`[clocks]` defaults, drift sigma `--drift-ppm`), per seed its
default mesh (a pair per peer every 10 ms for 100 ms) and the earlier one
(every 2 ms for 10 ms, given as `[probes]`), alternated: wall time of the
pass and estimate, and the drift error's p50 and max against the
simulated clocks.

T is `--threshold-us` (default 5 us) above each path's base. Prints
Markdown tables."""

import argparse
import csv
import tomllib
from pathlib import Path

import numpy as np

from fabriclab import simulate
from fabriclab.scenario.model import Scenario

HERE = Path(__file__).resolve().parent
BURST_PS = 1_000_000_000
WIRE = 1538
CCS = ["newreno", "dctcp", "cubic", "dcqcn"]
# clocks: Packet Rocket off, then on ideal clocks, on ideal clocks with T 1 ps and 25 ns higher (perturbation
# controls: no clock error, every pause that much shorter; 25 ns is about the idle estimate's largest offset error), on
# estimated clocks (the calibration pass's table; "loaded": the pass keeps the run's own load, Packet Rocket off)
# and on raw host clocks.
CLOCKS = ["off", "ideal", "ideal T+1ps", "ideal T+25ns", "estimated", "estimated loaded", "host"]


def _clock_case(clock, t):
    """(threshold, packet_rocket_clock) of a `clocks` row."""
    if clock == "off":
        return None, None
    if clock == "estimated loaded":
        return t, ("estimated", "loaded")
    if clock.startswith("ideal T+"):
        return t + {"1ps": 1, "25ns": 25_000}[clock.removeprefix("ideal T+")], "ideal"
    return t, clock


def _queue_and_transport(cc, buffer_packets):
    """[queue], [pfc] and the cc-specific part of the scenario."""
    if cc == "dcqcn":
        return {"limit_packets": "off", "ecn_threshold_packets": 64}, {"classes": [0]}
    return {"limit_packets": buffer_packets, "ecn_threshold_packets": 64 if cc == "dctcp" else None}, None


def _rocket(r):
    pr = r.summary.get("packet_rocket") or {}
    out = {"pauses": pr.get("pauses", 0), "paused_us": round(pr.get("paused_ps", 0) / 1e6, 1)}
    if "calibration" in pr:  # estimated clocks: the pass's offset and drift errors against the truth, largest
        out["cal_err_max_ns"] = round(pr["calibration"].get("offset_error_ns_max", float("nan")), 1)
        out["cal_drift_err_max_ppm"] = round(pr["calibration"].get("drift_error_ppm_max", float("nan")), 2)
    return out


def incast(n, cc, threshold_ps, flow_bytes=1_000_000, buffer_packets=250, clocks=None, clock=None, ignore="ended"):
    warm = [{"src": i, "dst": n, "size_bytes": 1460, "start_ps": i * 20_000_000} for i in range(n)]
    burst = [{"src": i, "dst": n, "size_bytes": flow_bytes, "start_ps": BURST_PS} for i in range(n)]
    queue, pfc = _queue_and_transport(cc, buffer_packets)
    raw = {"name": f"incast-{n}-{cc}", "seed": 1,
           "topology": {"kind": "star", "hosts": n + 1, "link_rate_bps": "10Gbps", "link_delay_ps": "2us"},
           "queue": queue, "transport": {"cc": cc, "packet_rocket_threshold_ps": threshold_ps,
                                         "packet_rocket_ignore": ignore},
           "flows": warm + burst}
    if pfc:
        raw["pfc"] = pfc
    if clocks is not None:
        raw["clocks"] = clocks
    clock, calibration = clock if isinstance(clock, tuple) else (clock, None)
    if calibration is not None:
        raw["transport"]["packet_rocket_calibration"] = calibration
    if clock is not None:
        raw["transport"]["packet_rocket_clock"] = clock
    r = simulate(Scenario.from_dict(raw))
    f = r.flows[r.flows.start_ps == BURST_PS]
    to_rx = r.links[r.links.dst_node == f"h{n}"]
    done_ps = int(f.end_ps.max()) - BURST_PS
    return {"n": n, "cc": cc, "rocket": threshold_ps is not None,
            "p99_fct_us": round(float(f.fct_ps.quantile(0.99)) / 1e6, 1),
            "request_us": round(done_ps / 1e6, 1),
            "drops": int(r.links.drops.sum()), "pfc_frames": int(r.links.pause_frames_sent.sum()),
            "retransmits": int(f.retransmits.sum()),
            "max_queue_packets": round(int(to_rx.max_queue_bytes.max()) / WIRE, 1),
            "goodput_gbps": round(n * flow_bytes * 8 / done_ps * 1e3, 2), **_rocket(r)}


def background(load, cc, threshold_ps, seeds, ms, clocks=None, clock=None, ignore="ended"):
    base = tomllib.loads((HERE / "star8_dctcp.toml").read_text())
    clock, calibration = clock if isinstance(clock, tuple) else (clock, None)
    queue, pfc = _queue_and_transport(cc, 250)
    fct, small, slow, drops, frames, maxq, gbps, pauses, paused = [], [], [], 0, 0, 0, [], 0, 0.0
    cal_err = cal_drift = 0.0
    for seed in seeds:
        raw = {**base, "seed": seed, "queue": {**base["queue"], **queue},
               "transport": {**base["transport"], "cc": cc, "packet_rocket_threshold_ps": threshold_ps,
                             "packet_rocket_ignore": ignore},
               "traffic": [{**base["traffic"][0], "load": load, "duration_ps": ms * 1_000_000_000}]}
        if pfc:
            raw["pfc"] = pfc
        if clocks is not None:
            raw["clocks"] = clocks
        if calibration is not None:
            raw["transport"]["packet_rocket_calibration"] = calibration
        if clock is not None:
            raw["transport"]["packet_rocket_clock"] = clock
        r = simulate(Scenario.from_dict(raw))
        f = r.flows
        fct.append(f.fct_ps.to_numpy(dtype=float))
        small.append(f.fct_ps[f.size_bytes < 100_000].to_numpy(dtype=float))
        slow.append(f.slowdown.to_numpy(dtype=float))
        drops += int(r.links.drops.sum())
        frames += int(r.links.pause_frames_sent.sum())
        sw = r.links[r.links.src_node.str.startswith("s")]
        maxq = max(maxq, int(sw.max_queue_bytes.max()))
        gbps.append(float(f.size_bytes.sum()) * 8 / (float(f.end_ps.max()) - float(f.start_ps.min())) * 1e3)
        rk = _rocket(r)
        pauses += rk["pauses"]
        paused += rk["paused_us"]
        cal_err = max(cal_err, rk.get("cal_err_max_ns", 0.0))
        cal_drift = max(cal_drift, rk.get("cal_drift_err_max_ppm", 0.0))
    fct, small, slow = np.concatenate(fct), np.concatenate(small), np.concatenate(slow)
    return {"load": load, "cc": cc, "rocket": threshold_ps is not None, "flows": len(fct),
            "p99_small_us": round(float(np.percentile(small, 99)) / 1e6, 1),
            "p99_fct_us": round(float(np.percentile(fct, 99)) / 1e6, 1),
            "p99_slowdown": round(float(np.percentile(slow, 99)), 1),
            "drops": drops, "pfc_frames": frames, "max_queue_packets": round(maxq / WIRE, 1),
            "goodput_gbps": round(float(np.mean(gbps)), 2), "pauses": pauses, "paused_us": round(paused, 1),
            **({"cal_err_max_ns": cal_err, "cal_drift_err_max_ppm": cal_drift} if clock == "estimated" else {})}


def _table(rows, out, kind):
    cols = list(dict.fromkeys(k for r in rows for k in r))
    if out:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / f"rocket_{kind}.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)


def _print(row, first):
    if first:
        print("| " + " | ".join(row) + " |")
        print("|" + "---|" * len(row))
    print("| " + " | ".join(str(v) for v in row.values()) + " |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=["incast", "background", "clocks", "calibration"])
    ap.add_argument("--n", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--cc", nargs="+", default=CCS)
    ap.add_argument("--threshold-us", type=float, default=5.0)
    ap.add_argument("--flow-bytes", type=int, default=1_000_000)
    ap.add_argument("--buffer-packets", type=int, default=250)
    ap.add_argument("--load", type=float, nargs="+", default=[0.4, 0.8])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--ms", type=int, default=200)
    ap.add_argument("--ignore", default="ended", choices=["ended", "extend", "during"],
                    help="transport.packet_rocket_ignore for the runs with Packet Rocket")
    ap.add_argument("--drift-ppm", type=float, default=6.0,
                    help="clocks: [clocks].drift_sigma_ppm of the host-clock runs (default: the scenario default)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    t = round(a.threshold_us * 1e6)
    rows = []
    if a.kind == "calibration":
        rows = calibration(a.n, a.seeds, a.drift_ppm)
    elif a.kind == "incast":
        for n in a.n:
            for cc in a.cc:
                for th in (None, t):
                    rows.append(incast(n, cc, th, a.flow_bytes, a.buffer_packets, ignore=a.ignore))
                    _print(rows[-1], len(rows) == 1)
    elif a.kind == "background":
        for load in a.load:
            for cc in a.cc:
                for th in (None, t):
                    rows.append(background(load, cc, th, a.seeds, a.ms, ignore=a.ignore))
                    _print(rows[-1], len(rows) == 1)
    else:
        clocks = {"drift_sigma_ppm": a.drift_ppm}
        for n in a.n:
            for cc in a.cc:
                for clock in CLOCKS:
                    th, ck = _clock_case(clock, t)
                    rows.append({"case": f"incast N={n}", "clock": clock,
                                 **incast(n, cc, th, a.flow_bytes, a.buffer_packets, clocks, ck, a.ignore)})
                    _print(rows[-1], len(rows) == 1)
        for load in a.load:
            for cc in a.cc:
                for clock in CLOCKS:
                    th, ck = _clock_case(clock, t)
                    rows.append({"case": f"background {load:.0%}", "clock": clock,
                                 **background(load, cc, th, a.seeds, a.ms, clocks, ck, a.ignore)})
                    _print(rows[-1], sum(r["case"].startswith("background") for r in rows) == 1)
    _table(rows, a.out, a.kind)


def calibration(n_values, seeds, drift_ppm):
    import time

    from fabriclab.observe.clock.calibrate import calibrate

    meshes = {"default (10 ms / 100 ms)": None,
              "earlier (2 ms / 10 ms)": {"peers": 5, "pair_every_ps": "2ms", "duration_ps": "10ms"}}
    rows = []
    for n in n_values:
        for seed in seeds:
            for mesh, probes in meshes.items():
                raw = {"name": "cal", "seed": seed, "topology": {"kind": "star", "hosts": n + 1,
                                                                 "link_rate_bps": "10Gbps", "link_delay_ps": "2us"},
                       "transport": {"cc": "newreno", "packet_rocket_threshold_ps": "5us"},
                       "clocks": {"drift_sigma_ppm": drift_ppm}}
                if probes is not None:
                    raw["probes"] = probes
                s = Scenario.from_dict(raw)
                t0 = time.perf_counter()
                _, info = calibrate(s)
                rows.append({"hosts": n + 1, "seed": seed, "mesh": mesh, "pass_s": round(time.perf_counter() - t0, 3),
                             "drift_err_p50_ppm": round(info["drift_error_ppm_p50"], 3),
                             "drift_err_max_ppm": round(info["drift_error_ppm_max"], 3),
                             "offset_err_max_ns": round(info["offset_error_ns_max"], 1)})
                _print(rows[-1], len(rows) == 1)
    return rows


if __name__ == "__main__":
    main()

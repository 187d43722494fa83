"""Clock sync in the cluster-in-a-box: our agent mesh + `fabriclab clock estimate` against linuxptp's ptp4l,
on the same host pairs, idle and under cross traffic; and the runtime's one-way delays corrected with the
agent's clocks. Not a test (root, linuxptp, ~5 minutes); run it by hand:

    sudo python benches/bench_box_clock.py [--scenario examples/cluster-star4-200m.toml] [--duration-s 30]
        [--loads idle,tcp40,tcp80,allreduce] [--window-s 2] [--seed 1] [--json out.json]

The box gets time namespaces (`cluster up --timens`), so every host's CLOCK_MONOTONIC has a real, known
offset (seeded within ±1 s); the agents stamp on it (`--clock monotonic`). Our error is each host's
estimated offset against h0 minus the difference of the two namespaces' offsets: exact, and taken from
what the bench set, not from the agents. ptp4l (master h0, slaves h1..) runs at the same time on
CLOCK_REALTIME, which all namespaces share: its reported offset is its error (observe/clock/linuxptp.py).

Loads (each for the whole run): `idle`; `tcpNN`: one TCP flow from every host to the next (h_i -> h_i+1),
each paced (SO_MAX_PACING_RATE) to NN % of the link's rate, so every link carries NN % each way; the load
reported is the receivers' measured goodput in wire bytes (x 1538/1448) over the link rate; `allreduce`:
the runtime's 4 MB ring allreduces back to back (`fabriclab runtime bench`), whose busbw is reported, and
whose messages (ccl.parquet) get one-way delays corrected with the agent's clocks (`fabriclab owd --clock
mono`), scored against their CLOCK_REALTIME readings (one machine: true time).
Results: docs/performance.md ("Clock sync in the box") and docs/clockwork.md ("Against linuxptp").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

from fabriclab.observe.clock import agent as ag  # noqa: E402
from fabriclab.observe.clock import estimate as est  # noqa: E402
from fabriclab.observe.clock import linuxptp  # noqa: E402
from fabriclab.observe.clock import probes as pr  # noqa: E402
from fabriclab.runtime.cluster import apply  # noqa: E402
from fabriclab.runtime.cluster.timens import prefix  # noqa: E402

PY = sys.executable
NAME = "bclk"
PORT = 5201
SO_MAX_PACING_RATE = 47
START_S = 8.0   # the mesh's agents start probing this long after launch

RECV = textwrap.dedent("""
    import socket, sys, time
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
    c, _ = s.accept(); got = 0; t0 = None; buf = bytearray(1 << 20)
    while True:
        n = c.recv_into(buf)
        if not n: break
        if t0 is None: t0 = time.time()
        got += n
    print(got, time.time() - t0, flush=True)
""")
SEND = textwrap.dedent("""
    import socket, sys, time
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, 47, int(sys.argv[3]))
    for _ in range(100):
        try:
            s.connect((sys.argv[1], int(sys.argv[2]))); break
        except OSError:
            time.sleep(0.05)
    end = time.time() + float(sys.argv[4]); b = b"x" * (1 << 16)
    while time.time() < end:
        s.sendall(b)
    s.close()
""")


def env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "python"), os.environ.get("PYTHONPATH", "")]))


def tcp_load(hosts, rate_bps: float, frac: float, seconds: float):
    """Flows h_i -> h_{i+1}, each paced to frac x rate; returns (procs, collect()) where collect gives the
    measured wire load per flow (goodput x 1538/1448 / rate)."""
    n = len(hosts)
    recv, send = [], []
    for i in range(n):
        dst = hosts[(i + 1) % n]
        recv.append(subprocess.Popen([*prefix(dst), PY, "-c", RECV, dst["addr"], str(PORT + i)],
                                     stdout=subprocess.PIPE, text=True))
    time.sleep(0.5)
    pace = int(frac * rate_bps / 8)
    for i in range(n):
        dst = hosts[(i + 1) % n]
        send.append(subprocess.Popen([*prefix(hosts[i]), PY, "-c", SEND, dst["addr"], str(PORT + i), str(pace),
                                      str(seconds)]))

    def collect():
        loads = []
        for p in send:
            p.wait()
        for p in recv:
            out, _ = p.communicate(timeout=30)
            got, dur = out.split()
            loads.append(int(got) * 8 / float(dur) * 1538 / 1448 / rate_bps)
        return loads
    return recv + send, collect


def allreduce_load(stop: threading.Event, tele_root: Path, results: list):
    """The runtime's 4 MB allreduces in back-to-back `runtime bench` runs until ``stop``; busbw per run."""
    k = 0
    time.sleep(START_S + 0.5)   # start once the agents probe: the clocks are estimated over the probes' span only
    while not stop.is_set():
        d = tele_root / f"run{k}"
        csv = tele_root / f"run{k}.csv"
        r = subprocess.run([PY, "-m", "fabriclab.cli", "runtime", "bench", "--cluster", NAME, "-n", "4", "--sizes",
                            "4M:4M", "--iters", "4", "--warmup", "1", "--telemetry", str(d), "--csv", str(csv)],
                           capture_output=True, text=True, env=env())
        if r.returncode == 0 and csv.exists():
            lines = csv.read_text().splitlines()
            row = dict(zip(lines[0].split(","), lines[1].split(",")))
            # a ring allreduce's bus bandwidth, 2 (n - 1) / n x size / time, in bits/s of payload per link
            busbw = 2 * 3 / 4 * int(row["size_bytes"]) * 8 / (float(row["time_us"]) * 1e-6)
            results.append({"dir": str(d), "busbw_bps": busbw})
        else:
            print(f"runtime bench failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
        k += 1


def our_errors(probes_path: Path, hosts, window_s: float):
    p = pr.read(probes_path)
    while True:
        try:
            res = est.estimate(p, ["huygens", "ntp", "ptp"], window_s=window_s, pure_bound_ns=2000.0,
                               reference="h0", drop_short_edges=True, robust=True)
            break
        except est.EstimateInputError as e:   # a window whose pure pairs no longer connect the hosts
            if window_s >= 4.0:
                raise
            print(f"window {window_s:g} s: {e}; trying {2 * window_s:g} s", file=sys.stderr)
            window_s *= 2
    c = res.clocks.to_pandas()
    mono = {h["label"]: h["mono_offset_ns"] for h in hosts}
    out = {}
    for m in ("huygens", "ntp", "ptp"):
        d = c[(c.method == m) & (c.host != "h0")].dropna(subset=["offset_ns"])
        truth = d.host.map(lambda h: mono[h] - mono["h0"]).to_numpy(dtype=np.float64)
        out[m] = np.abs(d.offset_ns.to_numpy() - truth)
    out["window_s"] = window_s
    return out, res


def owd_vs_offsets(t, run_dir: Path, hosts) -> np.ndarray:
    """Each message's OWD error against the truth from the time namespaces' known offsets: a host's
    CLOCK_MONOTONIC is the machine's plus its namespace's offset, so the true OWD is (arrival mono - offset of
    the receiver) - (send mono - offset of the sender). Unlike the CLOCK_REALTIME readings beside them, this
    does not depend on how far apart the runtime read its two clocks."""
    import pandas as pd

    from fabriclab.observe.owd import read_ccl

    ccl, _ = read_ccl(run_dir)
    mono = {h["label"]: h["mono_offset_ns"] for h in hosts}
    snd = ccl[ccl.kind == "send"][["op_id", "rank", "peer", "seq", "send_start_mono_ns"]].rename(
        columns={"rank": "src_rank", "peer": "dst_rank"})
    rcv = ccl[ccl.kind == "recv"][["op_id", "rank", "peer", "seq", "recv_arrival_mono_ns"]].rename(
        columns={"rank": "dst_rank", "peer": "src_rank"})
    m = pd.DataFrame(t).merge(snd, on=["op_id", "src_rank", "dst_rank", "seq"]).merge(
        rcv, on=["op_id", "src_rank", "dst_rank", "seq"])
    true = ((m.recv_arrival_mono_ns.astype("int64") - m.dst.map(mono).astype("int64"))
            - (m.send_start_mono_ns.astype("int64") - m.src.map(mono).astype("int64")))
    return (m.owd_ns - true.astype(np.float64)).to_numpy(dtype=np.float64)


def stats(x: np.ndarray) -> dict:
    if x.size == 0:
        return {"n": 0}
    return {"n": int(x.size), "p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99)),
            "max": float(x.max())}


def run_load(load: str, state: dict, a, work: Path) -> dict:
    hosts = state["hosts"]
    rate = state["links"][0]["rate_bps"]
    wd = work / load
    wd.mkdir(parents=True, exist_ok=True)
    if load not in ("idle", "allreduce") and not (load.startswith("tcp") and load[3:].isdigit()):
        raise SystemExit(f"--loads: unknown load {load!r} (idle, tcpNN, allreduce)")
    ptp = linuxptp.PtpRun(hosts, wd / "ptp")
    procs, collect, stop, ar = [], None, threading.Event(), []
    thread = None
    res = {"load": load}
    try:   # whatever happens, ptp4l, pmc and the load stop before the box is removed
        ptp.start()
        time.sleep(3.0)   # announce, unicast grants, the delay filter filling
        total = a.duration_s + START_S + 2.0
        if load.startswith("tcp"):
            procs, collect = tcp_load(hosts, rate, int(load[3:]) / 100.0, total)
        elif load == "allreduce":
            thread = threading.Thread(target=allreduce_load, args=(stop, wd / "tele", ar), daemon=True)
            (wd / "tele").mkdir(exist_ok=True)
            thread.start()
        t_mesh = time.time_ns()
        out = wd / "probes.parquet"
        # every agent must be listening before any probes: Python's start under load takes seconds
        ag.mesh(NAME, out, duration_s=a.duration_s, peers=3, rate_hz=100, seed=a.seed, start_delay_s=START_S,
                log=None)
        t0, t1 = t_mesh + int(START_S * 1e9), t_mesh + int((START_S + a.duration_s) * 1e9)
    finally:
        samples = ptp.stop()
        stop.set()
        if collect is not None:
            res["tcp_wire_load"] = [round(x, 3) for x in collect()]
        if thread is not None:
            thread.join(timeout=120)
            res["allreduce_runs"] = len(ar)
            res["allreduce_busbw_bps"] = [r["busbw_bps"] for r in ar]
        for p in procs:
            if p.poll() is None:
                p.kill()
    try:
        errs, est_res = our_errors(out, hosts, a.window_s)
    except est.EstimateInputError as e:
        res["ours_refused"] = str(e)
        res["linuxptp"] = stats(linuxptp.errors_in(samples, t0, t1))
        return res
    res["window_s"] = errs.pop("window_s")
    res["ours"] = {m: stats(v) for m, v in errs.items()}
    c = est_res.clocks.to_pandas()
    h = c[(c.method == "huygens") & (c.host != "h0")]
    res["ours_abs_drift_ppm"] = stats(np.abs(h.drift_ppm.dropna().to_numpy()))   # the true relative drift is 0
    res["linuxptp"] = stats(linuxptp.errors_in(samples, t0, t1))
    signed = [o for v in samples.values() for ing, o in v if t0 <= ing <= t1]
    res["linuxptp"]["median_signed"] = float(np.median(signed)) if signed else None
    res["linuxptp_window_mean"] = stats(linuxptp.window_means(samples, t0, t1, a.window_s))
    import pyarrow.parquet as pq

    res["stamp_noise"] = ag.stamp_noise(pq.read_table(str(out)))
    if ar:
        cl = wd / "clocks.parquet"
        c = est_res.clocks
        meta = dict(c.schema.metadata or {})
        origin = json.loads(pq.read_schema(str(out)).metadata[b"fabriclab.clock.join"])["stamp_origin_ns"]
        meta[b"fabriclab.clock.stamp_origin_ns"] = str(origin).encode()
        pq.write_table(c.replace_schema_metadata(meta), str(cl))
        from fabriclab.observe import owd

        e, e_off = [], []
        for r in ar:
            try:
                # only the ops wholly within the probes' span (outside it the clocks are extrapolated)
                ccl = pq.read_table(str(Path(r["dir"]) / "ccl.parquet"))
                df = ccl.select(["op_id", "post_real_ns", "recv_done_real_ns"]).to_pandas()
                g = df.groupby("op_id")
                ok = (g["post_real_ns"].min() >= t0) & (g["recv_done_real_ns"].max() <= t1)
                keep = set(ok[ok].index)
                if not keep:
                    continue
                sub = Path(r["dir"] + "-inspan")
                sub.mkdir(exist_ok=True)
                import pyarrow.compute as pc

                pq.write_table(ccl.filter(pc.is_in(ccl["op_id"], pa.array(sorted(keep), ccl["op_id"].type))),
                               str(sub / "ccl.parquet"))
                o, _ = owd.run(sub, cl, wd / "owd", "huygens", 1, ["h0", "h1", "h2", "h3"], "mono", True)
                e.append(o.table["error_ns"].abs().to_numpy())
                e_off.append(np.abs(owd_vs_offsets(o.table, sub, hosts)))
            except Exception as ex:  # a run whose telemetry is unusable: say so, keep the others
                print(f"owd of {r['dir']}: {ex}", file=sys.stderr)
        if e:
            res["runtime_owd_abs_error"] = stats(np.concatenate(e))
            res["runtime_owd_abs_error_vs_offsets"] = stats(np.concatenate(e_off))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", default=str(ROOT / "examples" / "cluster-star4-200m.toml"))
    ap.add_argument("--duration-s", type=float, default=30.0)
    ap.add_argument("--window-s", type=float, default=2.0)
    ap.add_argument("--loads", default="idle,tcp40,tcp80,allreduce")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default=None)
    ap.add_argument("--keep", default=None, help="keep the probes, ptp4l logs and telemetry in this folder")
    a = ap.parse_args()
    why = linuxptp.missing()
    if os.geteuid() != 0 or why:
        print(f"skipped: {why or 'needs root (network and time namespaces)'}")
        return
    rng = np.random.default_rng(a.seed)
    apply.remove(NAME)
    offsets = [int(v) for v in rng.integers(-10**9, 10**9, 4, endpoint=True)]
    state = apply.up(a.scenario, NAME, mono_offsets_ns=offsets)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-box-clock-") as d:
            for load in a.loads.split(","):
                r = run_load(load, state, a, Path(a.keep or d))
                results.append(r)
                print(json.dumps(r, indent=None), flush=True)
    finally:
        apply.remove(NAME)
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cores, kernel {platform.release()}, load "
          f"{os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"box: {a.scenario}, time namespaces (CLOCK_MONOTONIC offsets {offsets} ns); mesh K = 3, 100 pairs/s "
          f"per peer, {a.duration_s:g} s, windows {a.window_s:g} s, purity 2 us, --drop-short-edges --robust; "
          f"ptp4l {linuxptp.SYNC_LOG_INTERVAL} (2^n s) Sync and Delay_Req, unicast UDPv4, software stamps")
    print(f"{'load':<10} {'measured':<22} {'ours p50/p99/max ns':>26} {'linuxptp p50/p99/max ns':>30} "
          f"{'linuxptp, window means':>30} {'NTP-style p99':>14} {'PTP-style p99':>14}")
    for r in results:
        if "ours_refused" in r:
            print(f"{r['load']:<10} estimator refused the probes: {r['ours_refused']}")
            continue
        o, p = r["ours"]["huygens"], r["linuxptp"]
        meas = (f"wire {np.mean(r['tcp_wire_load']):.0%}" if "tcp_wire_load" in r else
                f"busbw {np.mean(r['allreduce_busbw_bps']) / 1e6:.0f} Mbit/s" if r.get("allreduce_busbw_bps") else "-")
        fmt = lambda s: f"{s['p50']:.0f} / {s['p99']:.0f} / {s['max']:.0f} (n {s['n']})" if s.get("n") else "-"  # noqa: E731
        print(f"{r['load']:<10} {meas:<22} {fmt(o):>26} {fmt(p):>30} {fmt(r['linuxptp_window_mean']):>30} "
              f"{r['ours']['ntp'].get('p99', float('nan')):>14.0f} {r['ours']['ptp'].get('p99', float('nan')):>14.0f}")
        if "runtime_owd_abs_error" in r:
            s = r["runtime_owd_abs_error"]
            s2 = r["runtime_owd_abs_error_vs_offsets"]
            print(f"{'':<10} runtime OWD |error| p50 / p99 / max: {s2['p50']:.0f} / {s2['p99']:.0f} / {s2['max']:.0f} "
                  f"ns against the namespaces' offsets, {s['p50']:.0f} / {s['p99']:.0f} / {s['max']:.0f} ns against "
                  f"the CLOCK_REALTIME readings, over {s['n']} messages")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

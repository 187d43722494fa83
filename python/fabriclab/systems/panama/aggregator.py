"""The software aggregator on real UDP packets (PANAMA section 6's
functional check): the Rust accelerator logic of the simulator
(fabriclab-agg) serving real workers.

- :func:`serve`: the aggregator, for given jobs and worker addresses.
- :func:`check`: N Python worker processes send random float32 vectors
  with increasing VIDs over loopback; each checks every result bit for bit
  against numpy's sum of every worker's vector, added in port order (the
  accelerator's order).
- :func:`bench`: the aggregator against the Rust load generator (workers as
  threads), for its throughput in packets and Gbit/s of gradient.

Packets are encoded and decoded by the crate (``_core.agg_encode`` /
``agg_decode``): one definition of the format for the simulator, the
aggregator and these workers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time

from ...errors import InputError

MAX_FLOATS = 65535


def free_udp_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _check_counts(workers: int, trees: int, packets: int, floats: int, window: int) -> None:
    for name, v, lo, hi in (("--workers", workers, 1, 1024), ("--trees", trees, 1, 255),
                            ("--packets", packets, 1, 1 << 32), ("--floats", floats, 1, MAX_FLOATS),
                            ("--window", window, 1, 1 << 16)):
        if not lo <= v <= hi:
            raise InputError(f"{name}: must be within {lo}..{hi}, got {v}")
    if 16 + 4 * floats > 65507:
        raise InputError(f"--floats: {floats} floats do not fit one UDP datagram (at most {(65507 - 16) // 4})")


def serve(bind: str, jobs: list[tuple[int, int, list[str]]], memory_bytes: int = 64 << 20, idle_s: float = 2.0) -> dict:
    from ..._core import agg_serve

    try:
        return agg_serve(bind, jobs, memory_bytes, idle_s)
    except ValueError as e:
        raise InputError(str(e)) from None


def worker_main(spec: dict) -> dict:
    """One Python worker of :func:`check` (run in its own process)."""
    import numpy as np

    from ..._core import agg_decode, agg_encode

    n, rank, trees, packets, floats, window = (spec[k] for k in ("n", "rank", "trees", "packets", "floats", "window"))
    agg = ("127.0.0.1", spec["agg_port"])

    def vector(r: int, tree: int, vid: int) -> np.ndarray:
        return np.random.default_rng([spec["seed"], r, tree, vid]).standard_normal(floats).astype(np.float32)

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", spec["ports"][rank]))
    s.settimeout(spec["timeout_s"])
    per_tree = [packets // trees + (t < packets % trees) for t in range(trees)]
    nxt, una = [0] * trees, [0] * trees
    sent = results = wrong = 0
    k = 0
    while results < packets:
        while k < packets and nxt[k % trees] - una[k % trees] < window:
            t = k % trees
            h = {"job": spec["job"], "tree": t, "vid": nxt[t], "fin": nxt[t] + 1 == per_tree[t], "ecn": 2}
            s.sendto(agg_encode(h, vector(rank, t, nxt[t]).tobytes()), agg)
            nxt[t] += 1
            sent += 1
            k += 1
        try:
            data = s.recv(65536)
        except socket.timeout:
            break
        h, payload = agg_decode(data)
        t, vid = h["tree"], h["vid"]
        if not h["result"] or vid < una[t]:
            continue
        una[t] = vid + 1
        results += 1
        ref = vector(0, t, vid)
        for r in range(1, n):
            ref = ref + vector(r, t, vid)  # float32 additions in port order, as the accelerator sums
        got = np.frombuffer(payload, np.float32)
        wrong += int(not np.array_equal(got.view(np.uint32), ref.view(np.uint32)))
    s.close()
    return {"rank": rank, "sent": sent, "results": results, "wrong": wrong}


def _start_aggregator(workers: int, trees: int):
    """The aggregator for job 1 on a thread of this process, its workers' ports chosen:
    (aggregator port, worker ports, thread, dict the thread fills with its counts). It
    stops 3 s after the last packet (or 3 s after start without one)."""
    agg_port = free_udp_port()
    ports = [free_udp_port() for _ in range(workers)]
    job = (1, trees, [f"127.0.0.1:{p}" for p in ports])
    out: dict = {}
    th = threading.Thread(target=lambda: out.update(serve(f"127.0.0.1:{agg_port}", [job], idle_s=3.0)), daemon=True)
    th.start()
    time.sleep(0.1)
    return agg_port, ports, th, out


def check(workers: int = 4, trees: int = 2, packets: int = 200, floats: int = 256, window: int = 8,
          seed: int = 1, timeout_s: float = 10.0) -> dict:
    """Aggregator in this process, workers as processes: every result checked bit for bit."""
    _check_counts(workers, trees, packets, floats, window)
    agg_port, ports, th, out = _start_aggregator(workers, trees)
    procs = []
    for r in range(workers):
        spec = {"n": workers, "rank": r, "trees": trees, "packets": packets, "floats": floats, "window": window,
                "agg_port": agg_port, "ports": ports, "job": 1, "seed": seed, "timeout_s": timeout_s}
        code = ("import json, sys; from fabriclab.systems.panama.aggregator import worker_main; "
                "print(json.dumps(worker_main(json.loads(sys.argv[1]))))")
        procs.append(subprocess.Popen([sys.executable, "-c", code, json.dumps(spec)], stdout=subprocess.PIPE, text=True))
    ranks = []
    for p in procs:
        stdout, _ = p.communicate(timeout=timeout_s * 6 + 60)
        if p.returncode != 0:
            raise RuntimeError(f"aggregator check: a worker failed (exit code {p.returncode})")
        ranks.append(json.loads(stdout))
    th.join()
    return {"aggregator": out, "workers": ranks}


def bench(workers: int = 4, trees: int = 4, packets: int = 20000, floats: int = 256, window: int = 32,
          timeout_s: float = 5.0) -> dict:
    """The aggregator against Rust load-generating workers (threads); throughput from the
    aggregator's busy time (first packet in to last result out)."""
    from ..._core import agg_load

    _check_counts(workers, trees, packets, floats, window)
    agg_port, ports, th, agg = _start_aggregator(workers, trees)
    res: list = [None] * workers

    def run(r):
        res[r] = agg_load(f"127.0.0.1:{agg_port}", f"127.0.0.1:{ports[r]}", 1, r, workers, trees, packets, floats,
                          window, timeout_s)

    ws = [threading.Thread(target=run, args=(r,)) for r in range(workers)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    th.join()
    busy = agg["busy_s"] or float("nan")
    return {"workers": res, "aggregator": agg, "packets_per_s": agg["packets_in"] / busy,
            "gradient_gbps": agg["gradient_bytes_in"] * 8 / busy / 1e9,
            "results_per_s": agg["aggregated"] / busy}

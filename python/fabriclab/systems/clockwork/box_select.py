"""Cluster selection in the cluster-in-a-box (`fabriclab cluster select`;
docs/clockwork-control.md, "Selection in the box"): the box's hosts are the pool (a
[cloud] box: the tenant's VMs, M + margin); the real probe mesh runs among
them, first idle, then through load rounds; :func:`select.choose` keeps M.

All namespaces of a box read one kernel clock, so the clock half of the
colocation detector (one oscillator per machine) would group every host: it
is not used here. The probes' one-way delays are read on that shared clock
directly (an all-zero clock estimate), and colocation comes from the delay
half only, made observable by load: in each round a subset of the pool sends
one paced UDP stream each; hosts behind one machine's uplink see the same
queue (``colocation.queue_sharing_groups``), each host's sender side of the
round's excess delays split from its receivers' by :func:`sender_side`. The rounds also give each host's
available bandwidth: the best rate of its streams."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .select import Measurement, SelectInputError, Selection, choose

IDLE_S = 1.5
ROUND_S = 0.6
RAMP_S = 0.25
GAP_S = 0.3
MAX_ROUNDS = 10
PORT = 31970
QUEUED_NS = 10_000_000.0
# Each sender of a round offers this share of the per-VM cap: two behind one NIC that is no faster than
# 1.4 caps (any machine whose VMs can overload it together) build its queue, slowly enough that the round
# ends before it overflows and drops the probes; one alone builds none.
LOAD_SHARE = 0.7
# The score: per pair the p90 of its idle excess delays, split into sender and receiver sides like a round's
# (sender_side); a host's score is its sender side: its machine's uplink queue. In a small pool every host
# probes nearly every other, so a host's own percentiles (the simulated score) hold the echoes it gets from a
# noisy host (docs/clockwork-control.md).
SCORE_QUANTILE = 90.0
# The agents and load workers start Python with pyarrow in every host at once; on a busy 2-core machine that
# took 6-9 s, and 18 s under a load average of 12 (measured), and probes must start before the idle phase does.
START_DELAY_S = 20.0
MIN_IDLE_PAIRS = 20


class MeasureFailure(RuntimeError):
    """The box could not be measured (a worker failed, or the machine was too busy): exit 1, not a bug."""


@dataclass
class BoxMeasurement:
    m: Measurement
    rounds: list[list[int]]        # per round: the senders (host indices)
    receivers: list[dict]          # per round: sender -> receiver
    q_ns: np.ndarray               # (hosts, rounds): sender-side queueing
    rates_bps: np.ndarray          # (hosts, rounds): its stream's rate (NaN: not a sender)
    probes: int


def load_rounds(n: int, seed: int = 0, max_rounds: int = MAX_ROUNDS) -> tuple[list[list[int]], list[dict]]:
    """The rounds' senders and receivers. Each round: about two thirds of the
    pool send, sender i to (i + k) mod n (k drawn per round: receivers
    distinct). Rounds (seeded draws) are added greedily until every pair of
    hosts sent out together (both sending, neither to the other: a stream to
    a machine mate never leaves the machine) in some round, and any two
    disjoint pairs were split by some round (one pair sending out together,
    the other not), so that two machines' queues do not rise in the same
    rounds; at most ``max_rounds``. Returns (senders per round, sender ->
    receiver per round)."""
    rng = random.Random(seed)
    h = max(2, -(-2 * n // 3))
    pairs = list(itertools.combinations(range(n), 2))
    cands = []
    for _ in range(300):
        senders, k = sorted(rng.sample(range(n), h)), rng.randrange(1, n)
        cands.append((senders, {i: (i + k) % n for i in senders}))

    def out_together(a, b, rnd):
        to = rnd[1]
        return a in to and b in to and to[a] != b and to[b] != a

    def need(rounds):
        pat = {p: tuple(out_together(*p, r) for r in rounds) for p in pairs}
        miss = sum(not any(v) for v in pat.values())
        same = sum(1 for a, b in itertools.combinations(pairs, 2) if not set(a) & set(b) and pat[a] == pat[b])
        return miss * 1000 + same

    rounds: list = []
    while len(rounds) < max_rounds and need(rounds) > 0:
        best = min(cands, key=lambda r: need(rounds + [r]))
        if need(rounds + [best]) >= need(rounds):
            break
        rounds.append(best)
    return [r[0] for r in rounds], [r[1] for r in rounds]


def _zero_clocks(names: list[str]):
    import pyarrow as pa

    return pa.table({"window": [0] * len(names), "window_mid_ns": [0] * len(names), "host": names,
                     "offset_ns": [0.0] * len(names), "drift_ppm": [0.0] * len(names)})


def _subset(p, keep: np.ndarray):
    return replace(p, src=p.src[keep], dst=p.dst[keep], tx0_ns=p.tx0_ns[keep], tx1_ns=p.tx1_ns[keep],
                   rx0_ns=p.rx0_ns[keep], rx1_ns=p.rx1_ns[keep], true_tx0_ps=None, true_rx0_ps=None,
                   true_tx1_ps=None, true_rx1_ps=None)


def measure_box(cluster: str, idle_s: float = IDLE_S, round_s: float = ROUND_S, peers: int | None = None,
                seed: int = 0, out_dir: Path | None = None, log=sys.stderr) -> BoxMeasurement:
    """Runs the mesh among the box's hosts, idle for ``idle_s``, then the load rounds (module docstring)."""
    from ...observe.clock import agent
    from ...observe.clock import colocation as co
    from ...observe.clock import probes as pr
    from ...runtime.cluster.apply import load_state
    from ...scenario.model import Scenario

    state = load_state(cluster, "--name")
    if state.get("status") != "up":
        raise SelectInputError(f"--name: cluster {cluster!r} is not up (status {state.get('status')})")
    hosts = state["hosts"]
    n = len(hosts)
    names = [h["label"] for h in hosts]
    s = Scenario.load(state["scenario"])
    cap = int(s.cloud.vm_egress_bps) if s.cloud is not None else int(state["links"][0]["rate_bps"])
    rounds, recv = load_rounds(n, seed)
    slot = round_s + GAP_S
    payload = s.transport.mss_bytes + 40 - 28  # a full frame: the MTU less the IP and UDP headers
    offered = LOAD_SHARE * cap * payload / (payload + 28 + 14 + 24)  # payload bits: the frame's share of the cap
    duration = idle_s + len(rounds) * slot + 0.2
    start_delay = START_DELAY_S
    t_mesh = time.time_ns() + int(start_delay * 1e9)
    t0 = t_mesh + int(idle_s * 1e9)
    with tempfile.TemporaryDirectory(prefix="fabriclab-box-select-") as tmp:
        probes_path = Path(out_dir or tmp) / "probes.parquet"
        result: dict = {}

        def run_mesh():
            try:
                result["j"] = agent.mesh(cluster, probes_path, duration_s=duration, peers=peers,
                                         offset_spread_ns=0.0, drift_spread_ppm=0.0, seed=seed,
                                         start_delay_s=(t_mesh - time.time_ns()) / 1e9, log=log,
                                         host_clock="realtime")
            except BaseException as e:  # re-raised below
                result["error"] = e

        th = threading.Thread(target=run_mesh, daemon=True)
        th.start()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3])] +
                                            ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        procs = []
        rates = np.full((n, len(rounds)), np.nan)
        try:
            for i, h in enumerate(hosts):
                spec = {"me": i, "addr": h["addr"], "port": PORT, "t0_ns": t0, "slot_s": slot, "round_s": round_s,
                        "ramp_s": RAMP_S, "payload": payload, "rate_bps": offered,
                        "dst": [hosts[rv[i]]["addr"] if i in rv else None for rv in recv]}
                procs.append(subprocess.Popen(["ip", "netns", "exec", h["ns"], sys.executable, "-m",
                                               "fabriclab.runtime.cluster.rounds", json.dumps(spec)], env=env,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            for i, p in enumerate(procs):
                try:
                    o, e = p.communicate(timeout=duration + start_delay + 60)
                    rx = json.loads(o)["rx"] if p.returncode == 0 else None
                except subprocess.TimeoutExpired:
                    raise MeasureFailure(f"cluster select: the load worker in {names[i]} did not finish") from None
                except (ValueError, KeyError, TypeError):
                    raise MeasureFailure(f"cluster select: the load worker in {names[i]} wrote no result") from None
                if log is not None and e:
                    log.write(e)
                if rx is None:
                    raise MeasureFailure(f"cluster select: the load worker in {names[i]} exited with {p.returncode}")
                for sender, r, bps in rx:
                    rates[sender, r] = bps
            th.join()
        finally:
            for p in procs:  # on any failure: nothing of ours keeps running
                if p.poll() is None:
                    p.kill()
                    p.wait()
            th.join(timeout=duration + start_delay + 60)
        if isinstance(result.get("error"), RuntimeError):  # an agent failed or timed out (agent.mesh)
            raise MeasureFailure(f"cluster select: {result['error']}")
        if "error" in result:
            raise result["error"]
        origin = result["j"].stamp_origin_ns
        p = pr.read(probes_path)
    # The hosts as the probe file names them (sorted) -> pool order.
    tx = p.tx0_ns.astype(np.int64) + origin
    clocks = _zero_clocks(names)
    if tx.size == 0:
        raise MeasureFailure("cluster select: the probe mesh recorded no probes; the machine is too busy, try again")
    idle = _subset(p, tx < t0)
    if len(idle.src) < MIN_IDLE_PAIRS * n:
        raise MeasureFailure(f"cluster select: only {len(idle.src)} probe pairs before the load rounds (the agents "
                           f"started late: first probe {(int(tx.min()) - t_mesh) / 1e9:+.1f} s after the planned "
                           "start); the machine is too busy, try again")
    src, dst, _, owd, excess = co.probe_delays(idle, clocks, names)
    base = np.full((n, n), np.inf)
    np.minimum.at(base, (src, dst), owd)
    e_idle = np.full((n, n), np.nan)
    for i, j in {(int(a), int(b)) for a, b in zip(src, dst)}:
        e_idle[i, j] = np.percentile(excess[(src == i) & (dst == j)], SCORE_QUANTILE)
    # A host none of whose pairs was measured is the worst, not the best (choose reads NaN as not noisy).
    score = sender_side(e_idle)
    score = np.where(np.isfinite(score), score, np.inf)
    q = np.full((n, len(rounds)), np.nan)
    for r in range(len(rounds)):
        lo, hi = t0 + int((r * slot + RAMP_S) * 1e9), t0 + int((r * slot + round_s) * 1e9)
        s_, d_, _, o_, _ = co.probe_delays(_subset(p, (tx >= lo) & (tx <= hi)), clocks, names)
        e = np.full((n, n), np.nan)
        for i, j in {(int(a), int(b)) for a, b in zip(s_, d_)}:
            if np.isfinite(base[i, j]):
                e[i, j] = np.median(o_[(s_ == i) & (d_ == j)] - base[i, j])
        q[:, r] = sender_side(e)
    groups = co.queue_sharing_groups(q, names, QUEUED_NS)
    best = np.nan_to_num(np.nanmax(np.where(np.isnan(rates), -1.0, rates), axis=1), nan=0.0).clip(min=0.0)
    # Slow: a host's best stream delivered less than slow_share of what it offered.
    m = Measurement(vms=names, hosts=list(range(n)), groups=groups, src=src, dst=dst, owd_ns=owd, excess_ns=excess,
                    cap_bps=int(offered), out_bps=best, in_bps=best, score_ns=score)
    return BoxMeasurement(m=m, rounds=rounds, receivers=recv, q_ns=q, rates_bps=rates, probes=len(p.src))


def sender_side(e: np.ndarray, sweeps: int = 6) -> np.ndarray:
    """Per host its sender side of a round's excess delays: ``e[i, j]`` (NaN where not
    measured) split as u_i + d_j by median polish (Tukey: alternate row and column
    medians), robust to the few pairs that break the sum (machine mates, whose path
    crosses neither's uplink nor downlink); the split's free constant set so that the
    least receiver side is 0 (some host's downlink is idle in every round: receivers
    are distinct). Returns u."""
    import warnings

    n = len(e)
    u, d = np.zeros(n), np.zeros(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a host with no measured pair: NaN
        for _ in range(sweeps):
            u = np.nanmedian(e - d[None, :], axis=1)
            d = np.nanmedian(e - u[:, None], axis=0)
        c = np.nanmin(d) if np.isfinite(d).any() else 0.0
    return u + c


def check_vms(cluster: str, vms: int) -> int:
    """The pool's size; M above it (or below 2) is refused before anything runs."""
    from ...runtime.cluster.apply import load_state

    n = len(load_state(cluster, "--name").get("hosts", []))
    if vms < 2:
        raise SelectInputError(f"--vms: a collective needs at least 2 VMs, got {vms}")
    if n < 4:
        raise SelectInputError(f"--name: box {cluster!r} has {n} hosts; selection in the box needs at least 4 (its load "
                               "rounds pair two senders against a third host's queue); build it with more tenant VMs "
                               "(cloud.tenant_vms)")
    if vms > n:
        raise SelectInputError(f"--vms: {vms} VMs asked, but the box's pool holds {n} hosts; ask for at most {n}, "
                               "or build the box with more tenant VMs (cloud.tenant_vms)")
    return n


def select_box(cluster: str, vms: int, prefer: str = "quiet", **kw) -> tuple[BoxMeasurement, Selection]:
    check_vms(cluster, vms)
    bm = measure_box(cluster, **kw)
    return bm, choose(bm.m, vms, prefer=prefer)


def write(out_dir: Path, bm: BoxMeasurement, sel: Selection) -> None:
    """selection.json (as the simulated selection's, plus the rounds) and selection.csv; hosts as labels too."""
    from . import select as s

    s.write(out_dir, bm.m, sel)
    path = Path(out_dir) / "selection.json"
    d = json.loads(path.read_text())
    d["labels"] = sel.vms
    d["bandwidth"]["measured"] = "load rounds: a host's best stream rate (send side; in_bps = out_bps)"
    d["rounds"] = [{"senders": [bm.m.vms[i] for i in r], "to": {bm.m.vms[a]: bm.m.vms[b] for a, b in rv.items()},
                    "queue_ns": {bm.m.vms[i]: float(bm.q_ns[i, k]) for i in range(len(bm.m.vms))},
                    "rate_bps": {bm.m.vms[i]: float(bm.rates_bps[i, k]) for i in r}}
                   for k, (r, rv) in enumerate(zip(bm.rounds, bm.receivers))]
    path.write_text(json.dumps(d, indent=1))

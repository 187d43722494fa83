"""Probe evidence for C4D: a light, periodic probe schedule over a job's host
links and the fabric's leaf-spine links, and the rule that reads its results
around an alarm to choose the faulty link (docs/c4.md, "C4D + probes").

C4 runs C4D beside C4P's path prober (section 3.2: a master probes
leaf-spine-leaf paths and leaves faulty links out). Here the probes are
small explicit flows (``[[flows]]``, each pinned to a path by ``path``) in
the job's class, every ``period_ps``:

- inside every leaf that holds a rank, a ring over the leaf's ranks' hosts
  (each sends to the next through the leaf), with other hosts of the leaf
  added up to ``RING_MIN``: every host link of the job is on two probes,
  and no fabric link is;
- across the fabric, a ring over all leaves through each spine (leaf L's
  prober to leaf L + 1's prober through spine S; a leaf's prober is its
  job host of lowest index, or its first host): every leaf-spine link is on two
  probes.

Probers are the job's hosts where possible: other tenants' hosts queue
the probes behind their own traffic, while the job's hosts are idle while
the job computes.

A probe and its acknowledgements cross each link of its path in both
directions. Reading them (:func:`localise`): per probed path, over a window
of ``WINDOW_PERIODS`` job periods plus ``LOST_PS`` before the alarm, a probe
is *lost* if it is not back ``LOST_PS`` after it started (by the alarm),
*stalled* if it came back after ``STALL_PS`` or more (a retransmission
timeout), and the path is *slower* if its fastest probe of the last
``RECENT_PERIODS`` took more than ``RISE`` x its fastest before the window. A path
with any of these is bad. The fastest probe of the last ``RECENT_PERIODS``
job periods sees an idle path (the job computes for about half of each
iteration, and that window holds one such gap), so its time is the path's
serialisation and propagation alone and rises only when a link's rate
falls. Boolean tomography: of the links that lie on every bad path (one
link explains them all), the one with the largest share of bad probes is
named, unless the telemetry's own answer lies on every bad path too (a
lossy link stalls a random few of its probes, and few bad probes can be
explained by several links); a down link loses every probe that crosses
it while it is down, so a link that lost every probe through it is named
whatever the telemetry said (one lost probe may be a lossy link's
retransmission timeout under way: ``LOST_PS`` is shorter than the RTO).
When no link lies on every bad path, or two share the largest share, the
probes name nothing. A lossy link need not stall every probe through it (a 0.5 %
loss stalls a probe of three frames and their acknowledgements about one
time in thirty), so a bad share below one is allowed for lost and stalled
probes; a lower rate slows every probe through the link, so for slower
probes alone only links whose every probe is slower are candidates (a link
on a good path is good). Lost probes are
read first, then stalled ones, and slower ones only when none was lost or
stalled: a path can queue behind traffic that the fault moved onto it (a dead link's
flows rerouted over its twin), but only a faulty link loses probes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .detector import path_links

PROBE_BYTES = 4_000  # three frames of 1,500 bytes
LOST_PS = 1_000_000_000  # 1 ms: a probe not back by then is counted lost (a stall under way counts too)
STALL_PS = 1_000_000_000  # a probe that took 1 ms or more was stalled (RTO 10 ms)
RISE = 1.05  # the fastest probe of a path 5 % slower than before: a slower link
WINDOW_PERIODS = 4.0  # the window before the alarm for lost and stalled probes, in job periods
RECENT_PERIODS = 1.5  # the window of the fastest probe: it holds one compute gap of the job
RING_MIN = 3  # hosts in a leaf's ring: with two, both links are on both probes
APP = "flows"  # messages.parquet's app label of explicit flows


def probe_flows(leaves: int, hosts_per_leaf: int, spines: int, job_hosts: list[int], period_ps: int,
                start_ps: int, end_ps: int) -> list[dict]:
    """The probe schedule as ``[[flows]]`` entries (module docstring)."""
    rounds = []
    job = set(job_hosts)
    for L in sorted({h // hosts_per_leaf for h in job}):
        on_leaf = range(L * hosts_per_leaf, (L + 1) * hosts_per_leaf)
        ring = [h for h in on_leaf if h in job]
        ring = sorted(ring + [h for h in on_leaf if h not in job][:max(0, RING_MIN - len(ring))])
        for a, b in zip(ring, ring[1:] + ring[:1]):
            if a != b:
                rounds.append((a, b, [f"h{a}", f"leaf{L}", f"h{b}"]))
    prober = {}
    for h in sorted(job, reverse=True):
        prober[h // hosts_per_leaf] = h
    for L in range(leaves):
        M = (L + 1) % leaves
        if M == L:
            break
        a, b = prober.get(L, L * hosts_per_leaf), prober.get(M, M * hosts_per_leaf)
        for S in range(spines):
            rounds.append((a, b, [f"h{a}", f"leaf{L}", f"spine{S}", f"leaf{M}", f"h{b}"]))
    return [{"src": a, "dst": b, "size_bytes": PROBE_BYTES, "start_ps": t, "path": p}
            for t in range(start_ps, end_ps, period_ps) for a, b, p in rounds]


def probe_load(flows: list[dict], period_ps: int, rate_bps: int) -> float:
    """The busiest link direction's probe load as a share of ``rate_bps``
    (payload bytes of one period; the ACKs add about 3 %)."""
    if not flows:
        return 0.0
    per_round: dict = {}
    t0 = flows[0]["start_ps"]
    for f in flows:
        if f["start_ps"] != t0:
            break
        for a, b in zip(f["path"], f["path"][1:]):
            per_round[(a, b)] = per_round.get((a, b), 0) + f["size_bytes"]
    return max(per_round.values()) * 8 * 10**12 / period_ps / rate_bps


@dataclass
class Verdict:
    link: str
    bad_paths: int  # bad probed paths through it
    probed_paths: int  # probed paths through it


def path_states(probes: pd.DataFrame, alarm_ps: int, period_ps: float) -> pd.DataFrame:
    """Per probed path: bad or not at ``alarm_ps`` (module docstring), from
    the probes' rows of messages.parquet, using only what had happened by
    then."""
    p = probes
    start, end = p["start_ps"].to_numpy(float), p["end_ps"].to_numpy(float)
    done = ~np.isnan(end) & (end <= alarm_ps)
    w0 = alarm_ps - WINDOW_PERIODS * period_ps - LOST_PS
    r0 = alarm_ps - RECENT_PERIODS * period_ps
    inwin = (start >= w0) & (start <= alarm_ps - LOST_PS)
    before = done & (end < w0)
    fct = end - start
    df = pd.DataFrame({"path": p["path"].to_numpy(), "lost": inwin & ~done,
                       "stall": (start >= w0) & done & (fct >= STALL_PS),
                       "fct_win": np.where((start >= r0) & done, fct, np.inf),
                       "fct_before": np.where(before, fct, np.inf)})
    g = df.groupby("path").agg(lost=("lost", "sum"), stall=("stall", "sum"), win=("fct_win", "min"),
                               base=("fct_before", "min"))
    slower = np.isfinite(g["win"]) & np.isfinite(g["base"]) & (g["win"] > RISE * g["base"])
    g["hard"] = (g["lost"] > 0) | (g["stall"] > 0)
    g["bad"] = g["hard"] | slower
    return g


def _bad_paths_by_link(probes: pd.DataFrame, time_ps: int, period_ps: float, job_links: set | None):
    """The probes' evidence at ``time_ps``: (any probe lost, any lost or
    stalled, how many paths are bad, per link [bad paths, probed paths]),
    reading only paths that cross ``job_links`` when given, and as bad the
    lost ones if any, else the stalled ones if any, else the slower ones (a
    slower path may only queue behind traffic that the fault moved: a dead
    link's flows on its twin). None when no probed path is bad."""
    if probes.empty or not period_ps:
        return None
    g = path_states(probes, time_ps, period_ps)
    if job_links is not None:
        g = g[[any(lk in job_links for lk in path_links(p)) for p in g.index]]
    lost = g["lost"] > 0
    hard = bool(g["hard"].any())
    bad = lost if lost.any() else g["hard"] if hard else g["bad"]
    nbad = int(bad.sum())
    if nbad == 0:
        return None
    count: dict = {}
    for path, is_bad in zip(g.index, bad):
        for lk in path_links(path):
            c = count.setdefault(lk, [0, 0])
            c[0] += int(is_bad)
            c[1] += 1
    return bool(lost.any()), hard, nbad, count


def blame(probes: pd.DataFrame, time_ps: int, period_ps: float, job_links: set) -> str | None:
    """The link the probes alone blame at ``time_ps``: of the links the job
    crossed, the only one whose every probed path is bad and that lies on
    every bad path (lost probes read first, then stalled ones, then slower
    ones, as in :func:`localise`); None when no link or several do."""
    ev = _bad_paths_by_link(probes, time_ps, period_ps, job_links)
    if ev is None:
        return None
    _, _, nbad, count = ev
    full = [lk for lk, (b, n) in count.items() if b == n == nbad and lk in job_links]
    return full[0] if len(full) == 1 else None


def localise(probes: pd.DataFrame, alarm_ps: int, period_ps: float, job_links: set | None = None,
             prior: set = frozenset()) -> Verdict | None:
    """The link the probes blame at ``alarm_ps``, or None when no probed
    path is bad or no link explains every bad one. With ``job_links`` (the
    links the job's messages crossed), only those can be named, and probes
    that cross none of them are not read (a tenant's host link, probed to
    close a leaf's ring, cannot slow the job). A link of ``prior`` (the
    telemetry's answer) that explains every bad probe is kept."""
    # A down link loses every probe that crosses it while it is down (the
    # rounds go out together), so for lost probes the most specific link is
    # named whatever the telemetry said.
    ev = _bad_paths_by_link(probes, alarm_ps, period_ps, job_links)
    if ev is None:
        return None
    lost_any, hard, nbad, count = ev
    # The links that explain every bad probe.
    # Slower probes alone: a link's lower rate slows every probe through it
    # (its fastest probe is serialisation and propagation), so a link on a
    # good path is good (Duffield's rule) and only links whose every probe is
    # slower can explain them; lost and stalled probes may come from a lossy
    # link that stalls a random few of its probes.
    full = [Verdict(lk, b, n) for lk, (b, n) in count.items()
            if b == nbad and (job_links is None or lk in job_links) and (hard or b == n)]
    if not full:
        return None
    # A link that lost every probe through it is down, whatever the telemetry
    # said. A probe lost alone may be a retransmission timeout under way on a
    # lossy link (LOST_PS is shorter than the RTO), like a stalled one.
    share = max(v.bad_paths / v.probed_paths for v in full)
    top = [v for v in full if v.bad_paths / v.probed_paths == share]
    if lost_any and share == 1 and len(top) == 1:
        return top[0]
    # Otherwise the telemetry's link when it explains every bad probe, else
    # the one whose probes are bad the most often (the most specific); a tie
    # names nothing (the telemetry's answer stands).
    kept = [v for v in full if v.link in prior]
    if kept:
        return max(kept, key=lambda v: v.bad_paths / v.probed_paths)
    return top[0] if len(top) == 1 else None

"""The C4D master (C4 section 3.1): reads one job's collective telemetry in
time order and reports, with the simulated time at which its evidence
existed, communication hang, non-communication hang, communication slow or
non-communication slow, and the suspect component.

Thresholds are relative to the job's own rhythm (docs/c4.md):

- Rhythm: the job's ops complete periodically; ``period`` is the median
  interval between the completions of the last (up to) 8 healthy ops.
- Hang: no telemetry event for ``HANG_PERIODS`` periods while an op is
  unfinished. Communication hang if a message was sent and never arrived
  (suspects: those connections, located on the fabric by their paths);
  non-communication hang otherwise (suspect: the rank whose last activity
  in the stuck op is earliest; a rank that never joined it first).
- Communication slow: per op and connection, time per byte in flight
  (arrival - departure, summed over the op's messages, over their bytes),
  divided by the connection's own median over its last 8 healthy ops: the
  delay matrix. An element is high when its log ratio exceeds
  max(log SLOW_MIN, SIGMAS x the connection's robust spread); it must be
  high in two consecutive ops, or above STRONG once. The matrix pattern
  (matrix.py) names the suspect: a host for a row and column through one
  rank, the source's or destination's host for a row or column, a fabric
  link for points (the links all slow connections cross and no healthy one
  does, from the paths in messages.parquet: C4D's network monitor).
- Non-communication slow: per op and ring neighbour (the first receive's
  sender), how late the sender joined after the receiver was ready
  (sender's first post - receiver's first post). A rank is a straggler
  when its lateness exceeds max(LATE_MIN x period, SIGMAS x robust spread
  of all lateness seen) in two consecutive ops, or STRONG_LATE x period once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .matrix import classify

HANG_PERIODS = 4.0
HISTORY = 8
WARMUP_OPS = 5
SLOW_MIN = 1.6
RATE_MIN = 1.15
STRONG = 4.0
SIGMAS = 5.0
LATE_MIN = 0.04
STRONG_LATE = 0.25


@dataclass
class Alarm:
    time_ps: int
    syndrome: str  # comm_hang, noncomm_hang, comm_slow, noncomm_slow
    component_kind: str | None  # rank, host, link
    component: str | None
    op: int
    pattern: str = ""
    suspects: list = field(default_factory=list)


@dataclass
class JobView:
    """What the master knows of the job: its ranks' host names, the links
    (node-name pairs) of the fabric, and the messages' paths."""
    name: str
    hosts: list[str]
    paths: dict  # (op, sender, step) -> list of undirected link names
    host_links: dict  # host name -> its access link names


def _link(a: str, b: str) -> str:
    return "-".join(sorted((a, b)))


def job_view(name: str, hosts: list[str], messages: pd.DataFrame, first_op: int = 0) -> JobView:
    m = messages[messages["app"] == name]
    tag = m["tag"].to_numpy(dtype=np.uint64)
    op = (tag >> np.uint64(32)).astype(np.int64) + first_op
    step = ((tag >> np.uint64(16)) & np.uint64(0xFFFF)).astype(np.int64)
    sender = (tag & np.uint64(0xFFFF)).astype(np.int64)
    paths, host_links = {}, {}
    for o, st, s, p in zip(op, step, sender, m["path"]):
        nodes = [x for x in str(p).split() if x != ">"]
        links = [_link(a, b) for a, b in zip(nodes, nodes[1:])]
        paths[(int(o), int(s), int(st))] = links
        for a, b in ((nodes[0], nodes[1]), (nodes[-1], nodes[-2])):
            host_links.setdefault(a, set()).add(_link(a, b))
    return JobView(name, hosts, paths, host_links)


def _robust_sd(x) -> float:
    x = np.asarray(x, dtype=float)
    if len(x) < 3:
        return 0.0
    return float(1.4826 * np.median(np.abs(x - np.median(x))))


class Master:
    """Feed ops in order with :meth:`op`; then :meth:`finish` at the run's end."""

    def __init__(self, view: JobView):
        self.v = view
        self.alarms: list[Alarm] = []
        self.ends: list[int] = []  # completion times of healthy ops
        self.conn_hist: dict = {}  # (s, d) -> list of time per byte (healthy ops)
        self.conn_path: dict = {}  # (s, d) -> links of its last healthy op
        self.late_hist: list[float] = []
        self.prev_slow: set = set()
        self.prev_late: set = set()
        self.last_event = 0
        self.prev_done = None
        self.stuck = None

    @property
    def period(self) -> float | None:
        e = self.ends[-HISTORY - 1:]
        return float(np.median(np.diff(e))) if len(e) >= 3 else None

    def alarm(self, a: Alarm):
        if not self.alarms:
            self.alarms.append(a)

    def op(self, op_id: int, rows: pd.DataFrame) -> None:
        times = rows[["post_mono_ns", "send_start_mono_ns", "send_end_mono_ns", "recv_arrival_mono_ns",
                      "recv_done_mono_ns"]].to_numpy(dtype=float) * 1000
        self.last_event = max(self.last_event, int(np.nanmax(times)))
        send = rows[rows["kind"] == "send"]
        recv = rows[rows["kind"] == "recv"]
        joined = rows.groupby("rank")["post_mono_ns"].min() * 1000
        n = len(self.v.hosts)
        complete = (len(joined) == n and send["send_end_mono_ns"].notna().all()
                    and recv["recv_done_mono_ns"].notna().all())
        if not complete:
            self.stuck = (op_id, rows, joined)
            return
        end = int(np.nanmax(times))
        if len(self.ends) >= WARMUP_OPS and self.period is not None:
            # A late rank also reshapes the traffic: its syndrome comes first.
            self._noncomm_slow(op_id, send, recv, end)
            self._comm_slow(op_id, send, end)
        else:
            self._learn_conn(op_id, send, set())
            self._learn_late(send, recv, set())
        self.ends.append(end)

    # -- communication slow: the delay matrix ---------------------------------
    def _conn_rates(self, send):
        """Per connection: (time per byte over all its messages in the op,
        the least time per byte of its larger messages). The first grows
        with any delay (stalls after losses, queueing); the second only when
        the connection's bottleneck rate falls, since congestion rarely
        slows every message of an op."""
        d = pd.DataFrame({"s": send["rank"].to_numpy(), "d": send["peer"].to_numpy(),
                          "t": (send["send_end_mono_ns"] - send["send_start_mono_ns"]).to_numpy(dtype=float),
                          "b": send["bytes"].to_numpy(dtype=float)})
        d["big"] = d["b"] >= d.groupby(["s", "d"])["b"].transform("median")
        d["r"] = d["t"] / d["b"].clip(lower=1.0)
        tot = d.groupby(["s", "d"])[["t", "b"]].sum()
        least = d[d["big"]].groupby(["s", "d"])["r"].min()
        return {k: (r.t / max(r.b, 1.0), float(least.get(k, r.t / max(r.b, 1.0)))) for k, r in tot.iterrows()}

    def _learn_conn(self, op_id, send, skip):
        for k, v in self._conn_rates(send).items():
            if k in skip:
                continue
            self.conn_hist.setdefault(k, []).append(v)
            del self.conn_hist[k][:-HISTORY]
        for s, st, d in zip(send["rank"], send["step"], send["peer"]):
            if (int(s), int(d)) not in skip:
                p = self.v.paths.get((op_id, int(s), int(st)))
                if p:
                    self.conn_path[(int(s), int(d))] = p

    def _comm_slow(self, op_id, send, end):
        rates = self._conn_rates(send)
        high, strong = set(), set()
        for k, v in rates.items():
            h = self.conn_hist.get(k)
            if not h or len(h) < WARMUP_OPS:
                continue
            for m, floor in ((0, SLOW_MIN), (1, RATE_MIN)):
                hist = np.asarray([x[m] for x in h])
                base = float(np.median(hist))
                lr = np.log(v[m] / base)
                if lr > max(np.log(floor), SIGMAS * _robust_sd(np.log(hist / base))):
                    high.add(k)
                    if lr > np.log(STRONG):
                        strong.add(k)
        confirmed = (high & self.prev_slow) | strong
        recent = high | self.prev_slow
        self.prev_slow = high
        self._learn_conn(op_id, send, high)
        if not confirmed or self.alarms:
            return
        n = len(self.v.hosts)
        flagged = np.zeros((n, n), bool)
        present = np.zeros((n, n), bool)
        for (s, d) in rates:
            present[s, d] = True
        for (s, d) in confirmed:
            flagged[s, d] = True
        pats = classify(flagged, present)
        kind, comp, pattern = self._locate(pats, confirmed, set(rates) - recent)
        self.alarm(Alarm(end, "comm_slow", kind, comp, op_id, pattern, sorted(confirmed)))

    def _locate(self, pats, slow, healthy):
        """The component the delay-matrix patterns point at."""
        for p, r in pats:
            if p in ("host", "row", "column"):
                return "host", self.v.hosts[r], p
        return ("link",) + self._tomography(slow, healthy) + ("point",)

    def _tomography(self, slow, healthy, paths=None):
        """The link slow connections cross most and healthy ones least:
        score = (slow connections through it) - (healthy ones through it);
        the best score wins, then fabric links before host access links,
        then name order."""
        paths = paths or self.conn_path
        score: dict = {}
        for c in slow:
            for lk in set(paths.get(c, [])):
                score[lk] = score.get(lk, 0) + 1
        if not score:
            return (None,)
        for c in healthy:
            for lk in set(paths.get(c, [])):
                if lk in score:
                    score[lk] -= 1
        access = set().union(*self.v.host_links.values()) if self.v.host_links else set()
        best = max(score.values())
        return (min((lk in access, lk) for lk, v in score.items() if v == best)[1],)

    # -- non-communication slow: receiver waits on a late sender -------------
    def _lateness(self, send, recv):
        """Per sender: how late it joined after its ring neighbour (the
        receiver of its first send) was ready, less the part its own release
        from the previous op explains: (join_s - done_s(previous)) - (join_v -
        done_v(previous)), i.e. the excess of its non-communication time."""
        rows = pd.concat([send, recv])
        join = rows.groupby("rank")["post_mono_ns"].min().astype(float)
        # A ring worker holds the sum at its last receive; a plan rank is
        # done when every step is, its sends delivered too.
        ends = recv[["recv_done_mono_ns"]].rename(columns={"recv_done_mono_ns": "t"})
        ends["rank"] = recv["rank"]
        if (rows["algorithm"] != "ring").any():
            more = send[["send_end_mono_ns", "rank"]].rename(columns={"send_end_mono_ns": "t"})
            ends = pd.concat([ends, more])
        done = ends.groupby("rank")["t"].max().astype(float)
        prev, self.prev_done = self.prev_done, done
        if prev is None:
            return {}
        gap = (join - prev.reindex(join.index)).dropna() * 1000
        first = send.sort_values("step").groupby("rank").first()
        late = {}
        for s_, r in first.iterrows():
            v = int(r["peer"])
            if s_ in gap.index and v in gap.index:
                late[int(s_)] = float(gap[s_] - gap[v])
        return late

    def _learn_late(self, send, recv, skip):
        self.late_hist += [x for s, x in self._lateness(send, recv).items() if s not in skip]
        del self.late_hist[:-HISTORY * len(self.v.hosts)]

    def _noncomm_slow(self, op_id, send, recv, end):
        late = self._lateness(send, recv)
        p = self.period
        thr = max(LATE_MIN * p, SIGMAS * _robust_sd(self.late_hist))
        high = {s for s, x in late.items() if x > thr}
        strong = {s for s, x in late.items() if x > STRONG_LATE * p}
        confirmed = (high & self.prev_late) | strong
        self.prev_late = high
        self._learn_late(send, recv, high)
        if confirmed:
            r = max(confirmed, key=lambda s: late[s])
            self.alarm(Alarm(end, "noncomm_slow", "rank", f"{self.v.name}:{r}", op_id, "late sender",
                             sorted(confirmed)))

    # -- hangs ----------------------------------------------------------------
    def finish(self, run_end_ps: int) -> None:
        if self.stuck is None or self.alarms or self.period is None:
            return
        t = int(self.last_event + HANG_PERIODS * self.period)
        if t > run_end_ps:
            return
        op_id, rows, joined = self.stuck
        send = rows[rows["kind"] == "send"]
        lost = send[send["send_start_mono_ns"].notna() & send["send_end_mono_ns"].isna()]
        if len(lost):
            conns = {(int(s), int(d)) for s, d in zip(lost["rank"], lost["peer"])}
            paths = {(int(s), int(d)): self.v.paths.get((op_id, int(s), int(st)), [])
                     for s, d, st in zip(lost["rank"], lost["peer"], lost["step"])}
            (link,) = self._tomography(conns, set(), paths)
            self.alarm(Alarm(t, "comm_hang", "link", link, op_id, "lost messages", sorted(conns)))
            return
        n = len(self.v.hosts)
        missing = [r for r in range(n) if r not in joined.index]
        if missing:
            r = missing[0]
        else:
            cols = ["post_mono_ns", "send_start_mono_ns", "send_end_mono_ns", "recv_arrival_mono_ns",
                    "recv_done_mono_ns"]
            last = rows.groupby("rank")[cols].max().max(axis=1)
            r = int(last.idxmin())
        self.alarm(Alarm(t, "noncomm_hang", "rank", f"{self.v.name}:{r}", op_id, "no progress", [r]))


def diagnose(ccl: pd.DataFrame, view: JobView, run_end_ps: int) -> Alarm | None:
    """Feeds the job's ops to a master in the order of their first event and
    returns its first alarm (C4D stops the job at its first diagnosis)."""
    m = Master(view)
    for op_id, rows in sorted(ccl.groupby("op_id"), key=lambda kv: kv[1]["post_mono_ns"].min()):
        if m.stuck is not None:
            break
        m.op(int(op_id), rows)
        if m.alarms:
            break
    m.finish(run_end_ps)
    return m.alarms[0] if m.alarms else None

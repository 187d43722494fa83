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
  max(log RATE_MIN, the connection's worst
  healthy op x ABOVE_WORST, SIGMAS x its robust spread). Each op's suspect
  links are those the most high channels cross; an alarm needs a common
  suspect in PERSIST consecutive ops, in two ops with a stall above
  STRONG, or in two consecutive ops when every connection (FULL_MIN at
  least) through the link is high; or, since the sixth pass, stalls above
  STRONG on two connections of one op that share a link (not in an op
  where routing moved a message), or one place that two or more high
  connections cross, more than any other, in two consecutive ops (one
  link, or since the eighth pass one switch's fabric links: ECMP twins). The matrix pattern
  (matrix.py) names the suspect: a host for a row and column through one
  rank, the source's or destination's host for a row or column, a fabric
  link for points (the links all slow connections cross and no healthy one
  does, from the paths in messages.parquet: C4D's network monitor).
- A fabric link routed around (a dead link with an alternative path): the
  job's messages stop crossing a link they used to; reported as
  communication slow on it once the empty ops make chance unlikely
  (``VANISH_MIN``, :meth:`Master._vanished`).
- Non-communication slow: per op and ring neighbour (the first receive's
  sender), how late the sender joined after the receiver was ready
  (sender's first post - receiver's first post). A rank is a straggler
  when its lateness exceeds max(LATE_MIN x period, SIGMAS x robust spread
  of all lateness seen) in two consecutive ops, or STRONG_LATE x period once.
- Communicator groups: when ccl.parquet has a ``group`` column (schema 3,
  docs/telemetry.md) with names in it, each group's ops are diagnosed as a
  job of their own (their rhythm, their ranks, their connections; ops
  without a group together as the job's world), and the earliest alarm is
  the answer, naming its group. A group's ranks are its own (0..k-1), on
  the hosts its rows name (else the job's hosts).
- With a prober (C4D + probes): communication slow on the link the probes
  blame when every connection through it ran slower than its recent
  median, in two consecutive ops, or at once when the job's messages used
  to cross it and none does in the op (:meth:`Master._probed_slow`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .matrix import classify
from .tomography import tomography

HANG_PERIODS = 4.0
HISTORY = 8
WARMUP_OPS = 5
RATE_MIN = 1.3
ABOVE_WORST = 1.1
STRONG = 3.0
# Ops in a row a connection must be high (unless above STRONG).
PERSIST = 3
# Connections a link must carry, all high, to count as confirmed in two ops.
FULL_MIN = 2
SIGMAS = 5.0
LATE_MIN = 0.04
VANISH_MIN = 8
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
    period_ps: float | None = None  # the job's period when the alarm was raised
    group: str | None = None  # the communicator group of the ops it was raised on (None: the job's world)


@dataclass
class JobView:
    """What the master knows of the job: its ranks' host names, the links
    (node-name pairs) of the fabric, and the messages' paths."""
    name: str
    hosts: list[str]
    paths: dict  # (op, sender, step) -> list of undirected link names
    host_links: dict  # host name -> its access link names
    rerouted: set = field(default_factory=set)  # (op, sender, step) of messages moved to a new route
    # (op, sender, step) of messages that lost a frame (the transport's
    # retransmission count, a NIC or socket counter) and kept their route
    retransmitted: set = field(default_factory=set)

    def access_links(self) -> set[str]:
        """The hosts' access links."""
        return set().union(*self.host_links.values())

    def links(self) -> set[str]:
        """Every link the job's messages crossed."""
        return {lk for links in self.paths.values() for lk in links}


def _link(a: str, b: str) -> str:
    return "-".join(sorted((a, b)))


def path_nodes(path: str) -> list[str]:
    """The nodes of a messages.parquet path ("h1 > leaf0 > h2")."""
    return [x for x in str(path).split() if x != ">"]



def _links(nodes: list[str]) -> list[str]:
    return [_link(a, b) for a, b in zip(nodes, nodes[1:])]


def path_links(path: str) -> list[str]:
    """The links of a messages.parquet path ("h1 > leaf0 > h2"), named as
    the detector names them."""
    return _links(path_nodes(path))


def job_view(name: str, hosts: list[str], messages: pd.DataFrame, first_op: int = 0) -> JobView:
    m = messages[messages["app"] == name]
    tag = m["tag"].to_numpy(dtype=np.uint64)
    op = (tag >> np.uint64(32)).astype(np.int64) + first_op
    step = ((tag >> np.uint64(16)) & np.uint64(0xFFFF)).astype(np.int64)
    sender = (tag & np.uint64(0xFFFF)).astype(np.int64)
    paths, host_links = {}, {}
    moved = m["reroutes"].to_numpy() > 0 if "reroutes" in m else np.zeros(len(m), bool)
    rerouted = {(int(o), int(s), int(st)) for o, s, st in zip(op[moved], sender[moved], step[moved])}
    lost = (m["retransmits"].to_numpy() > 0) & ~moved if "retransmits" in m else np.zeros(len(m), bool)
    retransmitted = {(int(o), int(s), int(st)) for o, s, st in zip(op[lost], sender[lost], step[lost])}
    for o, st, s, p in zip(op, step, sender, m["path"]):
        nodes = path_nodes(p)
        links = _links(nodes)
        paths[(int(o), int(s), int(st))] = links
        for a, b in ((nodes[0], nodes[1]), (nodes[-1], nodes[-2])):
            host_links.setdefault(a, set()).add(_link(a, b))
    return JobView(name, hosts, paths, host_links, rerouted, retransmitted)


def _robust_sd(x) -> float:
    x = np.asarray(x, dtype=float)
    if len(x) < 3:
        return 0.0
    return float(1.4826 * np.median(np.abs(x - np.median(x))))


class Master:
    """Feed ops in order with :meth:`op`; then :meth:`finish` at the run's end."""

    def __init__(self, view: JobView, prober=None):
        self.v = view
        # prober(time_ps, period_ps) -> the link the probes blame by then, or
        # None (C4P's path probing beside C4D; None: the telemetry alone).
        self.prober = prober
        self.probe_hist: list = []  # per op: the probes' link, when the job's connections through it slowed
        self.op_ratio: dict = {}  # the last op's delay matrix: connection -> log ratio to its history
        self.op_paths: dict = {}  # connection -> its links, now and while healthy
        self.alarms: list[Alarm] = []
        self.ends: list[int] = []  # completion times of healthy ops
        self.conn_hist: dict = {}  # (s, d) -> list of time per byte (healthy ops)
        self.conn_path: dict = {}  # (s, d) -> its routes seen healthy (dict as an ordered set)
        self.late_hist: list[float] = []
        self.prev_links: list = []  # suspect links of the last ops
        self.strong_links: list = []  # suspect links of the last ops with stalls
        self.single_links: list = []  # per op: the one place (a link, or a switch's fabric links) most high connections cross
        self.full_links: list = []  # per op: links every connection through which was high
        self.bias_hist: list = []  # per op: link -> [sum, count] of its messages' route bias
        self.frame_links: list = []  # the last 2 ops with lost frames on high connections: their common links
        self.lossy_hist: list = []  # per op: the routes (link sets) of its messages that lost a frame
        self.prev_late: set = set()
        self.link_hist: dict = {}  # link -> the job's messages on it per op
        self.empty_run: dict = {}  # link -> [its mean before, ops] while no message crosses it
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
        counts = self._link_counts(op_id, send)
        if len(self.ends) >= WARMUP_OPS and self.period is not None:
            # A late rank also reshapes the traffic: its syndrome comes first.
            self._noncomm_slow(op_id, self._lateness(send, recv), end)
            self._vanished(op_id, counts, end)
            self._comm_slow(op_id, send, end)
            if self.prober is not None:
                self._probed_slow(op_id, end)
        else:
            self._learn_conn(self._channels(op_id, send), set())
            self._learn_late(self._lateness(send, recv), set())
        if not self.alarms:
            for lk in set(self.link_hist) | set(counts):
                self.link_hist.setdefault(lk, []).append(counts.get(lk, 0))
                del self.link_hist[lk][:-HISTORY]
        self.ends.append(end)

    # -- a fabric link routed around: the link no message crosses any more ----
    def _link_counts(self, op_id, send) -> dict:
        """Messages of the op per link (their routes in the network monitor)."""
        count: dict = {}
        for a, st in zip(send["rank"], send["step"]):
            for lk in set(self.v.paths.get((op_id, int(a), int(st)), ())):
                count[lk] = count.get(lk, 0) + 1
        return count

    def _vanished(self, op_id, counts, end):
        """A link the job's messages used to cross and that none crosses any
        more has been withdrawn from routing: a dead link with an
        alternative path (also what C4P's probing sees: a link with no
        path). ECMP puts each message on one of the equal-cost routes at
        random, so a link that carried a mean of mu messages per op is
        empty in k ops in a row by chance with probability at most
        exp(-mu k) (Poisson; a binomial over two spines gives 2^(-2 mu k)).
        The alarm comes once mu k, summed over the empty ops in a row,
        reaches ``VANISH_MIN`` (exp(-8) = 3e-4), for links with mu >= 1."""
        if self.alarms:
            return
        gone = []
        for lk, h in self.link_hist.items():
            if counts.get(lk, 0) or len(h) < WARMUP_OPS:
                self.empty_run.pop(lk, None)
                continue
            if lk not in self.empty_run:
                self.empty_run[lk] = [float(np.mean(h[-HISTORY:])), 0]
            mu, k = self.empty_run[lk]
            self.empty_run[lk][1] = k = k + 1
            if mu >= 1 and mu * k >= VANISH_MIN:
                gone.append((mu * k, lk))
        if gone:
            lk = max(gone)[1]
            self.alarm(Alarm(end, "comm_slow", "link", lk, op_id, "link without traffic", []))

    def _channels(self, op_id, send):
        """Per connection (sender, receiver): time per byte while busy, i.e.
        the length of the union of its messages' flights (departure to
        arrival) over their bytes, and the routes its messages took. A
        message queued behind the connection's previous one (or beside it on
        another route) adds only its own share, so the figure follows the
        routes' rate and stalls (losses, a dead link), not how the ranks'
        pipeline overlaps."""
        paths = [tuple(self.v.paths.get((op_id, int(a), int(st)), ()))
                 for a, st in zip(send["rank"], send["step"])]
        d = pd.DataFrame({"s": send["rank"].to_numpy(), "d": send["peer"].to_numpy(), "p": paths,
                          "a": send["send_start_mono_ns"].to_numpy(dtype=float),
                          "e": send["send_end_mono_ns"].to_numpy(dtype=float),
                          "b": send["bytes"].to_numpy(dtype=float)})
        out = {}
        for k, g in d.sort_values(["s", "d", "a"]).groupby(["s", "d"], sort=False):
            busy, reach = 0.0, -np.inf
            for a, e in zip(g["a"].to_numpy(), g["e"].to_numpy()):
                if e > reach:
                    busy += e - max(a, reach)
                    reach = e
            out[(int(k[0]), int(k[1]))] = (busy / max(float(g["b"].sum()), 1.0), set(g["p"]))
        return out

    def _learn_conn(self, rates, skip):
        for k, v in rates.items():
            if k in skip:
                continue
            self.conn_hist.setdefault(k, []).append(v[0])
            del self.conn_hist[k][:-HISTORY]
            for p in v[1]:
                self.conn_path.setdefault(k, {})[p] = None

    def _comm_slow(self, op_id, send, end):
        rates = self._channels(op_id, send)
        high, strong, ratio = set(), set(), {}
        # A connection's links: every route it took, now or while healthy
        # (a rerouted message no longer shows the link it lost).
        paths = {k: sorted({lk for p in v[1] for lk in p} | set(self._route(*k))) for k, v in rates.items()}
        for k, v in rates.items():
            h = self.conn_hist.get(k)
            if not h or len(h) < WARMUP_OPS:
                continue
            hist = np.asarray(h)
            base = float(np.median(hist))
            lr = np.log(v[0] / base)
            ratio[k] = lr
            worst = np.log(hist.max() / base) + np.log(ABOVE_WORST)
            if lr > max(np.log(RATE_MIN), worst, SIGMAS * _robust_sd(np.log(hist / base))):
                high.add(k)
                if lr > np.log(STRONG):
                    strong.add(k)
        self.op_ratio, self.op_paths = ratio, paths
        suspects, crossers = self._suspect_links(high, paths)
        self.prev_links = (self.prev_links + [suspects])[-PERSIST:]
        self.full_links = (self.full_links + [self._full_links(high, paths)])[-2:]
        self.bias_hist = (self.bias_hist + [self._route_bias(op_id, send)])[-PERSIST:]
        lossy = [(set(self.v.paths.get((op_id, int(a), int(st)), ())), (int(a), int(d)))
                 for a, d, st in zip(send["rank"], send["peer"], send["step"])
                 if (op_id, int(a), int(st)) in self.v.retransmitted]
        moved = any((op_id, int(a), int(st)) in self.v.rerouted for a, st in zip(send["rank"], send["step"]))
        # In an op where routing moved messages, frames may be lost to the
        # moved traffic's congestion on the links it moved to: not read.
        self.lossy_hist = (self.lossy_hist + [None if moved else [r for r, _ in lossy]])[-PERSIST:]
        self._learn_conn(rates, high)
        if self.alarms:
            return
        stalled, stallers = self._suspect_links(strong, paths)
        if strong:
            self.strong_links = (self.strong_links + [stalled])[-2:]
        framed = [r for r, c in lossy if c in high]
        if framed and not moved:
            self.frame_links = (self.frame_links + [set.intersection(*framed)])[-2:]
        # Stalls on two connections of one op that share a link: as much
        # evidence as stalls in two ops. Not in an op where routing moved a
        # message (a link event): a moved message's recorded route is its new
        # one, while its stall came from the link it left.
        shared = stalled if stallers >= 2 and not moved else set()
        # The one place most high connections cross (two at least), the same in
        # two ops in a row: one link, or one switch's fabric links (ECMP
        # spreads a connection over a leaf's uplinks, so its links name them
        # all; the route bias in _locate picks one).
        top = suspects if crossers >= 2 else set()
        self.single_links = (self.single_links + [top if len(top) == 1 or self._twins(top) else set()])[-2:]
        if shared:
            links, slow = shared, strong
        elif len(self.single_links) == 2 and self.single_links[0] and self.single_links[0] == self.single_links[1]:
            links, slow = self.single_links[1], high
        elif len(self.strong_links) == 2 and set.intersection(*self.strong_links):
            # Stalls in two ops (not necessarily in a row) on a common link.
            links, slow = set.intersection(*self.strong_links), strong or high
        elif len(self.frame_links) == 2 and set.intersection(*self.frame_links):
            # Lost frames on one link in two ops, each slowing a connection.
            links, slow = set.intersection(*self.frame_links), high
        elif len(self.prev_links) == PERSIST and set.intersection(*self.prev_links):
            links, slow = set.intersection(*self.prev_links), high
        elif len(self.full_links) == 2 and set.intersection(*self.full_links):
            # Every connection through a link high in two ops in a row.
            links, slow = set.intersection(*self.full_links), high
        else:
            return
        n = len(self.v.hosts)
        flagged = np.zeros((n, n), bool)
        present = np.zeros((n, n), bool)
        for k in rates:
            present[k[0], k[1]] = True
        for k in slow:
            flagged[k[0], k[1]] = True
        pats = classify(flagged, present)
        # Lost frames place the fault: the link on the route of every message
        # that lost one (among the suspects if it is one of them).
        lossy = self._lossy_links()
        if lossy:
            links = (links & lossy) or lossy
        bias = {lk: self._bias(lk) for lk in links}
        kind, comp, pattern = self._locate(pats, links, ratio, paths, bias)
        self.alarm(Alarm(end, "comm_slow", kind, comp, op_id, pattern, sorted(slow)))

    def _probed_slow(self, op_id, end):
        """Communication slow raised by the probes (C4P, section 3.2, beside
        C4D): the probes blame one link (every probe through it bad and it on
        every bad probe, :func:`c4.probes.blame`) and every connection of the
        job through it ran slower than its own recent median in the op (the
        link slows the job, if below the delay matrix's threshold); both in
        two consecutive ops. The median is of the connection's last HISTORY
        ops not flagged high, so a slowdown below the threshold enters it:
        after about HISTORY / 2 slowed ops it is the slowed rate and this
        rule can no longer fire; it must fire in the first few ops. By
        chance, each connection is above its median half the time: all n of them in two ops, 4^-n, on top of the probes'
        evidence, which no fault-free op of the development runs showed.
        A link the probes blame that the job's messages crossed and no longer
        cross is a dead link routed around: the alarm comes at once (seventh
        pass; :meth:`_vanished` waits for enough empty ops)."""
        link = self.prober(end, self.period)
        if link in self.empty_run and self.empty_run[link][0] >= 1:
            # The probes' link, which the job's messages crossed (a mean of
            # one or more per op before they stopped, over at least
            # WARMUP_OPS ops: :meth:`_vanished`, earlier in the op, keeps it)
            # and none crosses in this op: a dead link routed around, seen at
            # once instead of after VANISH_MIN messages' worth of empty ops.
            self.alarm(Alarm(end, "comm_slow", "link", link, op_id, "probes; link without traffic", []))
            return
        through = [lr for k, lr in self.op_ratio.items() if link in self.op_paths.get(k, ())]
        ok = link if through and min(through) > 0 else None
        self.probe_hist = (self.probe_hist + [ok])[-2:]
        if len(self.probe_hist) == 2 and ok is not None and self.probe_hist[0] == ok:
            self.alarm(Alarm(end, "comm_slow", "link", ok, op_id, "probes", []))

    def _bias(self, lk) -> float:
        """A link's route bias (:meth:`_route_bias`) over the last PERSIST ops."""
        return (sum(b[lk][0] for b in self.bias_hist if lk in b)
                / max(1, sum(b[lk][1] for b in self.bias_hist if lk in b)))

    def _lossy_links(self) -> set:
        """The links on the route of every message of the last PERSIST ops
        that lost a frame (none: empty)."""
        if any(op is None for op in self.lossy_hist):
            return set()
        routes = [r for op in self.lossy_hist for r in op]
        return set.intersection(*routes) if routes else set()

    def _twins(self, links) -> bool:
        """Whether ``links`` are fabric links (no host's access link) that
        share one switch: a leaf's uplinks (equal-cost twins) or a
        spine's links. Reads the switch from the link's name, as the master
        names links (node names joined by "-"): right for the builders'
        node names, which hold no "-"."""
        if not links or links & self.v.access_links():
            return False
        common = set.intersection(*(set(lk.split("-")) for lk in links))
        return len(common) == 1

    @staticmethod
    def _suspect_links(high, paths) -> tuple[set, int]:
        """The links the most high channels cross (all of them if tied), and
        how many cross each of them."""
        count: dict = {}
        for k in high:
            for lk in set(paths.get(k, [])):
                count[lk] = count.get(lk, 0) + 1
        if not count:
            return set(), 0
        top = max(count.values())
        return {lk for lk, c in count.items() if c == top}, top

    @staticmethod
    def _full_links(high, paths) -> set:
        """Links crossed by at least ``FULL_MIN`` connections, every one of
        them high. A degraded link slows every connection that crosses it;
        in a big job many connections share each fabric link and the
        tenants' bursts make a few of them high anywhere, so the most-high
        count (:meth:`_suspect_links`) needs ``PERSIST`` ops, which a job
        near its end may not have; a link whose connections are all high is
        the same evidence at full strength and needs two."""
        tot: dict = {}
        hit: dict = {}
        for k, p in paths.items():
            for lk in set(p):
                tot[lk] = tot.get(lk, 0) + 1
                hit[lk] = hit.get(lk, 0) + (k in high)
        return {lk for lk, n in tot.items() if n >= FULL_MIN and hit[lk] == n}

    def _route_bias(self, op_id, send) -> dict:
        """Per link: the sum and count of the log ratios of the op's
        messages that crossed it to their connection's median time per byte
        in the op. A connection that splits over two ECMP routes shows which
        one is slow (a degraded leaf-spine link beside its healthy twin
        through the other spine); a link every message of a connection
        crosses scores 0 for it. The master sums it over the last
        ``PERSIST`` ops, the ops whose evidence raises the alarm."""
        d = pd.DataFrame({"c": list(zip(send["rank"], send["peer"])),
                          "r": ((send["send_end_mono_ns"] - send["send_start_mono_ns"])
                                / send["bytes"].clip(lower=1)).to_numpy(dtype=float),
                          "p": [self.v.paths.get((op_id, int(a), int(st)), [])
                                for a, st in zip(send["rank"], send["step"])]})
        d["lr"] = np.log(d["r"] / d.groupby("c")["r"].transform("median"))
        bias: dict = {}
        for lr, p in zip(d["lr"], d["p"]):
            for lk in set(p):
                b = bias.setdefault(lk, [0.0, 0])
                b[0] += lr
                b[1] += 1
        return bias

    def _locate(self, pats, links, ratio, paths, bias):
        """The component: of the suspect links, the one whose connections
        (slow or not) are slowest on average (mean log ratio to their
        history: a degraded link slows all that cross it, a shared access
        link only some) plus its route bias (:meth:`_route_bias`); named as its host when it is a host's access link
        and the delay matrix shows that host's row, column or both."""
        through: dict = {}
        for k, lr in ratio.items():
            for lk in set(paths.get(k, [])) & links:
                through.setdefault(lk, []).append(lr)
        best = max(sorted(links), key=lambda lk: float(np.mean(through.get(lk, [0.0]))) + bias.get(lk, 0.0))
        pattern = ",".join(sorted({p for p, _ in pats}))
        for p, r in pats:
            h = self.v.hosts[r] if p != "point" else None
            if h is not None and best in self.v.host_links.get(h, ()):
                return "host", h, pattern
        return "link", best, pattern

    def _tomography(self, slow, healthy, paths, prefer_access=False):
        """The link slow connections cross most and healthy ones least
        (:func:`.tomography.tomography`): fabric links before host access
        links on a tie (access links first for a hang: a dead fabric link is
        routed around, a host's only link is not), then name order."""
        return (tomography(slow, healthy, paths, self.v.access_links(), prefer_access),)

    # -- non-communication slow: receiver waits on a late sender -------------
    def _lateness(self, send, recv):
        """Per sender: how late it joined after its ring neighbour (the
        receiver of its first send) was ready, less the part its own release
        from the previous op explains: (join_s - done_s(previous)) - (join_v -
        done_v(previous)), i.e. the excess of its non-communication time."""
        rows = pd.concat([send, recv])
        join = rows.groupby("rank")["post_mono_ns"].min().astype(float)
        # A ring worker holds the sum at its last round's receive; a plan rank is
        # done when every step is, its sends delivered too.
        # (A ring message may overtake an earlier round's: its last round counts.)
        last = recv.sort_values("step").groupby("rank").tail(1)
        ends = last[["recv_done_mono_ns", "rank"]].rename(columns={"recv_done_mono_ns": "t"})
        if (rows["algorithm"] != "ring").any():
            ends = recv[["recv_done_mono_ns", "rank"]].rename(columns={"recv_done_mono_ns": "t"})
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

    def _learn_late(self, late, skip):
        self.late_hist += [x for s, x in late.items() if s not in skip]
        del self.late_hist[:-HISTORY * len(self.v.hosts)]

    def _noncomm_slow(self, op_id, late, end):
        p = self.period
        thr = max(LATE_MIN * p, SIGMAS * _robust_sd(self.late_hist))
        high = {s for s, x in late.items() if x > thr}
        strong = {s for s, x in late.items() if x > STRONG_LATE * p}
        confirmed = (high & self.prev_late) | strong
        self.prev_late = high
        self._learn_late(late, high)
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
        recv = rows[rows["kind"] == "recv"]
        lost = send[send["send_start_mono_ns"].notna() & send["send_end_mono_ns"].isna()]
        if len(lost):
            conns = {(int(s), int(d)) for s, d in zip(lost["rank"], lost["peer"])}
            # Each lost message by the route it took (the connection's healthy
            # routes if it has none): the dead link is on every one of them.
            paths = {(int(s), int(d), int(st)): self.v.paths.get((op_id, int(s), int(st)))
                     or self._route(int(s), int(d))
                     for s, d, st in zip(lost["rank"], lost["peer"], lost["step"])}
            # Healthy: connections that delivered a message which left after
            # half of the lost ones had (their links still worked by then).
            after = send[send["send_end_mono_ns"].notna()
                         & (send["send_start_mono_ns"] > lost["send_start_mono_ns"].median())]
            fine = {(int(s), int(d)) for s, d in zip(after["rank"], after["peer"])} - conns
            # A delivered message that lost frames on the way does not show
            # its links healthy (a flapping link delivers between its flaps):
            # its route is a bad path, and its connection not a healthy one.
            done = send[send["send_end_mono_ns"].notna()]
            frames = [(int(s), int(d), int(st)) for s, d, st in zip(done["rank"], done["peer"], done["step"])
                      if (op_id, int(s), int(st)) in self.v.retransmitted]
            fine -= {(s, d) for s, d, _ in frames}
            for s, d, st in frames:
                paths[("lost frame", s, st)] = self.v.paths.get((op_id, s, st), [])
            for c in fine:
                paths[c] = self._route(*c)
            (link,) = self._tomography(set(paths) - fine, fine, paths, prefer_access=True)
            self.alarm(Alarm(t, "comm_hang", "link", link, op_id, "lost messages", sorted(conns)))
            return
        r = self._hung_rank(rows, send, recv, joined)
        self.alarm(Alarm(t, "noncomm_hang", "rank", f"{self.v.name}:{r}", op_id, "no progress", [r]))

    def _route(self, s, d) -> list:
        """The links of every route connection (s, d) took while healthy."""
        return sorted({lk for p in self.conn_path.get((s, d), {}) for lk in p})

    def _hung_rank(self, rows, send, recv, joined) -> int:
        """The rank the stuck op waits on: one that never joined it; else
        one whose message was delivered but that never took it in; else one
        with a send posted (its dependencies done) that never started; else
        the rank whose last activity is earliest."""
        n = len(self.v.hosts)
        missing = [r for r in range(n) if r not in joined.index]
        if missing:
            return missing[0]
        delivered = send[send["send_end_mono_ns"].notna()]
        taken = recv[recv["recv_arrival_mono_ns"].notna()]
        got = taken.groupby(["rank", "peer"]).size()
        sent = delivered.groupby(["peer", "rank"]).size()  # (receiver, sender)
        for (v, s_), k in sent.items():
            if got.get((v, s_), 0) < k:
                return int(v)
        idle = send[send["post_mono_ns"].notna() & send["send_start_mono_ns"].isna()]
        if len(idle):
            return int(idle.sort_values("post_mono_ns")["rank"].iloc[0])
        cols = ["post_mono_ns", "send_start_mono_ns", "send_end_mono_ns", "recv_arrival_mono_ns",
                "recv_done_mono_ns"]
        return int(rows.groupby("rank")[cols].max().max(axis=1).idxmin())


def _group_view(view: JobView, rows: pd.DataFrame) -> JobView:
    """The view of one communicator group: its ranks' hosts from its rows'
    ``host`` column when given, else the job's."""
    if "host" not in rows or rows["host"].isna().any():
        return view
    by_rank = rows.groupby("rank")["host"].first()
    if list(by_rank.index) != list(range(len(by_rank))):
        return view
    return JobView(view.name, list(by_rank), view.paths, view.host_links, view.rerouted)


def diagnose(ccl: pd.DataFrame, view: JobView, run_end_ps: int, prober=None) -> Alarm | None:
    """Feeds the job's ops to a master in the order of their first event and
    returns its first alarm (C4D stops the job at its first diagnosis);
    ``prober`` as for :class:`Master`. With communicator groups (a ``group``
    column with names), one master per group; the earliest alarm wins."""
    if "group" not in ccl or ccl["group"].isna().all():
        return _diagnose(ccl, view, run_end_ps, prober)
    alarms = []
    for name, rows in ccl.groupby(ccl["group"].astype(object).where(ccl["group"].notna(), ""), sort=True):
        a = _diagnose(rows, _group_view(view, rows) if name else view, run_end_ps, prober)
        if a is not None:
            a.group = name or None
            alarms.append(a)
    return min(alarms, key=lambda a: (a.time_ps, a.group or "")) if alarms else None


def _diagnose(ccl: pd.DataFrame, view: JobView, run_end_ps: int, prober=None) -> Alarm | None:
    m = Master(view, prober)
    for op_id, rows in sorted(ccl.groupby("op_id"), key=lambda kv: kv[1]["post_mono_ns"].min()):
        if m.stuck is not None:
            break
        m.op(int(op_id), rows)
        if m.alarms:
            break
    m.finish(run_end_ps)
    if not m.alarms:
        return None
    m.alarms[0].period_ps = m.period
    return m.alarms[0]

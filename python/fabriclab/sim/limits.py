"""What a scenario will cost in memory, estimated before anything is built,
so that a scenario that cannot fit is refused with the field to blame
instead of being killed (or aborting) half-way; and in time (events and
run time, :func:`estimate_time`, at the end), announced and never refused.

The figures per item were measured on whole runs (peak resident memory
against the number of flows, timeline rows and links; docs/scenario.md,
"Limits") and rounded up: about 470 bytes per finished flow or message
(core record, Arrow and pandas tables), 370 per job timeline row, 1 KB per
link (Python topology, JSON, core ports and queues), plus the core's
distance table (2 bytes per switch and attachment group).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..errors import InputError

BYTES_PER_FLOW = 600
BYTES_PER_TIMELINE_ROW = 500
BYTES_PER_LINK = 1500
BYTES_PER_NODE = 500
BYTES_PER_DIST_ENTRY = 2
# A queue sample row: the core's record and its Python columns while converted.
BYTES_PER_QUEUE_ROW = 300
# The interpreter, numpy, pyarrow, pandas and the extension loaded.
BASE_BYTES = 200 * 2**20
ENV_LIMIT = "FABRICLAB_MEMORY_LIMIT"


class MemoryLimitError(InputError):
    """The scenario would need more memory than the limit allows."""


@dataclass
class Estimate:
    """Bytes per cause; each cause names the field that drives it."""

    parts: dict[str, tuple[int, str]] = field(default_factory=dict)
    # The topology, when the estimate had to build it (a topology file) or was given it.
    topology: object = None

    def add(self, field_name: str, nbytes: float, detail: str) -> None:
        old, old_detail = self.parts.get(field_name, (0, ""))
        self.parts[field_name] = (old + int(nbytes), detail if not old_detail else f"{old_detail}; {detail}")

    @staticmethod
    def count(x: float) -> str:
        """A count for a message: with thousands separators, or in exponent form when huge."""
        return _count(x)

    @property
    def total_bytes(self) -> int:
        return BASE_BYTES + sum(b for b, _ in self.parts.values())

    def dominant(self) -> tuple[str, int, str]:
        name, (b, detail) = max(self.parts.items(), key=lambda kv: kv[1][0])
        return name, b, detail


def human_bytes(n: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def available_bytes() -> int | None:
    """Memory this process can get now: the machine's MemAvailable (else its
    physical memory), or less when the process runs under an address-space
    or data limit (ulimit -v / -d): that limit less what is mapped already."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    except OSError:
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            pass
    try:
        import resource

        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        for which in (resource.RLIMIT_AS, resource.RLIMIT_DATA):
            soft = resource.getrlimit(which)[0]
            if soft != resource.RLIM_INFINITY:
                left = max(soft - mapped, 0)
                avail = left if avail is None else min(avail, left)
    except (ImportError, OSError, ValueError):
        pass
    return avail


def resolve_limit(limit: int | str | None, option: str = "--memory-limit") -> int | None:
    """The limit in bytes (None: no check): an explicit value or 'off', else
    the environment's FABRICLAB_MEMORY_LIMIT, else the available memory."""
    if limit is None:
        limit = os.environ.get(ENV_LIMIT)
        option = ENV_LIMIT
    if limit is None:
        return available_bytes()
    if isinstance(limit, str):
        if limit.strip().lower() in ("off", "none"):
            return None
        from pydantic import TypeAdapter, ValidationError

        from ..scenario.units import SizeBytes

        try:
            limit = TypeAdapter(SizeBytes).validate_python(limit.strip())
        except ValidationError as e:
            msg = e.errors()[0]["msg"].removeprefix("Value error, ")
            raise InputError(f"{option}: {msg} (give a size such as 16GiB, or 'off')") from None
    if limit <= 0:
        raise InputError(f"{option}: must be positive (or 'off')")
    return int(limit)


def estimate(scenario, topology_data=None, apps=()) -> Estimate:
    """The memory a run of ``scenario`` needs, by cause (``topology_data``:
    the scenario's topology if already built; ``apps``: the apps whose
    sections it counts, fabriclab.sim.apps.APPS for a run)."""
    est = Estimate(topology=topology_data)
    hosts, rate_bps, links = _topology(scenario, est)
    for app in apps:
        app.estimate(scenario, est, hosts, rate_bps)
    _queue_samples(scenario, est, links)
    return est


def check_memory(scenario, limit: int | str | None = None, topology_data=None, apps=()) -> Estimate:
    """Refuses (MemoryLimitError naming the dominant field) a scenario whose
    estimate exceeds the limit; returns the estimate otherwise."""
    est = estimate(scenario, topology_data, apps)
    cap = resolve_limit(limit)
    if cap is not None and est.total_bytes > cap:
        name, b, detail = est.dominant()
        raise MemoryLimitError(
            f"{name}: the scenario would need about {human_bytes(est.total_bytes)} of memory, more than the "
            f"{human_bytes(cap)} allowed; most of it ({human_bytes(b)}) for {detail}. Make it smaller, or set the "
            f"limit with --memory-limit SIZE ('off' to skip this check; environment: {ENV_LIMIT})"
        )
    return est


def checked_topology(scenario, limit: int | str | None = None, topology_data=None, apps=()):
    """The memory check (refusing before a topology that may not fit is
    built), then the scenario's topology, the estimate's own when it had to
    build it: ``(estimate, topology)``."""
    est = check_memory(scenario, limit, topology_data, apps)
    return est, est.topology if est.topology is not None else scenario.build_topology()


def _topology(s, est: Estimate) -> tuple[int, float, int]:
    """Adds the topology's cost; returns its hosts, fastest link rate and links."""
    t = s.topology
    rate = getattr(t, "link_rate_bps", None)
    kind = t.kind
    if kind == "star":
        hosts, switches, links, groups, name = t.hosts, 1, t.hosts, 1, "topology.hosts"
    elif kind == "leaf_spine":
        hosts = t.leaves // t.host_ports * t.hosts_per_leaf
        switches, links, groups = t.leaves + t.spines, hosts * t.host_ports + t.leaves * t.spines, t.leaves
        name = "topology.hosts_per_leaf" if t.hosts_per_leaf >= t.leaves else "topology.leaves"
    elif kind == "fat_tree":
        k = t.k
        hosts, switches, links, groups, name = k**3 // 4 // t.host_ports, 5 * k * k // 4, 3 * k**3 // 4, k * k // 2, "topology.k"
    else:  # a file: its size is what it is; count it once built (and keep it for the run)
        data = est.topology if est.topology is not None else s.build_topology()
        est.topology = data
        hosts = len(data.hosts)
        switches = len(data.nodes) - hosts
        links, groups, name = len(data.links), hosts, "topology.path"
        rate = max((lk["rate_bps"] for lk in data.links), default=1)
    nodes = hosts + switches
    est.add(name, nodes * BYTES_PER_NODE + links * BYTES_PER_LINK + groups * switches * BYTES_PER_DIST_ENTRY,
            f"a topology of {nodes:,} nodes and {links:,} links")
    return hosts, float(rate), links


# Queue sample rows kept when no memory limit applies.
MAX_QUEUE_ROWS = 50_000_000


def queue_row_budget(est: Estimate, limit: int | str | None = None) -> int:
    """How many queue sample rows a run may keep: what the memory limit
    leaves after the rest of the estimate, at twice a row's cost (the core's
    vector may double while growing), at most MAX_QUEUE_ROWS. A run that
    outlasts its arrivals (a slow link, say) can sample for longer than the
    estimate foresaw; sampling then stops at the budget instead of
    exhausting memory."""
    cap = resolve_limit(limit)
    if cap is None:
        return MAX_QUEUE_ROWS
    rest = est.total_bytes - est.parts.get("outputs.queues_every_ps", (0, ""))[0]
    return int(max(1000, min(MAX_QUEUE_ROWS, (cap - rest) // (2 * BYTES_PER_QUEUE_ROW))))


def _queue_samples(s, est: Estimate, links: int) -> None:
    """At most one row per sample, port (two per link) and band while the
    network is busy (rows of idle bands are skipped, so this is a bound)."""
    every = s.outputs.queues_every_ps
    if every is None:
        return
    bands = s.queue.bands if s.queue.discipline == "prio" else 1
    samples = s.stop_ps // every if s.stop_ps else s.arrivals_end_ps() // every + 1
    rows = samples * 2 * links * bands
    est.add("outputs.queues_every_ps", rows * BYTES_PER_QUEUE_ROW,
            f"up to {_count(rows)} queue samples ({_count(samples)} samples x {2 * links:,} ports x {bands} bands)")


def _count(x: float) -> str:
    return f"{x:,.0f}" if x < 1e15 else f"{x:.2e}"


# ---------------------------------------------------------------- run time
#
# What a run will cost in time, estimated as validate and run start (issue 28: a long run got no
# warning). The count of events is modelled from the scenario; the time is that count at the
# speed measured on the machine below. Events are deterministic; the speed is this machine's.
#
# Packet backend: every segment costs events on each link it crosses (its transmission and arrival,
# and its ACK's on the way back): EVENTS_PER_HOST_HOP on the first and the last (a host's link) and
# EVENTS_PER_SWITCH_HOP on each link between switches, plus EVENTS_PER_MESSAGE per message or flow
# (its start, connection and end). Fitted on 14 runs of 7 scenarios (star, leaf-spine and fat-tree
# background traffic, explicit flows, two training jobs, two collectives; both backends) with
# fabriclab 0.1.0 on the 2-core development VM (2026-11-28), counting the bytes the runs' flows
# really had: a star's 8 hosts 6.7 events per segment (2 host links), a 4-leaf leaf-spine's 15.7
# (3.55 links on average), a k = 4 fat-tree's 21.6 (5.33). The estimate from the expected bytes
# was within a factor of 2 of every run's `events` (a heavy-tailed CDF's few large flows can
# offer twice the expected bytes in a short run); tests/test_rough_edges.py holds four to 3x.
EVENTS_PER_HOST_HOP = 3.4
EVENTS_PER_SWITCH_HOP = 4.8
EVENTS_PER_MESSAGE = 12
# Flow backend: a flow or message costs a few events (arrival, rate changes, slow-start rounds, end).
FLOW_EVENTS_PER_MESSAGE = 4
# Training jobs: a forward and a backward event per layer, worker and iteration (both backends).
EVENTS_PER_LAYER_PASS = 1
# Events per second of wall time, measured with `fabriclab run` on the same VM (summary.json's
# performance.events_per_s): 14.4 to 27.7 M/s on the packet backend's seven runs (median 21.6 M);
# the flow backend spends far more per event on max-min rates (0.3 to 3.5 M/s), 1 M/s taken.
EVENTS_PER_S = {"packet": 20e6, "flow": 1e6}
# Path lengths are found by a search from each source host (a k = 64 fat-tree's takes about 0.2 s
# in Python): a traffic's mean from HOP_SAMPLE_SOURCES sources to up to 64 destinations each, a
# job's, a collective's or the explicit flows' from HOP_SAMPLE_PAIRS of their pairs, evenly spaced.
HOP_SAMPLE_SOURCES = 4
HOP_SAMPLE_PAIRS = 8


@dataclass
class TimeEstimate:
    """Expected events of a run by cause, and what they take at EVENTS_PER_S.
    Each app adds its own (``App.events``) through :meth:`load` and
    :meth:`add`, with the hops between hosts from ``hops``."""

    backend: str
    hops: "_Hops"
    mss_bytes: int
    parts: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, events: float) -> None:
        self.parts[name] = self.parts.get(name, 0.0) + events

    def load(self, name: str, nbytes: float, messages: float, mean_hops: float) -> None:
        """The events of ``messages`` messages carrying ``nbytes`` in all over
        ``mean_hops`` links on average (see the constants above)."""
        if self.backend == "packet":
            per_segment = 2 * EVENTS_PER_HOST_HOP + max(mean_hops - 2, 0) * EVENTS_PER_SWITCH_HOP
            self.add(name, (nbytes / self.mss_bytes + messages) * per_segment + messages * EVENTS_PER_MESSAGE)
        else:
            self.add(name, messages * FLOW_EVENTS_PER_MESSAGE)

    @property
    def events(self) -> float:
        return sum(self.parts.values())

    @property
    def seconds(self) -> float:
        return self.events / EVENTS_PER_S[self.backend]

    def text(self) -> str:
        """One line: 'about 45 M events, about 2 s of run time (...)'."""
        main = max(self.parts.items(), key=lambda kv: kv[1])[0] if self.parts else None
        why = f"; most for {main}" if main is not None and len(self.parts) > 1 else ""
        return (f"about {_events_text(self.events)} events, {human_seconds(self.seconds)} of run time "
                f"(at {EVENTS_PER_S[self.backend] / 1e6:g} M events/s, the {self.backend} backend's speed measured "
                f"on a 2-core VM{why})")


def human_seconds(s: float) -> str:
    """'under a second', 'about 4 s', 'about 9.7 min', ..."""
    if s < 1:
        return "under a second"
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"about {s / size:,.1f} {unit}"
    return f"about {s:.0f} s"


def _events_text(n: float) -> str:
    return f"{n / 1e9:,.1f} G" if n >= 1e9 else f"{n / 1e6:,.1f} M" if n >= 1e6 else f"{n:,.0f}"


class _Hops:
    """Links on the shortest path between hosts of a built topology (BFS per source, cached)."""

    def __init__(self, t):
        self.t = t
        self.host_nodes = t.hosts  # a property that scans the nodes: read once
        self.adj: dict[int, list[int]] = {}
        self.rate: dict[int, int] = {}  # node -> summed rate of its links (TopologyData.host_rate_bps, in one pass)
        for lk in t.links:
            self.adj.setdefault(lk["a"], []).append(lk["b"])
            self.adj.setdefault(lk["b"], []).append(lk["a"])
            for end in (lk["a"], lk["b"]):
                self.rate[end] = self.rate.get(end, 0) + lk["rate_bps"]
        self.cache: dict[int, dict[int, int]] = {}

    def host_rate_bps(self, h: int) -> int:
        return self.rate.get(self.host_nodes[h], 0)

    def between(self, a: int, b: int) -> int:
        """Hops between host indices ``a`` and ``b`` (1 when unreachable: the run names that)."""
        src, dst = self.host_nodes[a], self.host_nodes[b]
        if src not in self.cache:
            dist, frontier = {src: 0}, [src]
            while frontier:
                nxt = []
                for u in frontier:
                    for v in self.adj.get(u, ()):
                        # Through switches only: a host does not forward.
                        if v not in dist:
                            dist[v] = dist[u] + 1
                            if self.t.nodes[v]["kind"] != "host":
                                nxt.append(v)
                frontier = nxt
            self.cache[src] = dist
        return max(self.cache[src].get(dst, 1), 1)

    def mean(self, hosts: list[int]) -> float:
        """Mean hops between two distinct hosts of ``hosts`` (sources sampled evenly)."""
        if len(hosts) < 2:
            return 1.0
        sources = hosts[:: -(-len(hosts) // HOP_SAMPLE_SOURCES)]
        pairs = [(a, b) for a in sources for b in hosts[:: max(len(hosts) // 64, 1)] if a != b]
        return sum(self.between(a, b) for a, b in pairs) / len(pairs) if pairs else 1.0

    def weighted(self, pairs: list[tuple[int, int, float]]) -> float:
        """Mean hops of (source, destination, bytes) pairs, weighted by bytes, from a few spread evenly."""
        picked = pairs[:: -(-len(pairs) // HOP_SAMPLE_PAIRS)] if pairs else []
        total = sum(w for _, _, w in picked)
        if total <= 0:
            return sum(self.between(a, b) for a, b, _ in picked) / len(picked) if picked else 1.0
        return sum(self.between(a, b) * w for a, b, w in picked) / total


def estimate_text(s, t, apps=()) -> str:
    """:meth:`TimeEstimate.text` of ``estimate_time(s, t, apps)``; a failure of the
    estimate (a bug) is said in the line instead of ending a run it only informs."""
    try:
        return estimate_time(s, t, apps).text()
    except Exception as e:  # noqa: BLE001 - the run goes on; the line says what failed
        return f"not available ({type(e).__name__}: {e}; please report it)"


def estimate_time(s, t, apps=()) -> TimeEstimate:
    """The events a run of scenario ``s`` on its built topology ``t`` is
    expected to process, by cause: each of ``apps`` counts its own
    (fabriclab.sim.apps.APPS for a run)."""
    est = TimeEstimate(s.backend, _Hops(t), s.transport.mss_bytes)
    for app in apps:
        app.events(s, t, est)
    return est

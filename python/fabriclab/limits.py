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

import math
import os
from dataclasses import dataclass, field

from .errors import InputError

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

        from .units import SizeBytes

        try:
            limit = TypeAdapter(SizeBytes).validate_python(limit.strip())
        except ValidationError as e:
            msg = e.errors()[0]["msg"].removeprefix("Value error, ")
            raise InputError(f"{option}: {msg} (give a size such as 16GiB, or 'off')") from None
    if limit <= 0:
        raise InputError(f"{option}: must be positive (or 'off')")
    return int(limit)


def estimate(scenario, topology_data=None) -> Estimate:
    """The memory a run of ``scenario`` needs, by cause (``topology_data``:
    the scenario's topology if already built)."""
    est = Estimate(topology=topology_data)
    hosts, rate_bps, links = _topology(scenario, est)
    _traffic(scenario, est, hosts, rate_bps)
    _jobs(scenario, est, hosts)
    _queue_samples(scenario, est, links)
    return est


def check_memory(scenario, limit: int | str | None = None, topology_data=None) -> Estimate:
    """Refuses (MemoryLimitError naming the dominant field) a scenario whose
    estimate exceeds the limit; returns the estimate otherwise."""
    est = estimate(scenario, topology_data)
    cap = resolve_limit(limit)
    if cap is not None and est.total_bytes > cap:
        name, b, detail = est.dominant()
        raise MemoryLimitError(
            f"{name}: the scenario would need about {human_bytes(est.total_bytes)} of memory, more than the "
            f"{human_bytes(cap)} allowed; most of it ({human_bytes(b)}) for {detail}. Make it smaller, or set the "
            f"limit with --memory-limit SIZE ('off' to skip this check; environment: {ENV_LIMIT})"
        )
    return est


def checked_topology(scenario, limit: int | str | None = None, topology_data=None):
    """The memory check (refusing before a topology that may not fit is
    built), then the scenario's topology, the estimate's own when it had to
    build it: ``(estimate, topology)``."""
    est = check_memory(scenario, limit, topology_data)
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


def _traffic(s, est: Estimate, hosts: int, rate: float) -> None:
    from .cdfs import CdfError, load_cdf

    for i, tr in enumerate(s.traffic):
        n_hosts = hosts if tr.hosts == "all" else len(set(tr.hosts))
        seconds = tr.duration_ps / 1e12
        if tr.flows_per_s is not None:
            flows = tr.flows_per_s * seconds
        else:
            try:
                mean = _cdf_mean_bytes(load_cdf(tr.cdf, s._base_dir))
            except CdfError as e:
                raise InputError(f"traffic[{i}].cdf: {e}") from None
            flows = tr.load * rate * n_hosts * seconds / (8 * mean)
        est.add(f"traffic[{i}]", flows * BYTES_PER_FLOW,
                f"about {_count(flows)} flows (load or flows_per_s x duration_ps {tr.duration_ps} / mean flow size)")
    n = len(s.flows) + (_csv_rows(s) if s.flows_csv else 0)
    if n:
        est.add("flows", n * BYTES_PER_FLOW, f"{n:,} explicit flows")


def _jobs(s, est: Estimate, hosts: int) -> None:
    from .profiles import BUILTIN, ProfileError, build_profile, builtin_size

    for i, j in enumerate(s.jobs):
        workers = hosts if j.workers == "all" else len(j.workers)
        if j.profile in BUILTIN:  # counted, not built: a billion layers must not be made to be refused
            layers, model = builtin_size(j.profile, j.layers, j.model_bytes)
        else:
            try:
                rows = build_profile(j.profile, j.compute_ps, j.model_bytes, j.layers, base_dir=s._base_dir)
            except ProfileError as e:
                raise InputError(f"jobs[{i}].{e}") from None
            layers, model = len(rows), sum(x["param_bytes"] for x in rows)
        fusions = min(layers, math.ceil(model / j.fusion_bytes) + 1)
        rows = workers * j.iterations * (2 * layers + fusions)
        messages = j.iterations * fusions * workers * 2 * max(workers - 1, 1)
        # Blame the count furthest above its default (5 iterations, 100 layers).
        field_name = f"jobs[{i}].layers" if layers / 100 > j.iterations / 5 else f"jobs[{i}].iterations"
        est.add(field_name, rows * BYTES_PER_TIMELINE_ROW + messages * BYTES_PER_FLOW,
                f"{j.iterations:,} iterations of {workers} workers x {layers:,} layers: about {_count(rows)} "
                f"timeline rows and {_count(messages)} messages")


def _cdf_mean_bytes(points) -> float:
    from ._core import cdf_mean

    return max(cdf_mean(points), 1.0)


def _csv_rows(s) -> int:
    try:
        with open(s._resolve_path(s.flows_csv), "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0  # reading it later names the problem


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
    """Expected events of a run by cause, and what they take at EVENTS_PER_S."""

    backend: str
    parts: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, events: float) -> None:
        self.parts[name] = self.parts.get(name, 0.0) + events

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


def estimate_text(s, t) -> str:
    """:meth:`TimeEstimate.text` of ``estimate_time(s, t)``; a failure of the
    estimate (a bug) is said in the line instead of ending a run it only informs."""
    try:
        return estimate_time(s, t).text()
    except Exception as e:  # noqa: BLE001 - the run goes on; the line says what failed
        return f"not available ({type(e).__name__}: {e}; please report it)"


def estimate_time(s, t) -> TimeEstimate:
    """The events a run of scenario ``s`` on its built topology ``t`` is
    expected to process, by cause (see the constants above)."""
    est = TimeEstimate(s.backend)
    hops = _Hops(t)
    mss = s.transport.mss_bytes
    packet = s.backend == "packet"

    def traffic(name: str, nbytes: float, messages: float, mean_hops: float) -> None:
        if packet:
            per_segment = 2 * EVENTS_PER_HOST_HOP + max(mean_hops - 2, 0) * EVENTS_PER_SWITCH_HOP
            est.add(name, (nbytes / mss + messages) * per_segment + messages * EVENTS_PER_MESSAGE)
        else:
            est.add(name, messages * FLOW_EVENTS_PER_MESSAGE)

    nh = len(t.hosts)
    for i, tr in enumerate(s.traffic):
        hosts = list(range(nh)) if tr.hosts == "all" else sorted(set(h for h in tr.hosts if 0 <= h < nh))
        end = tr.start_ps + tr.duration_ps if s.stop_ps is None else min(tr.start_ps + tr.duration_ps, s.stop_ps)
        seconds = max(end - tr.start_ps, 0) / 1e12
        mean = _cdf_mean_bytes(_cdf(s, i, tr))
        if tr.flows_per_s is not None:
            flows = tr.flows_per_s * seconds
            nbytes = flows * mean
        else:
            nbytes = tr.load * sum(hops.host_rate_bps(h) for h in hosts) * seconds / 8
            flows = nbytes / mean
        traffic(f"traffic[{i}]", nbytes, flows, hops.mean(hosts))
    flows = [f for f in s.explicit_flows(t) if f.src < nh and f.dst < nh]
    if flows:
        traffic("flows", sum(f.size_bytes for f in flows), len(flows),
                hops.weighted([(f.src, f.dst, f.size_bytes) for f in flows if f.src != f.dst]))
    for i, j in enumerate(s.jobs):
        _job_events(s, i, j, t, hops, traffic, est)
    for i, c in enumerate(s.collectives):
        p, where = s._collective_plan(i, c, nh)
        sends = [(where[r], where[st.peer], st.bytes) for r, steps in enumerate(p.ranks) for st in steps
                 if st.op == "send" and st.peer < len(where)]
        if sends:
            traffic(f"collectives[{i}]", sum(b for _, _, b in sends), len(sends), hops.weighted(sends))
    return est


def _cdf(s, i, tr):
    from .cdfs import CdfError, load_cdf

    try:
        return load_cdf(tr.cdf, s._base_dir)
    except CdfError as e:
        raise InputError(f"traffic[{i}].cdf: {e}") from None


def _job_events(s, i, j, t, hops, traffic, est) -> None:
    """A job's allreduces (as its planner sends them) and its compute events."""
    from .panama.config import AGGREGATION_ALLREDUCE
    from .profiles import BUILTIN, build_profile, builtin_size

    nh = len(t.hosts)
    workers = list(range(nh)) if j.workers == "all" else [w for w in j.workers if 0 <= w < nh]
    n = len(workers)
    if j.profile in BUILTIN:
        layers, model = builtin_size(j.profile, j.layers, j.model_bytes)
    else:
        rows = build_profile(j.profile, j.compute_ps, j.model_bytes, j.layers, base_dir=s._base_dir)
        layers, model = len(rows), sum(x["param_bytes"] for x in rows)
    fusions = min(layers, math.ceil(model / j.fusion_bytes) + 1)
    est.add(f"jobs[{i}]", 2 * layers * n * j.iterations * EVENTS_PER_LAYER_PASS)
    if n < 2:
        return
    ring = [(workers[k], workers[(k + 1) % n]) for k in range(n)]
    plan = None if j.allreduce in AGGREGATION_ALLREDUCE else s._job_plan(i, j, n)
    if j.allreduce in AGGREGATION_ALLREDUCE:
        # Up to the aggregating switches and back: the model once each way per worker.
        nbytes, messages, mean_hops = 2 * model * n, 2 * fusions * n, hops.mean(workers)
    elif plan is None:  # the built-in ring: 2 (n - 1) steps of model / n bytes per worker
        nbytes, messages = 2 * (n - 1) * model, 2 * (n - 1) * n * fusions
        mean_hops = hops.weighted([(a, b, 1) for a, b in ring])
    else:  # a plan built for plan["size_bytes"], scaled to each fusion
        sends = [(workers[r], workers[st["peer"]], st["bytes"]) for r, steps in enumerate(plan["steps"])
                 for st in steps if st["op"] == "send"]
        sent = max(sum(b for _, _, b in sends), 1)
        nbytes, messages = sent * model / plan["size_bytes"], len(sends) * fusions
        mean_hops = hops.weighted(sends)
    traffic(f"jobs[{i}]", nbytes * j.iterations, messages * j.iterations, mean_hops)

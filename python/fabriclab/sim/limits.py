"""What a scenario will cost in memory, estimated before anything is built,
so that a scenario that cannot fit is refused with the field to blame
instead of being killed (or aborting) half-way.

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

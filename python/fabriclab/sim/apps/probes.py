"""The probe mesh (``[probes]``): each host probes ``peers`` others with
coded pairs, every probe echoed (crates/fabriclab-core/src/apps/probes.rs).
Its table is ``probes.parquet`` (docs/telemetry.md), the schema the clock
estimator reads; the summary reports the mesh's overhead."""

from __future__ import annotations

from ...scenario.base import WIRE_OVERHEAD_BYTES, ScenarioError
from ..app import App, Collected, Resolving

# A probe's row: the core's record while the run lasts (about 64 bytes and
# its index entry), then its Arrow row (two names, six numbers).
BYTES_PER_PROBE = 200

# The schema of probes.parquet: one row per probe that arrived.
SCHEMA = (("src", "string"), ("dst", "string"), ("pair", "uint64"), ("seq", "uint8"), ("tx_ns", "int64"),
          ("rx_ns", "int64"), ("true_tx_ps", "uint64"), ("true_rx_ps", "uint64"))


def wire_bytes(size_bytes: int) -> int:
    """A probe's bytes on the wire: one segment of the packet backend
    (headers, Ethernet's 64-byte minimum frame, preamble and gap)."""
    headers, min_frame, preamble_gap = 58, 64, 20  # IP + TCP + Ethernet + FCS; 802.3
    assert headers + preamble_gap == WIRE_OVERHEAD_BYTES
    return max(size_bytes + headers, min_frame) + preamble_gap


def probes_sent(p, hosts: int) -> float:
    """Probes the mesh sends in all, echoes included (an upper bound)."""
    pairs = hosts * p.peers * -(-p.duration_ps // p.pair_every_ps)
    return 4 * pairs


def mesh_hosts(s, hosts: int) -> list[int]:
    """The host indices of the mesh: ``probes.hosts``, else with ``[cloud]``
    the tenant's VMs (the tenant controls only its own), else every host."""
    p = s.probes
    if p.hosts is not None:
        bad = [h for h in p.hosts if h >= hosts]
        if bad:
            raise ScenarioError(f"probes.hosts: host index {bad[0]} out of range (the topology has hosts "
                                f"0..{hosts - 1})")
        return list(p.hosts)
    if s.cloud is not None:
        return list(range(s.cloud.tenant_vms))
    return list(range(hosts))


class Probes(App):
    name = "probes"
    tables = ("probes",)

    def active(self, s) -> bool:
        return s.probes is not None

    def resolve(self, r: Resolving) -> None:
        p = r.scenario.probes
        if p is None:
            r.spec["probes"] = None
            return
        members = mesh_hosts(r.scenario, len(r.topology.hosts))
        if p.peers >= len(members):
            where = (f"the topology has {len(members)}" if len(members) == len(r.topology.hosts) else
                     f"the mesh has {len(members)}: probes.hosts, or with [cloud] the tenant's VMs")
            raise ScenarioError(f"probes.peers: {p.peers} peers need more hosts than that ({where}); "
                                f"give at most {len(members) - 1}")
        r.spec["probes"] = {"peers": p.peers, "pair_every_ps": p.pair_every_ps, "spacing_ps": p.spacing_ps,
                            "size_bytes": p.size_bytes, "class": p.class_, "start_ps": p.start_ps,
                            "duration_ps": p.duration_ps, "hosts": members}

    def estimate(self, s, est, hosts: int, rate_bps: float) -> None:
        p = s.probes
        if p is None:
            return
        n = probes_sent(p, hosts if p.hosts is None and s.cloud is None else len(mesh_hosts(s, hosts)))
        est.add("probes.pair_every_ps", n * BYTES_PER_PROBE,
                f"about {est.count(n)} probes (hosts x peers {p.peers} x 4 per pair_every_ps {p.pair_every_ps} "
                f"over duration_ps {p.duration_ps})")

    def collect(self, c: Collected) -> None:
        p = c.scenario.probes
        t = c.core_tables.get("probes")
        if p is None:
            return
        import pyarrow as pa

        empty = {name: [] for name, _ in SCHEMA}
        t = t or empty
        c.tables["probes"] = pa.table({name: pa.array(t[name], getattr(pa, kind)()) for name, kind in SCHEMA})
        load = c.core_tables.get("probe_load") or {"host": [], "probes_sent": []}
        stop = c.scenario.stop_ps
        seconds = (p.duration_ps if stop is None else max(min(p.duration_ps, stop - p.start_ps), 1)) / 1e12
        sent = load["probes_sent"]
        per_host = [n / seconds for n in sent]
        wire = wire_bytes(p.size_bytes)
        c.summary["probes"] = {
            "peers": p.peers,
            "probes_sent": int(sum(sent)),
            "probes_arrived": len(t["src"]),
            "payload_bytes_per_s_per_host": {"mean": p.size_bytes * sum(per_host) / max(len(per_host), 1),
                                             "max": p.size_bytes * max(per_host, default=0.0)},
            "wire_bytes_per_s_per_host": {"mean": wire * sum(per_host) / max(len(per_host), 1),
                                          "max": wire * max(per_host, default=0.0)},
        }


PROBES = Probes()

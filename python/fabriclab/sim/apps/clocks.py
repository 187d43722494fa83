"""Host clocks (``[clocks]``): each host's explicit values and its
oscillator's group resolved for the core (which draws the rest from the
seed), the walk's memory counted, and the ground truth at time 0
(``clocks.parquet``). No events: the core evaluates every reading lazily
(crates/fabriclab-core/src/engine/clock.rs)."""

from __future__ import annotations

from ...scenario.base import ScenarioError
from ..app import App, Collected, Resolving

# A wander step kept per oscillator: its drift and phase (two f64).
BYTES_PER_WANDER_STEP = 16


def _host_index(t, names: dict[str, int], name: str, field: str) -> int:
    node = names.get(name)
    if node is None or t.nodes[node]["kind"] != "host":
        raise ScenarioError(f"{field}: {name!r} is not a host of the topology")
    return t.hosts.index(node)


class Clocks(App):
    name = "clocks"
    tables = ("clocks",)

    def active(self, s) -> bool:
        return s.clocks is not None

    def resolve(self, r: Resolving) -> None:
        c = r.scenario.clocks
        if c is None:
            r.spec["clocks"] = None
            return
        t = r.topology
        hosts = [{"offset_ps": None, "drift_ppm": None, "stamping": c.stamping} for _ in t.hosts]
        for name, h in c.hosts.items():
            i = _host_index(t, r.names, name, f"clocks.hosts.{name}")
            hosts[i] = {"offset_ps": h.offset_ps, "drift_ppm": h.drift_ppm, "stamping": h.stamping or c.stamping}
        # With [cloud], the VMs of one machine share its oscillator (the scenario refuses groups given too).
        given = c.groups if r.scenario.cloud is None else r.scenario.build_cloud().groups()
        groups = [[_host_index(t, r.names, name, f"clocks.groups[{g}][{k}]") for k, name in enumerate(members)]
                  for g, members in enumerate(given)]
        for g in groups:
            drifts = {hosts[i]["drift_ppm"] for i in g} - {None}
            if len(drifts) > 1:
                raise ScenarioError(f"clocks.hosts: VMs of one machine ({', '.join(t.nodes[t.hosts[i]]['name'] for i in g)}) "
                                    f"share its oscillator but are given different drift_ppm ({sorted(drifts)})")
        r.spec["clocks"] = {
            "offset_sigma_ps": c.offset_sigma_ps, "drift_sigma_ppm": c.drift_sigma_ppm, "wander_ppm": c.wander_ppm,
            "wander_every_ps": c.wander_every_ps, "nic_sigma_ps": c.nic_sigma_ps,
            "software_median_ps": c.software_median_ps, "software_shape": c.software_shape,
            "hosts": hosts, "groups": groups,
        }

    def estimate(self, s, est, hosts: int, rate_bps: float) -> None:
        c = s.clocks
        if c is None or c.wander_ppm == 0:
            return
        end = s.stop_ps or s.arrivals_end_ps()
        steps = hosts * (end // c.wander_every_ps + 1)
        est.add("clocks.wander_every_ps", steps * BYTES_PER_WANDER_STEP,
                f"about {est.count(steps)} wander steps ({hosts} oscillators at most x run end {end} ps / "
                f"wander_every_ps {c.wander_every_ps})")

    def collect(self, c: Collected) -> None:
        t = c.core_tables.get("clocks")
        if t is None:
            return
        import pyarrow as pa

        c.tables["clocks"] = pa.table({
            "host": pa.array(t["host"], pa.string()),
            "oscillator": pa.array(t["oscillator"], pa.uint32()),
            "offset_ps": pa.array(t["offset_ps"], pa.int64()),
            "drift_ppm": pa.array(t["drift_ppm"], pa.float64()),
        })


CLOCKS = Clocks()

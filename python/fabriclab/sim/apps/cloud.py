"""The public cloud (``[cloud]``): its ground truth, ``cloud.parquet``, one
row per VM (docs/telemetry.md). The cloud itself is lowered onto the
topology (``Scenario.build_topology``), the hypervisor queues
(``Scenario.all_queue_overrides``), the neighbours' traffic
(``Scenario.all_traffic``) and the clocks' groups (the clocks app); the
core knows nothing of it."""

from __future__ import annotations

from ..app import App, Collected


class Cloud(App):
    name = "cloud"
    tables = ("cloud",)

    def active(self, s) -> bool:
        return s.cloud is not None

    def collect(self, c: Collected) -> None:
        s = c.scenario
        if s.cloud is None:
            return
        import pyarrow as pa

        cl = s.build_cloud()
        busy = set(cl.busy)
        n = len(cl.machine)
        c.tables["cloud"] = pa.table({
            "vm": pa.array(cl.vms, pa.string()),
            "host": pa.array(range(n), pa.uint32()),
            "machine": pa.array([cl.machine_names[m] for m in cl.machine], pa.string()),
            "slot": pa.array(cl.slot, pa.uint32()),
            "tenant": pa.array(["tenant" if t else "other" for t in cl.tenant], pa.string()),
            "tor": pa.array([cl.tor_names[m] for m in cl.machine], pa.string()),
            "busy": pa.array([m in busy for m in cl.machine], pa.bool_()),
        })
        c.summary["cloud"] = {"vms": n, "tenant_vms": s.cloud.tenant_vms, "machines": len(cl.machine_names),
                              "tenant_machines": len({m for m, t in zip(cl.machine, cl.tenant) if t}),
                              "busy_machines": len(busy)}


CLOUD = Cloud()

"""What a :class:`~fabriclab.scenario.model.Scenario` resolves to: its cloud,
topology, traffic (the neighbours' included), queue overrides, explicit flows,
the files it reads, the resolved file's dict and the end of its arrivals. A
mixin of plain methods (no fields, no validators) that ``Scenario`` inherits."""

import csv
from pathlib import Path

from pydantic import ValidationError

from ..util.inputs import read_text
from . import topology as topo
from .base import ScenarioError
from .fabric import (
    QUEUE_FIELDS,
    FatTreeTopology,
    GpuClusterTopology,
    LeafSpineTopology,
    NodeOverrideConfig,
    QueueOverrideConfig,
    StarTopology,
)
from .messages import format_validation_error
from .workloads import JOB_ALLREDUCE, FlowConfig, PoissonTrafficConfig


class ScenarioResolving:
    def build_cloud(self):
        """The cloud of ``[cloud]`` (its topology and placement); None without it."""
        if self.cloud is None:
            return None
        from .cloud import build

        return build(self.cloud, self.seed)

    def all_traffic(self) -> list[PoissonTrafficConfig]:
        """``[[traffic]]`` and, with ``[cloud]``, the noisy neighbours' Poisson
        traffic (after the scenario's own entries)."""
        c = self.cloud
        if c is None:
            return list(self.traffic)
        noisy = self.build_cloud().noisy_vms()
        if len(noisy) < 2:
            return list(self.traffic)
        duration = c.neighbour_duration_ps
        if duration is None:
            duration = self.probes.start_ps + self.probes.duration_ps if self.probes else 10**12
        return [*self.traffic, PoissonTrafficConfig.model_validate(
            {"load": c.neighbour_load, "cdf": c.neighbour_cdf, "start_ps": c.neighbour_start_ps,
             "duration_ps": duration, "hosts": noisy, "class": c.neighbour_class, "tag": "neighbours"})]

    def all_queue_overrides(self) -> list[QueueOverrideConfig]:
        """``[[queue_overrides]]`` and, with ``[cloud]``, each machine's
        hypervisor queue (its node's port toward its ToR), before them so that
        the scenario's own overrides win."""
        if self.cloud is None:
            return list(self.queue_overrides)
        cl = self.build_cloud()
        q = {k: getattr(self.cloud.hypervisor_queue, k) for k in QUEUE_FIELDS}
        own = [QueueOverrideConfig(**q, node=m, to=tor) for m, tor in zip(cl.machine_names, cl.tor_names)]
        return own + list(self.queue_overrides)

    def all_node_overrides(self) -> list[NodeOverrideConfig]:
        """``[[node_overrides]]`` and, with ``[cloud] hypervisor_pps``, each
        machine's virtual switch (its node ``pm<j>``), before them so that the
        scenario's own entries win."""
        c = self.cloud
        if c is None or c.hypervisor_pps is None:
            return list(self.node_overrides)
        from .cloud import HYPERVISOR_BACKLOG_PACKETS

        backlog = c.hypervisor_backlog_packets
        own = [NodeOverrideConfig(node=m, forwarding_pps=c.hypervisor_pps,
                                  forwarding_queue_packets=HYPERVISOR_BACKLOG_PACKETS if backlog is None else backlog)
               for m in self.build_cloud().machine_names]
        return own + list(self.node_overrides)

    def build_topology(self) -> topo.TopologyData:
        if self.cloud is not None:
            return self.build_cloud().topology
        t = self.topology
        try:
            if isinstance(t, StarTopology):
                return topo.star(t.hosts, t.link_rate_bps, t.link_delay_ps)
            if isinstance(t, LeafSpineTopology):
                return topo.leaf_spine(
                    t.leaves, t.hosts_per_leaf, t.spines, t.link_rate_bps, t.link_delay_ps,
                    t.oversubscription, t.spine_link_rate_bps, t.host_ports,
                )
            if isinstance(t, FatTreeTopology):
                return topo.fat_tree(t.k, t.link_rate_bps, t.link_delay_ps, t.host_ports)
            if isinstance(t, GpuClusterTopology):
                return topo.gpu_cluster(t.leaves, t.servers_per_leaf, t.gpus_per_server, t.spines, t.nic_rate_bps,
                                        t.nvlink_bps, t.link_delay_ps, t.nvlink_delay_ps, t.spine_link_rate_bps)
            return topo.from_file(self._resolve_path(t.path))
        except topo.TopologyError as e:
            raise ScenarioError(str(e)) from None

    def flow_label(self, i: int) -> str:
        """How the user wrote explicit flow ``i`` (the core numbers ``[[flows]]``, then the CSV's rows)."""
        n = len(self.flows)
        return f"flows[{i}]" if i < n else f"flows_csv row {i - n + 1}"

    def explicit_flows(self, t: topo.TopologyData) -> list[FlowConfig]:
        """The scenario's own flows: ``flows`` and those of ``flows_csv``."""
        flows = list(self.flows)
        if self.flows_csv:
            text = read_text(self._resolve_path(self.flows_csv), "flows_csv", "flows CSV file")
            lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
            reader = csv.DictReader(lines)
            rows = list(reader)
            # The header names the columns: each one a field of [[flows]] (a blank name holds no values).
            columns = [f.alias or n for n, f in FlowConfig.model_fields.items()]
            unknown = [c for c in (reader.fieldnames or []) if c.strip() and c.strip() not in columns]
            if unknown:
                raise ScenarioError(f"flows_csv: unknown column {unknown[0].strip()!r} in the header "
                                    f"(allowed columns: {', '.join(columns)})")
            for i, r in enumerate(rows):
                if None in r:
                    raise ScenarioError(f"flows_csv row {i + 1}: more values than the header has columns "
                                        f"(columns: {', '.join(k for k in r if k is not None)})")
                r = {k.strip(): v.strip() for k, v in r.items() if v not in (None, "")}
                if "path" in r:
                    r["path"] = r["path"].split()
                for k in ("src", "dst", "class"):
                    if k in r and r[k].lstrip("-").isdigit():
                        r[k] = int(r[k])
                for k in ("size_bytes", "start_ps"):
                    if k in r and r[k].isdigit():
                        r[k] = int(r[k])
                try:
                    flows.append(FlowConfig.model_validate(r))
                except ValidationError as e:
                    raise ScenarioError(format_validation_error(e, f"flows_csv row {i + 1}", type(self))) from None
        return flows

    def _file_refs(self, d: dict):
        """(table, key) of every entry of ``d`` (this scenario dumped by
        alias) that names a file: topology path, CDFs, flows CSV, profiles, plans."""
        from .cdfs import BUILTIN as CDFS
        from .profiles import BUILTIN as PROFILES

        if d.get("topology", {}).get("kind") == "file":
            yield d["topology"], "path"
        yield from ((tr, "cdf") for tr in d["traffic"] if tr["cdf"] not in CDFS)
        if d.get("cloud") and d["cloud"]["neighbour_cdf"] not in CDFS:
            yield d["cloud"], "neighbour_cdf"
        if d.get("flows_csv"):
            yield d, "flows_csv"
        for j in d["jobs"]:
            if j["profile"] not in PROFILES:
                yield j, "profile"
            if j["allreduce"] not in JOB_ALLREDUCE:
                yield j, "allreduce"
        for c in d.get("collectives", []):
            if c.get("plan") is not None:
                yield c, "plan"
        yield from ((t, "path") for t in d.get("trace_jobs", []))

    def _resolve_path(self, name: str) -> Path:
        p = Path(name)
        return p if p.is_absolute() else self._base_dir / p

    def input_files(self) -> list[Path]:
        """The files this scenario reads besides itself, resolved against its folder."""
        d = self.model_dump(by_alias=True)
        return [self._resolve_path(t[k]) for t, k in self._file_refs(d)]

    def resolved_dict(self) -> dict:
        """Every field with its default filled in (None fields omitted), for
        ``scenario.resolved.toml``."""
        from .._version import __version__

        dump = self.model_dump(by_alias=True, exclude_none=True)
        dump.pop("fabriclab_version", None)  # the version that wrote it; this one writes its own
        if self.cloud is not None:
            dump.pop("topology")  # [cloud] builds it
        d = {"fabriclab_version": __version__, **dump}
        # Queue limits and thresholds default to a value, so "none" must be
        # written explicitly (as "off") for the resolved file to mean the same.
        for table in [d["queue"], d.get("host_queue"), *d.get("queue_overrides", []),
                      d.get("cloud", {}).get("hypervisor_queue")]:
            for k in ("limit_bytes", "limit_packets", "ecn_threshold_bytes", "ecn_threshold_packets"):
                if table is not None:
                    table.setdefault(k, "off")
        # Files are named by absolute paths, so the resolved file runs the
        # same from wherever it is written.
        for table, key in self._file_refs(d):
            table[key] = str(self._resolve_path(table[key]))
        return d

    def arrivals_end_ps(self) -> int:
        """When the last scheduled arrival can happen (progress target)."""
        ends = [tr.start_ps + tr.duration_ps for tr in self.all_traffic()]
        ends += [f.start_ps for f in self.flows]
        from .profiles import p100_iteration_ps

        ends += [c.start_ps for c in self.collectives]
        if self.probes is not None:
            ends.append(self.probes.start_ps + self.probes.duration_ps)
        ends += [j.start_ps + j.iterations * (j.compute_ps or p100_iteration_ps(j.profile) or 0)
                 + (j.iterations - 1) // (j.checkpoint_iterations or j.iterations) * (j.checkpoint_ps or 0)
                 for j in self.jobs]
        end = max(ends, default=0)
        return min(end, self.stop_ps) if self.stop_ps else end

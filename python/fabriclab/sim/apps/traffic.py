"""Background traffic: Poisson flows drawn from a size CDF (``[[traffic]]``)
and explicit flows (``[[flows]]`` and ``flows_csv``)."""

from __future__ import annotations

from ...errors import InputError
from ...scenario.base import ScenarioError
from ...scenario.cdfs import CdfError, load_cdf
from ...scenario.fabric import node_index
from ..app import App, Resolving
from ..limits import BYTES_PER_FLOW


class Traffic(App):
    name = "traffic"

    def active(self, s) -> bool:
        return bool(s.all_traffic())

    def resolve(self, r: Resolving) -> None:
        s, t = r.scenario, r.topology
        nh = len(t.hosts)
        out = []
        for i, tr in enumerate(s.all_traffic()):
            try:
                cdf = load_cdf(tr.cdf, s._base_dir)
            except CdfError as e:
                raise ScenarioError(f"traffic[{i}].cdf: {e}") from None
            hosts = list(range(nh)) if tr.hosts == "all" else tr.hosts
            bad = [h for h in hosts if not 0 <= h < nh]
            if bad:
                raise ScenarioError(f"traffic[{i}].hosts: host index {bad[0]} out of range (the topology has hosts 0..{nh - 1})")
            if len(set(hosts)) < 2:
                raise ScenarioError(f"traffic[{i}].hosts: needs at least two distinct hosts")
            load = tr.load
            if load is None:
                from ..._core import cdf_mean

                rate_sum = sum(t.host_rate_bps(h) for h in sorted(set(hosts)))
                load = tr.flows_per_s * cdf_mean(cdf) * 8 / rate_sum
                if not 0 < load <= 1:
                    raise ScenarioError(f"traffic[{i}].flows_per_s: {tr.flows_per_s} flows/s offers {load:.2f} of "
                                        f"the hosts' link rate; must be within (0, 1]")
            out.append({
                "load": load, "cdf": cdf, "start_ps": tr.start_ps, "duration_ps": tr.duration_ps,
                "hosts": sorted(set(hosts)), "class": tr.class_, "tag": tr.tag,
            })
        r.spec["traffic"] = out

    def estimate(self, s, est, hosts: int, rate_bps: float) -> None:
        for i, tr in enumerate(s.all_traffic()):
            n_hosts = hosts if tr.hosts == "all" else len(set(tr.hosts))
            seconds = tr.duration_ps / 1e12
            if tr.flows_per_s is not None:
                flows = tr.flows_per_s * seconds
            else:
                try:
                    mean = _cdf_mean_bytes(load_cdf(tr.cdf, s._base_dir))
                except CdfError as e:
                    raise InputError(f"traffic[{i}].cdf: {e}") from None
                flows = tr.load * rate_bps * n_hosts * seconds / (8 * mean)
            est.add(f"traffic[{i}]", flows * BYTES_PER_FLOW,
                    f"about {est.count(flows)} flows (load or flows_per_s x duration_ps {tr.duration_ps} / mean flow size)")


    def events(self, s, t, est) -> None:
        nh = len(t.hosts)
        for i, tr in enumerate(s.all_traffic()):
            hosts = list(range(nh)) if tr.hosts == "all" else sorted(set(h for h in tr.hosts if 0 <= h < nh))
            end = tr.start_ps + tr.duration_ps if s.stop_ps is None else min(tr.start_ps + tr.duration_ps, s.stop_ps)
            seconds = max(end - tr.start_ps, 0) / 1e12
            try:
                mean = _cdf_mean_bytes(load_cdf(tr.cdf, s._base_dir))
            except CdfError as e:
                raise InputError(f"traffic[{i}].cdf: {e}") from None
            if tr.flows_per_s is not None:
                flows = tr.flows_per_s * seconds
                nbytes = flows * mean
            else:
                nbytes = tr.load * sum(est.hops.host_rate_bps(h) for h in hosts) * seconds / 8
                flows = nbytes / mean
            est.load(f"traffic[{i}]", nbytes, flows, est.hops.mean(hosts))


class Flows(App):
    name = "flows"

    def active(self, s) -> bool:
        return bool(s.flows or s.flows_csv)

    def resolve(self, r: Resolving) -> None:
        s = r.scenario
        out = []
        # Host indices in range and src != dst are the core's checks (build_flows); the engine
        # names the flow as the user wrote it ([[flows]] or a flows_csv row).
        for i, f in enumerate(s.explicit_flows(r.topology)):
            path = None
            if f.path is not None:
                path = []
                for hop in f.path:
                    if isinstance(hop, str):
                        hop = node_index(r.names, hop, f"{s.flow_label(i)}.path")
                    path.append(hop)
            out.append({"src": f.src, "dst": f.dst, "size_bytes": f.size_bytes,
                        "start_ps": f.start_ps, "class": f.class_, "path": path})
        r.spec["flows"] = out

    def estimate(self, s, est, hosts: int, rate_bps: float) -> None:
        n = len(s.flows) + (_csv_rows(s) if s.flows_csv else 0)
        if n:
            est.add("flows", n * BYTES_PER_FLOW, f"{n:,} explicit flows")


    def events(self, s, t, est) -> None:
        nh = len(t.hosts)
        flows = [f for f in s.explicit_flows(t) if f.src < nh and f.dst < nh]
        if flows:
            est.load("flows", sum(f.size_bytes for f in flows), len(flows),
                     est.hops.weighted([(f.src, f.dst, f.size_bytes) for f in flows if f.src != f.dst]))


def _cdf_mean_bytes(points) -> float:
    from ..._core import cdf_mean

    return max(cdf_mean(points), 1.0)


def _csv_rows(s) -> int:
    try:
        with open(s._resolve_path(s.flows_csv), "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0  # reading it later names the problem


TRAFFIC = Traffic()
FLOWS = Flows()

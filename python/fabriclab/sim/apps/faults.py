"""The faults app: the scenario's ``[[faults]]`` compiled onto the
simulator's mechanisms (job faults and link events; the table of kinds is in
``fabriclab.scenario.faults``), and their ground truth (``faults.parquet``).
"""

from ...scenario.base import ScenarioError
from ...scenario.faults import RANK_KINDS, SYNDROME, FaultConfig, component
from ..app import App, Collected, Resolving


def compile_faults(s, t, names: dict[str, int]) -> tuple[dict[int, list[dict]], list[dict]]:
    """The faults of scenario ``s`` on its built topology ``t``: per job index
    the core's worker faults, and the core's extra link events."""
    from ...scenario.fabric import links_joining, node_index

    jobs: dict[int, list[dict]] = {}
    events: list[dict] = []
    by_name = {j.name: i for i, j in enumerate(s.jobs)}
    for i, f in enumerate(s.faults):
        where = f"faults[{i}]"
        if f.kind in RANK_KINDS:
            if f.job is None and len(s.jobs) != 1:
                raise ScenarioError(f"{where}.job: the scenario has {len(s.jobs)} jobs; name the faulty rank's job")
            name = f.job if f.job is not None else s.jobs[0].name
            if name not in by_name:
                raise ScenarioError(f"{where}.job: no job is called {name!r} (jobs: {', '.join(by_name) or 'none'})")
            k = by_name[name]
            workers = len(t.hosts) if s.jobs[k].workers == "all" else len(s.jobs[k].workers)
            if f.rank >= workers:
                raise ScenarioError(f"{where}.rank: {f.rank} is not a rank of job {name!r} (0..{workers - 1})")
            jobs.setdefault(k, []).append({"worker": f.rank, "at_ps": f.at_ps,
                                           "kind": "slow" if f.kind == "compute_slow" else "halt",
                                           "factor": f.factor or 1.0})
            continue
        if f.kind == "pcie_slow":
            node = host_node(f.host, t, names, f"{where}.host")
            links = [k for k, lk in enumerate(t.links) if node in (lk["a"], lk["b"])]
        else:
            a, b = (node_index(names, n, f"{where}.link[{j}]") for j, n in enumerate(f.link))
            links = links_joining(t, a, b)
            if not links:
                raise ScenarioError(f"{where}.link: no link joins {f.link[0]!r} and {f.link[1]!r}")
        for k in links:
            events.extend(fault_link_events(f, k, t.links[k]["rate_bps"]))
    return jobs, events


def host_node(host, t, names, field: str) -> int:
    """The node of a fault's host, given by index or name; ``field`` names it in errors."""
    if isinstance(host, int):
        if not 0 <= host < len(t.hosts):
            raise ScenarioError(f"{field}: host index {host} out of range (the topology has hosts 0..{len(t.hosts) - 1})")
        return t.hosts[host]
    if host not in names or t.nodes[names[host]]["kind"] != "host":
        raise ScenarioError(f"{field}: {host!r} is not a host of the topology")
    return names[host]


def fault_link_events(f: FaultConfig, k: int, rate_bps: int) -> list[dict]:
    """The core's link events of fault ``f`` on link ``k`` (of rate ``rate_bps``)."""
    def ev(at, action, rate=None, loss=None):
        return {"at_ps": at, "link": k, "action": action, "rate_bps": rate, "loss": loss}

    if f.kind in ("link_degraded", "pcie_slow") and f.factor is not None:
        return [ev(f.at_ps, "rate", rate=max(1, int(rate_bps / f.factor)))]
    if f.kind == "link_degraded":
        return [ev(f.at_ps, "loss", loss=f.loss)]
    if f.kind == "link_down":
        return [ev(f.at_ps, "down")] + ([ev(f.until_ps, "up")] if f.until_ps is not None else [])
    out, at, half = [], f.at_ps, f.period_ps // 2
    while at < f.until_ps:
        out.append(ev(at, "down"))
        out.append(ev(min(at + half, f.until_ps), "up"))
        at += f.period_ps
    return out


def ground_truth(s) -> "object":
    """``faults.parquet``: one row per fault of scenario ``s``: its index,
    kind, component (kind and name), times and severity, and the C4D
    syndrome it is expected to show."""
    import pyarrow as pa

    job0 = s.jobs[0].name if len(s.jobs) == 1 else None
    rows = {c: [] for c in ("fault", "kind", "component_kind", "component", "at_ps", "until_ps", "factor", "loss",
                            "period_ps", "syndrome")}
    for i, f in enumerate(s.faults):
        ck, cn = component(f, job0)
        for c, v in (("fault", i), ("kind", f.kind), ("component_kind", ck), ("component", cn), ("at_ps", f.at_ps),
                     ("until_ps", f.until_ps), ("factor", f.factor), ("loss", f.loss), ("period_ps", f.period_ps),
                     ("syndrome", SYNDROME[f.kind])):
            rows[c].append(v)
    types = {"fault": pa.uint32(), "at_ps": pa.uint64(), "until_ps": pa.uint64(), "period_ps": pa.uint64(),
             "factor": pa.float64(), "loss": pa.float64()}
    return pa.table({c: pa.array(v, type=types.get(c, pa.string())) for c, v in rows.items()})


class Faults(App):
    name = "faults"
    after_fabric = True
    tables = ("faults",)

    def active(self, s) -> bool:
        return bool(s.faults)

    def resolve(self, r: Resolving) -> None:
        job_faults, fault_events = compile_faults(r.scenario, r.topology, r.names)
        for k, fs in job_faults.items():
            r.spec["jobs"][k]["faults"] = fs
        r.spec["link_events"] = r.spec["link_events"] + fault_events

    def collect(self, c: Collected) -> None:
        if c.scenario.faults:
            c.tables["faults"] = ground_truth(c.scenario)


FAULTS = Faults()

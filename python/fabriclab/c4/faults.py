"""The scenario's ``[[faults]]``: labelled faults compiled onto the
simulator's mechanisms, and their ground truth (``faults.parquet``).

| kind | component | mechanism |
|---|---|---|
| ``crash``, ``hang`` | ``job`` + ``rank`` | the worker halts at ``at_ps``: no compute step completes, nothing is sent or taken in (the core's job fault ``halt``) |
| ``compute_slow`` | ``job`` + ``rank`` | every compute step started from ``at_ps`` takes ``factor`` x longer (job fault ``slow``) |
| ``link_degraded`` | ``link`` | from ``at_ps`` the link serializes at its rate / ``factor`` (a ``rate`` link event) or loses each frame with probability ``loss`` (a ``loss`` event) |
| ``link_down`` | ``link`` | ``down`` at ``at_ps`` (and ``up`` at ``until_ps`` if given) |
| ``flapping`` | ``link`` | ``down`` at ``at_ps``, ``up`` half a ``period_ps`` later, again every ``period_ps`` until ``until_ps`` |
| ``pcie_slow`` | ``host`` | the PCIe (or NVLink) path between a server's GPU and its NIC slowed by ``factor``: every link of the host serializes at its rate / ``factor`` (GPUDirect RDMA reads and writes GPU memory over that path, so it caps what the NIC sends and receives) |

A crash and a hang have the same mechanism here (the process stops
computing and communicating; the simulator has no connection reset to
tell them apart): they are separate labels of the ground truth.
"""

# No `from __future__ import annotations` in a schema module: see schema_base.py.

from typing import Annotated, Literal, Optional, Union

from pydantic import Field, StrictFloat, StrictInt, model_validator

from ..schema_base import ScenarioError, _Strict
from ..units import TimePs

KINDS = ("crash", "hang", "compute_slow", "link_degraded", "link_down", "flapping", "pcie_slow")
RANK_KINDS = ("crash", "hang", "compute_slow")
LINK_KINDS = ("link_degraded", "link_down", "flapping")
# The C4D syndrome each fault kind is expected to show (docs/c4.md).
SYNDROME = {"crash": "noncomm_hang", "hang": "noncomm_hang", "compute_slow": "noncomm_slow",
            "link_degraded": "comm_slow", "link_down": "comm_hang", "flapping": "comm_slow",
            "pcie_slow": "comm_slow"}
# The most edges a flapping fault may compile to (bounds the event list).
MAX_FLAPS = 100_000


class FaultConfig(_Strict):
    """One labelled fault; see the module docstring for its fields by kind."""
    kind: Literal["crash", "hang", "compute_slow", "link_degraded", "link_down", "flapping", "pcie_slow"]
    at_ps: Annotated[TimePs, Field(ge=0)]
    job: Optional[str] = None
    rank: Optional[StrictInt] = Field(None, ge=0)
    host: Optional[Union[StrictInt, str]] = None
    link: Optional[list[str]] = Field(None, min_length=2, max_length=2)
    factor: Optional[StrictFloat] = Field(None, gt=1)
    loss: Optional[StrictFloat] = Field(None, gt=0, le=1)
    period_ps: Optional[Annotated[TimePs, Field(gt=0)]] = None
    until_ps: Optional[Annotated[TimePs, Field(gt=0)]] = None

    @model_validator(mode="after")
    def _fields_of_kind(self):
        k = self.kind
        needs = {"rank": k in RANK_KINDS, "host": k == "pcie_slow", "link": k in LINK_KINDS,
                 "factor": k in ("compute_slow", "pcie_slow"), "period_ps": k == "flapping",
                 "until_ps": k == "flapping"}
        for name, needed in needs.items():
            if needed and getattr(self, name) is None:
                raise ValueError(f"{name}: kind = {k!r} needs it")
        allowed = {"job": k in RANK_KINDS, "rank": k in RANK_KINDS, "host": k == "pcie_slow",
                   "link": k in LINK_KINDS, "factor": k in ("compute_slow", "pcie_slow", "link_degraded"),
                   "loss": k == "link_degraded", "period_ps": k == "flapping",
                   "until_ps": k in ("flapping", "link_down")}
        for name, ok in allowed.items():
            if not ok and getattr(self, name) is not None:
                raise ValueError(f"{name}: not a field of kind = {k!r}")
        if k == "link_degraded" and (self.factor is None) == (self.loss is None):
            raise ValueError("factor: kind = 'link_degraded' needs exactly one of factor (rate / factor) "
                             "and loss (a probability in (0, 1])")
        if self.until_ps is not None and self.until_ps <= self.at_ps:
            raise ValueError(f"until_ps: {self.until_ps} must be later than at_ps ({self.at_ps})")
        if k == "flapping" and (self.until_ps - self.at_ps) // (self.period_ps // 2 or 1) > MAX_FLAPS:
            raise ValueError(f"period_ps: flapping from at_ps to until_ps every {self.period_ps} ps makes more "
                             f"than {MAX_FLAPS} link events; give a longer period or a shorter span")
        if k == "flapping" and self.period_ps < 2:
            raise ValueError("period_ps: needs at least 2 ps (down for half of it, up for the other half)")
        return self


def component(f: FaultConfig, job_name: str | None = None) -> tuple[str, str]:
    """(component kind, component name) of a fault: ``rank``/``job:rank``,
    ``host``/``h3`` or ``link``/``a-b`` (the two node names sorted)."""
    if f.kind in RANK_KINDS:
        return "rank", f"{f.job or job_name}:{f.rank}"
    if f.kind == "pcie_slow":
        return "host", f.host if isinstance(f.host, str) else f"h{f.host}"
    return "link", link_name(*f.link)


def link_name(a: str, b: str) -> str:
    """The name of the (undirected) link between two nodes."""
    return "-".join(sorted((a, b)))


def compile_faults(s, t, names: dict[str, int]) -> tuple[dict[int, list[dict]], list[dict]]:
    """The faults of scenario ``s`` on its built topology ``t``: per job index
    the core's worker faults, and the core's extra link events."""
    from ..fabric_schema import links_joining, node_index

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
            node = _host_node(f.host, t, names, f"{where}.host")
            links = [k for k, lk in enumerate(t.links) if node in (lk["a"], lk["b"])]
        else:
            a, b = (node_index(names, n, f"{where}.link[{j}]") for j, n in enumerate(f.link))
            links = links_joining(t, a, b)
            if not links:
                raise ScenarioError(f"{where}.link: no link joins {f.link[0]!r} and {f.link[1]!r}")
        for k in links:
            events.extend(_link_events(f, k, t.links[k]["rate_bps"]))
    return jobs, events


def _host_node(host, t, names, field: str) -> int:
    if isinstance(host, int):
        if not 0 <= host < len(t.hosts):
            raise ScenarioError(f"{field}: host index {host} out of range (the topology has hosts 0..{len(t.hosts) - 1})")
        return t.hosts[host]
    if host not in names or t.nodes[names[host]]["kind"] != "host":
        raise ScenarioError(f"{field}: {host!r} is not a host of the topology")
    return names[host]


def _link_events(f: FaultConfig, k: int, rate_bps: int) -> list[dict]:
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

"""The scenario's ``[[faults]]`` section: labelled faults, their kinds and
the names of their components (compiled onto the simulator's mechanisms by
``fabriclab.sim.apps.faults``).

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

# No `from __future__ import annotations` in a schema module: see base.py.

from typing import Annotated, Literal, Optional, Union

from pydantic import Field, StrictFloat, StrictInt, model_validator

from .base import _Strict
from .units import TimePs

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



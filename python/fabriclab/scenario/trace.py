"""``[[trace_jobs]]``: a training job replayed from an execution trace
(MLCommons Chakra, one file per rank), lowered by
``fabriclab.sim.apps.trace`` onto the core's dependency-graph job, the one
LLM jobs run on (docs/llm.md, "Chakra traces")."""

from typing import Annotated, Literal

from pydantic import (
    Field,
    PrivateAttr,
    StrictBool,
    StrictFloat,
    StrictInt,
    model_validator,
)

from .base import _Strict
from .graph_job import GraphJobRun
from .units import RateBps


class _TraceJobSource(_Strict):
    """The fields of ``[[trace_jobs]]`` before :class:`GraphJobRun`'s: the
    traces, their ranks' hosts and groups, and how their nodes are read."""

    name: str = "trace"
    # The files' prefix: <path>.0.et, <path>.1.et, ... (or .json, Chakra's JSON form), one per rank,
    # relative to the scenario's folder.
    path: str
    # Hosts of the ranks: "all" (rank r on host r; the topology's hosts must number the ranks) or a list.
    hosts: Literal["all"] | list[StrictInt] = "all"
    # Process groups by the traces' pg_name: their ranks. A collective without pg_name spans every rank.
    groups: dict[str, list[StrictInt]] = Field(default_factory=dict)
    # Honour ctrl_deps as well as data_deps. Off by default, as in ASTRA-sim's feeder: chakra's PyTorch
    # converter puts the execution order in data_deps, and its ctrl_deps name callers, often not in the file.
    ctrl_deps: StrictBool = False
    # Nodes marked is_cpu_op (host-side operators, collectives' launches): "skip" passes their dependencies
    # through at no cost (GPU nodes keep their launch order); "serial" runs them on the rank's one compute
    # resource with its GPU kernels.
    cpu_ops: Literal["skip", "serial"] = "skip"
    # ASTRA-sim's roofline mode: GPU compute nodes with num_ops take max(num_ops / peak_flops,
    # tensor_size x 8 / memory_bps) in place of duration_micros (unset: durations replayed).
    peak_flops: StrictFloat | None = Field(None, gt=0)
    memory_bps: Annotated[RateBps, Field(gt=0)] | None = None


class TraceJobConfig(GraphJobRun, _TraceJobSource):
    """A job replayed from Chakra execution traces."""

    # Rank -> compute slowdown factor (a straggler: > 1).
    slowdown: dict[str, float] = Field(default_factory=dict)
    telemetry: StrictBool = True
    end_run: StrictBool = False

    # The ranks' parsed nodes with the files' identity (path, mtime, size) they were read from, so a run's
    # memory estimate and its lowering read them once (fabriclab.sim.apps.trace); not part of the file format.
    _parsed = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _groups(self):
        for g, ranks in self.groups.items():
            if not ranks or len(set(ranks)) != len(ranks) or min(ranks) < 0:
                raise ValueError(f"groups.{g}: a process group lists distinct ranks >= 0; got {ranks}")
        if self.memory_bps is not None and self.peak_flops is None:
            raise ValueError("memory_bps: the roofline needs peak_flops too")
        return self

"""What ``[[llm_jobs]]`` and ``[[trace_jobs]]`` share: the six settings of how
their dependency-graph job runs on the core (``fabriclab.sim.apps.graph``
hands them to it as they are), declared once here."""

# No `from __future__ import annotations` in a schema module: see base.py.

from typing import Annotated

from pydantic import Field, StrictBool, StrictInt

from .base import U32_MAX, Delay, _Strict
from .units import RateBps


class GraphJobRun(_Strict):
    """How a graph job runs: its iterations, start, traffic class, the
    reduction's throughput, the software overhead per message, and whether
    its connections persist between messages.

    A job's section lists its own fields before these and after them: it
    derives from this and from a base holding its leading fields, in that
    order (``class LlmJobConfig(GraphJobRun, _LlmJobShape)``), so that pydantic,
    which orders a model's fields from its last base to itself, keeps the
    schema's order (the resolved file's too)."""

    iterations: StrictInt = Field(1, ge=1, le=U32_MAX)
    start_ps: Delay = 0
    class_: StrictInt = Field(0, ge=0, le=7, alias="class")
    reduce_bps: Annotated[RateBps, Field(gt=0)] = 300 * 8 * 10**9
    send_overhead_ps: Delay = 0
    persistent_connections: StrictBool = True

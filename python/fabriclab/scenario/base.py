"""What every part of the scenario schema shares: the error type, the strict
pydantic base model, the core's integer ranges and quantity types.

The modules of this package that define the schema's models (model.py, workloads.py, graph_job.py, fabric.py,
faults.py, recovery.py, aggregation.py) do not use ``from
__future__ import annotations``: their annotations are evaluated as the
module runs, where pydantic would otherwise turn each field's annotation
string into a ForwardRef and evaluate it, 5 ms of every start (issue 13)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from ..errors import InputError
from .units import RateBps, TimePs


class ScenarioError(InputError):
    """A scenario that cannot be run; the message names the field and the rule."""


class _Strict(BaseModel):
    # allow_inf_nan=False: every float must be finite (inf and nan never reach the core).
    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_default=True, allow_inf_nan=False)


# Wire bytes a segment adds to its payload: IP + TCP headers (40), Ethernet
# header and FCS (18), preamble and inter-frame gap (20); the core's
# packet::wire_bytes.
WIRE_OVERHEAD_BYTES = 78

# Integer ranges of the core's fields (u32 counts, u8 classes).
U32_MAX = 2**32 - 1
TrafficClass = Annotated[StrictInt, Field(ge=0, le=7)]


PositiveRate = Annotated[RateBps, Field(gt=0, description="bits per second")]
Delay = Annotated[TimePs, Field(ge=0)]


def _off_is_none(v):
    if isinstance(v, str) and v.strip().lower() in ("off", "none"):
        return None
    return v

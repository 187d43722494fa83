"""The scenario's in-network aggregation settings (PANAMA, seed 001): the
accelerators' ``[aggregation]`` section and a job's ``[jobs.aggregation]``.
A job aggregates in the network when its ``allreduce`` names one of
:data:`AGGREGATION_ALLREDUCE`; docs/panama.md describes each."""

# No `from __future__ import annotations` in a schema module: see base.py.

from typing import Annotated, Literal, Optional, Union

from pydantic import Field, StrictBool, StrictFloat, StrictInt

from .base import _Strict
from .units import SizeBytes, TimePs

# A job's allreduce by in-network aggregation, one scenario switch apart
# (section 7): PANAMA's congestion control, its partial-sync variants
# (aggregate once 88 % or 94 % of the workers' packets of a VID arrived),
# and SwitchML* (aggregation, multi-tenancy and load balancing without
# congestion control: a fixed window).
AGGREGATION_ALLREDUCE = {
    "panama": ("panama", 1.0),
    "panama-0.88": ("panama", 0.88),
    "panama-0.94": ("panama", 0.94),
    "switchml": ("fixed", 1.0),
}


class AggregationConfig(_Strict):
    """The accelerators on the aggregating switches and how workers send."""

    # Buffer of each accelerator, shared equally by the jobs it serves (64 MB in section 7).
    memory_bytes: Annotated[SizeBytes, Field(gt=0)] = 64 * 10**6
    # Gradient bytes per aggregation packet (float32: a multiple of 4). 1456
    # fills a 1500-byte MTU (16 bytes of header, 28 of IPv4 and UDP), as a
    # full TCP segment does.
    vector_bytes: StrictInt = Field(1456, gt=0, le=4 * 65535, multiple_of=4)
    # Packets carry float32 vectors and accelerators sum them (to check the
    # numbers: aggregation_values.parquet); otherwise sizes and times only.
    functional: StrictBool = False
    # A tree without a result for this long gives up its outstanding VIDs
    # (the fabric is lossless, so it need not be aggressive: section 4.2).
    timeout_ps: Annotated[TimePs, Field(gt=0)] = 10 * 10**9


class JobAggregationConfig(_Strict):
    """A job's trees and window (``allreduce`` picks the kind)."""

    # Roots of the job's trees: "all" (one per switch of the lowest tier that
    # reaches all its workers: their ToR if they share one, else every spine
    # or core, section 4.1), how many of those (the first N), or their names.
    trees: Union[Literal["all"], Annotated[StrictInt, Field(ge=1, le=256)], list[str]] = "all"
    # PANAMA's initial window, or SwitchML*'s fixed one, in packets per tree.
    window_packets: StrictInt = Field(10, ge=1, le=65535)
    # SwitchML*'s fixed window respects the accelerators' cwnd_cap (their slots).
    window_cap: StrictBool = True
    # Overrides the allreduce's fraction (panama-0.88: 0.88); within (0, 1].
    sync_fraction: Optional[StrictFloat] = Field(None, gt=0, le=1)
    # DCTCP's gain and initial alpha for PANAMA's window (RFC 8257: g = 1/16).
    g: StrictFloat = Field(1 / 16, gt=0, le=1)
    initial_alpha: StrictFloat = Field(0.0, ge=0, le=1)

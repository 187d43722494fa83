"""The scenario's ``[recovery]`` section (docs/c4-recovery.md): how a
failed job is detected, its suspect isolated and replaced from a pool of
spare hosts, and the job restarted from its last checkpoint (C4, section
3.1 and figure 3). Light on imports: the schema loads it with every
scenario; the run itself is ``fabriclab/systems/c4/recovery.py``.

Default durations are those of the Table 3 model's C4D practice
(``fabriclab/systems/c4/downtime.py``): automatic isolation 5 minutes ("minutes",
section 4.2.1), re-initialisation 10 minutes, and a manual diagnosis of 3
hours (its "Unknown" kind; the paper: "hours or even days", section 2).
"""

# No `from __future__ import annotations` in a schema module: see base.py.

import math
from typing import Annotated, Literal, Optional, Union

from pydantic import Field, StrictInt, field_validator

from .base import U32_MAX, Delay, ScenarioError, _Strict
from .units import TimePs

S = 10**12
# The paper's cluster: 8 spare servers for every 128 (section 3.1).
SPARES_PER = (8, 128)


class RecoveryConfig(_Strict):
    """Detection, isolation and restart of the scenario's one job."""

    # "c4d": the C4D master (systems/c4/detector.py), with NCCL's watchdog still armed
    # behind it (what it misses, the watchdog catches, and people diagnose);
    # "watchdog": the watchdog alone, every diagnosis by people.
    detector: Literal["c4d", "watchdog"] = "c4d"
    # An allreduce unfinished this long after its first event fires the
    # watchdog (PyTorch's default is 10 minutes; systems/c4/baselines.py uses 1 s).
    watchdog_timeout_ps: Annotated[TimePs, Field(gt=0)] = S
    # The suspect named by C4D isolated and replaced automatically.
    isolation_ps: Delay = 300 * S
    # People finding and isolating the faulty component (no component named).
    manual_diagnosis_ps: Delay = 3 * 3600 * S
    # Restarting the job: scheduling, loading the checkpoint, warming up.
    reinit_ps: Delay = 600 * S
    # Spare hosts: host indices or names, or how many (the lowest-numbered
    # hosts the job does not use); default 8 per 128 job hosts, rounded up.
    spares: Optional[Union[Annotated[StrictInt, Field(ge=0, le=U32_MAX)],
                           list[Union[Annotated[StrictInt, Field(ge=0)], str]]]] = None
    # Restarts before the job is given up.
    max_restarts: StrictInt = Field(10, ge=0, le=U32_MAX)

    @field_validator("spares", mode="before")
    @classmethod
    def _no_booleans(cls, v):
        # TOML's true/false would pass as the counts 1/0.
        items = v if isinstance(v, list) else [v]
        if any(isinstance(x, bool) for x in items):
            raise ValueError("true/false is not a spare pool: give a count of hosts (an integer >= 0) or a list "
                             "of host indices or names")
        return v


def check_scenario(s) -> None:
    """What a scenario with ``[recovery]`` must be (raised as the schema's
    rule on the ``recovery`` field)."""
    if len(s.jobs) != 1:
        raise ValueError(f"recovery: restarts one training job in segments; the scenario has {len(s.jobs)} jobs "
                         f"(give it exactly one [[jobs]])")
    if s.collectives:
        raise ValueError("recovery: a restarted job cannot replay [[collectives]] (they run once); "
                         "drop them or the [recovery] section")
    j = s.jobs[0]
    if j.workers != "all" and len(j.workers) < 2:
        raise ValueError("recovery: the job needs at least two workers (the detectors read its allreduces)")
    from .aggregation import AGGREGATION_ALLREDUCE

    if j.allreduce in AGGREGATION_ALLREDUCE:
        raise ValueError(f"recovery: the detectors read a ring's or a plan's telemetry; the job's allreduce "
                         f"{j.allreduce!r} aggregates in the network")


def spare_hosts(s, t, workers: list[int]) -> list[int]:
    """The spare pool (host indices, in the order spares are taken) of
    scenario ``s`` on topology ``t`` for a job on ``workers``."""
    r = s.recovery
    nh = len(t.hosts)
    free = [h for h in range(nh) if h not in set(workers)]
    if r.spares is None or isinstance(r.spares, int):
        want = math.ceil(len(workers) * SPARES_PER[0] / SPARES_PER[1]) if r.spares is None else r.spares
        if want > len(free):
            how = "" if r.spares is not None else f" (8 per 128 job hosts, rounded up, for {len(workers)} hosts)"
            raise ScenarioError(f"recovery.spares: needs {want} hosts the job does not use{how}; the topology "
                                f"has {len(free)}: give a smaller count or a list")
        return free[:want]
    names = {t.nodes[node]["name"]: h for h, node in enumerate(t.hosts)}
    out = []
    for k, x in enumerate(r.spares):
        if isinstance(x, str):
            if x not in names:
                raise ScenarioError(f"recovery.spares[{k}]: {x!r} is not a host of the topology")
            x = names[x]
        elif x >= nh:
            raise ScenarioError(f"recovery.spares[{k}]: host index {x} out of range (the topology has hosts "
                                f"0..{nh - 1})")
        if x in workers:
            raise ScenarioError(f"recovery.spares[{k}]: host {x} is a worker of the job; a spare must be a host "
                                f"the job does not use")
        if x in out:
            raise ScenarioError(f"recovery.spares[{k}]: host {x} is listed twice")
        out.append(x)
    return out

"""Host clocks (``[clocks]``) and the probe mesh (``[probes]``): the
scenario sections of Clockwork's observation half (docs/clockwork.md).

Every host's clock reads true time + offset + drift x t, the drift
wandering as a seeded random walk; hosts of a group share one oscillator.
The defaults come from published figures (docs/scenario.md gives the
sources)."""

# No `from __future__ import annotations` in a schema module: see base.py.

from typing import Annotated, Literal, Optional

from pydantic import BeforeValidator, Field, model_validator

from .base import U32_MAX, Delay, TrafficClass, _Strict
from .units import _TIME, SizeBytes, TimePs, _parser

# Drifts beyond this are refused (and a walk is held within it).
MAX_DRIFT_PPM = 1000.0

_time = _parser(_TIME, "time", "'-5us'")


def _signed_time(v):
    """A time that may be negative: '-5us', -5000000 or '5us'."""
    if isinstance(v, str) and v.strip().startswith("-"):
        return -_time(v.strip()[1:])
    if isinstance(v, int) and not isinstance(v, bool) and v < 0:
        return v
    return _time(v)


SignedTimePs = Annotated[int, BeforeValidator(_signed_time), Field(ge=-(2**62), le=2**62)]
Drift = Annotated[float, Field(ge=-MAX_DRIFT_PPM, le=MAX_DRIFT_PPM)]
Stamping = Literal["nic", "software"]


class HostClockConfig(_Strict):
    """One host's clock given explicitly (unset fields are drawn)."""

    offset_ps: Optional[SignedTimePs] = None
    drift_ppm: Optional[Drift] = None
    stamping: Optional[Stamping] = None


class ClocksConfig(_Strict):
    """Every host's clock and timestamping."""

    # Start offsets after NTP: chrony on a LAN is good to tens of us, so
    # offsets of us to ms; N(0, 100 us).
    offset_sigma_ps: Delay = 100_000_000
    # Huygens (NSDI'18): clock frequencies typically differ by 5-10 us/s, up
    # to 30. N(0, 6 ppm): two clocks differ by 6.8 ppm on average (|N(0, 6 sqrt 2)|).
    drift_sigma_ppm: Annotated[float, Field(ge=0, le=MAX_DRIFT_PPM)] = 6.0
    # The drift's wander (temperature): a step of N(0, wander_ppm) every
    # wander_every_ps; 0.01 ppm a millisecond is 0.3 ppm over a second.
    wander_ppm: Annotated[float, Field(ge=0, le=MAX_DRIFT_PPM)] = 0.01
    wander_every_ps: Annotated[TimePs, Field(ge=1_000_000)] = 1_000_000_000
    # Timestamping of every host not given its own.
    stamping: Stamping = "nic"
    # NIC hardware stamps: Gaussian noise, sigma tens of ns.
    nic_sigma_ps: Delay = 20_000
    # Kernel software stamps: log-normal error (late on receive, early on
    # send), median 335 ns, shape 1.09 (one stamp's p99 4.2 us): fitted to
    # SO_TIMESTAMPING over the cluster-in-a-box's veths, whose rx - tx above
    # its floor (the sum of two such errors) had p50 0.78 us and p99 6.1 us
    # (scripts/fit_software_stamps.py; docs/clockwork.md).
    software_median_ps: Delay = 335_000
    software_shape: Annotated[float, Field(ge=0, le=10)] = 1.09
    # Hosts (by name) given their own offset, drift or stamping.
    hosts: dict[str, HostClockConfig] = Field(default_factory=dict)
    # Hosts sharing one oscillator (VMs on one physical machine): the same
    # drift and the same wander.
    groups: list[list[str]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _groups_disjoint(self):
        seen: dict[str, int] = {}
        for g, members in enumerate(self.groups):
            if not members:
                raise ValueError(f"groups: groups[{g}] is empty")
            for h in members:
                if h in seen:
                    raise ValueError(f"groups: host {h!r} of groups[{g}] is already in groups[{seen[h]}]")
                seen[h] = g
            drifts = {self.hosts[h].drift_ppm for h in members if h in self.hosts} - {None}
            if len(drifts) > 1:
                raise ValueError(f"groups: the hosts of groups[{g}] share an oscillator but are given different "
                                 f"drift_ppm ({sorted(drifts)}); give one drift or none")
        return self


class ProbesConfig(_Strict):
    """The probe mesh: each host probes `peers` others with coded pairs."""

    # The talk's mesh probes 5 peers per VM (Huygens: 10-20).
    peers: int = Field(5, ge=1, le=U32_MAX)
    # A pair to each peer this often.
    pair_every_ps: Annotated[TimePs, Field(gt=0)] = 2_000_000_000
    # Between a pair's two probes, by the sender's clock (Huygens' s was not found; chosen).
    spacing_ps: Annotated[TimePs, Field(gt=0)] = 5_000_000
    size_bytes: Annotated[SizeBytes, Field(gt=0, le=65536)] = 64
    class_: TrafficClass = Field(0, alias="class")
    start_ps: Delay = 0
    duration_ps: Annotated[TimePs, Field(gt=0)] = 10_000_000_000
    # The hosts of the mesh (host indices); None: every host, or with [cloud] the tenant's VMs.
    hosts: Optional[list[Annotated[int, Field(ge=0, le=U32_MAX)]]] = None

    @model_validator(mode="after")
    def _distinct_hosts(self):
        if self.hosts is not None and len(set(self.hosts)) != len(self.hosts):
            raise ValueError(f"hosts: each host once, got {self.hosts}")
        return self

    @model_validator(mode="after")
    def _spacing_fits(self):
        gap = self.pair_every_ps // self.peers
        if self.spacing_ps >= gap:
            raise ValueError(f"spacing_ps: {self.spacing_ps} ps is not shorter than a host's gap between pairs "
                             f"(pair_every_ps / peers = {gap} ps)")
        return self

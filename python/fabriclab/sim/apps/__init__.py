"""The simulator's apps, registered in one place (as the core's are, in
``crates/fabriclab-core/src/apps/mod.rs``). Resolution runs them in this
order: the faults app writes onto the jobs' specs and the fabric's link
events, and the aggregation app numbers the jobs that aggregate; collection
runs them in this order too, so the collectives' ccl rows precede the jobs'.
A new app: a section in ``fabriclab.scenario``, a module here with its
:class:`~fabriclab.sim.apps.base.App`, and a line below."""

from .aggregation import AGGREGATION
from .clocks import CLOCKS
from .collectives import COLLECTIVES
from .faults import FAULTS
from .jobs import JOBS
from .probes import PROBES
from .traffic import FLOWS, TRAFFIC

APPS = (CLOCKS, TRAFFIC, FLOWS, COLLECTIVES, JOBS, FAULTS, AGGREGATION, PROBES)

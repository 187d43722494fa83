"""The simulator's apps, registered in one place (as the core's are, in
``crates/fabriclab-core/src/apps/mod.rs``). Resolution runs them in this
order, those marked ``after_fabric`` once the fabric is resolved: the
faults app writes onto the jobs' specs and the fabric's link events, and
the aggregation app numbers the jobs that aggregate; a scenario with
several mistakes is told of the first in this order. Collection runs them
in this order too; the ccl rows of collectives precede the jobs' whatever
the order.
A new app: a section in ``fabriclab.scenario``, a module here with its
:class:`~fabriclab.sim.app.App`, and a line below."""

from .aggregation import AGGREGATION
from .clocks import CLOCKS
from .cloud import CLOUD
from .collectives import COLLECTIVES
from .faults import FAULTS
from .jobs import JOBS
from .llm import LLM
from .probes import PROBES
from .trace import TRACE
from .traffic import FLOWS, TRAFFIC

APPS = (CLOCKS, TRAFFIC, FLOWS, JOBS, LLM, TRACE, COLLECTIVES, FAULTS, AGGREGATION, PROBES, CLOUD)

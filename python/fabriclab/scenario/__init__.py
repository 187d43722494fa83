"""The scenario contract: the one schema between fabriclab's parts.

``model.py`` is the :class:`Scenario` (top-level fields, the rules across
sections, loading), ``resolving.py`` what it resolves to (topology, traffic,
flows, the resolved file), ``messages.py`` its errors' text; the workloads
(traffic, flows, jobs, collectives, outputs) are in ``workloads.py``, the
fabric sections in ``fabric.py``, the app sections beside them
(``aggregation.py``, ``faults.py``, ``recovery.py``, ``clocks.py``,
``cloud.py``, ``llm.py``, ``trace.py``); ``base.py``, ``units.py`` the
shared types; ``topology.py``, ``gpus.py``, ``cdfs.py``, ``profiles.py`` the
builders and data a scenario names.

``from fabriclab.scenario import Scenario`` loads the schema on first use
(pydantic builds its models then), so importing a builder module of this
package stays cheap."""

import importlib

# The package's modules: `from . import topology` asks this package for the
# name before importing the module, which must not load the schema.
_MODULES = {"aggregation", "base", "cdfs", "clocks", "cloud", "fabric", "faults", "gpus", "graph_job", "llm", "messages",
            "model", "profiles", "recovery", "resolving", "topology", "trace", "units", "workloads"}


def __getattr__(name):
    if name.startswith("_") or name in _MODULES:
        raise AttributeError(f"module 'fabriclab.scenario' has no attribute {name!r}")
    model = importlib.import_module(".model", __name__)
    try:
        return getattr(model, name)
    except AttributeError:
        raise AttributeError(f"module 'fabriclab.scenario' has no attribute {name!r}") from None

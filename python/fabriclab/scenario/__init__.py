"""The scenario contract: the one schema between fabriclab's parts.

``model.py`` is the :class:`Scenario` (top-level fields, workloads, loading,
the resolved file); the fabric sections are in ``fabric.py``, the app
sections beside it (``aggregation.py``, ``faults.py``, ``recovery.py``);
``base.py``, ``units.py`` the shared types; ``topology.py``, ``gpus.py``,
``cdfs.py``, ``profiles.py`` the builders and data a scenario names.

``from fabriclab.scenario import Scenario`` loads the schema on first use
(pydantic builds its models then), so importing a builder module of this
package stays cheap."""

import importlib

# The package's modules: `from . import topology` asks this package for the
# name before importing the module, which must not load the schema.
_MODULES = {"aggregation", "base", "cdfs", "clocks", "fabric", "faults", "gpus", "model", "profiles", "recovery", "topology",
            "units"}


def __getattr__(name):
    if name.startswith("_") or name in _MODULES:
        raise AttributeError(f"module 'fabriclab.scenario' has no attribute {name!r}")
    model = importlib.import_module(".model", __name__)
    try:
        return getattr(model, name)
    except AttributeError:
        raise AttributeError(f"module 'fabriclab.scenario' has no attribute {name!r}") from None

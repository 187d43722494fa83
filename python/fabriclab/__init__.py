"""fabriclab: a lab for the network side of distributed ML training.

>>> import fabriclab
>>> res = fabriclab.simulate(fabriclab.Scenario.default())
>>> res.flows.head()

Bad input raises :class:`fabriclab.InputError` (or a subclass such as
``fabriclab.ScenarioError``): its message names the field, what is wrong and
what is allowed. Anything else is a failure or a bug (docs/scenario.md,
"Errors from Python").
"""

from ._version import __version__


def __getattr__(name):
    # Loaded on first use, so that the CLI starts quickly and answers bad
    # input at once: the scenario schema brings in pydantic and builds its
    # models; simulate and Results bring in pandas and pyarrow.
    if name in ("Scenario", "ScenarioError"):
        from .scenario import model as scenario

        return getattr(scenario, name)
    if name == "simulate":
        from .api import simulate

        return simulate
    if name == "InputError":
        from .errors import InputError

        return InputError
    if name == "Results":
        from .sim.results import Results

        return Results
    raise AttributeError(f"module 'fabriclab' has no attribute {name!r}")

__all__ = ["InputError", "Scenario", "ScenarioError", "Results", "simulate", "__version__"]

"""fabriclab: a lab for the network side of distributed ML training.

>>> import fabriclab
>>> res = fabriclab.simulate(fabriclab.Scenario.default())
>>> res.flows.head()
"""

__version__ = "0.1.0"

from .engine import simulate  # noqa: E402
from .results import Results  # noqa: E402
from .scenario import Scenario, ScenarioError  # noqa: E402

__all__ = ["Scenario", "ScenarioError", "Results", "simulate", "__version__"]

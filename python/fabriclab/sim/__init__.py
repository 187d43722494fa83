"""Simulation: a scenario resolved through every registered app
(``apps/``, the registry; ``app.py``, what an app contributes) and run by
the core (``engine.py``; ``pipeline.py`` binds it to the registry), its
results (``results.py``), its memory and time estimates (``limits.py``),
and plans run in the simulator (``plans.py``, ``bench.py``)."""

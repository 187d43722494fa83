"""Simulation: a scenario resolved and run by the core (``engine.py``), its
results (``results.py``), its memory estimate (``limits.py``), and sweeps
(``sweep.py``)."""

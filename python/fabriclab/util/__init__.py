"""Helpers every part may use: reading user files (``inputs.py``), TOML
(``toml.py``), and running independent work on several processes
(``parallel.py``)."""

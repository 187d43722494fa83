"""Clock synchronisation from probe records (docs/clockwork.md): the schema of
probes.parquet (``probes.py``), Huygens' estimator and its baselines
(``estimate.py``), a seeded generator of probe records (``synthetic.py``) and
the ``fabriclab clock`` commands (``cli.py``)."""

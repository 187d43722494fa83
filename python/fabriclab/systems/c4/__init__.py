"""C4 (Dong et al., Alibaba; seed 004) section 3.1: the C4D detector
(``detector.py``, ``matrix.py``), its baselines (``baselines.py``) and probe
evidence (``probes.py``), the recovery runner (``recovery.py``: detection,
isolation and restart from a spare pool), the error-induced downtime model
(``downtime.py``, Table 3), and their reproductions (``repro_*.py``;
docs/c4.md, docs/c4-recovery.md). The labelled faults they diagnose are the
simulator's faults app (``fabriclab.scenario.faults``,
``fabriclab.sim.apps.faults``)."""

"""Plans: the plan format (``plan.py``), its verifier (``verify.py``), the
planners (rings, trees, halving-doubling, direct, Blink's TreeGen, and the
topology-aware choice in ``algos.py``), nccl-tests' figures
(``metrics.py``) and the telemetry table of collective messages
(``ccl.py``). Nothing here runs the simulator (that is ``fabriclab.sim``)."""

"""Blink (Wang et al., MLSys 2020; seed 003): its packed spanning trees are a
planner (``fabriclab.collectives.treegen``); ``repro.py`` reproduces its figures."""

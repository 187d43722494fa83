"""Observation: clocks from probe records (``clock/``: the estimator, the
real agent), reports (``report/``), drawings (``draw.py``), quantities for people (``fmt.py``), and the comparison of a
plan run for real and simulated (``compare.py``)."""

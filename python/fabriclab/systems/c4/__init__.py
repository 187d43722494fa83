"""C4 (Dong et al., Alibaba; seed 004) section 3.1: labelled faults
(``[[faults]]``, ``faults.parquet``), the C4D detector, its baselines and
the diagnosis benchmark (docs/c4.md)."""

"""fabriclab.systems.panama: in-network aggregation after PANAMA (MLSys'21, seed 001).
The aggregation packet, the accelerator's logic and the workers' window are
the Rust crate fabriclab-agg; this package holds the software aggregator's
Python side (aggregator.py) and its commands (cli.py). See docs/panama.md."""

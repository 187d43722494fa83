"""The ETH thesis "Making DDNNs friendlier in the data center" (seed 002):
slack-aware prioritisation is part of the job model; ``repro.py`` reproduces
chapters 4 and 5 and the slack table."""

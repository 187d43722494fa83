"""Prints a scenario's resolved core JSON (what `fabriclab run` hands the
core), for benches/run_spec.rs:

    python benches/core_json.py benches/star8_dctcp.toml > /tmp/star8.json
"""

import json
import sys

from fabriclab.scenario.model import Scenario
from fabriclab.sim.pipeline import core_spec

s = Scenario.load(sys.argv[1])
print(json.dumps(core_spec(s, s.build_topology())))

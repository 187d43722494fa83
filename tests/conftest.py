import subprocess
import sys

import pytest

from fabriclab import Scenario


def star_scenario(hosts=2, rate="10Gbps", delay="10us", **kw) -> Scenario:
    raw = {
        "name": "test",
        "topology": {"kind": "star", "hosts": hosts, "link_rate_bps": rate, "link_delay_ps": delay},
    }
    raw.update(kw)
    return Scenario.from_dict(raw)


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "fabriclab.cli", *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture
def cli():
    return run_cli

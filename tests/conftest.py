import os
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


def why_no_box() -> str | None:
    """Why the cluster-in-a-box cannot be built here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, tc for the cluster-in-a-box)"
    try:
        r = subprocess.run(["ip", "netns", "list"], capture_output=True)
    except FileNotFoundError:
        return "needs iproute2's ip"
    return None if r.returncode == 0 else "ip netns does not work here"

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


def run_ranks(n, argv, timeout=60, extra_env=None):
    """Runs ``argv`` as ranks 0..n-1 of one job on this machine (torchrun's variables and a
    token, as ``fabriclab launch`` sets them); returns their exit codes and outputs."""
    from fabriclab.runtime.launch import free_port, rank_env

    port, procs = free_port(), []
    for r in range(n):
        env = rank_env(r, n, port, "test-token")
        env.update(extra_env or {})
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        outs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    return [p.returncode for p in procs], outs


def why_no_box() -> str | None:
    """Why the cluster-in-a-box cannot be built here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, tc for the cluster-in-a-box)"
    try:
        r = subprocess.run(["ip", "netns", "list"], capture_output=True)
    except FileNotFoundError:
        return "needs iproute2's ip"
    return None if r.returncode == 0 else "ip netns does not work here"

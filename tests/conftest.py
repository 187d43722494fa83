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


def c4p_two_server_testbed(spines: int):
    """A hand-sized C4P fabric: two servers of one GPU (nodes 0, 1 = hosts 0, 1)
    and one two-port NIC each, four leaves (nodes 2..5), ``spines`` spines
    (nodes 6..), every leaf to every spine at 100 Gbit/s, the first NIC on
    leaves 0 and 1, the second on leaves 2 and 3 (100 Gbit/s each port), the
    GPU to its NIC at 200 Gbit/s; 1 us links."""
    from fabriclab.systems.c4p import testbed as tb

    t = tb.Testbed()
    gpus = [t.add_node(f"s{s}.gpu0", "host", 0) for s in range(2)]
    t.leaves = [t.add_node(f"leaf{i}", "switch", 3) for i in range(4)]
    t.spines = [t.add_node(f"spine{i}", "switch", 4) for i in range(spines)]
    for lf in t.leaves:
        for sp in t.spines:
            t.add_link(lf, sp, 100 * 10**9, 1_000_000)
    for s, g in enumerate(gpus):
        nic = t.add_node(f"s{s}.nic0", "switch", 2)  # nodes 6 + spines and 7 + spines
        t.add_link(g, nic, 200 * 10**9, 1_000_000)
        left, right = t.leaves[2 * s], t.leaves[2 * s + 1]
        t.add_link(nic, left, 100 * 10**9, 1_000_000)
        t.add_link(nic, right, 100 * 10**9, 1_000_000)
        t.ports[nic] = (left, right)
        t.nic[(s, 0)] = nic
        t.gpus.append(g)
        t.servers.append([s])
        t.group.append(s)
    return t


def assert_quick_bands(name: str, summary: dict) -> None:
    """Issue 29's guard: every headline of ``name``'s quick run stays inside
    the band the registry (fabriclab/systems/registry/quick.py, QUICK) gives it. A
    change that moves one updates the registry with its reason."""
    from fabriclab.systems.reproduce import check_quick

    checks = check_quick(name, summary)
    assert checks, f"the registry has no quick checks for {name}"
    bad = [f"{c['metric']} ({c['key']}): {c['ours']} outside {c['band']}" for c in checks if not c["holds"]]
    assert not bad, f"{name} --quick left its registry bands: " + "; ".join(bad)

"""The public cloud in the cluster-in-a-box (docs/clockwork-control.md, "The cloud in
the box"): a [cloud] scenario placed by hand builds machines as router
namespaces; `fabriclab cluster select` on a pool where two VMs share a
machine and one machine carries noisy neighbours keeps neither the second VM
of the shared machine nor the VM beside the neighbours; asking for more VMs
than the pool holds is refused (exit 2). The plan test needs no root; the
rest is root only, about a minute (most of it waiting for the agents to start)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import why_no_box
from fabriclab.runtime.cluster.apply import list_namespaces, state_path
from fabriclab.runtime.cluster.plan import build_plan
from fabriclab.scenario.model import Scenario

PY = sys.executable
NAME = "c" + str(os.getpid() % 10**6)
CAP_MBPS, NIC_MBPS = 50, 60
# Machines 0..4 on one leaf, 3 slots each. vm0, vm1 on machine 0; vm2 on machine 1, busy: its two other
# VMs send Poisson bursts out at half their cap on average, 50 Mbit/s offered to its 60 Mbit/s NIC, 100
# while both burst; vm3..vm5 alone on machines 2..4. Other tenants' VMs on quiet machines are not built.
CLOUD = textwrap.dedent(f"""
    seed = 1
    [transport]
    cc = "newreno"
    [queue]
    ecn_threshold_packets = "off"
    [cloud]
    vms_per_host = 3
    vm_egress_bps = "{CAP_MBPS}Mbps"
    vm_link_delay_ps = "0us"
    tenant_vms = 6
    tenant_machines = [0, 0, 1, 2, 3, 4]
    busy_machines = [1]
    occupancy = 1.0
    neighbour_load = 0.5
    [cloud.fabric]
    kind = "leaf_spine"
    leaves = 1
    hosts_per_leaf = 5
    spines = 1
    link_rate_bps = "{NIC_MBPS}Mbps"
    link_delay_ps = "0us"
""")


def fl(*args, timeout=180):
    return subprocess.run([PY, "-m", "fabriclab.cli", *args], capture_output=True, text=True, timeout=timeout)


def test_plan_puts_machine_mates_behind_one_shaped_uplink(tmp_path):
    f = tmp_path / "cloud.toml"
    f.write_text(CLOUD)
    p = build_plan(Scenario.load(str(f)), "x")
    pre = "flbox-x-"
    assert [h[len(pre):] for h in p.hosts] == [f"vm{i}" for i in range(6)]
    # two neighbours on machine 1 (its three slots less vm2's) and their sink
    others = {o["label"]: o for o in p.others}
    assert sorted(o["machine"] for o in others.values() if o["role"] == "neighbour") == ["pm1"] * 2
    assert others["ext"]["role"] == "sink"
    vm_links = {lk.b_ns[len(pre):]: lk for lk in p.links if lk.b_dev == "eth0" and lk.b_ns != pre + "ext"}
    assert vm_links["vm0"].a_ns == vm_links["vm1"].a_ns == pre + "pm0"
    assert all(vm_links[f"vm{i}"].a_ns == pre + f"pm{i - 1}" for i in (2, 3, 4, 5))
    assert {lk.rate_bps for lk in vm_links.values()} == {CAP_MBPS * 10**6}
    uplinks = [lk for lk in p.links if lk.b_dev == "up"]
    assert sorted(lk.b_ns[len(pre):] for lk in uplinks) == [f"pm{j}" for j in range(5)]
    assert {lk.rate_bps for lk in uplinks} == {NIC_MBPS * 10**6}
    # the machine's end of its uplink queues in the hypervisor queue (Linux's 1000 packets by default)
    up_fifo = [argv for ns, argv in p.tc if ns == pre + "pm0" and "up" in argv and "pfifo" in argv]
    assert up_fifo and up_fifo[0][-1] == "1000"


@pytest.mark.parametrize("extra,field", [("hypervisor_pps = 100000", "cloud.hypervisor_pps"),
                                         ('[[node_overrides]]\nnode = "pm0"\nforwarding_pps = 1000',
                                          "node_overrides")])
def test_a_set_forwarding_capacity_is_refused_by_the_box(tmp_path, extra, field):
    from fabriclab.runtime.cluster.plan import ClusterError

    text = CLOUD.replace("busy_machines = [1]", f"busy_machines = [1]\n{extra}") if field.startswith("cloud") \
        else f"{CLOUD}\n{extra}\n"
    f = tmp_path / "cloud.toml"
    f.write_text(text)
    with pytest.raises(ClusterError, match=rf"^{field}: .*kernel's own speed"):
        build_plan(Scenario.load(str(f)), "x")


reason = why_no_box()


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    if reason is not None:
        pytest.skip(reason)
    f = tmp_path_factory.mktemp("cloudbox") / "cloud.toml"
    f.write_text(CLOUD)
    fl("cluster", "down", "--name", NAME)
    r = fl("cluster", "up", str(f), "--name", NAME)
    assert r.returncode == 0, r.stderr
    yield json.loads(state_path(NAME).read_text())
    fl("cluster", "down", "--name", NAME)


def test_select_excludes_the_machine_mate_and_the_noisy_machine(box, tmp_path):
    r = fl("cluster", "select", "--name", NAME, "--vms", "4", "--out", str(tmp_path / "sel"))
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads((tmp_path / "sel" / "selection.json").read_text())
    kept = set(d["labels"])
    # From the placement: keep vm3, vm4, vm5 and one of vm0, vm1; never vm2 (beside the neighbours).
    assert {"vm3", "vm4", "vm5"} <= kept, r.stdout
    assert len(kept & {"vm0", "vm1"}) == 1, r.stdout
    assert "vm2" not in kept, r.stdout
    verdicts = {row["vm"]: row for row in d["table"]}
    assert verdicts["vm2"]["verdict"] == "rejected"
    assert "vm2" in r.stdout and "rejected" in r.stdout


def test_select_more_than_the_pool_is_refused(box, tmp_path):
    r = fl("cluster", "select", "--name", NAME, "--vms", "7", "--out", str(tmp_path / "sel"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--vms" in r.stderr and "pool holds 6" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "sel").exists()


def test_down_stops_the_neighbours_and_removes_every_namespace(box):
    pids = box["noise_pids"]
    assert len(pids) == 3  # the sink and two neighbours
    assert all(Path(f"/proc/{p}").exists() for p in pids)
    r = fl("cluster", "down", "--name", NAME)
    assert r.returncode == 0, r.stderr
    assert not any(Path(f"/proc/{p}/cmdline").exists() and b"cluster.noise" in Path(f"/proc/{p}/cmdline").read_bytes()
                   for p in pids)
    assert list_namespaces(f"flbox-{NAME}-") == []


def test_sender_side_splits_a_rounds_delays_into_uplink_and_downlink():
    import numpy as np
    from fabriclab.systems.clockwork.box_select import sender_side

    # hosts 2, 3 send into a queue of 50 ms, hosts 1, 4 receive behind one of 30 ms: pair (i, j) sees
    # u_i + d_j, except mates 0 and 1, whose path crosses neither (0.5 ms: an outlier to the sum)
    u = np.array([0, 0, 50, 50, 0, 0.0])
    d = np.array([0, 30, 0, 0, 30, 0.0])
    e = u[:, None] + d[None, :]
    np.fill_diagonal(e, np.nan)
    e[0, 1] = e[1, 0] = 0.5
    assert np.allclose(sender_side(e), u)
    e[2, 5] = np.nan  # an unmeasured pair changes nothing
    assert np.allclose(sender_side(e), u)


def test_load_rounds_cover_every_pair_and_split_disjoint_pairs():
    import itertools

    from fabriclab.systems.clockwork.box_select import load_rounds

    for n in (6, 8):
        _, to = load_rounds(n, seed=0)
        assert all(len(set(t.values())) == len(t) and all(a != b for a, b in t.items()) for t in to)
        # a pair sends out together: both send, neither to the other
        pat = {(a, b): tuple(a in t and b in t and t[a] != b and t[b] != a for t in to)
               for a, b in itertools.combinations(range(n), 2)}
        assert all(any(v) for v in pat.values())
        assert all(pat[a] != pat[b] for a, b in itertools.combinations(pat, 2) if not set(a) & set(b))

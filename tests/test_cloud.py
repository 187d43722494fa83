"""The public-cloud model (``[cloud]``, docs/clockwork.md): placement
invariants, the lowering onto nodes and links checked by hand, one
oscillator per machine read back from the probes' stamps, the tenant-only
probe mesh, the resolved scenario, and bad input (exit 2)."""

from collections import Counter

import pytest
from fabriclab.scenario.cloud import CloudConfig, machines, place
from fabriclab.scenario.model import Scenario, ScenarioError
from fabriclab.sim.pipeline import core_spec, simulate


def cloud(**kw) -> CloudConfig:
    return CloudConfig.model_validate(kw)


@pytest.mark.parametrize("seed", range(12))
def test_placement_invariants(seed):
    c = cloud(fabric={"kind": "fat_tree", "k": 4}, vms_per_host=3, tenant_vms=10, occupancy=0.6, busy_share=0.5)
    tenant, others, busy = place(c, seed)
    slots = {(m, s) for m in range(16) for s in range(3)}  # k = 4: k^3/4 = 16 machines, 3 slots each
    assert len(tenant) == 10 and len(set(tenant)) == 10  # every tenant VM placed, once
    assert set(tenant) <= slots and set(others) <= slots
    assert not set(tenant) & set(others)  # one VM a slot
    assert len(others) == round(0.6 * (48 - 10))
    per_machine = Counter(m for m, _ in tenant + others)
    assert max(per_machine.values()) <= 3  # no machine over its slots
    hosting = {m for m, _ in others}
    assert set(busy) <= hosting and len(busy) == round(0.5 * len(hosting))
    assert place(c, seed) == (tenant, others, busy)  # same seed, same placement
    assert place(c, seed + 1)[0] != tenant  # another seed, another (C(48, 10) placements)


def test_a_tenant_filling_the_cloud_takes_every_slot():
    c = cloud(fabric={"kind": "leaf_spine", "leaves": 1, "hosts_per_leaf": 2, "spines": 1}, vms_per_host=2,
              tenant_vms=4)
    assert machines(c) == 2
    assert place(c, 5)[0] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_two_machines_of_two_vms_lower_to_the_topology_by_hand():
    # One ToR (leaf0) under one spine; two machines, 2 slots each, all four VMs the tenant's.
    s = Scenario.from_dict({"cloud": {
        "fabric": {"kind": "leaf_spine", "leaves": 1, "hosts_per_leaf": 2, "spines": 1, "link_rate_bps": "10Gbps",
                   "link_delay_ps": "1us"},
        "vms_per_host": 2, "vm_egress_bps": "4Gbps", "vm_link_delay_ps": "100ns", "tenant_vms": 4,
        "hypervisor_queue": {"limit_packets": 300, "ecn_threshold_packets": "off"}}})
    t = s.build_topology()
    names = [n["name"] for n in t.nodes]
    assert [n["name"] for n in t.nodes if n["kind"] == "host"] == ["vm0", "vm1", "vm2", "vm3"]
    assert sorted(n["name"] for n in t.nodes if n["kind"] == "switch") == ["leaf0", "pm0", "pm1", "spine0"]
    links = {frozenset((names[lk["a"]], names[lk["b"]])): (lk["rate_bps"], lk["delay_ps"]) for lk in t.links}
    # The tenant fills every slot: slots in (machine, slot) order, so vm0, vm1 on pm0 and vm2, vm3 on pm1.
    want = {frozenset(("vm0", "pm0")): (4 * 10**9, 100_000), frozenset(("vm1", "pm0")): (4 * 10**9, 100_000),
            frozenset(("vm2", "pm1")): (4 * 10**9, 100_000), frozenset(("vm3", "pm1")): (4 * 10**9, 100_000),
            frozenset(("pm0", "leaf0")): (10**10, 10**6), frozenset(("pm1", "leaf0")): (10**10, 10**6),
            # the leaf's uplink: 2 machines x 10 Gbit/s over 1 spine, oversubscription 1
            frozenset(("leaf0", "spine0")): (2 * 10**10, 10**6)}
    assert links == want and len(t.links) == len(want)
    core = core_spec(s)
    hyp = {(names[o["from"]], names[o["to"]]): o["queue"]["limit_packets"] for o in core["queue_overrides"]}
    assert hyp == {("pm0", "leaf0"): 300, ("pm1", "leaf0"): 300}
    assert core["traffic"] == []  # no other tenants, no neighbours


def _small(**over) -> dict:
    raw = {"seed": 4, "stop_ps": "12ms",
           "cloud": {"fabric": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 2, "spines": 1,
                                "link_rate_bps": "10Gbps"},
                     "vms_per_host": 3, "vm_egress_bps": "4Gbps", "tenant_vms": 6, "occupancy": 0.5,
                     "busy_share": 1.0, "neighbour_load": 0.2},
           "clocks": {"wander_ppm": 0.0, "nic_sigma_ps": 0},
           "probes": {"peers": 3, "pair_every_ps": "1ms", "duration_ps": "10ms"},
           "outputs": {"flows": False, "links": False, "messages": False}}
    raw.update(over)
    return raw


def test_vms_of_one_machine_read_one_drift():
    res = simulate(Scenario.from_dict(_small()))
    cl = res.cloud.set_index("vm")
    clocks = res.clocks.set_index("host")
    tenant = cl[cl.tenant == "tenant"]
    assert list(tenant.host) == list(range(6)) and len(cl) == 6 + round(0.5 * (12 - 6))
    by_machine = tenant.groupby("machine").groups
    assert any(len(v) > 1 for v in by_machine.values()), "seed 4 puts two tenant VMs on one machine"
    # Every probe's send and receive stamp, by the model: reading = true time + offset + drift x true time
    # (no wander, no stamp noise), in ns rounded down, so within 1 ns of it.
    p = res.probes
    for col, host in (("tx", "src"), ("rx", "dst")):
        t_ps = p[f"true_{col}_ps"].to_numpy(float)
        off = clocks.offset_ps[p[host]].to_numpy(float)
        drift = clocks.drift_ppm[p[host]].to_numpy(float)
        err = p[f"{col}_ns"].to_numpy(float) * 1000 - (t_ps + off + drift * 1e-6 * t_ps)
        assert -1000 < err.min() and err.max() <= 0
    for members in by_machine.values():
        assert len({clocks.drift_ppm[v] for v in members}) == 1  # one oscillator per machine
    machines_drift = {clocks.drift_ppm[next(iter(m))] for m in by_machine.values()}
    assert len(machines_drift) == len(by_machine)  # different machines, different oscillators


def test_the_mesh_is_the_tenants_and_the_run_is_deterministic(tmp_path, cli):
    import pyarrow.parquet as pq
    import tomli_w
    from fabriclab.util.toml import tomllib

    path = tmp_path / "c.toml"
    path.write_text(tomli_w.dumps(_small()))
    for out in ("a", "b"):
        r = cli("run", str(path), "--out", str(tmp_path / out), "-q")
        assert r.returncode == 0, r.stderr
    for f in ("probes.parquet", "cloud.parquet", "clocks.parquet"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    p = pq.read_table(tmp_path / "a" / "probes.parquet").to_pydict()
    assert set(p["src"]) | set(p["dst"]) == {f"vm{i}" for i in range(6)}
    # The resolved scenario runs the same (its [cloud] without a [topology]).
    resolved = tmp_path / "a" / "scenario.resolved.toml"
    assert "topology" not in tomllib.loads(resolved.read_text())
    r = cli("run", str(resolved), "--out", str(tmp_path / "c"), "-q")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "a" / "probes.parquet").read_bytes() == (tmp_path / "c" / "probes.parquet").read_bytes()


def test_seed_given_on_the_command_line_equals_it_in_the_file(tmp_path, cli):
    """``run --seed`` copies the scenario with another seed; with [cloud] the copy
    must not carry a default [topology] (which [cloud] refuses)."""
    import tomli_w

    base = _small()
    (tmp_path / "c.toml").write_text(tomli_w.dumps(base))
    (tmp_path / "s7.toml").write_text(tomli_w.dumps({**base, "seed": 7}))
    r = cli("run", str(tmp_path / "c.toml"), "--seed", "7", "--out", str(tmp_path / "a"), "-q")
    assert r.returncode == 0, r.stderr
    r = cli("run", str(tmp_path / "s7.toml"), "--out", str(tmp_path / "b"), "-q")
    assert r.returncode == 0, r.stderr
    for f in ("probes.parquet", "cloud.parquet"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_noisy_neighbours_send_among_the_busy_machines_other_vms():
    s = Scenario.from_dict(_small())
    cl = s.build_cloud()
    (tr,) = s.all_traffic()
    busy = set(cl.busy)
    want = [i for i in range(len(cl.machine)) if not cl.tenant[i] and cl.machine[i] in busy]
    assert tr.hosts == want and tr.load == 0.2 and tr.tag == "neighbours"
    assert tr.duration_ps == 10 * 10**9  # as long as the probe mesh
    assert all(i >= 6 for i in tr.hosts)


@pytest.mark.parametrize("change,needles", [
    ({"cloud": {"fabric": {"kind": "leaf_spine", "leaves": 1, "hosts_per_leaf": 2, "spines": 1}, "vms_per_host": 2,
                "tenant_vms": 5}}, ["cloud.tenant_vms", "5 VMs asked", "4 VM slots"]),
    ({"cloud": {"vms_per_host": 0}}, ["cloud.vms_per_host", "greater than or equal to 1"]),
    ({"cloud": {"tenant_vms": 1}}, ["cloud.tenant_vms"]),
    ({"topology": {"kind": "star", "hosts": 4}}, ["topology", "[cloud] builds the topology"]),
    ({"clocks": {"groups": [["vm0", "vm1"]]}}, ["clocks.groups", "[cloud] fills the groups"]),
    ({"cloud": {"fabric": {"kind": "fat_tree", "k": 4, "host_ports": 2}}}, ["cloud.fabric.host_ports"]),
    ({"cloud": {"hypervisor_queue": {"limit_bytes": 100}}}, ["cloud.hypervisor_queue.limit_bytes"]),
    ({"probes": {"hosts": [0, 0, 1]}}, ["probes.hosts", "each host once"]),
])
def test_bad_input_exits_2_naming_the_field(tmp_path, cli, change, needles):
    import tomli_w

    raw = {"cloud": {}, "clocks": {}, "probes": {"peers": 1}}
    raw.update(change)
    path = tmp_path / "bad.toml"
    path.write_text(tomli_w.dumps(raw))
    r = cli("validate", str(path))
    assert r.returncode == 2, r.stdout + r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)
    assert "Traceback" not in r.stderr


def test_probe_hosts_out_of_the_topology_are_refused():
    raw = _small(probes={"peers": 1, "hosts": [0, 99]})
    with pytest.raises(ScenarioError, match="probes.hosts: host index 99"):
        core_spec(Scenario.from_dict(raw))


def test_vms_of_one_machine_share_its_nic():
    # vm0 and vm1 on pm0, vm2 and vm3 on pm1 (the 2 x 2 cloud above); VMs capped at 8 Gbit/s, NICs 10 Gbit/s.
    # Alone, a 10 MB flow vm0 -> vm2 runs at its VM's cap: at least 10 MB x 8 / 8 Gbit/s = 10 ms. With vm1 -> vm3
    # beside it, both cross pm0's NIC: together at most 10 Gbit/s, so the later ends after 20 MB x 8 / 10 Gbit/s
    # = 16 ms; were the NIC not shared they would each end near 10 ms.
    def run(flows):
        s = Scenario.from_dict({"cloud": {
            "fabric": {"kind": "leaf_spine", "leaves": 1, "hosts_per_leaf": 2, "spines": 1, "link_rate_bps": "10Gbps",
                       "link_delay_ps": "1us"},
            "vms_per_host": 2, "vm_egress_bps": "8Gbps", "vm_link_delay_ps": "100ns", "tenant_vms": 4},
            "flows": [{"src": a, "dst": b, "size_bytes": "10MB"} for a, b in flows],
            "outputs": {"messages": False}})
        return simulate(s).flows.end_ps.max() / 1e9

    alone = run([(0, 2)])
    both = run([(0, 2), (1, 3)])
    assert 10.0 < alone < 11.5
    assert both > 16.0 and both < 18.5

"""The hypervisor's CPU (``[cloud] hypervisor_pps``, ``[[node_overrides]]``;
docs/scenario.md): lowered onto every machine node and nowhere else, a
CPU-bound flow's time against the closed form (each machine serves every
data frame and every ACK of the flow once), the same run twice gives the
same bytes, and bad input exits 2 naming the field."""

import pytest
from fabriclab.scenario.base import ScenarioError
from fabriclab.scenario.model import Scenario
from fabriclab.sim.pipeline import core_spec, simulate

SEG = 1460


def _two_by_two(**cloud) -> dict:
    # One ToR under one spine; two machines of 2 slots, all four VMs the tenant's: vm0, vm1 on pm0, vm2, vm3 on pm1.
    return {"cloud": {"fabric": {"kind": "leaf_spine", "leaves": 1, "hosts_per_leaf": 2, "spines": 1,
                                 "link_rate_bps": "10Gbps", "link_delay_ps": "1us"},
                      "vms_per_host": 2, "vm_egress_bps": "8Gbps", "vm_link_delay_ps": "100ns", "tenant_vms": 4,
                      **cloud}}


def test_lowered_onto_every_machine_node_and_nowhere_else():
    raw = {"seed": 3, "cloud": {"fabric": {"kind": "fat_tree", "k": 4}, "vms_per_host": 3, "tenant_vms": 10,
                                "occupancy": 0.6, "hypervisor_pps": 250_000, "hypervisor_backlog_packets": 64},
           "node_overrides": [{"node": "pm3", "forwarding_pps": 1000}]}
    s = Scenario.from_dict(raw)
    names = [n["name"] for n in s.build_topology().nodes]
    got = core_spec(s)["node_overrides"]
    # k = 4: k^3 / 4 = 16 machines, pm0..pm15, each once with the cloud's figures, in machine order ...
    assert [names[o["node"]] for o in got[:16]] == [f"pm{j}" for j in range(16)]
    assert all((o["forwarding_pps"], o["forwarding_queue_packets"]) == (250_000, 64) for o in got[:16])
    # ... then the scenario's own entry, which the core applies last (it wins for pm3).
    assert [(names[o["node"]], o["forwarding_pps"], o["forwarding_queue_packets"]) for o in got[16:]] == [
        ("pm3", 1000, 1000)]
    raw["cloud"].pop("hypervisor_pps")
    raw["cloud"].pop("hypervisor_backlog_packets")
    raw.pop("node_overrides")
    assert core_spec(Scenario.from_dict(raw))["node_overrides"] == []


def _run(flows, pps=None):
    extra = {} if pps is None else {"hypervisor_pps": pps}
    s = Scenario.from_dict({**_two_by_two(**extra), "flows": [{"src": a, "dst": b, "size_bytes": "1MB"}
                                                              for a, b in flows],
                            "outputs": {"messages": False}})
    return simulate(s)


def test_a_cpu_bound_flow_takes_two_services_per_frame_at_each_machine():
    # 1 MB is 685 segments; pm0 serves each data frame (vm0 -> vm2) and each ACK on its way back, and so does
    # pm1: 2 x 685 services of 1 / 100,000 s at each (no drop: the 1000-packet backlog holds a whole flow), so the
    # run's last event (the last ACK's arrival) comes 13.7 ms after the start at the earliest, and the flow's end
    # (its last data frame) after 685 services, 6.85 ms. Without a CPU the flow runs near its VM's 8 Gbit/s
    # (about 1 ms). Two such flows through the same two machines (vm0 -> vm2 and vm1 -> vm3): 4 x 685 services
    # at each, 27.4 ms.
    frames, pps = -(-10**6 // SEG), 100_000
    for flows in ([(0, 2)], [(0, 2), (1, 3)]):
        r = _run(flows, pps)
        services = 2 * frames * len(flows)
        fwd = r.summary["node_forwarding"]
        # Run to the end: nothing is left in either machine.
        assert {m: (f["forwarded_packets"], f["dropped_packets"], f["held_packets"]) for m, f in fwd.items()} == {
            "pm0": (services, 0, 0), "pm1": (services, 0, 0)}
        bound_ms = services / pps * 1e3
        assert bound_ms < r.summary["sim_time_ps"] / 1e9 < 1.2 * bound_ms
        assert r.flows.end_ps.max() / 1e9 > frames * len(flows) / pps * 1e3
    assert _run([(0, 2)]).flows.end_ps.max() / 1e9 < 2.0


def test_same_scenario_same_bytes():
    raw = {**_two_by_two(hypervisor_pps=200_000, hypervisor_backlog_packets=50),
           "flows": [{"src": 0, "dst": 2, "size_bytes": "300KB"}, {"src": 1, "dst": 3, "size_bytes": "300KB"},
                     {"src": 3, "dst": 0, "size_bytes": "200KB"}]}
    a, b = simulate(Scenario.from_dict(raw)), simulate(Scenario.from_dict(raw))
    assert a.flows_parquet == b.flows_parquet and a.links_parquet == b.links_parquet
    fwd = a.summary["node_forwarding"]
    assert set(fwd) == {"pm0", "pm1"}
    assert fwd["pm0"]["dropped_packets"] > 0  # 50 packets of backlog overflow under three flows
    assert a.summary["links"]["drops"] >= fwd["pm0"]["dropped_packets"] + fwd["pm1"]["dropped_packets"]


def _bad(change) -> dict:
    change = dict(change)
    raw = _two_by_two()
    raw["cloud"].update(change.pop("cloud", {}))
    raw.update(change)
    return raw


_PFC = {"classes": [1]}
_BAD = [
    ({"cloud": {"hypervisor_pps": 0}}, ["cloud.hypervisor_pps", "greater than 0"]),
    ({"cloud": {"hypervisor_pps": -5}}, ["cloud.hypervisor_pps"]),
    ({"cloud": {"hypervisor_pps": 10**5, "hypervisor_backlog_packets": 0}}, ["cloud.hypervisor_backlog_packets"]),
    # A backlog with no CPU to queue for does nothing: refused, not ignored.
    ({"cloud": {"hypervisor_backlog_packets": 5}}, ["hypervisor_backlog_packets", "hypervisor_pps"]),
    ({"backend": "flow", "cloud": {"hypervisor_pps": 10**5}}, ["cloud.hypervisor_pps", 'backend = "packet"']),
    ({"node_overrides": [{"node": "pm0", "forwarding_pps": 0}]}, ["node_overrides[0].forwarding_pps"]),
    ({"node_overrides": [{"node": "pm0", "forwarding_pps": 10, "forwarding_queue_packets": 0}]},
     ["node_overrides[0].forwarding_queue_packets"]),
    ({"node_overrides": [{"node": "pm0"}]}, ["node_overrides[0].forwarding_pps"]),
    ({"backend": "flow", "node_overrides": [{"node": "pm0", "forwarding_pps": 10}]},
     ["node_overrides[0].forwarding_pps", 'backend = "packet"']),
    ({"node_overrides": [{"node": "vm0", "forwarding_pps": 10}]}, ["node_overrides[0].node", "is a host"]),
    ({"node_overrides": [{"node": "nowhere", "forwarding_pps": 10}]}, ["node_overrides[0].node", "unknown node"]),
    # With the cloud's CPU lowered onto pm0, pm1 first, the user's entries keep their own index.
    ({"cloud": {"hypervisor_pps": 10**5}, "node_overrides": [{"node": "pm0", "forwarding_pps": 10},
                                                             {"node": "vm0", "forwarding_pps": 10}]},
     ["node_overrides[1].node", "is a host"]),
    ({"cloud": {"hypervisor_pps": 10**5}, "node_overrides": [{"node": "nowhere", "forwarding_pps": 10}]},
     ["node_overrides[0].node", "unknown node"]),
    # The same for queue_overrides after the cloud's hypervisor queues.
    ({"queue_overrides": [{"node": "nowhere", "limit_packets": 10}]}, ["queue_overrides[0].node", "unknown node"]),
    # A CPU's drop-tail backlog is outside PFC: lossless classes would lose packets there.
    ({"pfc": _PFC, "node_overrides": [{"node": "pm0", "forwarding_pps": 10}]},
     ["node_overrides:", "[pfc]", "not lossless"]),
    ({"pfc": _PFC, "cloud": {"hypervisor_pps": 10**5}}, ["cloud.hypervisor_pps", "[pfc]", "not lossless"]),
]


@pytest.mark.parametrize("change,needles", _BAD)
def test_bad_input_is_refused_naming_the_field(change, needles):
    with pytest.raises(ScenarioError) as e:
        core_spec(Scenario.from_dict(_bad(change)))
    for n in needles:
        assert n in str(e.value), (n, str(e.value))


@pytest.mark.parametrize("k", [0, 9])  # one refused by the schema, one by the built topology
def test_bad_input_exits_2_without_traceback(tmp_path, cli, k):
    import tomli_w

    change, needles = _BAD[k]
    path = tmp_path / "bad.toml"
    path.write_text(tomli_w.dumps(_bad(change)))
    r = cli("validate", str(path))
    assert r.returncode == 2, r.stdout + r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)
    assert "Traceback" not in r.stderr

"""Topology builders: counts from the published constructions, routes of the
expected length, files, drawing, and the example scenarios."""

import subprocess
from pathlib import Path

import pytest

from fabriclab import Scenario, simulate
from fabriclab.scenario import topology as topo

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("k", [4, 8, 16])
def test_fat_tree_counts(k):
    t = topo.fat_tree(k, 10**10, 10**6)
    hosts = len(t.hosts)
    switches = len(t.nodes) - hosts
    assert hosts == k**3 // 4  # k = 16: 1024 hosts
    assert switches == k * k + (k // 2) ** 2  # k pods of k switches, (k/2)^2 cores
    assert len(t.links) == 3 * k**3 // 4  # host, edge-agg and agg-core layers each have k^3/4 links
    deg = {}
    for lk in t.links:
        for v in (lk["a"], lk["b"]):
            deg[v] = deg.get(v, 0) + 1
    assert all(deg[v] == k for v in range(hosts, len(t.nodes)))  # every switch has k ports


def test_leaf_spine_oversubscription_sets_uplink_rate():
    t = topo.leaf_spine(4, 8, 2, 25 * 10**9, 10**6, oversubscription=2.0)
    up = {lk["rate_bps"] for lk in t.links if t.nodes[lk["a"]]["kind"] == "switch"}
    assert up == {8 * 25 * 10**9 // (2 * 2)}  # 8 hosts x 25G down = 2 x uplink capacity


def test_inter_pod_route_on_k16_fat_tree_has_six_hops():
    size, r, d = 1_000_000, 10**10, 10**6
    s = Scenario.from_dict({
        "topology": {"kind": "fat_tree", "k": 16, "link_rate_bps": r, "link_delay_ps": d},
        "backend": "flow", "flow_model": "fluid",  # the hand model: max-min rates alone
        "flows": [{"src": 0, "dst": 1023, "size_bytes": size}, {"src": 2, "dst": 3, "size_bytes": size}],
    })
    f = simulate(s).flows.sort_values("flow_id")
    full, rest = divmod(size, 1460)
    wire = full * 1538 + rest + 78
    # Store and forward: each hop after the first adds a full packet's time
    # (the short last packet waits for the full one ahead of it).
    full_pkt = 1538 * 8 / r * 1e12
    ser = wire * 8 / r * 1e12
    # Inter-pod: host-edge-agg-core-agg-edge-host = 6 links; same edge: 2 links.
    assert f["ideal_fct_ps"].iloc[0] == pytest.approx(ser + 5 * full_pkt + 6 * d, abs=8)
    assert f["ideal_fct_ps"].iloc[1] == pytest.approx(ser + 1 * full_pkt + 2 * d, abs=8)
    # Alone on the fabric the flow backend achieves the train time plus delays.
    assert f["fct_ps"].iloc[0] == pytest.approx(ser + 6 * d, abs=2)


def test_topology_file_and_drawing(tmp_path, cli):
    (tmp_path / "t.toml").write_text(
        'nodes = [{name = "a", kind = "host"}, {name = "b", kind = "host"}, {name = "sw", kind = "switch"}]\n'
        'links = [{a = "a", b = "sw", rate_bps = "1Gbps", delay_ps = "2us"},\n'
        '         {a = "sw", b = "b", rate_bps = "1Gbps", delay_ps = "2us"}]\n'
    )
    (tmp_path / "s.toml").write_text(
        '[topology]\nkind = "file"\npath = "t.toml"\n[[flows]]\nsrc = 0\ndst = 1\nsize_bytes = 1460\n'
    )
    s = Scenario.load(tmp_path / "s.toml")
    f = simulate(s).flows
    # One full segment: two serializations of 1538 bytes at 1 Gbit/s plus two 2 us links.
    assert f["fct_ps"].iloc[0] == 2 * 1538 * 8 * 1000 + 2 * 2_000_000
    png = tmp_path / "t.png"
    r = cli("topo", "show", str(tmp_path / "s.toml"), "--out", str(png))
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.toml")))
def test_examples_validate(cli, name):
    r = cli("validate", str(EXAMPLES / name))
    assert r.returncode == 0, r.stderr


def test_incast_example_runs_from_csv_flows():
    r = simulate(Scenario.load(EXAMPLES / "incast.toml"))
    f = r.flows
    assert len(f) == 8 and f["fct_ps"].notna().all()
    # Eight 256 KB answers cannot beat the receiver's link: 2.048 MB of payload at 10 Gbit/s.
    assert f["end_ps"].max() >= 8 * 256_000 * 8 / 10**10 * 1e12


def test_explicit_path_is_followed():
    s = Scenario.load(EXAMPLES / "leaf_spine_priority.toml").replace(traffic=[])
    r = simulate(s)
    links = r.links.set_index(["src_node", "dst_node"])
    assert links.loc[("leaf0", "spine1"), "bytes"] > 8_000_000
    assert links.loc[("leaf0", "spine0"), "bytes"] == 0
    assert links.loc[("spine1", "leaf3"), "bytes"] > 8_000_000


def test_core_rejects_malformed_spec_with_value_error():
    import fabriclab._core as core

    with pytest.raises(ValueError, match="scenario"):
        core.Simulator("{not json")
    with pytest.raises(ValueError, match="missing field"):
        core.Simulator('{"seed": 1}')

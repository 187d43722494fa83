"""PANAMA in the simulator (issue 11): the controller's trees, a job's
aggregation through the scenario layer, losslessness with PFC, round-robin
spraying and the quick reproductions of figures 9 and 10. Expected values
are counted by hand from the topology and the message sizes."""

from __future__ import annotations

import json
import math

import pytest

from fabriclab import simulate
from fabriclab.sim.apps.aggregation import build_tree, top_tier
from fabriclab.scenario.model import Scenario
from fabriclab.sim.pipeline import core_spec
from conftest import assert_quick_bands

VECTOR = 1456
WIRE = VECTOR + 16 + 66  # header, then UDP/IPv4/Ethernet with preamble and gap


def fat_tree4():
    return Scenario.from_dict({"topology": {"kind": "fat_tree", "k": 4}}).build_topology()


def test_fat_tree_gets_one_tree_per_core_through_one_aggregation_switch_per_pod():
    t = fat_tree4()
    names = [n["name"] for n in t.nodes]
    assert [names[s] for s in top_tier(t)] == ["core0", "core1", "core2", "core3"]
    workers = list(range(0, 16, 2))  # one per edge switch
    for c in range(4):
        root = names.index(f"core{c}")
        tree = {names[s["node"]]: s for s in build_tree(t, workers, root, "w")}
        # In a k = 4 fat-tree core c links to agg<p>_<c // 2> of every pod p.
        aggs = {f"agg{p}_{c // 2}" for p in range(4)}
        edges = {f"edge{p}_{e}" for p in range(4) for e in range(2)}
        assert set(tree) == {f"core{c}"} | aggs | edges
        assert tree[f"core{c}"]["parent"] is None
        assert sorted((names[ch], w) for ch, w in tree[f"core{c}"]["children"]) == [(a, 2) for a in sorted(aggs)]
        for p in range(4):
            agg = tree[f"agg{p}_{c // 2}"]
            assert names[agg["parent"]] == f"core{c}"
            assert sorted((names[ch], w) for ch, w in agg["children"]) == [(f"edge{p}_0", 1), (f"edge{p}_1", 1)]
            for e in range(2):
                edge = tree[f"edge{p}_{e}"]
                assert names[edge["parent"]] == f"agg{p}_{c // 2}"
                assert [(names[ch], w) for ch, w in edge["children"]] == [(f"h{4 * p + 2 * e}", 1)]


def roots_for(raw_topology, workers, trees="all"):
    s = Scenario.from_dict({"topology": raw_topology, "jobs": [
        {"workers": workers, "layers": 1, "model_bytes": "10KB", "compute_ps": "1us", "allreduce": "panama",
         "aggregation": {"trees": trees}}]})
    t = s.build_topology()
    core = core_spec(s, t)
    names = [n["name"] for n in t.nodes]
    return [[names[sw["node"]] for sw in tr["switches"] if sw["parent"] is None][0]
            for tr in core["aggregation"]["jobs"][0]["trees"]]


def test_default_trees_are_rooted_at_the_switches_nearest_to_all_workers():
    leaf_spine = {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 4, "spines": 2}
    fat_tree = {"kind": "fat_tree", "k": 4}
    assert roots_for(leaf_spine, [0, 1, 2]) == ["leaf0"]  # one rack: its ToR (section 3)
    assert roots_for(leaf_spine, [0, 4]) == ["spine0", "spine1"]
    assert roots_for(fat_tree, [0, 2]) == ["agg0_0", "agg0_1"]  # one pod: its aggregation switches
    assert roots_for(fat_tree, [0, 1]) == ["edge0_0"]
    assert roots_for(fat_tree, [0, 4]) == ["core0", "core1", "core2", "core3"]
    assert roots_for(fat_tree, [0, 4], trees=2) == ["core0", "core1"]


def test_a_multi_homed_worker_hangs_under_the_switch_of_its_first_port(tmp_path):
    # h0's first link goes to y, its second to x; the tree rooted at x must
    # take h0 through y (the core sends a worker's packets on its first port).
    topo = tmp_path / "t.toml"
    topo.write_text(
        'nodes = [{name = "h0", kind = "host"}, {name = "h1", kind = "host"}, {name = "x", kind = "switch"},\n'
        '         {name = "y", kind = "switch"}]\n'
        'links = [{a = "h0", b = "y", rate_bps = "10Gbps", delay_ps = "1us"},\n'
        '         {a = "h0", b = "x", rate_bps = "10Gbps", delay_ps = "1us"},\n'
        '         {a = "h1", b = "x", rate_bps = "10Gbps", delay_ps = "1us"},\n'
        '         {a = "x", b = "y", rate_bps = "10Gbps", delay_ps = "1us"}]\n')
    s = Scenario.from_dict({"topology": {"kind": "file", "path": str(topo)}, "jobs": [
        {"workers": [0, 1], "layers": 1, "model_bytes": "100KB", "compute_ps": "1us", "allreduce": "panama",
         "iterations": 1,
         "aggregation": {"trees": ["x"]}}]})
    t = s.build_topology()
    names = [n["name"] for n in t.nodes]
    tree = {names[sw["node"]]: sw for sw in core_spec(s, t)["aggregation"]["jobs"][0]["trees"][0]["switches"]}
    assert [(names[c], w) for c, w in tree["y"]["children"]] == [("h0", 1)]
    assert names[tree["y"]["parent"]] == "x"
    r = simulate(s)
    assert list(r.aggregation.results) == [math.ceil(1e5 / VECTOR)] * 2


def test_workers_under_one_leaf_use_only_that_leaf_when_it_is_the_root():
    t = Scenario.from_dict({"topology": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 4,
                                         "spines": 2}}).build_topology()
    names = [n["name"] for n in t.nodes]
    tree = build_tree(t, [0, 1, 2], names.index("leaf0"), "w")
    assert [(names[s["node"]], s["parent"], [(names[c], w) for c, w in s["children"]]) for s in tree] == [
        ("leaf0", None, [("h0", 1), ("h1", 1), ("h2", 1)])]


def leaf_spine_job(allreduce="panama", model="4MB", trees="all", iterations=1, extra=None, aggregation=None,
                   pfc=True, spine_rate="10Gbps", queue=None):
    raw = {
        "name": "agg", "backend": "packet",
        "topology": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 4, "spines": 2,
                     "link_rate_bps": "10Gbps", "spine_link_rate_bps": spine_rate},
        "queue": queue or {"discipline": "fifo", "ecn_threshold_packets": 85},
        "transport": {"cc": "dctcp"},
        "jobs": [{"name": "j", "workers": list(range(8)), "allreduce": allreduce, "class": 3, "layers": 1,
                  "model_bytes": model, "fusion_bytes": model, "compute_ps": "1us", "iterations": iterations,
                  "aggregation": {"trees": trees, **(extra or {})}}],
    }
    if pfc:
        raw["pfc"] = {"classes": [3]}
    if aggregation:
        raw["aggregation"] = aggregation
    return Scenario.from_dict(raw)


def test_a_job_aggregates_every_packet_once_and_sprays_the_trees_evenly():
    model = 4 * 10**6
    r = simulate(leaf_spine_job(model=model, iterations=2))
    packets = math.ceil(model / VECTOR)  # 2748 packets per worker per iteration
    w = r.aggregation
    assert list(w.packets_sent) == [2 * packets] * 8
    assert list(w.results) == [2 * packets] * 8
    assert int(w.given_up.sum() + w.skipped.sum()) == 0
    assert r.summary["aggregation"]["messages"] == 16
    # Spraying: packet k goes to tree k mod 2 (spine0, spine1): 1374 each per
    # iteration, on every leaf -> spine link up and spine -> leaf link down.
    links = r.links.set_index(["src_node", "dst_node"])
    last = model - (packets - 1) * VECTOR  # the last packet's (short) vector
    per_tree = {0: packets // 2 + packets % 2, 1: packets // 2}
    for s in (0, 1):
        n = per_tree[s]
        # Tree s carries packets s, s + 2, ...: the short last one goes to tree (packets - 1) % 2.
        bytes_ = n * WIRE - (VECTOR - last if (packets - 1) % 2 == s else 0)
        for leaf in ("leaf0", "leaf1"):
            assert links.loc[(leaf, f"spine{s}"), "packets"] == 2 * n
            assert links.loc[(leaf, f"spine{s}"), "bytes"] == 2 * bytes_
            assert links.loc[(f"spine{s}", leaf), "packets"] == 2 * n
    ups = [links.loc[("leaf0", f"spine{s}"), "bytes"] for s in (0, 1)]
    assert abs(ups[0] - ups[1]) <= 2 * WIRE  # at most one packet per iteration apart
    acc = r.accelerators
    assert set(acc.node) <= {"leaf0", "leaf1", "spine0", "spine1"}


def lossless_case(pfc: bool, control: str, straggler: bool = False):
    """8 workers on two leaves, one tree (spine0), spine links at a quarter
    of the rate: each leaf's aggregated stream (10 Gbit/s) queues at its
    uplink, whose queue holds 20 packets; accelerators of 256 packets let
    windows (their cwnd_cap: 64 per worker) outgrow that queue.
    ``straggler``: a TCP flow shares h3's NIC, so leaf0's accelerator holds
    the other workers' packets until h3's arrive; its buffer holds 16
    packets (cwnd_cap 4 per worker)."""
    queue = {"discipline": "fifo", "ecn_threshold_packets": 10, "limit_packets": 20}
    extra = {"window_packets": 256, "window_cap": False} if control == "switchml" else {}
    memory = memory_packets(straggler) * (VECTOR + 16)
    s = leaf_spine_job(allreduce=control, model="2MB", trees=1, extra=extra, pfc=pfc, spine_rate="2.5Gbps",
                       queue=queue, aggregation={"memory_bytes": memory, "timeout_ps": "2ms"})
    if straggler:
        d = s.model_dump(by_alias=True, exclude_none=True)
        d["flows"] = [{"src": 3, "dst": 7, "size_bytes": "20MB", "class": 0}]
        d["jobs"][0]["end_run"] = True
        s = Scenario.from_dict(d)
    return s


def memory_packets(straggler: bool) -> int:
    return 16 if straggler else 256


def agg_counts(r):
    logic = r.summary["switch_logic"]
    return (sum(c["agg_overflow"] for c in logic.values()), max(c["agg_peak_bytes"] for c in logic.values()))


@pytest.mark.parametrize("straggler", [False, True])
def test_with_pfc_and_panama_nothing_is_lost_and_the_buffer_stays_bounded(straggler):
    r = simulate(lossless_case(pfc=True, control="panama", straggler=straggler))
    w = r.aggregation
    packets = math.ceil(2 * 10**6 / VECTOR)
    assert list(w.results) == [packets] * 8
    assert int(w.given_up.sum() + w.skipped.sum()) == 0
    overflow, peak = agg_counts(r)
    # cwnd_cap: no accelerator ever held more than its buffer, and none dropped.
    assert overflow == 0 and peak <= memory_packets(straggler) * (VECTOR + 16)
    if straggler:
        assert peak >= 4 * (VECTOR + 16), "leaf0 did hold the fast workers' packets"
    else:
        assert r.summary["links"]["drops"] == 0  # the 20-packet queues dropped nothing


def test_without_pfc_the_uplink_queues_drop_aggregation_packets_and_the_workers_see_it():
    r = simulate(lossless_case(pfc=False, control="panama"))
    w = r.aggregation
    packets = math.ceil(2 * 10**6 / VECTOR)
    assert r.summary["links"]["drops"] > 0 and agg_counts(r)[0] == 0
    lost = w.given_up + w.skipped
    assert lost.sum() > 0
    assert ((w.results + lost) == packets).all(), "every VID has a result or is counted lost"


def test_without_a_window_cap_a_straggler_overflows_the_accelerator():
    r = simulate(lossless_case(pfc=True, control="switchml", straggler=True))
    w = r.aggregation
    packets = math.ceil(2 * 10**6 / VECTOR)
    assert agg_counts(r)[0] > 0
    lost = w.given_up + w.skipped
    assert (lost > 0).all()
    assert ((w.results + lost) == packets).all()


def test_panama_fig10_quick_shares_with_control_and_starves_without(cli, tmp_path):
    r = cli("reproduce", "panama-fig10", "--quick", "--out", str(tmp_path / "f10"))
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "f10" / "summary.json").read_text())
    assert_quick_bands("panama-fig10", s)
    assert s["panama"]["tcp_alone_gbps"] > 9.5  # the TCP flow alone fills the 10 Gbit/s bottleneck
    assert s["panama"]["jain_shared"] >= 0.95
    assert s["none"]["tcp_shared_gbps"] < 0.15 * s["none"]["aggregation_shared_gbps"]
    for k in ("panama", "none"):
        # Both flows together keep the bottleneck busy (wire bytes).
        assert 9.5 < s[k]["tcp_shared_gbps"] + s[k]["aggregation_shared_gbps"] <= 10.0 + 1e-6
        assert s[k]["drops"] == 0
    assert (tmp_path / "f10" / "fig10_fairness.png").stat().st_size > 0


def test_panama_fig9_quick_all_trees_beat_single_trees_and_the_ring(cli, tmp_path):
    r = cli("reproduce", "panama-fig9", "--quick", "--out", str(tmp_path / "f9"))
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "f9" / "summary.json").read_text())
    assert_quick_bands("panama-fig9", s)
    lat = s["aggregation_latency_ms"]
    # Alone on the fabric every tree moves 8 MB at line rate: 8e6 / 1456
    # packets of 1538 wire bytes at 10 Gbit/s (6.76 ms), plus the tree's
    # store-and-forward and delays (under 0.1 ms).
    alone = math.ceil(8e6 / VECTOR) * WIRE * 8 / 10e9 * 1e3
    for c in ("PANAMA", "PANAMA-Agg1", "PANAMA-Agg4"):
        assert alone <= lat["0"][c] <= alone + 0.1
    assert s["panama_best_everywhere"]
    assert s["worst_single_tree_over_ring"]["8"] > 1.0


def test_functional_mode_results_are_numpys_sums_in_the_trees_order():
    import numpy as np

    from fabriclab._core import agg_worker_values

    # 8 workers, two trees (spines); leaves sum their 4 workers in port
    # order, each spine the two leaves' sums. 3 packets per worker: 1456,
    # 1456 and 88 bytes (a short last one).
    model = 2 * VECTOR + 88
    s = leaf_spine_job(model=model, aggregation={"functional": True})
    r = simulate(s)
    v = r.aggregation_values
    assert len(v) == 8 * model // 4
    seed = s.seed
    for k, count in enumerate((VECTOR // 4, VECTOR // 4, 22)):
        w = [np.frombuffer(agg_worker_values(seed, 0, h, 0, k, count), np.float32) for h in range(8)]
        leaf0 = ((w[0] + w[1]) + w[2]) + w[3]
        leaf1 = ((w[4] + w[5]) + w[6]) + w[7]
        expected = leaf0 + leaf1
        for host in range(8):
            got = v[(v.host == f"h{host}") & (v.packet == k)].sort_values("index").value.to_numpy(np.float32)
            assert got.tobytes() == expected.tobytes(), (host, k)


def test_the_example_validates(cli):
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "panama_fattree.toml"
    r = cli("validate", str(example))
    assert r.returncode == 0, r.stderr


def test_class_bytes_add_up_to_each_links_bytes():
    # classes.parquet: per port, the last sample's bytes summed over classes
    # are every frame the port sent but PAUSE frames (84 wire bytes each).
    s = leaf_spine_job(model="1MB").replace(outputs={"queues_every_ps": 10_000_000},
                                            flows=[{"src": 3, "dst": 7, "size_bytes": "2MB", "class": 0}])
    r = simulate(s)
    c = r.classes.groupby(["link_id", "class"]).tx_bytes.max().groupby("link_id").sum()
    links = r.links.set_index("link_id")
    for link, total in c.items():
        assert total == links.loc[link, "bytes"] - 84 * links.loc[link, "pause_frames_sent"], link
    assert set(r.classes["class"]) == {0, 3}


def test_partial_sync_leaves_a_straggler_behind_and_it_skips_what_is_done():
    # A star of 10 hosts, 9 workers; a TCP flow shares h8's NIC, so h8 sends
    # its contributions at about half the rate. PANAMA waits for it: about
    # twice the line-rate time. PANAMA-0.88 aggregates once 8 of 9 workers
    # contributed (ceil(0.88 x 9) = 8): line rate, and h8 takes the results
    # of the VIDs done without it instead of sending them.
    line_rate_ms = math.ceil(4e6 / VECTOR) * WIRE * 8 / 10e9 * 1e3  # 3.38 ms
    times = {}
    for ar in ("panama", "panama-0.88"):
        r = simulate(Scenario.from_dict({
            "backend": "packet", "topology": {"kind": "star", "hosts": 10, "link_rate_bps": "10Gbps"},
            "queue": {"discipline": "fifo", "ecn_threshold_packets": 85, "limit_bytes": "8MB"},
            "transport": {"cc": "dctcp"}, "flows": [{"src": 8, "dst": 9, "size_bytes": "200MB", "class": 0}],
            "jobs": [{"name": "j", "workers": list(range(9)), "allreduce": ar, "class": 3, "layers": 1,
                      "model_bytes": "4MB", "compute_ps": "1us", "iterations": 2, "end_run": True}]}))
        times[ar] = [t / 1e9 for t in r.summary["jobs"]["j"]["iteration_times_ps"]]
        w = r.aggregation
        assert int(w.given_up.sum() + w.skipped.sum()) == 0, ar
        if ar == "panama-0.88":
            assert w.set_index("host").packets_sent["h8"] < 0.9 * w.set_index("host").packets_sent["h0"]
    for t in times["panama-0.88"]:
        assert line_rate_ms <= t <= line_rate_ms * 1.1
    for t in times["panama"]:
        assert t >= 1.6 * line_rate_ms


@pytest.mark.parametrize("backend", ["packet", "flow"])
def test_workers_are_host_indices_whatever_the_node_order(tmp_path, backend):
    # A file topology listing the switch first: host i is node i + 1.
    topo = tmp_path / "t.toml"
    topo.write_text(
        'nodes = [{name = "sw", kind = "switch"}, {name = "h0", kind = "host"}, {name = "h1", kind = "host"},\n'
        '         {name = "h2", kind = "host"}]\n'
        'links = [{a = "h0", b = "sw", rate_bps = "10Gbps", delay_ps = "1us"},\n'
        '         {a = "h1", b = "sw", rate_bps = "10Gbps", delay_ps = "1us"},\n'
        '         {a = "h2", b = "sw", rate_bps = "10Gbps", delay_ps = "1us"}]\n')
    r = simulate(Scenario.from_dict({"backend": backend, "topology": {"kind": "file", "path": str(topo)}, "jobs": [
        {"workers": [0, 2], "layers": 1, "model_bytes": "100KB", "compute_ps": "1us", "allreduce": "panama",
         "iterations": 1}]}))
    w = r.aggregation.set_index("host")
    assert sorted(w.index) == ["h0", "h2"]
    assert list(w.results) == [math.ceil(1e5 / VECTOR)] * 2


def test_panama_fig8_quick_runs_every_configuration(cli, tmp_path):
    r = cli("reproduce", "panama-fig8", "--quick", "--out", str(tmp_path / "f8"))
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "f8" / "summary.json").read_text())
    assert_quick_bands("panama-fig8", s)
    m = {key.split(" ", 1)[1]: v for key, v in s["metrics"].items()}
    assert set(m) == {"Ideal", "Ring-AllReduce", "SwitchML*", "PANAMA", "PANAMA-0.88", "PANAMA-0.94"}
    for c, v in m.items():
        assert v["jobs"] >= 1 and v["jobs_finished"] == v["jobs"], c
        assert v["short_unfinished"] == 0, c
    # A ring moves 2(n - 1)/n of the model per worker, aggregation the model once.
    assert s["at load 0.50"]["job_time_ring_over_panama"] > 1.2
    # The dedicated clusters are the best case for the jobs.
    assert m["Ideal"]["job_time_ms"] <= m["PANAMA"]["job_time_ms"]


def test_fig8_warmup_starts_the_jobs_before_the_measured_background():
    from fabriclab.systems.panama.repro import MS, fig8_scenario

    h, w = 30 * MS, 20 * MS
    s = fig8_scenario("PANAMA", 0.8, k=4, backend="packet", horizon_ps=h, warmup_ps=w)
    assert [t.start_ps for t in s.traffic] == [w, w] and all(t.duration_ps == h for t in s.traffic)
    starts = [j.start_ps for j in s.jobs]
    assert starts and max(starts) < w + h


def test_with_fair_queueing_at_the_nics_a_job_on_two_trees_shares_a_congested_spine_with_tcp():
    """Two workers, one per leaf, two trees (one per spine); a long DCTCP
    flow h2 -> h5 pinned through spine0. On leaf0 -> spine0 the tree and the
    flow are two flows on a 10 Gbit/s link: max-min gives each 5 Gbit/s.
    The workers' NICs serve each tree as its own flow, in round robin, so
    the uncongested tree's packets do not queue ahead of the congested
    tree's (docs/panama.md)."""
    from fabriclab.systems.panama.repro import class_rates, jain

    s = Scenario.from_dict({
        "backend": "packet", "stop_ps": 100 * 10**9,
        "topology": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 3, "spines": 2,
                     "link_rate_bps": "10Gbps", "spine_link_rate_bps": "10Gbps"},
        "queue": {"discipline": "fifo", "ecn_threshold_packets": 85, "limit_bytes": "8MB"},
        "host_queue": {"discipline": "fq", "limit_packets": "off", "ecn_threshold_packets": "off"},
        "transport": {"cc": "dctcp"},
        "flows": [{"src": 2, "dst": 5, "size_bytes": "10GB", "path": ["h2", "leaf0", "spine0", "leaf1", "h5"]}],
        "jobs": [{"name": "a", "workers": [0, 3], "allreduce": "panama", "class": 3, "layers": 1,
                  "model_bytes": "4MB", "fusion_bytes": "4MB", "compute_ps": "1us", "iterations": 10**6,
                  "start_ps": 20 * 10**9, "barrier": False}],
        "outputs": {"queues_every_ps": 10**9},
    })
    r = simulate(s)
    d = class_rates(r, "leaf0", "spine0")
    shared = d[d.index > 40e9].mean()
    tcp, tree = float(shared[0]), float(shared[3])
    assert 9.0 < tcp + tree <= 10.0
    assert jain([tcp, tree]) >= 0.95, (tcp, tree)


def test_fig8_flow_model_is_passed_and_defaults_to_fluid():
    from fabriclab.systems.panama.repro import fig8_scenario
    assert fig8_scenario("PANAMA", 0.5, k=4, backend="flow").flow_model == "fluid"
    assert fig8_scenario("PANAMA", 0.5, k=4, backend="flow", flow_model="tcp").flow_model == "tcp"

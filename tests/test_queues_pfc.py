"""Per-port queues (host NIC table, overrides per node or link) and PFC from
the scenario file: behaviour against hand reasoning, and bad input named."""

import pytest

from conftest import star_scenario
from fabriclab import Scenario, simulate
from fabriclab.scenario.model import ScenarioError
from fabriclab.sim.pipeline import core_spec


def _one_flow(**kw):
    return star_scenario(2, "10Gbps", "1us", flows=[{"src": 0, "dst": 1, "size_bytes": "2MB", "start_ps": 0}], **kw)


def _port(links, src, dst):
    return links[(links.src_node == src) & (links.dst_node == dst)].iloc[0]


def test_host_nic_unlimited_by_default_and_droppable_when_configured():
    # TSQ lets one connection hold 128 KB (about 89 full segments) in its NIC queue.
    plain = simulate(_one_flow(transport={"init_cwnd_packets": 1000}))
    assert _port(plain.links, "h0", "s0").drops == 0
    assert plain.links.ecn_marks.sum() == 0 or _port(plain.links, "h0", "s0").ecn_marks == 0
    # A 10-packet NIC queue under a 1000-packet initial window must drop there.
    small = simulate(_one_flow(transport={"init_cwnd_packets": 1000, "cc": "newreno"},
                               host_queue={"limit_packets": 10, "ecn_threshold_packets": "off"}))
    assert _port(small.links, "h0", "s0").drops > 0
    assert small.flows.retransmits.sum() > 0 and small.flows.fct_ps.notna().all()


def test_host_nic_marks_ecn_when_configured():
    r = simulate(_one_flow(host_queue={"ecn_threshold_packets": 5}))
    # DCTCP's initial window of 10 segments leaves back to back: the NIC queue
    # holds more than 5 packets at once, so it marks.
    assert _port(r.links, "h0", "s0").ecn_marks > 0


def test_override_of_one_link_inherits_the_rest_of_queue():
    s = star_scenario(3, queue={"limit_packets": 500, "ecn_threshold_packets": 40},
                      queue_overrides=[{"node": "s0", "to": "h2", "ecn_threshold_packets": 3}])
    o = core_spec(s)["queue_overrides"][0]
    names = [n["name"] for n in core_spec(s)["topology"]["nodes"]]
    assert (names[o["from"]], names[o["to"]]) == ("s0", "h2")
    assert o["queue"]["limit_packets"] == 500 and o["queue"]["ecn_threshold_packets"] == 3
    flows = [{"src": 0, "dst": 2, "size_bytes": "1MB", "start_ps": 0}, {"src": 1, "dst": 2, "size_bytes": "1MB", "start_ps": 0},
             {"src": 2, "dst": 0, "size_bytes": "1MB", "start_ps": 0}, {"src": 1, "dst": 0, "size_bytes": "1MB", "start_ps": 0}]
    r = simulate(s.replace(flows=flows))
    # Two DCTCP flows into h2 and two into h0, symmetric but for the marking
    # threshold K, around which DCTCP holds the queue: 3 packets (4.6 KB)
    # toward h2, 40 (61.5 KB) toward h0.
    q2, q0 = _port(r.links, "s0", "h2").mean_queue_bytes, _port(r.links, "s0", "h0").mean_queue_bytes
    assert q2 < 3 * 1538 * 2 and q0 > 5 * q2


def test_pfc_from_the_scenario_file_loses_nothing(tmp_path, cli):
    flows = "\n".join(f'[[flows]]\nsrc = {i}\ndst = 8\nsize_bytes = "1MB"\nstart_ps = 0' for i in range(8))
    base = ('[topology]\nkind = "star"\nhosts = 9\nlink_rate_bps = "10Gbps"\nlink_delay_ps = "1us"\n'
            '[transport]\ncc = "newreno"\n[queue]\nlimit_bytes = "100KB"\n' + flows + "\n")
    lossy, lossless = tmp_path / "lossy.toml", tmp_path / "lossless.toml"
    lossy.write_text(base)
    lossless.write_text(base + '[pfc]\nclasses = [0]\nxoff_bytes = "6KB"\nxon_bytes = "3KB"\nheadroom_bytes = "6KB"\n')
    import pandas as pd

    for f, out in ((lossy, "a"), (lossless, "b")):
        assert cli("run", str(f), "--out", str(tmp_path / out), "-q").returncode == 0
    a = pd.read_parquet(tmp_path / "a" / "links.parquet")
    b = pd.read_parquet(tmp_path / "b" / "links.parquet")
    assert a.drops.sum() > 0 and a.pause_frames_sent.sum() == 0
    assert b.drops.sum() == 0 and b.pause_frames_sent.sum() > 0 and b.paused_ps.sum() > 0
    # The resolved file reruns to the same links.
    assert cli("run", str(tmp_path / "b" / "scenario.resolved.toml"), "--out", str(tmp_path / "c"), "-q").returncode == 0
    assert pd.read_parquet(tmp_path / "c" / "links.parquet").equals(b)


def test_default_headroom_is_round_trip_plus_two_frames():
    s = star_scenario(2, "10Gbps", "2us", pfc={"classes": [3]})
    # 2 x 10 Gbit/s x 2 us = 5000 bytes on the wire both ways, plus two 1538-byte frames.
    assert core_spec(s)["pfc"]["headroom_bytes"] == 5000 + 2 * 1538


@pytest.mark.parametrize("raw, field", [
    ({"queue_overrides": [{"node": "nope"}]}, "queue_overrides[0].node"),
    ({"queue_overrides": [{"node": "s0", "to": "ghost"}]}, "queue_overrides[0].to"),
    ({"queue_overrides": [{"node": "s0", "limit_bytes": 100}]}, "queue_overrides[0].limit_bytes"),
    ({"host_queue": {"limit_bytes": 100}}, "host_queue.limit_bytes"),
    ({"pfc": {"classes": [0], "xoff_bytes": 1000, "xon_bytes": 2000}}, "xon_bytes"),
    ({"pfc": {"classes": [9]}}, "classes"),
    ({"pfc": {"classes": []}}, "pfc.classes"),
    ({"pfc": {"classes": [0]}, "backend": "flow"}, "pfc"),
    ({"pfc": {"classes": [0], "pause_quanta": 0}}, "pfc.pause_quanta"),
    # xoff + headroom = 1000 + 500 < 1538: no lossless frame is ever admitted.
    ({"pfc": {"classes": [0], "xoff_bytes": 1000, "xon_bytes": 500, "headroom_bytes": 500}}, "pfc.headroom_bytes"),
])
def test_bad_sections_name_their_field(raw, field):
    with pytest.raises(ScenarioError, match=None) as e:
        core_spec(Scenario.from_dict({"topology": {"kind": "star", "hosts": 2}, **raw}))
    assert field in str(e.value)


def test_override_link_must_exist():
    s = Scenario.from_dict({"topology": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 1, "spines": 1},
                            "queue_overrides": [{"node": "h0", "to": "spine0"}]})
    with pytest.raises(ScenarioError, match="queue_overrides\\[0\\].*no link"):
        simulate(s)


def test_shared_switch_buffer_from_the_scenario_file():
    # Three NewReno senders into h3: one congested queue at s0 under a 150 KB
    # shared buffer with alpha = 2 settles within a frame below
    # alpha (B + 1538) / (1 + alpha) = 101 025 bytes.
    flows = [{"src": i, "dst": 3, "size_bytes": "2MB", "start_ps": 0} for i in range(3)]
    s = star_scenario(4, "10Gbps", "1us", flows=flows, transport={"cc": "newreno", "init_cwnd_packets": 500},
                      queue={"limit_packets": "off", "ecn_threshold_packets": "off"},
                      switch_buffer={"bytes": "150KB", "alpha": 2.0})
    port = _port(simulate(s).links, "s0", "h3")
    bound = 2 * (150_000 + 1538) // 3
    assert port.drops > 0 and bound - 1538 <= port.max_queue_bytes <= bound


@pytest.mark.parametrize("raw, field", [
    ({"pfc": {"classes": [0], "xoff_fraction": 0.5}}, "pfc.xoff_fraction"),
    ({"switch_buffer": {"bytes": "1MB"}, "backend": "flow"}, "switch_buffer"),
    ({"switch_buffer": {"bytes": 0}}, "switch_buffer.bytes"),
    # 1538 wire bytes must fit the buffer and alpha x bytes: 34 bytes, 1000 bytes at alpha 1 or 2,
    # or 253 bytes at alpha 10 (found by the fuzz harness: every full segment dropped) never admit one.
    ({"switch_buffer": {"bytes": 34}}, "switch_buffer.bytes"),
    ({"switch_buffer": {"bytes": 1000, "alpha": 1.0}}, "switch_buffer.bytes"),
    ({"switch_buffer": {"bytes": 1000, "alpha": 2.0}}, "switch_buffer.bytes"),
    ({"switch_buffer": {"bytes": 253, "alpha": 10.0}}, "switch_buffer.bytes"),
])
def test_bad_buffer_sections_name_their_field(raw, field):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict({"topology": {"kind": "star", "hosts": 2}, **raw})
    assert field in str(e.value)


def test_a_buffer_that_admits_one_frame_at_its_alpha_is_accepted():
    # 1538 bytes at alpha 1: the frame fits and 1 x 1538 >= 1538, so an empty buffer admits a full segment.
    Scenario.from_dict({"topology": {"kind": "star", "hosts": 2}, "switch_buffer": {"bytes": 1538, "alpha": 1.0}})

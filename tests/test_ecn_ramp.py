"""RED's ECN marking ramp (ecn_kmin_bytes, ecn_kmax_bytes, ecn_pmax) in the
scenario and on the packet backend, and the CNPs a DCQCN receiver sends
(messages' ``cnps``). The marking probabilities themselves are checked in
crates/fabriclab-core/tests/qdisc.rs (counts over many packets against the
hand values, with a binomial bound)."""

from __future__ import annotations

import math

import pytest

from fabriclab import simulate
from fabriclab.sim.pipeline import core_spec

from conftest import run_cli, star_scenario

RAMP = {"ecn_kmin_bytes": "20KB", "ecn_kmax_bytes": "80KB", "ecn_pmax": 0.2}


def test_a_ramp_turns_the_default_step_off_and_keeps_an_explicit_one():
    core = core_spec(star_scenario(queue=dict(RAMP)))["queue"]
    assert (core["ecn_kmin_bytes"], core["ecn_kmax_bytes"], core["ecn_pmax"]) == (20_000, 80_000, 0.2)
    assert core["ecn_threshold_packets"] is None and core["ecn_threshold_bytes"] is None
    both = core_spec(star_scenario(queue={**RAMP, "ecn_threshold_packets": 100}))["queue"]
    assert both["ecn_threshold_packets"] == 100 and both["ecn_pmax"] == 0.2
    # Without a ramp nothing changes: the 65-packet step.
    plain = core_spec(star_scenario())["queue"]
    assert plain["ecn_threshold_packets"] == 65 and plain["ecn_pmax"] is None


def test_an_override_replaces_the_marking_it_would_inherit():
    s = star_scenario(queue=dict(RAMP), queue_overrides=[{"node": "s0", "ecn_threshold_packets": 30},
                                                         {"node": "s0", "limit_packets": 500}])
    core = core_spec(s)["queue_overrides"]
    assert core[0]["queue"]["ecn_threshold_packets"] == 30 and core[0]["queue"]["ecn_pmax"] is None
    assert core[1]["queue"]["ecn_pmax"] == 0.2 and core[1]["queue"]["ecn_threshold_packets"] is None
    s = star_scenario(queue_overrides=[{"node": "s0", **RAMP}])
    q = core_spec(s)["queue_overrides"][0]["queue"]
    assert q["ecn_threshold_packets"] is None and q["ecn_kmax_bytes"] == 80_000


def test_an_override_switches_inherited_marking_off_with_off():
    # docs/scenario.md: any threshold can be switched off with "off"; an override's
    # own marking, "off" included, replaces the ramp it would inherit.
    s = star_scenario(queue=dict(RAMP), queue_overrides=[
        {"node": "s0", "ecn_threshold_packets": "off", "ecn_threshold_bytes": "off"}])
    q = core_spec(s)["queue_overrides"][0]["queue"]
    assert q["ecn_pmax"] is None and q["ecn_kmin_bytes"] is None
    assert q["ecn_threshold_packets"] is None and q["ecn_threshold_bytes"] is None
    # A ramp switched off in [queue] keeps the default step.
    assert core_spec(star_scenario(queue={"ecn_kmin_bytes": "off"}))["queue"]["ecn_threshold_packets"] == 65


def test_the_flow_backends_tcp_model_refuses_a_ramp(tmp_path):
    # Its standing-queue model reads step thresholds only: a ramp would read as "never marks".
    toml = ('backend = "flow"\n[topology]\nkind = "star"\nhosts = 2\n[queue]\n'
            'ecn_kmin_bytes = "20KB"\necn_kmax_bytes = "80KB"\necn_pmax = 0.2\n')
    (tmp_path / "s.toml").write_text(toml)
    r = run_cli("validate", str(tmp_path / "s.toml"))
    assert r.returncode == 2 and "queue.ecn_kmin_bytes" in r.stderr and "packet backend only" in r.stderr, r.stderr
    (tmp_path / "f.toml").write_text(toml.replace('backend = "flow"', 'backend = "flow"\nflow_model = "fluid"'))
    assert run_cli("validate", str(tmp_path / "f.toml")).returncode == 0


@pytest.mark.parametrize("queue, field, word", [
    ({"ecn_kmin_bytes": "20KB", "ecn_kmax_bytes": "80KB"}, "ecn_pmax", "all of"),
    ({**RAMP, "ecn_kmax_bytes": "20KB"}, "ecn_kmax_bytes", "exceed"),
    ({**RAMP, "ecn_pmax": 1.5}, "ecn_pmax", "less than or equal"),
    ({**RAMP, "ecn_pmax": 0}, "ecn_pmax", "greater than"),
])
def test_a_bad_ramp_is_refused_naming_the_field(tmp_path, queue, field, word):
    toml = "[topology]\nkind = \"star\"\nhosts = 2\n[queue]\n" + "".join(
        f"{k} = {v!r}\n".replace("'", '"') for k, v in queue.items())
    (tmp_path / "s.toml").write_text(toml)
    r = run_cli("validate", str(tmp_path / "s.toml"))
    assert r.returncode == 2, r.stderr
    assert field in r.stderr and word in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def _incast(seed=1, queue=None):
    """Two DCQCN flows into one 10 Gbit/s port over a lossless class."""
    return simulate(star_scenario(hosts=3, rate=10_000_000_000, delay=2_000_000, seed=seed,
                         transport={"cc": "dcqcn", "dcqcn": {"increase_interval_ps": "55us"}},
                         queue={"limit_packets": "off", **(queue or RAMP)}, pfc={"classes": [0], "xoff_bytes": "200KB",
                                                                                   "xon_bytes": "100KB"},
                         flows=[{"src": 0, "dst": 2, "size_bytes": 5_000_000},
                                {"src": 1, "dst": 2, "size_bytes": 5_000_000}]))


def test_dcqcn_incast_under_the_ramp_counts_its_cnps_and_is_deterministic():
    r = _incast()
    m = r.messages.sort_values("msg_id")
    port = r.links[(r.links.src_node == "s0") & (r.links.dst_node == "h2")].iloc[0]
    # The ramp marks only above Kmin: the queue went past 20 KB, and marks happened.
    assert port.max_queue_bytes > 20_000 and port.ecn_marks > 0
    # Every CNP answers a marked packet, at most one per flow per 50 us.
    assert 0 < m.cnps.sum() <= port.ecn_marks
    for _, row in m.iterrows():
        assert row.cnps <= math.floor(row.fct_ps / 50_000_000) + 1
    again = _incast().messages.sort_values("msg_id")
    assert m[["end_ps", "cnps"]].equals(again[["end_ps", "cnps"]])
    other = _incast(seed=2).links
    # Another seed draws other marks (the ramp's stream depends on the seed).
    assert other.ecn_marks.sum() != r.links.ecn_marks.sum()


def test_without_dcqcn_messages_report_no_cnps():
    s = star_scenario(hosts=3, queue={"ecn_threshold_packets": 5},
                      flows=[{"src": 0, "dst": 2, "size_bytes": 2_000_000},
                             {"src": 1, "dst": 2, "size_bytes": 2_000_000}])
    r = simulate(s)
    assert r.links.ecn_marks.sum() > 0  # DCTCP's echoes are not CNPs
    assert (r.messages.cnps == 0).all()

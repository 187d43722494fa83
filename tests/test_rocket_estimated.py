"""Packet Rocket on estimated clocks (issue 27; docs/clockwork-control.md,
"Estimated clocks"): `packet_rocket_clock = "estimated"`, a correction table
given by hand or made by the calibration pass (the probe mesh alone, then
fabriclab's estimator).

Expected numbers come from the path's rates (test_packet_rocket.py's
two-rate path: segment 4's echo is 33,220,800 ps over the base, a pause of
3,220,800 ps at T = 30 us) and from clocks given by hand."""

import json

import pytest
from conftest import run_cli
from fabriclab import simulate
from fabriclab.scenario.model import Scenario, ScenarioError
from test_packet_rocket import FAST_PKT_PS, OFFSETS, SLOW_PKT_PS, _two_rates

PAUSE_PS = 3_220_800
# Segment 4 reaches h1 3 slow-link packet times after segment 1 (the base's).
GAP_PS = 3 * SLOW_PKT_PS  # 36,912,000


def _piece(host, offset_ps, drift_ppm=0.0, from_local_ps=0):
    return {"host": host, "from_local_ps": from_local_ps, "offset_ps": offset_ps, "drift_ppm": drift_ppm}


def test_perfect_offsets_give_the_bytes_of_ideal_clocks(tmp_path):
    # OFFSETS: h0 reads t - 5 us, h1 t + 70 us, no drift. A table with exactly those offsets corrects every
    # reading to true time, so every stamp, echo and pause is ideal's: the same bytes of flows and links.
    table = [_piece(0, -5_000_000), _piece(1, 70_000_000)]
    est = _two_rates(tmp_path, 6, OFFSETS, clock="estimated", correction=table)
    ideal = _two_rates(tmp_path, 6, OFFSETS, clock="ideal")
    assert est.summary["packet_rocket"] == ideal.summary["packet_rocket"]
    assert (est.summary["packet_rocket"]["pauses"], est.summary["packet_rocket"]["paused_ps"]) == (1, PAUSE_PS)
    assert est.flows_parquet == ideal.flows_parquet and est.links_parquet == ideal.links_parquet
    assert "calibration" not in est.summary["packet_rocket"]  # a table given: no calibration pass


# OFFSETS with drifts: h0 runs 200 ppm fast, h1 300 ppm slow. Host h reads L = t + o + d t.
DRIFTING = {"hosts": {"h0": {"offset_ps": "-5us", "drift_ppm": 200.0},
                      "h1": {"offset_ps": "70us", "drift_ppm": -300.0}}, "wander_ppm": 0.0}
# Segment 4 leaves h0 3 fast-link packet times after segment 1 (the base's) and reaches h1 GAP_PS after it.
TX_GAP_PS = 3 * FAST_PKT_PS  # 3,691,200


@pytest.mark.parametrize("sign,pause_ps", [
    (1, PAUSE_PS),
    # No slope: the corrected clocks keep the drifts, and segment 4's OWD over the base errs by
    # d1 x GAP_PS - d0 x TX_GAP_PS = -300e-6 x 36,912,000 - 200e-6 x 3,691,200 = -11,811.84 ps.
    (0, PAUSE_PS - 11_811.84),
    # The slope negated: corrected = t (1 + 2d), twice that error.
    (-1, PAUSE_PS - 2 * 11_811.84),
], ids=["exact", "no-drift", "negated-drift"])
def test_only_the_exact_drifting_table_gives_ideal_pauses(tmp_path, sign, pause_ps):
    # The exact correction of L = t + o + d t, read on L: from L = o (t = 0), offset o, slope d / (1 + d);
    # then L - correction = t within the stamps' rounding (1 ps each).
    table = [_piece(0, -5_000_000, sign * 200 / 1.0002, -5_000_000),
             _piece(1, 70_000_000, sign * -300 / 0.9997, 70_000_000)]
    assert -300e-6 * GAP_PS - 200e-6 * TX_GAP_PS == pytest.approx(-11_811.84)
    pr = _two_rates(tmp_path, 6, DRIFTING, clock="estimated", correction=table).summary["packet_rocket"]
    assert pr["pauses"] == 1 and abs(pr["paused_ps"] - pause_ps) <= 3, pr


def test_a_constant_offset_error_cancels_through_the_base(tmp_path):
    # The table misjudges h1 by +3 us and h0 by -2 us: every OWD is 5 us off, the base too.
    table = [_piece(0, -7_000_000), _piece(1, 73_000_000)]
    pr = _two_rates(tmp_path, 6, OFFSETS, clock="estimated", correction=table).summary["packet_rocket"]
    assert (pr["pauses"], pr["paused_ps"]) == (1, PAUSE_PS)


DRIFT = {"hosts": {"h0": {"offset_ps": 0, "drift_ppm": 0.0}, "h1": {"offset_ps": 0, "drift_ppm": 1000.0}},
         "wander_ppm": 0.0}


def test_an_exact_drift_correction_gives_ideal_pauses(tmp_path):
    # h1 reads L = 1.001 t; the correction L - t = L x 0.001 / 1.001, a slope of 1000 / 1.001 ppm. Each
    # corrected reading is t within 1 ps (rounding), so the pause is ideal's within 2 ps; raw host clocks
    # lengthen it by 1000 ppm of GAP_PS = 36,912 ps (test_packet_rocket.py).
    table = [_piece(1, 0, 1000 / 1.001)]
    pr = _two_rates(tmp_path, 6, DRIFT, clock="estimated", correction=table).summary["packet_rocket"]
    assert pr["pauses"] == 1 and abs(pr["paused_ps"] - PAUSE_PS) <= 2


def test_a_drift_error_does_not_cancel_by_hand(tmp_path):
    # The table's slope is 500 ppm where 1000 / 1.001 would be exact: corrected = 1.001 x (1 - 0.0005) t =
    # (1 + 499.5 ppm) t. Segment 4's OWD then carries 499.5e-6 x GAP_PS = 18,437.5 ps more than the base's
    # (segment 1's), and its pause is that much longer, give or take the stamps' rounding (as raw clocks).
    table = [_piece(1, 0, 500.0)]
    pr = _two_rates(tmp_path, 6, DRIFT, clock="estimated", correction=table).summary["packet_rocket"]
    assert pr["pauses"] == 1
    assert abs(pr["paused_ps"] - (PAUSE_PS + 499.5e-6 * GAP_PS)) <= 50


# ---------------------------------------------------------------- the calibration pass
def _star(clocks, probes=None, threshold="30us"):
    raw = {"name": "cal", "seed": 7,
           "topology": {"kind": "star", "hosts": 4, "link_rate_bps": "10Gbps", "link_delay_ps": "1us"},
           "transport": {"cc": "newreno", "packet_rocket_threshold_ps": threshold},
           "flows": [{"src": 0, "dst": 3, "size_bytes": 100_000, "start_ps": "1ms"},
                     {"src": 1, "dst": 3, "size_bytes": 100_000, "start_ps": "1ms"}],
           "clocks": clocks}
    if probes is not None:
        raw["probes"] = probes
    return Scenario.from_dict(raw)


# Four hosts with offsets and drifts given by hand (drifts of 100-500 ppm, so that a table without its slope, or
# with it negated, is microseconds off within the mesh), no wander, NIC stamps (20 ns noise).
HAND_PS_PPM = {"h0": (40e6, 150.0), "h1": (-120e6, -400.0), "h2": (3e6, 500.0), "h3": (250e6, -100.0)}
HAND = {"hosts": {h: {"offset_ps": int(o), "drift_ppm": d} for h, (o, d) in HAND_PS_PPM.items()}, "wander_ppm": 0.0}


def _hand_reading_ps(host: int, t_ps: float) -> float:
    off, drift = HAND_PS_PPM[f"h{host}"]
    return t_ps + off + drift * 1e-6 * t_ps


def test_the_calibration_recovers_hand_given_clocks():
    # The pass's table, read at h's clock L_h(t), should give L_h(t) - L_h0(t) (the reference is h0, the first
    # host by name). Huygens' idle error is tens of ns with 20 ns NIC stamps (docs/clockwork.md: p99 21 ns);
    # allowed: 100 ns, within the mesh's 6 ms. Its slope on h's clock is d(L_h - L_h0)/dL_h =
    # (d_h - d_h0) / (1 + d_h): -550 / 0.9996, 350 / 1.0005 and -250 / 0.9999 ppm; allowed: 20 ppm (the fit's
    # slope error is the stamps' noise over the mesh's span, ~20 ns / 5 ms = 4 ppm). Without the slope, the
    # table would be 550 ppm x 2 ms = 1.1 us off at 1 and 5 ms; negated, twice that.
    from fabriclab.observe.clock.calibrate import calibrate
    s = _star(HAND, probes={"peers": 3, "pair_every_ps": "1ms", "duration_ps": "6ms"})
    table, info = calibrate(s)
    assert info["reference"] == "h0" and info["hosts"] == 4
    # An idle fabric: every triangle of the complete mesh closes within tens of ns (2 x 300 ns allowed), so the
    # robust estimate of every host agrees with at least two of its edges.
    assert info["hosts_unconfirmed"] == []
    d0 = HAND_PS_PPM["h0"][1] * 1e-6
    for h in range(4):
        own = [p for p in table if p["host"] == h]
        assert len(own) == info["windows"] == 1
        p = own[0]
        dh = HAND_PS_PPM[f"h{h}"][1] * 1e-6
        assert abs(p["drift_ppm"] - (dh - d0) / (1 + dh) * 1e6) <= 20, (h, p["drift_ppm"])
        for t in (1e9, 3e9, 5e9):
            local = _hand_reading_ps(h, t)
            got = p["offset_ps"] + p["drift_ppm"] * 1e-6 * (local - p["from_local_ps"])
            want = local - _hand_reading_ps(0, t)
            assert abs(got - want) <= 100_000, (h, t, got - want)
    # summary.json's drift error: against the same hand slopes.
    drift = {int(h[1:]): d for h, (_, d) in HAND_PS_PPM.items()}
    errs = [abs(p["drift_ppm"] - (drift[p["host"]] - 150.0) / (1 + drift[p["host"]] * 1e-6)) for p in table if p["host"]]
    assert info["drift_error_ppm_max"] == pytest.approx(max(errs), abs=1e-9)
    assert info["drift_error_ppm_p50"] == pytest.approx(sorted(errs)[1], abs=1e-9)


def test_pieces_of_a_hand_built_two_window_estimate():
    # No simulation: an estimate's clocks table written by hand, rows shuffled, hosts h0 (the reference), h2 and
    # h10 with host indices 0, 2 and 10 (by name h10 sorts before h2). Windows' midpoints at 1 s and 3 s.
    # Each piece, worked out from the module's formulas: piece 0 starts at the reference's reading R = mid_0
    # with o = offset_0; piece 1 at R = (mid_0 + mid_1) / 2 = 2 s with o = offset_1 + d_1 (R - mid_1); the host
    # reads L = R + o there (ps: x 1000); the slope on L is d / (1 + d).
    import pyarrow as pa
    from fabriclab.observe.clock.calibrate import pieces
    rows = [  # host, window, mid_ns, offset_ns, drift_ppm
        ("h10", 1, 3e9, -700.0, -30.0), ("h2", 0, 1e9, 1000.0, 100.0), ("h0", 1, 3e9, 0.0, 0.0),
        ("h2", 1, 3e9, 1200.0, 50.0), ("h10", 0, 1e9, -500.0, -20.0), ("h0", 0, 1e9, 0.0, 0.0)]
    clocks = pa.table({"host": [r[0] for r in rows], "window": [r[1] for r in rows],
                       "window_mid_ns": [r[2] for r in rows], "offset_ns": [r[3] for r in rows],
                       "drift_ppm": [r[4] for r in rows]})
    got = pieces(clocks, {"h0": 0, "h2": 2, "h10": 10})
    want = [
        (0, 1_000_000_000_000, 0, 0.0), (0, 2_000_000_000_000, 0, 0.0),
        # h2: o = 1000 ns at R = 1 s; then 1200 + 50e-6 x (2e9 - 3e9) = -48,800 ns at R = 2 s.
        (2, 1_000_001_000_000, 1_000_000, 100 / 1.0001), (2, 1_999_951_200_000, -48_800_000, 50 / 1.00005),
        # h10: o = -500 ns at R = 1 s; then -700 - 30e-6 x (2e9 - 3e9) = 29,300 ns at R = 2 s.
        (10, 999_999_500_000, -500_000, -20 / 0.99998), (10, 2_000_029_300_000, 29_300_000, -30 / 0.99997)]
    assert [(p["host"], p["from_local_ps"], p["offset_ps"]) for p in got] == [w[:3] for w in want]
    assert [p["drift_ppm"] for p in got] == pytest.approx([w[3] for w in want], rel=1e-12)


def test_estimated_is_the_default_with_clocks_and_runs_the_calibration_pass():
    s = _star(HAND, probes={"peers": 3, "pair_every_ps": "1ms", "duration_ps": "6ms"})
    r = simulate(s)
    cal = r.summary["packet_rocket"]["calibration"]
    assert cal["mesh"] == "scenario" and cal["hosts"] == 4 and cal["reference"] == "h0"
    # The resolved scenario carries the table, so a rerun of it needs no pass and gives the same bytes.
    again = simulate(Scenario.from_dict(r.resolved))
    assert "calibration" not in again.summary["packet_rocket"]
    assert again.flows_parquet == r.flows_parquet


def test_without_probes_the_pass_runs_the_default_mesh():
    r = simulate(_star(HAND))
    cal = r.summary["packet_rocket"]["calibration"]
    assert cal["mesh"] == "default" and cal["hosts"] == 4
    assert r.probes is None or len(r.probes) == 0  # the mesh ran in the pass only


def test_the_pipeline_alone_refuses_estimated_clocks_without_a_table():
    from fabriclab.sim.pipeline import simulate as simulate_plain
    with pytest.raises(ScenarioError, match="packet_rocket_correction"):
        simulate_plain(_star(HAND))


# ---------------------------------------------------------------- bad input
def test_a_table_for_other_clocks_refused():
    with pytest.raises(ScenarioError, match="packet_rocket_correction"):
        _two_rates_scenario(clock="host", correction=[_piece(0, 0)])


@pytest.mark.parametrize("transport,field", [
    ({"packet_rocket_correction": [_piece(0, 0)]}, "packet_rocket_correction"),  # Packet Rocket off
    ({"packet_rocket_threshold_ps": "10us", "packet_rocket_correction": [_piece(0, 0)]},
     "packet_rocket_correction"),  # a table, no [clocks] (the clock then defaults to "ideal")
], ids=["rocket-off", "no-clocks"])
def test_a_table_where_it_cannot_apply_exits_2(tmp_path, transport, field):
    import tomli_w
    raw = {"name": "x", "topology": {"kind": "star", "hosts": 2}, "transport": transport,
           "flows": [{"src": 0, "dst": 1, "size_bytes": 1000}]}
    if transport.get("packet_rocket_threshold_ps") is None:
        raw["clocks"] = {}
    (tmp_path / "s.toml").write_text(tomli_w.dumps(raw))
    for cmd in (("validate",), ("run", "--out", str(tmp_path / "out"))):
        r = run_cli(cmd[0], str(tmp_path / "s.toml"), *cmd[1:])
        out = r.stderr + r.stdout
        assert r.returncode == 2 and "Traceback" not in r.stderr and f"transport.{field}" in out, out
    assert not (tmp_path / "out").exists()


def test_estimated_without_clocks_refused():
    with pytest.raises(ScenarioError, match="packet_rocket_clock"):
        Scenario.from_dict({"name": "x", "topology": {"kind": "star", "hosts": 2},
                            "transport": {"packet_rocket_threshold_ps": 0, "packet_rocket_clock": "estimated"}})


def _two_rates_scenario(clock, correction):
    return Scenario.from_dict({"name": "x", "topology": {"kind": "star", "hosts": 2}, "clocks": {},
                               "transport": {"packet_rocket_threshold_ps": 0, "packet_rocket_clock": clock,
                                             "packet_rocket_correction": correction}})


@pytest.mark.parametrize("table,words", [
    ('[{host = 5, from_local_ps = 0, offset_ps = 0, drift_ppm = 0.0}]', ["packet_rocket_correction[0].host", "0..1"]),
    (('[{host = 0, from_local_ps = 9, offset_ps = 0, drift_ppm = 0.0}, '
     '{host = 0, from_local_ps = 9, offset_ps = 0, drift_ppm = 0.0}]'), ["packet_rocket_correction[1].from_local_ps"]),
    ('[{host = 0, from_local_ps = 0, offset_ps = 0, drift_ppm = 5000.0}]', ["drift_ppm"]),
], ids=["host-out-of-range", "not-increasing", "drift-out-of-range"])
def test_bad_tables_exit_2(tmp_path, table, words):
    (tmp_path / "s.toml").write_text('name = "x"\n[topology]\nkind = "star"\nhosts = 2\n[clocks]\n'
                                     f'[transport]\npacket_rocket_threshold_ps = "10us"\n'
                                     f'packet_rocket_clock = "estimated"\npacket_rocket_correction = {table}\n'
                                     '[[flows]]\nsrc = 0\ndst = 1\nsize_bytes = 1000\n')
    r = run_cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"))
    out = r.stderr + r.stdout
    assert r.returncode == 2 and "Traceback" not in r.stderr, out
    assert all(w in out for w in words), out
    assert not (tmp_path / "out").exists()


def test_the_pass_keeps_the_fabric_and_clocks_and_drops_the_load():
    from fabriclab.observe.clock.calibrate import DRAIN_PS, calibration_scenario
    s = _star(HAND, probes={"peers": 3, "pair_every_ps": "1ms", "duration_ps": "6ms"})
    c = calibration_scenario(s, 4)
    assert (c.flows, c.traffic, c.collectives, c.jobs) == ([], [], [], [])
    assert c.transport.packet_rocket_threshold_ps is None and c.transport.cc == s.transport.cc
    assert (c.seed, c.clocks, c.topology, c.probes) == (s.seed, s.clocks, s.topology, s.probes)
    assert c.stop_ps == 6_000_000_000 + DRAIN_PS


def test_the_pass_runs_on_a_cloud_with_the_tenants_mesh():
    # [cloud] builds the topology; the mesh is the tenant's 6 VMs, so 6 hosts are estimated and 6 pieces made.
    from test_cloud import _small
    raw = _small(transport={"cc": "newreno", "packet_rocket_threshold_ps": "20us",
                            "packet_rocket_hosts": list(range(6))},
                 flows=[{"src": i, "dst": 5, "size_bytes": 50_000, "start_ps": "2ms"} for i in range(5)])
    cal = simulate(Scenario.from_dict(raw)).summary["packet_rocket"]["calibration"]
    assert (cal["hosts"], cal["pieces"], cal["reference"]) == (6, 6, "vm0")


def test_validate_builds_without_the_pass_and_says_the_run_will_calibrate(tmp_path):
    (tmp_path / "s.toml").write_text('name = "x"\n[topology]\nkind = "star"\nhosts = 3\n[clocks]\n'
                                     '[transport]\npacket_rocket_threshold_ps = "10us"\n'
                                     '[[flows]]\nsrc = 0\ndst = 1\nsize_bytes = 1000\n')
    r = run_cli("validate", str(tmp_path / "s.toml"))
    assert r.returncode == 0, r.stderr
    assert "estimated clocks" in r.stdout


def test_a_loaded_pass_keeps_the_load_and_says_so():
    from fabriclab.observe.clock.calibrate import calibration_scenario
    raw = _star(HAND, probes={"peers": 3, "pair_every_ps": "1ms", "duration_ps": "6ms"}).model_dump(by_alias=True)
    raw["transport"]["packet_rocket_calibration"] = "loaded"
    s = Scenario.from_dict(raw)
    c = calibration_scenario(s, 4)
    assert c.flows == s.flows and c.transport.packet_rocket_threshold_ps is None
    assert simulate(s).summary["packet_rocket"]["calibration"]["pass"] == "loaded"


def test_same_seed_identical_bytes_with_the_pass():
    s = _star(HAND, probes={"peers": 3, "pair_every_ps": "1ms", "duration_ps": "6ms"}, threshold="2us")
    a, b = simulate(s), simulate(s)
    assert a.summary["packet_rocket"]["pauses"] > 0
    assert a.summary["packet_rocket"] == b.summary["packet_rocket"]
    assert a.flows_parquet == b.flows_parquet and a.resolved == b.resolved


def test_a_mesh_the_estimator_refuses_is_exit_2_naming_the_clock(tmp_path):
    # Two probe pairs per peer (a pair every 5 ms for 10 ms, one peer each): fewer than the two pure pairs each
    # way per edge the estimator needs, so it refuses, and the run says which setting brought it in.
    (tmp_path / "s.toml").write_text('name = "x"\n[topology]\nkind = "star"\nhosts = 3\n[clocks]\n'
                                     '[probes]\npeers = 1\npair_every_ps = "5ms"\nduration_ps = "6ms"\n'
                                     '[transport]\npacket_rocket_threshold_ps = "10us"\n'
                                     '[[flows]]\nsrc = 0\ndst = 1\nsize_bytes = 1000\n')
    r = run_cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"))
    out = r.stderr + r.stdout
    assert r.returncode == 2 and "Traceback" not in r.stderr, out
    assert "packet_rocket_clock" in out and "estimator refused" in out, out
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- what a table was made for
def test_a_resolved_scenario_rerun_with_another_seed_equals_a_fresh_run_of_that_seed():
    # Default [clocks]: each host's offset and drift drawn from the seed. Seed 3's resolved scenario carries seed
    # 3's table; rerun with seed 4 it must not apply that table to seed 4's clocks, but give what seed 4 gives.
    s = _star({}, probes={"peers": 3, "pair_every_ps": "1ms", "duration_ps": "6ms"}, threshold="2us")
    r3, r4 = simulate(s.replace(seed=3)), simulate(s.replace(seed=4))
    t3, t4 = (r.resolved["transport"]["packet_rocket_correction"] for r in (r3, r4))
    assert max(abs(a["drift_ppm"] - b["drift_ppm"]) for a, b in zip(t3, t4)) > 1.0  # the seeds' clocks differ
    again = simulate(Scenario.from_dict(r3.resolved).replace(seed=4))
    assert again.resolved["transport"] == r4.resolved["transport"]
    assert again.summary["packet_rocket"]["calibration"]["replaced_stale_table"] is True
    assert again.flows_parquet == r4.flows_parquet
    # Rerun unchanged, the table matches what it was made for: no pass.
    assert "calibration" not in simulate(Scenario.from_dict(r3.resolved)).summary["packet_rocket"]


def test_a_changed_clock_or_topology_changes_what_the_table_is_for():
    from fabriclab.observe.clock.calibrate import made_for
    s = _star(HAND)
    raw = s.model_dump(by_alias=True)
    other_clock = {**HAND, "hosts": {**HAND["hosts"], "h2": {"offset_ps": "3us", "drift_ppm": 13.0}}}
    slower = {**raw["topology"], "link_rate_bps": 1_000_000_000}
    digests = {made_for(s), made_for(s.replace(seed=8)), made_for(s.replace(clocks=other_clock)),
               made_for(s.replace(topology=slower))}
    assert len(digests) == 4
    renamed = s.replace(name="other", flows=[])  # neither the name nor the idle pass's dropped load count
    assert made_for(renamed) == made_for(s)


def test_a_digest_without_a_table_refused():
    with pytest.raises(ScenarioError, match="packet_rocket_correction_for"):
        Scenario.from_dict({"name": "x", "topology": {"kind": "star", "hosts": 2}, "clocks": {},
                            "transport": {"packet_rocket_threshold_ps": 0, "packet_rocket_correction_for": "sha256:0"}})


def test_validate_says_a_stale_table_will_be_made_again(tmp_path):
    r = simulate(_star(HAND, probes={"peers": 3, "pair_every_ps": "1ms", "duration_ps": "6ms"}))
    import tomli_w
    raw = r.resolved
    (tmp_path / "same.toml").write_text(tomli_w.dumps(raw))
    (tmp_path / "other.toml").write_text(tomli_w.dumps({**raw, "seed": 9}))
    same, other = run_cli("validate", str(tmp_path / "same.toml")), run_cli("validate", str(tmp_path / "other.toml"))
    assert same.returncode == other.returncode == 0, same.stderr + other.stderr
    assert "made for another scenario" not in same.stdout and "made for another scenario" in other.stdout


def test_a_recovery_run_calibrates_each_segment_on_its_own_clocks(tmp_path):
    # test_c4_recovery.py's crash (rank 1 at 15 ms, restart on a spare) with Packet Rocket on and the hand clocks on
    # the star's six hosts: each segment (its own seed) runs the pass, and its table's slope on h is
    # (d_h - d_h0) / (1 + d_h) within 20 ppm, as in test_the_calibration_recovers_hand_given_clocks.
    import tomli_w
    from test_c4_recovery import CRASH_AT, scenario
    hand = {**HAND_PS_PPM, "h4": (-7e6, 300.0), "h5": (9e6, -250.0)}
    raw = scenario([{"kind": "crash", "rank": 1, "at_ps": CRASH_AT}])
    raw["transport"]["packet_rocket_threshold_ps"] = "20us"
    raw["clocks"] = {"hosts": {h: {"offset_ps": int(o), "drift_ppm": d} for h, (o, d) in hand.items()},
                     "wander_ppm": 0.0}
    (tmp_path / "s.toml").write_text(tomli_w.dumps(raw))
    r = run_cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr + r.stdout
    segments = sorted((tmp_path / "out" / "segments").iterdir())
    assert len(segments) == 2
    for seg in segments:
        cal = json.loads((seg / "summary.json").read_text())["packet_rocket"]["calibration"]
        assert (cal["hosts"], cal["reference"]) == (6, "h0")
        table = Scenario.load(seg / "scenario.resolved.toml").transport.packet_rocket_correction
        for p in table:
            dh = hand[f"h{p.host}"][1]
            assert abs(p.drift_ppm - (dh - 150.0) / (1 + dh * 1e-6)) <= 20, (seg.name, p)

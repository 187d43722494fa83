"""Packet Rocket in the packet backend (issue 27; docs/clockwork-control.md, "Packet
Rocket"): `transport.packet_rocket_threshold_ps` and `packet_rocket_clock`.

Every expected number is worked out by hand from the path's rates and
delays (the rule alone is checked in crates/fabriclab-core/tests/rocket.rs)."""

import pytest
from conftest import run_cli
from fabriclab import simulate
from fabriclab.scenario.model import Scenario, ScenarioError

WIRE = 1538  # wire bytes of a full 1460-byte segment
FAST_PKT_PS = WIRE * 8 * 100  # 1,230,400 ps at 10 Gbit/s
SLOW_PKT_PS = WIRE * 8 * 1000  # 12,304,000 ps at 1 Gbit/s


def _two_rates(tmp_path, packets, clocks=None, threshold="30us", clock=None, ignore=None, correction=None):
    """h0 -(10 Gbit/s, 1 us)- s0 -(1 Gbit/s, 1 us)- h1, one flow of `packets` full segments."""
    (tmp_path / "topo.toml").write_text(
        'nodes = [{name = "h0", kind = "host"}, {name = "h1", kind = "host"}, {name = "s0", kind = "switch"}]\n'
        'links = [{a = "h0", b = "s0", rate_bps = 10000000000, delay_ps = 1000000},\n'
        '         {a = "s0", b = "h1", rate_bps = 1000000000, delay_ps = 1000000}]\n')
    raw = {"name": "rocket", "topology": {"kind": "file", "path": str(tmp_path / "topo.toml")},
           "queue": {"limit_packets": 100, "ecn_threshold_packets": None},
           "transport": {"cc": "newreno", "packet_rocket_threshold_ps": threshold},
           "flows": [{"src": 0, "dst": 1, "size_bytes": 1460 * packets}]}
    if clock is not None:
        raw["transport"]["packet_rocket_clock"] = clock
    if ignore is not None:
        raw["transport"]["packet_rocket_ignore"] = ignore
    if correction is not None:
        raw["transport"]["packet_rocket_correction"] = correction
    if clocks is not None:
        raw["clocks"] = clocks
    return simulate(Scenario.from_dict(raw))


# Constant offsets only (no drift, no wander): they cancel against the base.
OFFSETS = {"hosts": {"h0": {"offset_ps": "-5us", "drift_ppm": 0.0}, "h1": {"offset_ps": "70us", "drift_ppm": 0.0}},
           "wander_ppm": 0.0}


@pytest.mark.parametrize("clocks", [None, OFFSETS], ids=["ideal", "host-offsets"])
def test_one_pause_of_owd_minus_base_minus_threshold(tmp_path, clocks):
    # The initial window (10) holds all 6 segments: they leave h0's NIC
    # back to back, one per 1,230,400 ps, and each reaches s0 that much after
    # the one before; s0 sends one per 12,304,000 ps. So segment k waits
    # (k - 1) x (12,304,000 - 1,230,400) = (k - 1) x 11,073,600 ps at s0, and
    # its one-way delay exceeds segment 1's (the base) by that. With T = 30 us:
    # k = 3 gives 22.1 us (no pause), k = 4 gives 33,220,800 ps: a pause of
    # 3,220,800 ps. Segments 5 and 6 left h0 before that pause ended (all
    # six left within 7.4 us), so their echoes (44.3 and 55.4 us over the
    # base) are ignored: one build-up, one pause. Host clocks with constant
    # offsets give the same: the offset is in the base too.
    r = _two_rates(tmp_path, 6, clocks, clock=None if clocks is None else "host")
    assert 3 * (SLOW_PKT_PS - FAST_PKT_PS) == 33_220_800
    pr = r.summary["packet_rocket"]
    assert (pr["pauses"], pr["paused_ps"]) == (1, 33_220_800 - 30_000_000)
    assert r.summary["flows_finished"] == 1


def test_below_the_threshold_no_pause(tmp_path):
    # Three segments: the third waits 2 x 11,073,600 = 22,147,200 ps < 30 us.
    pr = _two_rates(tmp_path, 3).summary["packet_rocket"]
    assert (pr["connections"], pr["pauses"], pr["paused_ps"]) == (1, 0, 0)


def test_drifting_clocks_do_not_cancel(tmp_path):
    # A receiver clock 1000 ppm fast reads each later one-way delay longer:
    # segment k arrives about (k - 1) x 12.3 us after segment 1, so its
    # echo carries (k - 1) x 12.3 ns more than on true clocks. Segment 4's
    # pause grows by 3 x 12,304 ps (arrivals 36.9 us after the base's) give
    # or take the stamps' rounding, while ideal clocks on the same hosts
    # (packet_rocket_clock = "ideal") still give 3,220,800 ps.
    drift = {"hosts": {"h0": {"offset_ps": 0, "drift_ppm": 0.0}, "h1": {"offset_ps": 0, "drift_ppm": 1000.0}},
             "wander_ppm": 0.0}
    host = _two_rates(tmp_path, 6, drift, clock="host").summary["packet_rocket"]
    ideal = _two_rates(tmp_path, 6, drift, clock="ideal").summary["packet_rocket"]
    assert ideal["paused_ps"] == 3_220_800
    assert abs(host["paused_ps"] - (3_220_800 + 3 * 12_304)) <= 50


def test_ignore_variants_of_ours_by_hand(tmp_path):
    # The same six segments. Their ACKs come back one per 12,304,000 ps (the
    # bottleneck's spacing), so segment 4's pause (3,220,800 ps) is over
    # when segment 5's echo arrives.
    # "extend": 5 and 6 were sent before that pause ended and arrive with the
    # flow no longer held: ignored, as with "ended".
    pr = _two_rates(tmp_path, 6, ignore="extend").summary["packet_rocket"]
    assert (pr["pauses"], pr["paused_ps"]) == (1, 3_220_800)
    # "during": 5 and 6 were sent before the pause started, so they count.
    # Segment 5 (4 x 11,073,600 = 44,294,400 over the base) starts a second
    # pause of 14,294,400; segment 6's echo (55,368,000 over) arrives
    # 12,304,000 later, still held, and moves the end to 12,304,000 +
    # 25,368,000 after segment 5's: that pause lasts 37,672,000 in all.
    pr = _two_rates(tmp_path, 6, ignore="during").summary["packet_rocket"]
    assert (pr["pauses"], pr["paused_ps"]) == (2, 3_220_800 + 12_304_000 + 25_368_000)


def test_unknown_ignore_refused():
    with pytest.raises(ScenarioError, match="packet_rocket_ignore"):
        Scenario.from_dict({"name": "x", "topology": {"kind": "star", "hosts": 2},
                            "transport": {"packet_rocket_ignore": "before"}})


# ---------------------------------------------------------------- the incast
N, IW = 16, 10


def _incast(limit_packets, threshold, cc="newreno", packets=70, ignore=None):
    # N senders to one receiver on a 10 Gbit/s star. Each path's base is
    # learnt first (one segment per sender, 20 us apart: no queue), then at
    # 1 ms all N send `packets` segments at once.
    warm = [{"src": i, "dst": N, "size_bytes": 1460, "start_ps": i * 20_000_000} for i in range(N)]
    burst = [{"src": i, "dst": N, "size_bytes": 1460 * packets, "start_ps": 1_000_000_000} for i in range(N)]
    raw = {"name": "incast", "seed": 1,
           "topology": {"kind": "star", "hosts": N + 1, "link_rate_bps": "10Gbps", "link_delay_ps": "2us"},
           "queue": {"limit_packets": limit_packets, "ecn_threshold_packets": 65 if cc == "dctcp" else None},
           "transport": {"cc": cc, "packet_rocket_threshold_ps": threshold},
           "flows": warm + burst}
    if ignore is not None:
        raw["transport"]["packet_rocket_ignore"] = ignore
    return simulate(Scenario.from_dict(raw))


def test_incast_buffer_drops_without_packet_rocket():
    # The buffer holds the first burst whole: N x IW = 160 segments (even if
    # the port sent none meanwhile). Slow start then sends two segments per
    # ACK while the port sends one, so the queue, already (N - 1) x IW = 150
    # when the first window ends, grows by one segment per segment time
    # until it overflows 160: each flow has 70 segments, 7 windows' worth.
    r = _incast(N * IW, None)
    assert r.summary["links"]["drops"] > 0
    assert "packet_rocket" not in r.summary


# The issue's drop-free incast (docs/clockwork-control.md, "The incast,
# window by window"). S = 70 segments per flow, tau = one segment time
# (1,230,400 ps), T = 5 us; the first segments are served in flow order.
#
# The buffer, derived from the burst: B = N x 2 x IW = 320. Slow start adds
# at most one segment per ACK, so after the IW ACKs of its first window a
# flow's window is at most 2 x IW. With `packet_rocket_ignore = "during"`
# each flow is held across its first window's echoes: segment j of flow f
# waited ((N - 1) j + f) tau, and its pause, that less T, outlasts the N tau
# until the flow's next echo from j = 2 on (from j = 1 for f >= 6). So the
# largest burst that reaches the port at once after the first windows is
# every flow's released window: at most N x 2 x IW. That bounds the first
# burst and the first release only; later releases (windows up to 28) come
# out of step, and that they stay under B is measured, not derived here
# (docs/clockwork-control.md: the buffer sweep is drop-free from 240).
#
# Without Packet Rocket, by hand: the first windows leave (N - 1) x IW = 150
# queued; then each ACK (one per tau, the port's pace) releases two segments
# while the port sends one, and a flow sends its last segment after
# (S - IW) / 2 = 30 ACKs, so the queue would reach 150 + N x 30 = 630. No
# sender notices a loss before it has sent everything (a drop is noticed at
# least B tau after the queue reaches B at (B - 150 + IW) tau; all is sent by
# (IW + 480) tau: earlier, for B >= 315), so the port drops 630 - B = 310.
B_DROP_FREE = N * 2 * IW


@pytest.mark.parametrize("cc", ["newreno", "cubic"])
def test_incast_drops_630_minus_buffer_without_packet_rocket(cc):
    by_hand = (N - 1) * IW + N * (70 - IW) // 2 - B_DROP_FREE
    assert by_hand == 310
    assert _incast(B_DROP_FREE, None, cc).summary["links"]["drops"] == by_hand


@pytest.mark.parametrize("cc", ["newreno", "cubic"])
def test_incast_no_drops_with_packet_rocket_ignoring_only_echoes_sent_during_a_pause(cc):
    r = _incast(B_DROP_FREE, 5_000_000, cc, ignore="during")
    assert r.summary["links"]["drops"] == 0
    assert r.summary["packet_rocket"]["flows_paused"] == N


@pytest.mark.parametrize("cc", ["newreno", "cubic"])
def test_incast_the_issues_reading_is_blind_while_slow_start_overflows(cc):
    # The default ("ended", the issue's reading of On-Ramp) at B = N x IW.
    # Flow f's first echo is of its first segment, f-th served: an excess of
    # f tau, so flows f >= 5 pause for f tau - T < 13.5 us (flows 0-4 at their
    # second echo, for (N - 1 + f) tau - T < 18.4 us), which ends before the
    # flow's next ACK (N tau = 19.7 us later). Every later echo of the first
    # window is of a packet stamped before that pause ended: ignored. The
    # first echo that counts is of a packet sent after a first pause (the
    # earliest ends 17.9 us in) behind at least (N - 1) x IW = 150 queued:
    # it returns no earlier than 17.9 + 150 tau = 202.5 us. Until then every
    # ACK (one per tau from 10.6 us: at least 155) releases two segments, so
    # at least 160 + 2 x 155 = 470 reach the port, which sends at most 162
    # and holds 160: at least 148 drop, less those still on the wire at the
    # end (at most two per sender, 32): at least 116.
    r = _incast(N * IW, 5_000_000, cc)
    assert r.summary["links"]["drops"] >= 116


def test_same_seed_identical_bytes_with_packet_rocket():
    a, b = _incast(N * IW, 5_000_000), _incast(N * IW, 5_000_000)
    assert a.summary["packet_rocket"]["pauses"] > 0
    assert a.flows_parquet == b.flows_parquet and a.links_parquet == b.links_parquet
    assert a.summary["packet_rocket"] == b.summary["packet_rocket"]


def test_off_absent_and_null_give_identical_bytes():
    raw = {"name": "incast", "flows_csv": "examples/incast_flows.csv",
           "topology": {"kind": "star", "hosts": 9, "link_rate_bps": "10Gbps", "link_delay_ps": "5us"},
           "queue": {"limit_packets": 64, "ecn_threshold_packets": "off"}, "transport": {"cc": "newreno"}}
    absent = simulate(Scenario.from_dict(raw))
    raw["transport"]["packet_rocket_threshold_ps"] = None
    null = simulate(Scenario.from_dict(raw))
    assert absent.summary["links"]["drops"] > 0  # the example's incast does drop
    assert absent.flows_parquet == null.flows_parquet and absent.links_parquet == null.links_parquet
    assert "packet_rocket" not in absent.summary and "packet_rocket" not in null.summary


# ---------------------------------------------------------------- bad input
def test_negative_threshold_refused():
    with pytest.raises(ScenarioError, match="packet_rocket_threshold_ps"):
        Scenario.from_dict({"name": "x", "topology": {"kind": "star", "hosts": 2},
                            "transport": {"packet_rocket_threshold_ps": -1}})


def test_negative_threshold_exit_2(tmp_path):
    (tmp_path / "s.toml").write_text('name = "x"\n[topology]\nkind = "star"\nhosts = 2\n'
                                     '[transport]\npacket_rocket_threshold_ps = "-5us"\n'
                                     '[[flows]]\nsrc = 0\ndst = 1\nsize_bytes = 1000\n')
    r = run_cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "packet_rocket_threshold_ps" in r.stderr + r.stdout
    assert not (tmp_path / "out").exists()


def test_flow_backend_refuses_packet_rocket():
    with pytest.raises(ScenarioError, match="packet_rocket_threshold_ps"):
        Scenario.from_dict({"name": "x", "backend": "flow", "topology": {"kind": "star", "hosts": 2},
                            "transport": {"packet_rocket_threshold_ps": "10us"}})


def test_clock_defaults_to_estimated_with_clocks_else_ideal():
    from fabriclab.scenario.fabric import rocket_clock
    base = {"name": "x", "topology": {"kind": "star", "hosts": 2}}
    assert rocket_clock(Scenario.from_dict(base)) == "ideal"
    assert rocket_clock(Scenario.from_dict({**base, "clocks": {}})) == "estimated"
    assert rocket_clock(Scenario.from_dict({**base, "clocks": {},
                                            "transport": {"packet_rocket_clock": "ideal"}})) == "ideal"


def test_host_clocks_without_clocks_section_refused():
    # "host" reads each host's [clocks] reading; a scenario without [clocks] has none to read, and was once run on
    # true time without a word.
    raw = {"name": "x", "topology": {"kind": "star", "hosts": 3, "link_rate_bps": "10Gbps", "link_delay_ps": "1us"},
           "flows": [{"src": 0, "dst": 1, "size_bytes": 1000, "start_ps": 0}],
           "transport": {"packet_rocket_threshold_ps": 0, "packet_rocket_clock": "host"}}
    with pytest.raises(ScenarioError, match="packet_rocket_clock"):
        Scenario.from_dict(raw)
    raw["transport"]["packet_rocket_clock"] = "ideal"
    Scenario.from_dict(raw)


# ---------------------------------------------------------------- which senders run it
def _two_pairs(tmp_path, hosts="absent", threshold="30us", packets=6, limit_packets=100):
    """Two of `_two_rates`'s paths through one switch, on ports of their own:
    h0 -(10G)- s0 -(1G)- h1 and h2 -(10G)- s0 -(1G)- h3; flow 0 (A) from h0
    to h1 and flow 1 (B) from h2 to h3, `packets` full segments each, both at 0."""
    (tmp_path / "topo.toml").write_text(
        'nodes = [{name = "h0", kind = "host"}, {name = "h1", kind = "host"}, {name = "h2", kind = "host"},\n'
        '         {name = "h3", kind = "host"}, {name = "s0", kind = "switch"}]\n'
        'links = [{a = "h0", b = "s0", rate_bps = 10000000000, delay_ps = 1000000},\n'
        '         {a = "s0", b = "h1", rate_bps = 1000000000, delay_ps = 1000000},\n'
        '         {a = "h2", b = "s0", rate_bps = 10000000000, delay_ps = 1000000},\n'
        '         {a = "s0", b = "h3", rate_bps = 1000000000, delay_ps = 1000000}]\n')
    raw = {"name": "rocket-hosts", "topology": {"kind": "file", "path": str(tmp_path / "topo.toml")},
           "queue": {"limit_packets": limit_packets, "ecn_threshold_packets": None},
           "transport": {"cc": "newreno", "packet_rocket_threshold_ps": threshold},
           "flows": [{"src": 0, "dst": 1, "size_bytes": 1460 * packets},
                     {"src": 2, "dst": 3, "size_bytes": 1460 * packets}]}
    if hosts != "absent":
        raw["transport"]["packet_rocket_hosts"] = hosts
    return simulate(Scenario.from_dict(raw))


def _flow_rows(r) -> list[dict]:
    from fabriclab.sim.results import read_parquet_bytes
    return sorted(read_parquet_bytes(r.flows_parquet).to_pylist(), key=lambda f: f["flow_id"])


@pytest.mark.parametrize("on", [0, 2], ids=["A-only", "B-only"])
def test_only_listed_senders_pause_by_hand(tmp_path, on):
    # Each pair alone is `test_one_pause_of_owd_minus_base_minus_threshold`'s
    # path: with Packet Rocket its sender pauses once, for 3,220,800 ps. With
    # host `on` listed alone, one connection runs the rule and pauses so.
    pr = _two_pairs(tmp_path, hosts=[on]).summary["packet_rocket"]
    assert (pr["connections"], pr["pauses"], pr["paused_ps"]) == (1, 1, 3 * (SLOW_PKT_PS - FAST_PKT_PS) - 30_000_000)
    assert _two_pairs(tmp_path).summary["packet_rocket"]["pauses"] == 2  # with every host: one per sender


@pytest.mark.parametrize("on", [0, 2], ids=["A-only", "B-only"])
def test_unlisted_senders_run_as_with_packet_rocket_off(tmp_path, on):
    # 20 segments into a 10-packet port: here a pause does move a flow's
    # finish (checked first, so the equalities after it can fail). The pairs
    # share no port and are mirror images: with host `on` listed alone, its
    # flow runs as in the run where every host runs Packet Rocket (half of
    # that run's pauses and paused time), and the other flow as in the run
    # with Packet Rocket off, row for row.
    def run(**kw):
        return _two_pairs(tmp_path, packets=20, limit_packets=10, **kw)
    off, every, some = run(threshold=None), run(), run(hosts=[on])
    f_off, f_every, f_some = _flow_rows(off), _flow_rows(every), _flow_rows(some)
    assert f_every[0]["end_ps"] != f_off[0]["end_ps"] and f_every[1]["end_ps"] != f_off[1]["end_ps"]
    mine, other = (0, 1) if on == 0 else (1, 0)
    assert f_some[other] == f_off[other]
    assert f_some[mine] == f_every[mine]
    e, s = every.summary["packet_rocket"], some.summary["packet_rocket"]
    assert e["pauses"] > 0 and e["pauses"] % 2 == 0
    assert (s["connections"], 2 * s["pauses"], 2 * s["paused_ps"]) == (1, e["pauses"], e["paused_ps"])


def test_every_host_listed_and_null_give_the_bytes_of_absent(tmp_path):
    absent = _two_pairs(tmp_path)
    for hosts in (None, [0, 1, 2, 3]):
        r = _two_pairs(tmp_path, hosts=hosts)
        assert r.flows_parquet == absent.flows_parquet and r.links_parquet == absent.links_parquet
        assert r.summary["packet_rocket"] == absent.summary["packet_rocket"]
    assert absent.summary["packet_rocket"]["pauses"] == 2


def test_hosts_listed_that_send_nothing_pause_nothing(tmp_path):
    # h1 and h3 only receive: no connection runs Packet Rocket, and the run
    # is the run with it off, byte for byte.
    off, r = _two_pairs(tmp_path, threshold=None), _two_pairs(tmp_path, hosts=[1, 3])
    assert r.flows_parquet == off.flows_parquet and r.links_parquet == off.links_parquet
    assert r.summary["packet_rocket"]["pauses"] == 0


def test_hosts_without_threshold_refused():
    with pytest.raises(ScenarioError, match="packet_rocket_hosts.*packet_rocket_threshold_ps"):
        Scenario.from_dict({"name": "x", "topology": {"kind": "star", "hosts": 2},
                            "transport": {"packet_rocket_hosts": [0]}})


def test_hosts_repeated_refused():
    with pytest.raises(ScenarioError, match="packet_rocket_hosts"):
        Scenario.from_dict({"name": "x", "topology": {"kind": "star", "hosts": 2},
                            "transport": {"packet_rocket_threshold_ps": "10us", "packet_rocket_hosts": [1, 1]}})


@pytest.mark.parametrize("transport,words", [
    ('packet_rocket_threshold_ps = "10us"\npacket_rocket_hosts = [0, 2]\n', ["host 2", "0..1"]),
    ('packet_rocket_hosts = [0]\n', ["packet_rocket_threshold_ps"]),
    ('packet_rocket_threshold_ps = "10us"\npacket_rocket_hosts = [-1]\n', []),
], ids=["out-of-range", "no-threshold", "negative"])
def test_bad_hosts_exit_2(tmp_path, transport, words):
    (tmp_path / "s.toml").write_text('name = "x"\n[topology]\nkind = "star"\nhosts = 2\n'
                                     f'[transport]\n{transport}'
                                     '[[flows]]\nsrc = 0\ndst = 1\nsize_bytes = 1000\n')
    r = run_cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"))
    out = r.stderr + r.stdout
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "packet_rocket_hosts" in out and all(w in out for w in words), out
    assert not (tmp_path / "out").exists()

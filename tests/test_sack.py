"""transport.sack end to end on the packet backend: conservation laws on a
lossy run (every data packet that left the sender is either dropped or
answered by exactly one ACK, and the sender sent each segment once plus its
retransmissions), the ACKs' wire sizes with their SACK options, and a run
without SACK unchanged by the field's existence (docs/scenario.md)."""

from pathlib import Path

from fabriclab import Scenario, simulate

MSS = 1460
WIRE_DATA = MSS + 58 + 20   # 1538: payload + headers + preamble/gap
WIRE_ACK = 84               # a bare ACK: the 64-byte minimum frame + 20


def _dumbbell(tmp_path: Path, sack: bool | None, cc: str = "cubic") -> Scenario:
    # 10 Gbit/s into 1 Gbit/s behind a 60-packet drop-tail buffer: slow start overshoots and drops.
    (tmp_path / "topo.toml").write_text(
        'nodes = [{name = "h0", kind = "host"}, {name = "h1", kind = "host"}, {name = "s0", kind = "switch"}]\n'
        'links = [{a = "h0", b = "s0", rate_bps = 10000000000, delay_ps = 10000000},\n'
        '         {a = "s0", b = "h1", rate_bps = 1000000000, delay_ps = 10000000}]\n')
    transport = {"cc": cc, "min_rto_ps": 1_000_000_000}
    if sack is not None:
        transport["sack"] = sack
    return Scenario.from_dict({
        "name": "sack", "topology": {"kind": "file", "path": str(tmp_path / "topo.toml")},
        "queue": {"limit_packets": 60, "ecn_threshold_packets": None},
        "transport": transport,
        "flows": [{"src": 0, "dst": 1, "size_bytes": 1000 * MSS}]})


def test_a_lossy_sack_run_conserves_packets_and_carries_the_options_on_its_acks(tmp_path):
    r = simulate(_dumbbell(tmp_path, True))
    links = r.links.set_index(["src_node", "dst_node"])
    retx = int(r.flows["retransmits"].iloc[0])
    drops = int(links.loc[("s0", "h1"), "drops"])
    assert drops > 0 and int(links["drops"].sum()) == drops  # losses only at the bottleneck
    sent = int(links.loc[("h0", "s0"), "packets"])
    assert sent == 1000 + retx                                # each segment once, plus retransmissions
    assert int(links.loc[("h0", "s0"), "bytes"]) == sent * WIRE_DATA
    arrived = int(links.loc[("s0", "h1"), "packets"])
    assert arrived == sent - drops
    acks = int(links.loc[("h1", "s0"), "packets"])
    assert acks == arrived                                    # one ACK per data packet
    # Each ACK is 84 wire bytes, plus 4 + 8 n with n = 1..3 SACK blocks (90, 98, 106): so the
    # extra over 84 each is even and at most 22 per ACK, and some ACKs carry blocks.
    extra = int(links.loc[("h1", "s0"), "bytes"]) - acks * WIRE_ACK
    assert 0 < extra <= 22 * acks and extra % 2 == 0
    assert r.flows["end_ps"].notna().all()


def test_sack_off_is_the_run_without_the_field(tmp_path):
    a, b = simulate(_dumbbell(tmp_path, None)), simulate(_dumbbell(tmp_path, False))
    assert a.flows.equals(b.flows) and a.links.equals(b.links)
    # Bare ACKs only without SACK.
    links = a.links.set_index(["src_node", "dst_node"])
    assert int(links.loc[("h1", "s0"), "bytes"]) == int(links.loc[("h1", "s0"), "packets"]) * WIRE_ACK


def test_sack_runs_are_deterministic(tmp_path):
    a, b = simulate(_dumbbell(tmp_path, True)), simulate(_dumbbell(tmp_path, True))
    assert a.flows.equals(b.flows) and a.links.equals(b.links)


def test_newreno_with_sack_resends_exactly_what_the_bottleneck_drops(tmp_path):
    # A FIFO path that loses no ACK and reorders nothing: every segment the receiver lacks was
    # dropped once at the bottleneck, so a sender that trusts its SACK blocks and never times out
    # resends exactly the drops (review_sack T1; NewReno without SACK resends 225 for 101 drops).
    r = simulate(_dumbbell(tmp_path, True, "newreno"))
    drops, retx = int(r.links["drops"].sum()), int(r.flows["retransmits"].iloc[0])
    assert drops > 0 and retx == drops
    # No timeout: the flow ends within one minimum RTO (1 ms) of its ideal FCT.
    assert int(r.flows["fct_ps"].iloc[0]) < int(r.flows["ideal_fct_ps"].iloc[0]) + 1_000_000_000

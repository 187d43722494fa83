"""The ns-3 harness's handshake and seed options (benches/ns3); needs no ns-3.

With ``--handshake`` fabriclab's side opens every flow with SYN / SYN-ACK, as
ns-3 always does; without it, it does not. A lone flow of that scenario then
takes the hand model's transfer plus one SYN round trip (two 84-byte frames
each way over two links, store and forward)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fabriclab import Scenario, simulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches" / "ns3"))
import compare  # noqa: E402
import flows as gen  # noqa: E402

ACK_WIRE_BYTES = 84


@pytest.mark.parametrize("handshake", [False, True])
def test_scenario_opens_flows_with_a_handshake_only_when_asked(tmp_path, handshake):
    s = gen.Setup(topology="star", hosts=4, load=0.2, duration_ps=20_000_000_000, seed=5, handshake=handshake)
    gen.write_case(s, tmp_path)
    assert Scenario.load(tmp_path / "scenario.toml").transport.handshake is handshake


def test_a_lone_flow_of_the_handshake_scenario_pays_one_syn_round_trip(tmp_path):
    # The harness's star (10 Gbit/s, 10 us links) with one 1-segment flow:
    # data time is the same with and without the handshake, which adds
    # SYN + SYN-ACK, each 2 links x (84 B at 10 Gbit/s + 10 us).
    s = gen.Setup(topology="star", hosts=4, load=0.2, duration_ps=20_000_000_000, seed=5, handshake=True)
    gen.write_case(s, tmp_path)
    sc = Scenario.load(tmp_path / "scenario.toml")
    one = [{"src": 0, "dst": 1, "size_bytes": 1000, "start_ps": 0}]
    with_hs = simulate(sc.replace(flows=one)).flows.fct_ps.iloc[0]
    plain = simulate(sc.replace(flows=one, transport=sc.transport.model_copy(update={"handshake": False})))
    syn_rtt_ps = 4 * (ACK_WIRE_BYTES * 8 * 1e12 / s.link_rate_bps + s.delay_ps())
    assert with_hs - plain.flows.fct_ps.iloc[0] == pytest.approx(syn_rtt_ps, abs=4)


@pytest.mark.parametrize("text", ["2,x", "2,2", "-1"])
def test_bad_seeds_name_the_option(text):
    with pytest.raises(gen.SetupError, match="--seeds"):
        compare.parse_seeds(text, 1)


def test_seeds_default_to_the_single_seed():
    assert compare.parse_seeds(None, 7) == [7]
    assert compare.parse_seeds("2,3", 7) == [2, 3]

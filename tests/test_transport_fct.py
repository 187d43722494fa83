"""Test 1: one flow through one switch matches serialization + propagation +
slow-start rounds computed by hand (an independent model of the TCP rules:
initial window 10, one more segment per ACK in slow start, per-packet ACKs,
store-and-forward at the switch)."""

import math

import pytest

from fabriclab import Scenario, simulate

from conftest import star_scenario

MSS = 1460


def wire(payload: int) -> int:
    # payload + 40 IP/TCP + 18 Ethernet header/FCS, min frame 64, + 20 preamble/IFG
    return max(payload + 58, 64) + 20


def hand_fct_ps(size: int, rate_bps: int, delay_ps: int, iw: int = 10) -> float:
    n = math.ceil(size / MSS)
    pay = [MSS] * (n - 1) + [size - MSS * (n - 1)]
    ser = lambda b: b * 8 / rate_bps * 1e12  # noqa: E731
    nic_free = sw_free = ack_nic_free = ack_sw_free = 0.0
    ack_at = []  # ACK i (acknowledging packet i) arrival time at the sender
    arrive_rx = 0.0
    for j in range(n):
        # Packet j may leave once the window allows: after ACK k, the window
        # admits packets 0 .. (k+1) + (iw + k + 1) - 1 = 2k + iw + 1.
        if j < iw:
            eligible = 0.0
        else:
            k = math.ceil((j - iw - 1) / 2)
            eligible = ack_at[k]
        start = max(eligible, nic_free)
        nic_free = start + ser(wire(pay[j]))
        at_switch = nic_free + delay_ps
        sw_start = max(at_switch, sw_free)
        sw_free = sw_start + ser(wire(pay[j]))
        arrive_rx = sw_free + delay_ps
        # The receiver's ACK crosses back: receiver NIC, switch port, two links.
        a_start = max(arrive_rx, ack_nic_free)
        ack_nic_free = a_start + ser(wire(0))
        a_sw = max(ack_nic_free + delay_ps, ack_sw_free)
        ack_sw_free = a_sw + ser(wire(0))
        ack_at.append(ack_sw_free + delay_ps)
        # ACKs of packets sent later cannot be needed before they exist: the
        # recurrence only ever looks back, since k < j.
    return arrive_rx


@pytest.mark.parametrize("rate_bps", [1_000_000_000, 10_000_000_000, 40_000_000_000])
@pytest.mark.parametrize("size", [1_000, 20_000, 150_000, 1_000_000, 10_000_000])
def test_single_flow_fct_matches_slow_start_by_hand(size, rate_bps):
    delay_ps = 10_000_000
    s = star_scenario(
        hosts=2, rate=rate_bps, delay=delay_ps,
        transport={"cc": "newreno"},
        flows=[{"src": 0, "dst": 1, "size_bytes": size}],
    )
    fct = simulate(s).flows["fct_ps"].iloc[0]
    expect = hand_fct_ps(size, rate_bps, delay_ps)
    assert abs(fct - expect) / expect < 0.02, (fct, expect)
    # Tighter: the model and the simulator differ only by picosecond rounding
    # of each serialization time.
    assert abs(fct - expect) <= 4 * math.ceil(size / MSS), (fct, expect)


def test_ideal_fct_is_line_rate_train_plus_store_and_forward():
    size, rate, delay = 1_000_000, 10_000_000_000, 10_000_000
    s = star_scenario(hosts=2, rate=rate, delay=delay, flows=[{"src": 0, "dst": 1, "size_bytes": size}])
    ideal = simulate(s).flows["ideal_fct_ps"].iloc[0]
    n_full, rest = divmod(size, MSS)
    total_wire = n_full * wire(MSS) + (wire(rest) if rest else 0)
    # At the switch the short last packet waits for the full one before it,
    # so the second hop adds a full packet's time, not the last packet's.
    largest = wire(MSS) if n_full else wire(rest)
    expect = total_wire * 8 / rate * 1e12 + largest * 8 / rate * 1e12 + 2 * delay
    assert abs(ideal - expect) <= 2
    # The hand model of a lone NewReno flow gives the same once its window no longer limits it.
    assert hand_fct_ps(size, rate, delay, iw=10**6) == pytest.approx(expect, abs=4 * n_full)


def test_persistent_connection_skips_slow_start_unless_idle():
    size, rate, delay = 1_000_000, 40_000_000_000, 10_000_000

    def second_fct(persistent, gap_ps):
        first_end = hand_fct_ps(size, rate, delay)
        s = star_scenario(
            hosts=2, rate=rate, delay=delay,
            transport={"cc": "newreno", "persistent_connections": persistent},
            flows=[{"src": 0, "dst": 1, "size_bytes": size},
                   {"src": 0, "dst": 1, "size_bytes": size, "start_ps": int(first_end + gap_ps)}],
        )
        f = simulate(s).flows.sort_values("flow_id")
        return f["fct_ps"].iloc[0], f["fct_ps"].iloc[1]

    first, fresh = second_fct(False, 500_000_000)
    assert fresh == first  # each message is a new connection
    first, warm = second_fct(True, 500_000_000)  # idle 0.5 ms < RTO (1 ms minimum)
    assert warm < 0.8 * first  # at 40 Gbit/s slow start costs a third of a 1 MB transfer
    # With the whole window open, the message goes at line rate: its ideal FCT.
    ideal = simulate(star_scenario(hosts=2, rate=rate, delay=delay, flows=[{"src": 0, "dst": 1, "size_bytes": size}]))
    assert int(warm) == pytest.approx(int(ideal.flows["ideal_fct_ps"].iloc[0]), rel=1e-3)
    first, cold = second_fct(True, 50_000_000_000)  # idle 50 ms > RTO: slow start again
    assert cold == first


@pytest.mark.parametrize("size", [1_000, 150_000, 1_000_000])
def test_handshake_adds_one_syn_round_trip_to_a_lone_flow(size):
    """With `handshake`, the data starts when the SYN-ACK is back: a SYN and
    a SYN-ACK (84 wire bytes each) cross two links each way, store and
    forward, before the hand model's transfer begins on an empty network."""
    rate, delay = 10_000_000_000, 10_000_000
    s = star_scenario(hosts=2, rate=rate, delay=delay, transport={"cc": "newreno", "handshake": True},
                      flows=[{"src": 0, "dst": 1, "size_bytes": size}])
    fct = simulate(s).flows["fct_ps"].iloc[0]
    handshake = 4 * (wire(0) * 8 / rate * 1e12 + delay)
    expect = handshake + hand_fct_ps(size, rate, delay)
    assert abs(fct - expect) <= 4 * math.ceil(size / MSS) + 4, (fct, expect)


def test_persistent_connections_shake_hands_once():
    rate, delay, size = 10_000_000_000, 10_000_000, 20_000
    first_end = 4 * (wire(0) * 8 / rate * 1e12 + delay) + hand_fct_ps(size, rate, delay)
    s = star_scenario(hosts=2, rate=rate, delay=delay,
                      transport={"cc": "newreno", "handshake": True, "persistent_connections": True},
                      flows=[{"src": 0, "dst": 1, "size_bytes": size},
                             {"src": 0, "dst": 1, "size_bytes": size, "start_ps": int(first_end + 100_000_000)}])
    f = simulate(s).flows.sort_values("flow_id")
    # The second message continues the open connection: no SYN, and its window carries over.
    assert f["fct_ps"].iloc[1] < f["fct_ps"].iloc[0] - 4 * delay


def test_a_lone_dcqcn_flow_is_paced_at_line_rate_and_finishes_at_its_ideal_fct():
    """No congestion, no CNP: DCQCN sends one packet per wire time at the
    NIC's rate, so the transfer is the ideal train (no slow start)."""
    size, rate, delay = 1_000_000, 10_000_000_000, 10_000_000
    s = star_scenario(hosts=2, rate=rate, delay=delay, transport={"cc": "dcqcn"},
                      flows=[{"src": 0, "dst": 1, "size_bytes": size}])
    f = simulate(s).flows
    assert abs(int(f["fct_ps"].iloc[0]) - int(f["ideal_fct_ps"].iloc[0])) <= math.ceil(size / MSS)


def test_two_dcqcn_flows_into_one_port_share_it_and_keep_it_busy():
    """A 2-to-1 incast at 10 Gbit/s over a lossless class with step marking:
    the CNPs bring both flows to about half the port each, and the port
    stays busy (DCQCN's purpose, Zhu et al. section 3)."""
    size, rate = 20_000_000, 10_000_000_000
    s = star_scenario(hosts=3, rate=rate, delay=2_000_000,
                      # The paper's rate-increase timer (55 us), not the NIC default's 1.5 ms.
                      transport={"cc": "dcqcn", "dcqcn": {"increase_interval_ps": "55us"}},
                      queue={"ecn_threshold_packets": 20, "limit_packets": "off"},
                      pfc={"classes": [0]},
                      flows=[{"src": 0, "dst": 2, "size_bytes": size}, {"src": 1, "dst": 2, "size_bytes": size}])
    r = simulate(s)
    f = r.flows.sort_values("flow_id")
    fct = f["fct_ps"].to_numpy(dtype=float)
    # Both finish close together (a fair share), and the pair moves 2 x 20 MB at over 90 % of 10 Gbit/s.
    assert abs(fct[0] - fct[1]) / fct.max() < 0.1, fct
    assert 2 * size * 8 / (fct.max() / 1e12) > 0.9 * rate
    l = r.links
    assert l.drops.sum() == 0
    # It is DCQCN, not PFC, that shares the port: the switch marks, no PAUSE
    # is ever sent, and the queue stays near the 20-packet threshold (PFC
    # alone, without marking, would hold it at its XOFF level).
    port = l[(l.src_node == "s0") & (l.dst_node == "h2")].iloc[0]
    assert port.ecn_marks > 0
    assert l.pause_frames_sent.sum() == 0
    assert port.mean_queue_bytes < 2 * 20 * 1538


def _grid_fct_ps(wires, rates, delay_ps):
    """Store and forward by the recurrence F(k, h) = max(F(k, h-1), F(k-1, h)) + ser(k, h)."""
    prev = [0.0] * len(rates)
    for w in wires:
        cur, t = [], 0.0
        for h, r in enumerate(rates):
            t = max(t, prev[h]) + w * 8 / r * 1e12
            cur.append(t)
        prev = cur
    return prev[-1] + delay_ps * len(rates)


@pytest.mark.parametrize("size", [1000, 1560, 13_000, 14_600])
def test_ideal_fct_is_exact_store_and_forward_on_unequal_rates(size):
    """100 Gbit/s hosts under 40 Gbit/s leaf-spine links: the ideal FCT equals
    the packet-by-packet recurrence, and a lone flow within its initial
    window (no ACK clocking) achieves it on the packet backend."""
    host, spine, d = 100 * 10**9, 40 * 10**9, 1_000_000
    s = Scenario.from_dict({
        "topology": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 1, "spines": 1,
                     "link_rate_bps": host, "spine_link_rate_bps": spine, "link_delay_ps": d},
        "transport": {"cc": "newreno"},
        "flows": [{"src": 0, "dst": 1, "size_bytes": size}],
    })
    f = simulate(s).flows
    n = math.ceil(size / MSS)
    wires = [wire(MSS)] * (n - 1) + [wire(size - MSS * (n - 1))]
    expect = _grid_fct_ps(wires, [host, spine, spine, host], d)
    assert abs(int(f["ideal_fct_ps"].iloc[0]) - expect) <= 4 * n
    assert abs(int(f["fct_ps"].iloc[0]) - expect) <= 4 * n

"""The host NIC queue the ns-3 comparison gives every host (benches/ns3: a
RED step marker at K on host ports too), against a hand count: marks come
from the documented rule, a packet is marked when the band it joins already
holds more than K waiting packets, the one on the wire not counted."""

import pytest

from conftest import star_scenario
from fabriclab import simulate

MSS = 1460


@pytest.mark.parametrize("k", [1, 3, 5, 8, 9])
def test_host_nic_marks_the_initial_window_beyond_k(k):
    # One DCTCP flow of exactly its initial window (10 segments) leaves at
    # t = 0 back to back: segment 1 goes on the wire at once, segment i >= 2
    # joins a band holding i - 2 packets, so segments i > K + 2 are marked:
    # max(0, 8 - K) marks on h0's NIC. The switch forwards at the arrival
    # rate (equal links), so its queue never holds a packet; ACKs carry no ECT.
    s = star_scenario(2, "10Gbps", "1us", transport={"cc": "dctcp", "init_cwnd_packets": 10},
                      host_queue={"ecn_threshold_packets": k},
                      flows=[{"src": 0, "dst": 1, "size_bytes": 10 * MSS, "start_ps": 0}])
    links = simulate(s).links
    nic = links[(links.src_node == "h0") & (links.dst_node == "s0")].iloc[0]
    assert nic.ecn_marks == max(0, 8 - k)
    assert links.ecn_marks.sum() == nic.ecn_marks

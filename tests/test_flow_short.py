"""The flow backend's short-flow model against the packet backend: a lone
flow's FCT equals the independent slow-start hand model of the packet
backend's TCP (test_transport_fct.hand_fct_ps), and a short flow behind long
flows waits about what the packet backend's queues make it wait."""

import pytest

from fabriclab import simulate

from conftest import star_scenario
from test_transport_fct import hand_fct_ps

D = 10_000_000


@pytest.mark.parametrize("packets", [1, 10, 100, 1000])
def test_lone_flow_matches_the_packet_backends_slow_start_by_hand(packets):
    size = packets * 1460
    s = star_scenario(hosts=2, backend="flow", flows=[{"src": 0, "dst": 1, "size_bytes": size}])
    fct = simulate(s).flows["fct_ps"].iloc[0]
    assert abs(int(fct) - hand_fct_ps(size, 10_000_000_000, D)) <= 4 * packets


def test_fluid_model_is_explicit_and_has_no_rounds():
    size = 100 * 1460
    s = star_scenario(hosts=2, backend="flow", flow_model="fluid", flows=[{"src": 0, "dst": 1, "size_bytes": size}])
    assert simulate(s).flows["fct_ps"].iloc[0] == 100 * 1538 * 800 + 2 * D


LONG = {"src": 0, "dst": 2, "size_bytes": 10_000_000}


@pytest.mark.parametrize("flows", [
    [LONG, {"src": 0, "dst": 3, "size_bytes": 1460, "start_ps": 2_000_000_000}],  # TSQ queue at h0's NIC
    [LONG, {"src": 1, "dst": 2, "size_bytes": 1460, "start_ps": 2_000_000_000}],  # no queue at the switch
    [LONG, {"src": 1, "dst": 2, "size_bytes": 10_000_000},
     {"src": 3, "dst": 2, "size_bytes": 1460, "start_ps": 2_000_000_000}],  # DCTCP queue at the switch
], ids=["same-nic", "same-destination", "dctcp-bottleneck"])
def test_short_flow_behind_long_flows_close_to_the_packet_backend(flows):
    def last_fct(backend):
        s = star_scenario(hosts=4, backend=backend, transport={"cc": "dctcp"}, flows=flows)
        return int(simulate(s).flows.sort_values("flow_id")["fct_ps"].iloc[-1])

    packet, flow = last_fct("packet"), last_fct("flow")
    assert abs(flow - packet) / packet < 0.05, (flow, packet)

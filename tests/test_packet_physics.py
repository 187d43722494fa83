"""Tests 2-5: sharing a bottleneck, strict priority, ECN marking, conservation."""

import numpy as np

from fabriclab import simulate

from conftest import star_scenario

RATE = 10_000_000_000
PAYLOAD_FRACTION = 1460 / 1538  # goodput of full segments at line rate


def jain(x):
    x = np.asarray(x, dtype=float)
    return x.sum() ** 2 / (len(x) * (x ** 2).sum())


def test_dctcp_incast_of_long_flows_fills_link_fairly_without_drops():
    n, size, k_pkts, buffer_pkts = 4, 20_000_000, 20, 200
    s = star_scenario(
        hosts=n + 1, rate=RATE, delay="10us",
        queue={"limit_packets": buffer_pkts, "ecn_threshold_packets": k_pkts},
        transport={"cc": "dctcp"},
        flows=[{"src": i, "dst": n, "size_bytes": size} for i in range(n)],
    )
    r = simulate(s)
    f, links = r.flows, r.links
    assert f["fct_ps"].notna().all()
    span_s = (f["end_ps"].max() - f["start_ps"].min()) / 1e12
    goodput = n * size * 8 / span_s
    assert goodput >= 0.95 * RATE * PAYLOAD_FRACTION, goodput / (RATE * PAYLOAD_FRACTION)
    thr = size * 8 / (f["fct_ps"] / 1e12)
    assert jain(thr) >= 0.95
    bott = links[(links.src_node == "s0") & (links.dst_node == f"h{n}")].iloc[0]
    assert links["drops"].sum() == 0
    assert bott.ecn_marks > 0
    # DCTCP analysis (Alizadeh et al. SIGCOMM'10 §3.3): the queue peaks near
    # K + N packets and swings by about A = 0.5 * sqrt(2 N (C*RTT + K)).
    rtt_pkts = 2 * 2 * 10e-6 * RATE / 8 / 1538
    amp = 0.5 * np.sqrt(2 * n * (rtt_pkts + k_pkts))
    mean_pkts = bott.mean_queue_bytes / 1538
    assert k_pkts - amp <= mean_pkts <= k_pkts + n, (mean_pkts, k_pkts, amp)
    assert bott.max_queue_bytes < buffer_pkts * 1538


def test_newreno_shares_fairly_and_recovers_from_drops():
    n, size = 3, 5_000_000
    s = star_scenario(
        hosts=n + 1, rate=RATE, delay="10us",
        queue={"limit_packets": 40, "ecn_threshold_packets": None},
        transport={"cc": "newreno"},
        flows=[{"src": i, "dst": n, "size_bytes": size} for i in range(n)],
    )
    r = simulate(s)
    assert r.links["drops"].sum() > 0  # the small buffer overflows
    assert r.flows["fct_ps"].notna().all()
    assert r.summary["in_flight_at_end"] == 0
    span_s = (r.flows["end_ps"].max() - r.flows["start_ps"].min()) / 1e12
    assert n * size * 8 / span_s >= 0.9 * RATE * PAYLOAD_FRACTION
    assert jain(size * 8 / (r.flows["fct_ps"] / 1e12)) >= 0.95


def _mouse_with_elephant(discipline, elephant: bool):
    flows = [{"src": 1, "dst": 2, "size_bytes": 1_000_000, "start_ps": "5ms", "class": 0}]
    if elephant:
        flows.insert(0, {"src": 0, "dst": 2, "size_bytes": 60_000_000, "start_ps": 0, "class": 1})
    s = star_scenario(
        hosts=3, rate=RATE, delay="10us",
        queue={"discipline": discipline, "bands": 3, "limit_packets": 1000, "ecn_threshold_packets": 65},
        transport={"cc": "dctcp"},
        flows=flows,
    )
    f = simulate(s).flows
    return f, f[f["class"] == 0]["fct_ps"].iloc[0]


def test_strict_priority_keeps_high_class_at_its_solo_fct():
    _, solo = _mouse_with_elephant("prio", elephant=False)
    f, shared = _mouse_with_elephant("prio", elephant=True)
    assert abs(shared - solo) / solo <= 0.02, (shared, solo)
    assert f["fct_ps"].notna().all()  # the elephant completes
    # Without priority the same mouse is slowed by the elephant's queue.
    _, fifo = _mouse_with_elephant("fifo", elephant=True)
    assert fifo > 1.05 * solo


def test_ecn_marks_only_when_queue_exceeds_threshold():
    flows = [{"src": i, "dst": 3, "size_bytes": 3_000_000} for i in range(3)]
    base = dict(hosts=4, rate=RATE, delay="10us", transport={"cc": "dctcp"}, flows=flows)
    # K above anything the buffer can hold: never marked.
    r = simulate(star_scenario(queue={"limit_packets": 100, "ecn_threshold_packets": 100}, **base))
    assert r.links["ecn_marks"].sum() == 0
    # Low K: marks appear, and only on ports whose queue went above K.
    k = 10
    r = simulate(star_scenario(queue={"limit_packets": 100, "ecn_threshold_packets": k}, **base))
    marked = r.links[r.links.ecn_marks > 0]
    assert len(marked) >= 1
    assert (marked.max_queue_bytes > k * 1538).all()
    unmarked_small = r.links[r.links.max_queue_bytes <= k * 84]
    assert (unmarked_small.ecn_marks == 0).all()


def test_every_flow_delivered_and_network_empty_after_lossy_background():
    s = star_scenario(
        hosts=6, rate=RATE, delay="5us",
        queue={"limit_packets": 30, "ecn_threshold_packets": None},
        transport={"cc": "newreno"},
        traffic=[{"load": 0.6, "cdf": "websearch", "duration_ps": "50ms"}],
    )
    r = simulate(s)
    assert r.links["drops"].sum() > 0
    assert r.summary["retransmits"] > 0
    assert r.flows["fct_ps"].notna().all()
    assert r.summary["in_flight_at_end"] == 0
    # Every host-to-switch link carried at least the wire bytes of the data
    # its host sent (retransmissions and ACKs only add to it).
    f = r.flows
    n_full = f.size_bytes // 1460
    rest = f.size_bytes % 1460
    wire = n_full * 1538 + np.where(rest > 0, np.maximum(rest + 58, 64) + 20, 0)
    sent = wire.groupby(f.src).sum()
    for h, b in sent.items():
        link = r.links[(r.links.src_node == f"h{h}") & (r.links.dst_node == "s0")].iloc[0]
        assert link.bytes >= b

"""TCP CUBIC (RFC 9438) on the packet backend, end to end (issue 27).

A lone flow through one drop-tail bottleneck whose queue never empties: its
window is the bottleneck's queue plus the path's bandwidth-delay product,
so the queue samples show the window. Every expected number below is worked
out by hand from the RFC's formulas and the path's rates and delays (the
Rust tests in crates/fabriclab-core/tests/cubic.rs drive the controller
itself)."""

from itertools import pairwise

import numpy as np
from fabriclab import simulate
from fabriclab.scenario.model import Scenario

WIRE = 1538  # wire bytes of a full 1460-byte segment
ACK_WIRE = 84
C, BETA = 0.4, 0.7
ALPHA = 3 * (1 - BETA) / (1 + BETA)


def _dumbbell(tmp_path, fast_bps, bottleneck_bps, delay_ps, limit, size, cc="cubic", sample_ps=10_000_000_000,
              min_rto_ps=200_000_000_000):
    (tmp_path / "topo.toml").write_text(
        'nodes = [{name = "h0", kind = "host"}, {name = "h1", kind = "host"}, {name = "s0", kind = "switch"}]\n'
        f'links = [{{a = "h0", b = "s0", rate_bps = {fast_bps}, delay_ps = {delay_ps[0]}}},\n'
        f'         {{a = "s0", b = "h1", rate_bps = {bottleneck_bps}, delay_ps = {delay_ps[1]}}}]\n')
    return Scenario.from_dict({
        "name": "cubic", "topology": {"kind": "file", "path": str(tmp_path / "topo.toml")},
        "queue": {"limit_packets": limit, "ecn_threshold_packets": None},
        # One flow alone: fast convergence (RFC 9438 §4.7, for competing flows) off, so W_max = W* each cycle.
        "transport": {"cc": cc, "cubic_fast_convergence": False, "min_rto_ps": min_rto_ps,
                      "initial_rto_ps": max(min_rto_ps, 1_000_000_000)},
        "flows": [{"src": 0, "dst": 1, "size_bytes": size}],
        "outputs": {"queues_every_ps": sample_ps}})


def _bottleneck(r):
    q = r.queues
    b = q[(q.src_node == "s0") & (q.dst_node == "h1")]
    t = b.time_ps.to_numpy() / 1e12
    drops = b.drops.to_numpy()
    at = np.nonzero(np.diff(drops))[0] + 1  # samples where a drop was counted
    return t, b.queue_bytes.to_numpy() / WIRE, t[at], at


def test_window_after_a_loss_follows_the_cubic_function(tmp_path):
    # 1 Gbit/s into a 6.152 Mbit/s bottleneck: one full packet per 2 ms (mu =
    # 500 packets/s). Base RTT = 2 * (1 us + 29 ms) propagation + 12.3 us + 2 ms
    # (the data packet's serialization) + 109.2 us + 0.7 us (the ACK's) = 60.12 ms,
    # so BDP = 30.06 packets; with a 30-packet buffer the queue overflows at a
    # window of W* = BDP + 30 = 60.06 packets. Each loss (fast convergence off)
    # sets W_max = W* and ssthresh = cwnd_epoch = 0.7 W* = 42.04: the queue falls
    # to 42.04 - 30.06 = 12 and never empties. K = cbrt((W_max - cwnd_epoch) / C)
    # = cbrt(0.75 W*) = 3.558 s. Reno-friendly W_est (0.53 segment per RTT of
    # 84-120 ms, about 5 segments/s) stays below W_cubic until near K.
    bdp = 60.122e-3 * 500
    w_star = bdp + 30
    k = (0.75 * w_star) ** (1 / 3)
    assert 3.557 < k < 3.559
    r = simulate(_dumbbell(tmp_path, 1_000_000_000, 6_152_000, (1_000_000, 29_000_000_000), 30, 36_000_000))
    _, q, t_drop, at = _bottleneck(r)
    steady = [i for i, td in enumerate(t_drop) if td > 30.0][:-1]  # the first cycles start from timeouts
    assert len(steady) >= 3
    # One packet lost per cycle: the concave approach to W_max crosses W* slowly.
    assert all(b - a > 1.0 for a, b in pairwise(t_drop) if a > 30.0)
    # The congestion avoidance stage starts when the loss is repaired: the dupacks
    # of the packets behind the lost one come back after the full queue (60 ms),
    # three packet times and the base RTT (0.124 s); the retransmission's ACK one
    # RTT later (0.12 s): d = 0.244 s after the drop.
    d = 0.244

    def queue_by_hand(x):
        tau = x - d
        return C * (tau - k) ** 3 + w_star - bdp

    for n in steady:
        i0 = at[n]
        nxt = at[n + 1]
        # The cycle's period: K plus the repair (d), within a tenth of a second.
        assert abs((t_drop[n + 1] - t_drop[n]) - (k + d)) < 0.1, t_drop[n + 1] - t_drop[n]
        # The cut: beta = 0.7 (NewReno's 0.5 would empty the queue).
        assert abs(q[i0:nxt].min() - (BETA * w_star - bdp)) < 1.5, q[i0:nxt].min()
        for x in (0.5, 1.0, 2.0, 3.0):
            j = i0 + round(x / 0.01)
            # NewReno would be at 12 + x / 0.1 packets: 17, 22, 32, 42.
            assert abs(q[j] - queue_by_hand(x)) < 2.0, (x, q[j], queue_by_hand(x))


def test_reno_friendly_region_rules_a_short_path(tmp_path):
    # 10 Gbit/s into 1 Gbit/s (mu = 81,274 packets/s), 10 us per link: base
    # RTT = 40 us + 1.23 + 12.30 (data) + 0.67 + 0.07 (ACK) = 54.27 us, BDP =
    # 4.41 packets; a 60-packet buffer gives W* = 64.41. Here K = cbrt(0.75 W*) =
    # 3.6 s while a cycle lasts milliseconds: W_cubic barely leaves cwnd_epoch,
    # and W_est (RFC 9438 §4.3) sets the window, the small-BDP case the RFC
    # describes. W_est grows by alpha / W per ACK at mu ACKs per second, so W^2
    # grows at 2 alpha mu: from 0.7 W* back to W* takes (1 - 0.49) W*^2 / (2
    # alpha mu) = 24.6 ms, plus the repair of about two full-queue RTTs (2 W* / mu =
    # 1.6 ms). NewReno (alpha 1, beta 0.5) would take 0.75 W*^2 / (2 mu) + 1.6 =
    # 20.7 ms. A 10 ms minimum RTO lets NewReno's recovery repair a window
    # (the transport has no SACK).
    mu = 1e9 / (WIRE * 8)
    bdp = 54.27e-6 * mu
    w_star = bdp + 60
    period = (1 - BETA ** 2) * w_star ** 2 / (2 * ALPHA * mu) + 2 * w_star / mu
    assert 0.0260 < period < 0.0263
    r = simulate(_dumbbell(tmp_path, 10_000_000_000, 1_000_000_000, (10_000_000, 10_000_000), 60, 50_000_000,
                           sample_ps=50_000_000, min_rto_ps=10_000_000_000))
    _, q, t_drop, at = _bottleneck(r)
    steady = [i for i, td in enumerate(t_drop) if td > 0.1][:-1]
    assert len(steady) >= 8
    for n in steady:
        # Within 5 %: the packet in service and the repair's length are not exact.
        assert abs((t_drop[n + 1] - t_drop[n]) - period) < 0.05 * period, t_drop[n + 1] - t_drop[n]
        assert abs(q[at[n]:at[n + 1]].min() - (BETA * w_star - bdp)) < 1.5


def test_cubic_runs_are_deterministic(tmp_path):
    s = _dumbbell(tmp_path, 10_000_000_000, 1_000_000_000, (10_000_000, 10_000_000), 60, 2_000_000,
                  sample_ps=50_000_000, min_rto_ps=10_000_000_000)
    a, b = simulate(s), simulate(s)
    assert a.queues.equals(b.queues) and a.flows.equals(b.flows)


def test_cubic_on_the_flow_backend_is_refused(tmp_path, cli):
    (tmp_path / "s.toml").write_text(
        'name = "x"\nbackend = "flow"\n[topology]\nkind = "star"\nhosts = 2\n'
        '[[flows]]\nsrc = 0\ndst = 1\nsize_bytes = 1000\n[transport]\ncc = "cubic"\n')
    p = cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"), "-q")
    assert p.returncode == 2
    assert p.stderr.startswith("error: ") and "transport.cc" in p.stderr and "packet" in p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "out").exists()

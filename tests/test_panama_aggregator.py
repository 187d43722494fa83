"""The software aggregator on real UDP packets: Python worker processes
check every sum bit for bit against numpy (added in port order); the packet
layout against bytes written by hand from the format's description."""

import struct

import numpy as np

from fabriclab._core import agg_decode, agg_encode
from fabriclab.systems.panama.aggregator import check


def test_layout_is_the_documented_one():
    h = {"job": 258, "tree": 3, "vid": 7, "fin": True, "result": False, "ecn": 3, "cwnd_cap": 9, "workers": 2}
    v = np.array([1.0, -0.5], np.float32)
    b = agg_encode(h, v.tobytes())
    # JID u16 BE, TID u8, flags (FIN | ECN << 2), VID u32 BE, cwnd_cap, count, workers u16 BE, 2 reserved, f32 LE.
    assert b == struct.pack(">HBBIHHH2x", 258, 3, 1 | 3 << 2, 7, 9, 2, 2) + struct.pack("<2f", 1.0, -0.5)
    d, payload = agg_decode(b)
    assert d == {**h, "count": 2}
    assert np.frombuffer(payload, np.float32).tolist() == [1.0, -0.5]


def test_workers_get_exact_sums_from_the_aggregator():
    n, trees, packets = 3, 2, 60
    r = check(workers=n, trees=trees, packets=packets, floats=64, window=4)
    for w in r["workers"]:
        assert (w["sent"], w["results"], w["wrong"]) == (packets, packets, 0)
    a = r["aggregator"]
    # Every worker's packet in once; one result per VID to each worker out; nothing dropped.
    assert (a["packets_in"], a["aggregated"], a["packets_out"]) == (n * packets, packets, n * packets)
    assert a["skipped"] == a["stale"] == a["overflow"] == a["malformed"] == 0


def test_bad_job_is_refused(cli):
    r = cli("panama", "aggregator", "--bind", "127.0.0.1:0", "--job", "1:x:127.0.0.1:1")
    assert r.returncode == 2 and "--job[0]: '1:x:127.0.0.1:1' is not JOB:TREES:ip:port" in r.stderr
    r = cli("panama", "aggregator", "--bind", "nowhere", "--job", "1:1:127.0.0.1:1")
    assert r.returncode == 2 and "bind: \"nowhere\" is not an IP address and port" in r.stderr

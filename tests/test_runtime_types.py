"""Element types and several streams per rank pair, ranks as threads of the
test process (the binding releases the GIL while a collective runs)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import numpy as np

from fabriclab.runtime import Communicator
from fabriclab.runtime.launch import free_port


def run_threads(n, fn, **kw):
    port = free_port()
    out, comms = [None] * n, [None] * n

    def make(r):
        comms[r] = Communicator(r, n, "127.0.0.1", port, "t", checksum=True, **kw)

    def work(r):
        try:
            out[r] = fn(comms[r])
        except Exception as e:  # noqa: BLE001 - returned for the assertion
            out[r] = e

    for target in (make, work):
        ts = [threading.Thread(target=target, args=(r,)) for r in range(n)]
        [t.start() for t in ts]
        [t.join(60) for t in ts]
    [c.close() for c in comms if c is not None]
    return out


def test_dtypes_sum_exactly_where_they_can():
    def fn(c):
        r = c.rank
        f16 = np.array([0.5, 1.25, -2.0], np.float16) * (r + 1)
        f64 = np.array([1e300, 0.1], np.float64) * (r + 1)
        i64 = np.array([2**62, -5], np.int64) + r
        i32 = np.array([2**31 - 1, 0], np.int32)
        for a in (f16, f64, i64, i32):
            c.allreduce(a, algo="halving-doubling")
        return f16, f64, i64, i32

    for f16, f64, i64, i32 in run_threads(3, fn):
        # factors 1+2+3 = 6; every value is exact in float16
        np.testing.assert_array_equal(f16, np.array([3.0, 7.5, -12.0], np.float16))
        np.testing.assert_allclose(f64, [6e300, 0.6], rtol=1e-15)
        # integer sums wrap: 3 * 2**62 + 3 - 2**64 = -2**62 + 3; 3 * (2**31 - 1) - 2**32 = 2**31 - 3
        np.testing.assert_array_equal(i64, np.array([-(2**62) + 3, -12], np.int64))
        np.testing.assert_array_equal(i32, np.array([2**31 - 3, 0], np.int32))


def test_three_streams_per_pair_keep_message_order():
    def fn(c):
        x = np.arange(300_001, dtype=np.int32) * (c.rank + 1)
        c.allreduce(x, algo="direct")
        y = np.full(5, c.rank, np.float32)
        c.broadcast(y, root=2)
        return x, y

    for x, y in run_threads(4, fn, streams=3, chunk_bytes=64 << 10):
        np.testing.assert_array_equal(x, np.arange(300_001, dtype=np.int32) * 10)
        np.testing.assert_array_equal(y, np.full(5, 2.0, np.float32))


def test_launcher_forwards_sigterm_to_every_rank(tmp_path):
    flag = tmp_path / "r"
    code = ("import os, signal, sys, time, pathlib\n"
            "def bye(s, f):\n"
            f"    pathlib.Path('{flag}' + os.environ['RANK']).write_text('term'); sys.exit(0)\n"
            "signal.signal(signal.SIGTERM, bye)\n"
            f"pathlib.Path('{flag}' + os.environ['RANK'] + '.up').write_text('up')\n"
            "time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-m", "fabriclab.cli", "launch", "-n", "2", "--", sys.executable, "-c", code])
    deadline = time.monotonic() + 20
    while not all((tmp_path / f"r{r}.up").exists() for r in range(2)) and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    assert p.wait(20) == 0  # both ranks handled the forwarded SIGTERM and exited 0
    assert [(tmp_path / f"r{r}").read_text() for r in range(2)] == ["term", "term"]

"""The noisy neighbours' traffic in a [cloud] box (plan.py, build_cloud_plan): ``sink``
accepts TCP streams and discards them; ``send`` keeps one connection to the
sink and sends Poisson bursts on it at the given mean rate, reconnecting when
the sink goes away. apply.py starts them detached inside
the namespaces and stops them by their recorded pids at ``cluster down``.

    python -m fabriclab.runtime.cluster.noise sink ADDR PORT
    python -m fabriclab.runtime.cluster.noise send ADDR PORT RATE_BPS SEED"""

from __future__ import annotations

import random
import socket
import sys
import threading
import time

PORT = 31950
MARK = "fabriclab.runtime.cluster.noise"  # in the command line: remove() checks a pid is still ours
BURST_BYTES = 1_000_000  # the bursts' mean size (chosen: about the web-search CDF's mean flow, 1.6 MB)


def sink(addr: str, port: int) -> None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(64)

    def drain(c: socket.socket) -> None:
        buf = bytearray(1 << 20)
        with c:
            while c.recv_into(buf):
                pass

    while True:
        c, _ = s.accept()
        threading.Thread(target=drain, args=(c,), daemon=True).start()


def send(addr: str, port: int, rate_bps: int, burst_bytes: int = BURST_BYTES, seed: int = 0) -> None:
    """Bursts of exponential sizes (mean ``burst_bytes``) arriving as a Poisson process at
    ``rate_bps / (8 * burst_bytes)`` per second, each sent as fast as TCP and the VM's cap let it, on one
    connection (a burst that arrives while another is sent waits for it): ``rate_bps`` on average, in
    bursts that fill a shared uplink's queue and let it drain."""
    rng = random.Random(seed)
    per_s = rate_bps / (8 * burst_bytes)
    block = bytes(1 << 16)
    while True:
        try:
            c = socket.create_connection((addr, port))
            due = time.monotonic()
            while True:
                due += rng.expovariate(per_s)
                left = due - time.monotonic()
                if left > 0:
                    time.sleep(left)
                n = max(1, round(rng.expovariate(1 / burst_bytes)))
                while n > 0:
                    k = c.send(block[:min(n, len(block))])
                    n -= k
        except OSError:
            time.sleep(0.2)


if __name__ == "__main__":
    kind, a, p = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if kind == "sink":
        sink(a, p)
    else:
        send(a, p, int(sys.argv[4]), seed=int(sys.argv[5]))

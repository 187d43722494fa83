"""The noisy neighbours' traffic in a [cloud] box (cloudbox.py): ``sink``
accepts TCP streams and discards them; ``send`` keeps one stream to the sink,
paced by the kernel (SO_MAX_PACING_RATE: TCP's own pacing) at the given rate,
reconnecting when the sink goes away. apply.py starts them detached inside
the namespaces and stops them by their recorded pids at ``cluster down``.

    python -m fabriclab.runtime.cluster.noise sink ADDR PORT
    python -m fabriclab.runtime.cluster.noise send ADDR PORT RATE_BPS"""

from __future__ import annotations

import socket
import sys
import threading
import time

PORT = 31950
MARK = "fabriclab.runtime.cluster.noise"  # in the command line: remove() checks a pid is still ours
SO_MAX_PACING_RATE = getattr(socket, "SO_MAX_PACING_RATE", 47)


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


def send(addr: str, port: int, rate_bps: int) -> None:
    block = bytes(1 << 16)
    while True:
        try:
            c = socket.socket()
            c.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, max(1, rate_bps // 8))  # bytes per second
            c.connect((addr, port))
            while True:
                c.sendall(block)
        except OSError:
            time.sleep(0.2)


if __name__ == "__main__":
    kind, a, p = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if kind == "sink":
        sink(a, p)
    else:
        send(a, p, int(sys.argv[4]))

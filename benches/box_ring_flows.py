"""Plain TCP flows around a ring in a cluster-in-a-box, with no library:
host i sends ``--bytes`` to host i+1 while it receives from host i-1, the
traffic pattern of a ring allreduce without its computation. The slowest
receiver's goodput bounds what any ring allreduce can reach as busbw in that
box at that moment (docs/performance-runtime.md). Root; the box must be up:

    sudo fabriclab cluster up examples/cluster-star4-1g-jumbo.toml --name b31 --gso
    sudo python benches/box_ring_flows.py --cluster b31 -n 4 --bytes 256M --reps 3

One line per repetition: every receiver's goodput (Mbit/s, from its first
to its last byte) and the slowest.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import threading
import time

CHUNK_BYTES = 1 << 20


def parse_size(s: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def flow(nxt: str, port: int, nbytes: int) -> None:
    """One host: listen, connect to the next host, send and receive ``nbytes``; print the goodput."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(1)
    time.sleep(1.0)  # every host listens before any connects
    out = socket.create_connection((nxt, port))
    inc, _ = ls.accept()

    def send() -> None:
        block = memoryview(bytes(CHUNK_BYTES))
        left = nbytes
        while left > 0:
            k = min(left, CHUNK_BYTES)
            out.sendall(block[:k])
            left -= k

    th = threading.Thread(target=send)
    th.start()
    buf = bytearray(CHUNK_BYTES)
    got = first = 0
    t0 = 0.0
    while got < nbytes:
        k = inc.recv_into(buf)
        if k == 0:
            raise SystemExit("ring flow: the previous host closed early")
        if got == 0:
            t0, first = time.perf_counter(), k
        got += k
    t1 = time.perf_counter()
    th.join()
    print(f"{(got - first) * 8 / (t1 - t0) / 1e6:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cluster", required=True)
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("--bytes", default="256M")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--port", type=int, default=5600)
    ap.add_argument("--flow", nargs=3, help=argparse.SUPPRESS)  # internal: NEXT_ADDR PORT BYTES
    a = ap.parse_args()
    if a.flow:
        flow(a.flow[0], int(a.flow[1]), int(a.flow[2]))
        return
    from fabriclab.runtime.launch import cluster_hosts

    hosts = cluster_hosts(a.cluster, a.n)
    nbytes = parse_size(a.bytes)
    for rep in range(a.reps):
        procs = [subprocess.Popen(["ip", "netns", "exec", h["ns"], sys.executable, __file__, "--cluster", a.cluster,
                                   "--flow", hosts[(i + 1) % a.n]["addr"], str(a.port + rep), str(nbytes)],
                                  stdout=subprocess.PIPE, text=True) for i, h in enumerate(hosts)]
        rates = [float(p.communicate()[0]) for p in procs]
        if any(p.returncode for p in procs):
            raise SystemExit("ring flow: a host failed")
        print(f"rep {rep + 1}: " + " ".join(f"{r:.1f}" for r in rates) + f" Mbit/s; slowest {min(rates):.1f}")


if __name__ == "__main__":
    main()

"""Load rounds for cluster selection in the box (systems/clockwork/box_select.py):
one worker per host, started in its namespace. Each round starts at an
agreed CLOCK_REALTIME instant; a sender of the round sends UDP datagrams to
its receiver, paced at ``rate_bps`` (UDP payload bits), so every machine's
uplink gets a known offered load, with no ACKs that a busy path would slow; a receiver counts the bytes of each
sender that arrive after the round's ramp. At the end the worker prints one
JSON line: ``{"rx": [[sender, round, bits_per_s], ...]}`` (UDP payload
bits).

    python -m fabriclab.runtime.cluster.rounds SPEC_JSON

SPEC: me (index), addr, port, t0_ns, slot_s (round start to round start),
round_s (sending time), ramp_s (not counted), rate_bps, payload (bytes per datagram),
dst: per round the receiver's address, or null."""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time

HEADER = struct.Struct("!II")  # sender index, round


def _wait_until(t_ns: int) -> None:
    while True:
        left = t_ns - time.time_ns()
        if left <= 0:
            return
        time.sleep(min(left / 1e9, 0.05))


def worker(spec: dict) -> dict:
    t0, slot, run, ramp = spec["t0_ns"], spec["slot_s"], spec["round_s"], spec["ramp_s"]
    got: dict[tuple[int, int], int] = {}
    end = t0 + int((len(spec["dst"]) * slot + 0.2) * 1e9)
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    rx.bind((spec["addr"], spec["port"]))

    def receive() -> None:
        buf = bytearray(65536)
        while True:
            left = (end - time.time_ns()) / 1e9
            if left <= 0:
                return
            rx.settimeout(left)
            try:
                k = rx.recv_into(buf)
            except (TimeoutError, OSError):
                return
            if k < HEADER.size:
                continue
            sender, r = HEADER.unpack_from(buf)
            now = time.time_ns()
            if t0 + (r * slot + ramp) * 1e9 <= now <= t0 + (r * slot + run) * 1e9:
                got[(sender, r)] = got.get((sender, r), 0) + k

    th = threading.Thread(target=receive, daemon=True)
    th.start()
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = bytes(spec["payload"] - HEADER.size)
    for r, dst in enumerate(spec["dst"]):
        start = t0 + int(r * slot * 1e9)
        stop = start + int(run * 1e9)
        _wait_until(start)
        if dst is None:
            continue
        msg = HEADER.pack(spec["me"], r) + pad
        addr = (dst, spec["port"])
        per_ns = spec["rate_bps"] / 8e9  # bytes per ns
        sent, begin = 0, time.time_ns()
        while (now := time.time_ns()) < stop:
            if sent > (now - begin) * per_ns:
                time.sleep(0.0005)
                continue
            try:
                tx.sendto(msg, addr)
                sent += len(msg)
            except OSError:
                time.sleep(0.001)
    th.join()
    return {"rx": [[s, r, 8 * n / (run - ramp)] for (s, r), n in sorted(got.items())]}


if __name__ == "__main__":
    print(json.dumps(worker(json.loads(sys.argv[1]))), flush=True)

"""The real clock agent (docs/clockwork.md, "The real agent"): coded probe pairs over UDP between
real hosts, stamped by the kernel (SO_TIMESTAMPING), with an emulated clock per host.

One agent runs per host (``fabriclab clock agent``). Every 1/rate s it sends each peer a coded pair:
two small datagrams ``spacing`` apart on its clock. It echoes every probe pair it receives as a pair
of its own in the reverse direction, so both directions of every probed edge are measured.

**Stamps.** The socket asks the kernel for software timestamps (SOF_TIMESTAMPING_TX_SOFTWARE |
RX_SOFTWARE | SOFTWARE). The send stamp comes back on the socket's error queue (``MSG_ERRQUEUE``,
the packet's copy with an ``SCM_TIMESTAMPING`` message), taken where the driver hands the packet
to the device (``skb_tx_timestamp``: loopback and veth both call it); the receive stamp comes with
the datagram (``SCM_TIMESTAMPING``), taken as the packet enters the stack. Both read
CLOCK_REALTIME. Hardware stamps need a NIC that offers them (``ethtool -T``); loopback and veth
offer none, so the agent reports what the listening interface offers and uses software stamps.
If the kernel refuses SO_TIMESTAMPING the agent says so on stderr and falls back to user-space
stamps (``clock_gettime`` just before ``sendto`` and just after ``recvmsg``); the half file's
metadata records which.

**The emulated clock.** All hosts of a cluster-in-a-box (and two agents on one machine) share one
oscillator and one CLOCK_REALTIME, which time namespaces do not shift. So each agent turns every
stamp t it takes, kernel stamps included, into its emulated clock's reading
``t + offset + drift x (t - epoch)`` (``--offset-ns``, ``--drift-ppm``, ``--epoch-ns``). The
unemulated stamps are the truth (``true_tx_ps`` / ``true_rx_ps`` = stamp ns x 1000): the true
instants at which the clocks were read, as probes.parquet defines them.

**Rows: halves joined afterwards.** The kernel's send stamp is known to the sender only after the
probe has left, so no single host can write a whole row. Each agent writes its half (``--out``):
a row per probe it sent (side ``tx``: its send stamp) and per probe it received (side ``rx``: its
receive stamp), keyed by (src, dst, pair, seq). ``join`` (``fabriclab clock join``) matches the
halves into probes.parquet rows; a pair with a probe lost or unstamped is dropped whole, and
counted. No follow-up message (PTP's two-step) is needed, so the probes are the only traffic.
"""

from __future__ import annotations

import array
import fcntl
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import InputError
from . import probes as pr

# <linux/net_tstamp.h>, <asm-generic/socket.h> (x86-64 and arm64: 64-bit time_t, so the old numbers)
SO_TIMESTAMPING = 37
SCM_TIMESTAMPING = SO_TIMESTAMPING
SOF_TX_HARDWARE, SOF_TX_SOFTWARE, SOF_RX_HARDWARE, SOF_RX_SOFTWARE = 1 << 0, 1 << 1, 1 << 2, 1 << 3
SOF_SOFTWARE, SOF_RAW_HARDWARE = 1 << 4, 1 << 6
SOFTWARE_FLAGS = SOF_TX_SOFTWARE | SOF_RX_SOFTWARE | SOF_SOFTWARE
IP_RECVERR = 11
SO_EE_ORIGIN_TIMESTAMPING = 4
SCM_TSTAMP_SND = 0
SIOCETHTOOL, SIOCGIFADDR, ETHTOOL_GET_TS_INFO = 0x8946, 0x8915, 0x41

MAGIC = b"FLCK"
HEADER = struct.Struct("!4sBBBBQq")   # magic, version, kind (0 probe, 1 echo), seq, name length, pair, tx stamp
VERSION = 1
PROBE, ECHO = 0, 1
MAX_DRIFT_PPM = 1000.0
# An emulated clock's offset within ±1 day and its epoch within ±2^62 ns: the runtime's bounds (fabriclab-runtime's
# clock.rs refuses a larger offset; both are i64 there), so a huge value is refused here, not overflowed there.
MAX_OFFSET_NS = 86_400_000_000_000
MAX_EPOCH_NS = 2**62

HALF_SCHEMA = pa.schema([
    pa.field("side", pa.string(), nullable=False),    # "tx": a probe this host sent; "rx": one it received
    pa.field("src", pa.string(), nullable=False),
    pa.field("dst", pa.string(), nullable=False),
    pa.field("pair", pa.uint64(), nullable=False),
    pa.field("seq", pa.uint8(), nullable=False),
    pa.field("stamp_ns", pa.int64(), nullable=False),  # this host's emulated clock
    pa.field("true_ns", pa.int64(), nullable=False),    # the unemulated stamp (CLOCK_REALTIME)
])


class AgentInputError(InputError):
    """Bad options for the agent, the join or the mesh; the message names the option."""


# ---------------------------------------------------------------- options


def parse_addr(spec: str, option: str) -> tuple[str, int]:
    host, sep, port = spec.rpartition(":")
    if not sep or not host:
        raise AgentInputError(f"{option}: {spec!r} lacks a port; give ADDR:PORT, e.g. 10.1.0.1:31900")
    try:
        p = int(port)
    except ValueError:
        raise AgentInputError(f"{option}: the port of {spec!r} is not a number") from None
    if not 1 <= p <= 65535:
        raise AgentInputError(f"{option}: the port of {spec!r} must be within 1..65535")
    try:
        socket.inet_aton(host)
    except OSError:
        raise AgentInputError(f"{option}: {host!r} in {spec!r} is not an IPv4 address") from None
    return host, p


def parse_peers(spec: str, me: str) -> list[tuple[str, tuple[str, int]]]:
    """``NAME=ADDR:PORT,...`` -> [(name, (addr, port))]."""
    out = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        name, sep, addr = item.partition("=")
        if not sep or not name:
            raise AgentInputError(f"--peers: {item!r} is not NAME=ADDR:PORT")
        if name == me:
            raise AgentInputError(f"--peers: {name!r} is this agent's own --name")
        if name in (n for n, _ in out):
            raise AgentInputError(f"--peers: {name!r} is given twice")
        out.append((name, parse_addr(addr, "--peers")))
    return out


def check_emulated(offset_ns: int, epoch_ns: int | None, offset_field: str = "--offset-ns",
                   epoch_field: str = "--epoch-ns") -> None:
    if not abs(offset_ns) <= MAX_OFFSET_NS:
        raise AgentInputError(f"{offset_field}: must be within ±{MAX_OFFSET_NS} ns (1 day), got {offset_ns}")
    if epoch_ns is not None and not abs(epoch_ns) <= MAX_EPOCH_NS:
        raise AgentInputError(f"{epoch_field}: must be within ±2^62 ns (CLOCK_REALTIME ns), got {epoch_ns}")


def check_options(name: str, duration_s: float, rate_hz: float, spacing_ns: int, drift_ppm: float,
                  offset_ns: int = 0, epoch_ns: int | None = None) -> None:
    if not name or len(name.encode()) > 64 or "," in name or "=" in name:
        raise AgentInputError(f"--name: {name!r} must be 1..64 bytes without ',' or '='")
    if not duration_s > 0:
        raise AgentInputError(f"--duration-s: must be > 0, got {duration_s}")
    if not rate_hz > 0:
        raise AgentInputError(f"--rate-hz: must be > 0, got {rate_hz}")
    if not 0 <= spacing_ns < 1e9 / rate_hz / 2:
        raise AgentInputError(f"--spacing-ns: must be within 0 and half the probe period ({1e9 / rate_hz / 2:.0f} "
                              f"ns at --rate-hz {rate_hz:g}), got {spacing_ns}")
    if not abs(drift_ppm) <= MAX_DRIFT_PPM:
        raise AgentInputError(f"--drift-ppm: must be within ±{MAX_DRIFT_PPM:g} ppm (quartz drifts by tens), "
                              f"got {drift_ppm}")
    check_emulated(offset_ns, epoch_ns)


# ---------------------------------------------------------------- the emulated clock


@dataclass
class EmulatedClock:
    """Reads ``t + offset + drift x (t - epoch)`` for a true CLOCK_REALTIME stamp t (ns), the last term
    rounded half to even: the runtime's own emulated clock (fabriclab-runtime's clock.rs, one
    implementation), so a rank of ``fabriclab runtime bench`` and its probe-phase agent read the same ns."""

    offset_ns: int = 0
    drift_ppm: float = 0.0
    epoch_ns: int = 0

    def read(self, true_ns: int) -> int:
        from ..._core import emulated_clock_ns

        return emulated_clock_ns(int(true_ns), int(self.offset_ns), float(self.drift_ppm), int(self.epoch_ns))


# ---------------------------------------------------------------- this host's CLOCK_MONOTONIC


def realtime_minus_monotonic(samples: int = 200) -> tuple[int, int]:
    """CLOCK_REALTIME - CLOCK_MONOTONIC as read in this process's time namespace, as a bracket (lo, hi) in ns.

    The kernel keeps both clocks on one timebase, so their difference D is a constant (it changes only when
    CLOCK_REALTIME is stepped; NTP's slewing moves both alike), and a time namespace adds its offset to
    CLOCK_MONOTONIC only. Reading m1, r, m2 in that order bounds it: r - m2 <= D <= r - m1. The tightest
    bounds over ``samples`` reads are returned; their width is the conversion's error bound."""
    lo, hi = -(1 << 62), 1 << 62
    mono, real = time.CLOCK_MONOTONIC, time.CLOCK_REALTIME
    for _ in range(samples):
        m1 = time.clock_gettime_ns(mono)
        r = time.clock_gettime_ns(real)
        m2 = time.clock_gettime_ns(mono)
        lo, hi = max(lo, r - m2), min(hi, r - m1)
    return lo, hi


# ---------------------------------------------------------------- hardware stamps: what the NIC offers


def _iface_of(addr: str) -> Optional[str]:
    want = socket.inet_aton(addr)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, ifname in socket.if_nameindex():
            try:
                r = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("16s16x", ifname.encode()[:15]))
            except OSError:
                continue
            if r[20:24] == want:
                return ifname
    return None


def hardware_offer(addr: str) -> str:
    """What the interface holding ``addr`` offers for hardware stamps (ETHTOOL_GET_TS_INFO), in words."""
    ifname = _iface_of(addr)
    if ifname is None:
        return f"no interface holds {addr}"
    info = array.array("B", struct.pack("IIiI3II3I", ETHTOOL_GET_TS_INFO, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0))
    addr_of_info, _ = info.buffer_info()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            fcntl.ioctl(s.fileno(), SIOCETHTOOL, struct.pack("16sP8x", ifname.encode()[:15], addr_of_info))
    except OSError as e:
        return f"{ifname}: no answer to ETHTOOL_GET_TS_INFO ({e.strerror})"
    caps = struct.unpack("IIiI", info.tobytes()[:16])[1]
    hw = caps & (SOF_TX_HARDWARE | SOF_RX_HARDWARE | SOF_RAW_HARDWARE)
    return (f"{ifname}: offers hardware stamps (so_timestamping 0x{caps:x}); this agent uses software stamps"
            if hw else f"{ifname}: no hardware stamps (so_timestamping 0x{caps:x}); software stamps")


# ---------------------------------------------------------------- the agent


def _ts(anc) -> Optional[int]:
    """The software stamp (ns) of an SCM_TIMESTAMPING control message, if any."""
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPING and len(data) >= 16:
            sec, nsec = struct.unpack_from("qq", data, 0)
            if sec or nsec:
                return sec * 1_000_000_000 + nsec
    return None


@dataclass
class Agent:
    name: str
    listen: tuple[str, int]
    peers: list[tuple[str, tuple[str, int]]]
    duration_s: float
    rate_hz: float = 100.0
    spacing_ns: int = 20_000
    clock: EmulatedClock = field(default_factory=EmulatedClock)
    start_ns: Optional[int] = None     # true CLOCK_REALTIME instant to start probing (default: now)
    linger_s: float = 0.5              # keep echoing and collecting stamps this long after the last probe
    stamps: str = "kernel"             # kernel, or user (user-space stamps)
    log: object = sys.stderr
    host_clock: str = "realtime"       # realtime, or monotonic: stamps on this host's CLOCK_MONOTONIC
    flush_every_s: Optional[float] = None   # write the half so far to flush_to this often while probing
    flush_to: Optional[Path] = None

    def __post_init__(self):
        self.tx: list[tuple] = []      # (dst, pair, seq, true_ns)
        self.rx: list[tuple] = []      # (src, pair, seq, true_ns)
        self.pending: dict[tuple, str] = {}   # (pair, seq) -> dst, sent and awaiting its kernel stamp
        self.echo_of: dict[tuple, int] = {}   # (src, their pair) -> our echo pair
        self.next_pair = 0
        self.counts = {"pairs_sent": 0, "echo_pairs_sent": 0, "probes_received": 0, "tx_stamps": 0,
                       "tx_unstamped": 0, "send_errors": 0, "foreign": 0}
        self.mode = self.stamps
        self.hw = ""
        # CLOCK_REALTIME - CLOCK_MONOTONIC in this time namespace (host_clock monotonic); 0 for realtime
        self.rt_minus_mono = (0, 0)
        self.rt_minus_mono_end = (0, 0)

    def _shift(self) -> int:
        """What a CLOCK_REALTIME stamp loses to read this host's clock scale (0, or realtime - monotonic)."""
        lo, hi = self.rt_minus_mono
        return (lo + hi) // 2

    def _say(self, msg: str) -> None:
        if self.log is not None:
            print(f"clock agent {self.name}: {msg}", file=self.log, flush=True)

    def _open(self) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)
        try:
            s.bind(self.listen)
        except OSError as e:
            s.close()
            raise AgentInputError(f"--listen: cannot bind {self.listen[0]}:{self.listen[1]} ({e.strerror})") from None
        if self.mode == "kernel":
            try:
                s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, SOFTWARE_FLAGS)
            except OSError as e:
                self.mode = "user"
                self._say(f"the kernel refused SO_TIMESTAMPING ({e.strerror}); falling back to user-space stamps "
                          "(clock_gettime around sendto/recvmsg: tens of µs of noise)")
        s.setblocking(False)
        try:
            self.hw = hardware_offer(self.listen[0]) if self.listen[0] != "0.0.0.0" else "listening on all interfaces"
        except OSError as e:
            self.hw = f"unknown ({e.strerror})"
        return s

    def _send(self, s, dst: str, addr, kind: int, pair: int, seq: int) -> None:
        t_user = time.time_ns()
        name = self.name.encode()
        msg = HEADER.pack(MAGIC, VERSION, kind, seq, len(name), pair, self.clock.read(t_user) - self._shift()) + name
        try:
            s.sendto(msg, addr)
        except OSError:
            self.counts["send_errors"] += 1
            return
        if self.mode == "kernel":
            self.pending[(pair, seq)] = dst
            self._drain_errqueue(s)
        else:
            self.tx.append((dst, pair, seq, t_user))

    def _drain_errqueue(self, s) -> None:
        while True:
            try:
                data, anc, _, _ = s.recvmsg(512, 512, socket.MSG_ERRQUEUE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            t = _ts(anc)
            origin_ok = any(lv == socket.IPPROTO_IP and kd == IP_RECVERR and len(d) >= 16
                            and d[4] == SO_EE_ORIGIN_TIMESTAMPING and struct.unpack_from("I", d, 8)[0] == SCM_TSTAMP_SND
                            for lv, kd, d in anc)
            at = data.rfind(MAGIC)
            if t is None or not origin_ok or at < 0 or len(data) < at + HEADER.size:
                continue
            _, _, _, seq, _, pair, _ = HEADER.unpack_from(data, at)
            dst = self.pending.pop((pair, seq), None)   # pair ids are unique per sender
            if dst is None:
                continue
            self.tx.append((dst, pair, seq, t))
            self.counts["tx_stamps"] += 1

    def _receive(self, s) -> None:
        while True:
            try:
                data, anc, _, addr = s.recvmsg(512, 512)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            t = _ts(anc) if self.mode == "kernel" else None
            if t is None:
                t = time.time_ns()
            if len(data) < HEADER.size or data[:4] != MAGIC:
                self.counts["foreign"] += 1
                continue
            _, ver, kind, seq, nlen, pair, _ = HEADER.unpack_from(data)
            src = data[HEADER.size:HEADER.size + nlen].decode(errors="replace")
            if ver != VERSION or seq > 1 or src == self.name:
                self.counts["foreign"] += 1
                continue
            self.rx.append((src, pair, seq, t))
            self.counts["probes_received"] += 1
            if kind != PROBE:
                continue
            # echo: a pair of our own back to the sender, each probe as its original arrives
            if seq == 0:
                e = self._new_pair()
                self.echo_of[(src, pair)] = e
                self._send(s, src, addr, ECHO, e, 0)
            else:
                e = self.echo_of.pop((src, pair), None)
                if e is not None:
                    self._send(s, src, addr, ECHO, e, 1)
                    self.counts["echo_pairs_sent"] += 1

    def _new_pair(self) -> int:
        p = self.next_pair
        self.next_pair += 1
        return p

    def _send_pair(self, s, dst: str, addr) -> None:
        p = self._new_pair()
        self._send(s, dst, addr, PROBE, p, 0)
        # the spacing on this host's (emulated) clock
        until = time.perf_counter_ns() + self.spacing_ns / (1 + self.clock.drift_ppm * 1e-6)
        while time.perf_counter_ns() < until:
            pass
        self._send(s, dst, addr, PROBE, p, 1)
        self.counts["pairs_sent"] += 1

    def run(self) -> dict:
        if self.host_clock == "monotonic":
            self.rt_minus_mono = realtime_minus_monotonic()
        s = self._open()
        self._say(f"listening on {self.listen[0]}:{self.listen[1]}; stamps: {self.mode}; hardware: {self.hw}")
        rng = random.Random(self.name)
        period_ns = 1e9 / self.rate_hz
        start = self.start_ns if self.start_ns is not None else time.time_ns()
        start = max(start, time.time_ns())
        # per peer, staggered over the period; the next send time on CLOCK_REALTIME
        due = [start + period_ns * (i + 0.5) / max(1, len(self.peers)) for i in range(len(self.peers))]
        stop = start + self.duration_s * 1e9
        end = stop + self.linger_s * 1e9
        poll = select.poll()
        poll.register(s, select.POLLIN | select.POLLERR)
        flush_ns = None if self.flush_every_s is None else int(self.flush_every_s * 1e9)
        next_flush = start + (flush_ns or 0)
        flusher = None if flush_ns is None else HalfFlusher(self, self.flush_to)
        if flusher is not None:  # the file exists from the start, and the writer's first-use cost is paid now
            flusher.flush()
        try:
            while True:
                now = time.time_ns()
                if now >= end:
                    break
                if flusher is not None and now >= next_flush:
                    flusher.flush()   # the records so far, for a live refit (rocket-table --watch-s)
                    next_flush = now + flush_ns
                for i, (name, addr) in enumerate(self.peers):
                    if due[i] <= now and due[i] < stop:
                        self._send_pair(s, name, addr)
                        # jittered by ±10 % so that pairs do not lock to one another's phase
                        due[i] += period_ns * rng.uniform(0.9, 1.1)
                        due[i] = max(due[i], now)
                nxt = min([d for d in due if d < stop], default=end)
                wait_ms = max(0.0, (min(nxt, end) - time.time_ns()) / 1e6)
                for _, ev in poll.poll(min(wait_ms, 50.0)):
                    if ev & select.POLLERR:
                        self._drain_errqueue(s)
                    if ev & select.POLLIN:
                        self._receive(s)
            self._drain_errqueue(s)
        except KeyboardInterrupt:   # SIGINT, or SIGTERM from the CLI: stop and keep what was recorded
            self.counts["interrupted"] = 1
        finally:
            s.close()
            if flusher is not None:
                flusher.wait()   # before anyone writes the whole half to the same path
        if self.host_clock == "monotonic":
            self.rt_minus_mono_end = realtime_minus_monotonic()
            lo, hi = self.rt_minus_mono_end
            if abs((lo + hi) // 2 - self._shift()) > 1000:
                self._say(f"CLOCK_REALTIME - CLOCK_MONOTONIC moved by {(lo + hi) // 2 - self._shift()} ns during the "
                          "run (CLOCK_REALTIME was stepped); the monotonic stamps after the step are off by that")
        self.counts["tx_unstamped"] = len(self.pending)
        return self.counts

    def half_table(self) -> pa.Table:
        """The whole half, rows sorted (the final --out: same records, same bytes)."""
        tx = sorted(self.tx, key=lambda r: (r[1], r[2]))
        rx = sorted(self.rx, key=lambda r: (r[0], r[1], r[2]))
        return self.rows_table(tx, rx).replace_schema_metadata(self.half_meta())

    def rows_table(self, tx: Sequence[tuple], rx: Sequence[tuple]) -> pa.Table:
        c = self.clock
        side = ["tx"] * len(tx) + ["rx"] * len(rx)
        src = [self.name] * len(tx) + [r[0] for r in rx]
        dst = [r[0] for r in tx] + [self.name] * len(rx)
        rows = list(tx) + list(rx)
        return pa.table({
            "side": pa.array(side, pa.string()), "src": pa.array(src, pa.string()), "dst": pa.array(dst, pa.string()),
            "pair": pa.array([r[1] for r in rows], pa.uint64()), "seq": pa.array([r[2] for r in rows], pa.uint8()),
            "stamp_ns": pa.array([c.read(r[3]) - self._shift() for r in rows], pa.int64()),
            "true_ns": pa.array([r[3] for r in rows], pa.int64()),
        }, schema=HALF_SCHEMA)

    def half_meta(self) -> dict:
        c = self.clock
        meta = {"host": self.name, "stamps": self.mode, "hardware": self.hw, "offset_ns": c.offset_ns,
                "drift_ppm": c.drift_ppm, "epoch_ns": c.epoch_ns, "counts": dict(self.counts),
                "clock": self.host_clock}
        if self.host_clock == "monotonic":
            meta["realtime_minus_monotonic_ns"] = [list(self.rt_minus_mono), list(self.rt_minus_mono_end)]
        return {b"fabriclab.clock.agent": json.dumps(meta).encode()}


def write_half(agent: Agent, path: Path) -> None:
    """Written whole (a temp file renamed over ``path``): a reader never sees half a file."""
    _write_whole(agent.half_table(), path)


def _write_whole(t: pa.Table, path: Path) -> None:
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    pq.write_table(t, str(tmp))
    os.replace(tmp, path)


class HalfFlusher:
    """The live flushes of an agent's half (``--flush-s``; review_rtable B1). In the probe loop, only the
    records added since the last flush are turned into rows (a cost flat in the history: about 1 ms per
    1,200 rows); a helper thread then writes the whole half (temp file, rename: a reader never sees half a
    file), with the GIL released while pyarrow writes, so the loop keeps probing and echoing. A flush due
    while the previous write still runs is left to the next one. The rows are in arrival order per
    flush; the join sorts them. The final --out is ``write_half``'s, sorted."""

    def __init__(self, agent: Agent, path: Path):
        self.agent, self.path = agent, Path(path)
        self.chunks: list[pa.Table] = []
        self.n_tx = self.n_rx = 0
        self.thread: Optional[threading.Thread] = None
        self.error: Optional[OSError] = None

    def flush(self) -> bool:
        if self.thread is not None and self.thread.is_alive():
            return False
        a = self.agent
        tx, rx = a.tx[self.n_tx:], a.rx[self.n_rx:]
        self.n_tx += len(tx)
        self.n_rx += len(rx)
        self.chunks.append(a.rows_table(tx, rx))
        if self.error is not None:
            a._say(f"--flush-s: the last flush of {self.path} failed ({self.error}); trying again")
            self.error = None
        chunks, meta = list(self.chunks), a.half_meta()

        def write():
            try:
                whole = pa.concat_tables(chunks).combine_chunks()
                self.chunks = [whole]   # the loop appends only once this thread has ended
                _write_whole(whole.replace_schema_metadata(meta), self.path)
            except OSError as x:
                self.error = x

        self.thread = threading.Thread(target=write, daemon=True)
        self.thread.start()
        return True

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join()


# ---------------------------------------------------------------- the join


@dataclass
class Joined:
    table: pa.Table
    hosts: dict                 # host -> its metadata (stamps, offset, drift, epoch, counts)
    probes: int = 0
    dropped_pairs: int = 0      # pairs with a probe lost, or a half missing
    origin_ns: int = 0          # the CLOCK_REALTIME instant (unemulated) that 0 stands for in the true times
    stamp_origin_ns: int = 0    # the hosts' clock reading that 0 stands for in tx_ns and rx_ns


def read_half(path: Path) -> tuple[pa.Table, dict]:
    path = Path(path)
    if not path.is_file():
        raise AgentInputError(f"HALVES: no such file: {path}")
    try:
        t = pq.read_table(str(path))
    except (pa.ArrowException, OSError) as e:
        raise AgentInputError(f"HALVES: {path} is not a readable Parquet file ({e})") from None
    missing = [f.name for f in HALF_SCHEMA if f.name not in t.column_names]
    if missing:
        raise AgentInputError(f"HALVES: {path} lacks the column(s) {', '.join(missing)}; is it an agent's --out?")
    meta = json.loads((t.schema.metadata or {}).get(b"fabriclab.clock.agent", b"{}"))
    return t.select(HALF_SCHEMA.names).cast(HALF_SCHEMA), meta


def join(halves: Sequence) -> Joined:
    """Agents' halves (paths or (table, meta)) -> probes.parquet rows: each probe's send stamp from its
    sender's half, its receive stamp from its receiver's; pairs not whole on both sides are dropped."""
    tables, hosts = [], {}
    for h in halves:
        t, meta = h if isinstance(h, tuple) else read_half(h)
        tables.append(t)
        if "host" in meta:
            hosts[meta["host"]] = meta
    if not tables:
        raise AgentInputError("HALVES: give at least one agent's half file")
    df = pa.concat_tables(tables).to_pandas()
    key = ["src", "dst", "pair", "seq"]
    tx = df[df.side == "tx"].drop(columns="side").rename(columns={"stamp_ns": "tx_ns", "true_ns": "true_tx"})
    rx = df[df.side == "rx"].drop(columns="side").rename(columns={"stamp_ns": "rx_ns", "true_ns": "true_rx"})
    m = tx.merge(rx, on=key, how="inner")
    whole = m.groupby(["src", "pair"])["seq"].transform("size") == 2
    pairs_all = len(tx.groupby(["src", "pair"]).size()) if len(tx) else 0
    m = m[whole].sort_values(["src", "pair", "seq"], kind="stable")
    # One shared origin for every stamp and true time: a whole second at or before the first true stamp.
    # CLOCK_REALTIME in ps does not fit uint64 (2^64 ps is 213 days), and float64 (the estimator's
    # arithmetic) holds ns exactly only below 2^53 ns (104 days). Moving the time axis's origin for all
    # hosts alike changes no offset, drift or delay.
    origin = (int(min(m.true_tx.min(), m.true_rx.min())) // 10**9) * 10**9 if len(m) else 0
    # The stamps share that origin while they are near it (emulated clocks over CLOCK_REALTIME: offsets
    # of µs to ms). Stamps on CLOCK_MONOTONIC (--clock monotonic) are days away from CLOCK_REALTIME, so they
    # get an origin of their own: a whole second at or before the first stamp. Either way one origin for
    # every host's stamps, so the offsets between hosts are kept; it is in the metadata (stamp_origin_ns).
    first = int(min(m.tx_ns.min(), m.rx_ns.min())) if len(m) else 0
    stamp_origin = origin if abs(first - origin) < 86_400 * 10**9 else (first // 10**9) * 10**9
    t = pa.table({
        "src": pa.array(m.src.to_numpy(), pa.string()), "dst": pa.array(m.dst.to_numpy(), pa.string()),
        "pair": pa.array(m.pair.to_numpy(np.uint64), pa.uint64()), "seq": pa.array(m.seq.to_numpy(np.uint8), pa.uint8()),
        "tx_ns": pa.array(m.tx_ns.to_numpy(np.int64) - stamp_origin, pa.int64()),
        "rx_ns": pa.array(m.rx_ns.to_numpy(np.int64) - stamp_origin, pa.int64()),
        "true_tx_ps": pa.array((m.true_tx.to_numpy(np.int64) - origin) * 1000, pa.uint64()),
        "true_rx_ps": pa.array((m.true_rx.to_numpy(np.int64) - origin) * 1000, pa.uint64()),
    }, schema=pr.SCHEMA)
    meta = {"origin_ns": origin, "stamp_origin_ns": stamp_origin, "hosts": hosts,
            "truth": "the unemulated kernel stamps; true time only where every agent read one CLOCK_REALTIME "
                     "(one machine, a cluster-in-a-box)"}
    t = t.replace_schema_metadata({b"fabriclab.clock.join": json.dumps(meta).encode()})
    return Joined(t, hosts, probes=t.num_rows, dropped_pairs=pairs_all - t.num_rows // 2, origin_ns=origin,
                  stamp_origin_ns=stamp_origin)


# ---------------------------------------------------------------- stamp noise


def stamp_noise(t: pa.Table) -> dict:
    """The spread of true rx - true tx per direction of each edge, above that direction's least (the delay
    floor): what the stamps add to a constant path delay, plus any queueing. Percentiles in ns."""
    df = t.select(["src", "dst", "true_tx_ps", "true_rx_ps"]).to_pandas()
    d = (df.true_rx_ps.astype(np.int64) - df.true_tx_ps.astype(np.int64)) / 1000.0
    floor = d.groupby([df.src, df.dst]).transform("min")
    x = (d - floor).to_numpy()
    return {"probes": int(x.size), "floor_ns_median": float(np.median(floor)),
            "p50_ns": float(np.percentile(x, 50)), "p90_ns": float(np.percentile(x, 90)),
            "p99_ns": float(np.percentile(x, 99)), "max_ns": float(x.max())}


# ---------------------------------------------------------------- the mesh in a cluster-in-a-box


PORT = 31900


def choose_peers(n: int, k: int, seed: int) -> list[list[int]]:
    """Host i probes (i + 1) mod n and k - 1 others drawn at random (so the probe graph is connected)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        first = (i + 1) % n
        rest = [j for j in range(n) if j not in (i, first)]
        extra = rng.choice(rest, size=k - 1, replace=False).tolist() if k > 1 else []
        out.append([first] + sorted(extra))
    return out


def run_agents(argvs: Sequence[list[str]], labels: Sequence[str], timeout_s: float, what: str, log=None,
               ready=None, stop=None) -> None:
    """Runs one agent process per argv (this package first on their PYTHONPATH) to its end. ``ready(procs)``,
    if given, is called once all are started and returns each one's stderr read so far (it may raise);
    then each is awaited, its stderr written to ``log``, and the first that failed is named
    (``what: label exited with ...``). ``stop`` (a threading.Event), once set, ends them early with SIGTERM
    (an agent then keeps and writes what it recorded). Whatever happens, none is left running."""
    import subprocess

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3])] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    procs: list = []
    try:
        for argv in argvs:
            procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        said = ready(procs) if ready is not None else [""] * len(procs)
        deadline = time.monotonic() + timeout_s
        stopped = False
        if stop is not None:
            while any(p.poll() is None for p in procs) and time.monotonic() < deadline and not stop.wait(0.2):
                pass
            stopped = stop.is_set()
            for p in procs:
                if stopped and p.poll() is None:
                    p.terminate()
        for i, p in enumerate(procs):
            try:
                _, e = p.communicate(timeout=max(1.0, deadline - time.monotonic()) if not stopped else 30)
                e = said[i] + e
            except subprocess.TimeoutExpired:
                p.kill()
                _, e = p.communicate()
            if log is not None and e:
                log.write(e)
            if p.returncode != 0 and not (stopped and p.returncode == -signal.SIGTERM):
                raise RuntimeError(f"{what}: {labels[i]} exited with {p.returncode}: {e.strip()[-500:]}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def mesh(cluster: str, out: Path, duration_s: float = 3.0, peers: Optional[int] = None, rate_hz: float = 100.0,
         spacing_ns: int = 20_000, offsets_ns: Optional[Sequence[int]] = None,
         drifts_ppm: Optional[Sequence[float]] = None, offset_spread_ns: Optional[float] = None,
         drift_spread_ppm: Optional[float] = None, seed: int = 0, stamps: str = "kernel", start_delay_s: float = 3.0,
         log=sys.stderr, host_clock: str = "auto", epoch_ns: Optional[int] = None, flush_s: Optional[float] = None,
         halves_dir: Optional[Path] = None, stop=None) -> Joined:
    """One agent per host of box ``cluster`` (``ip netns exec``), K peers each, seeded emulated clocks
    (or the given ones); the halves joined into ``out`` (probes.parquet). Host h's agent is named by the
    box's label (h0, h1, ...).

    ``host_clock``: ``realtime`` (stamps on CLOCK_REALTIME, emulated offsets within ±100 µs and drifts
    within ±30 ppm unless the spreads say otherwise), ``monotonic`` (each agent in its host's time
    namespace, stamps on that host's CLOCK_MONOTONIC; no emulation unless spreads or values are given), or
    ``auto``: monotonic when the box has time namespaces (``cluster up --timens``), else realtime.
    ``epoch_ns``: the emulated clocks' epoch (default: now). ``flush_s`` and ``halves_dir``: the agents
    rewrite their halves (HOST.half.parquet) in ``halves_dir`` every ``flush_s`` while they probe, for a
    live refit (rocket_table.watch); default: a temporary folder, written at the end only. ``stop`` (a
    threading.Event) ends the agents early (``run_agents``)."""
    import tempfile

    from ...runtime.cluster.apply import load_state
    from ...runtime.cluster.timens import prefix as host_prefix

    state = load_state(cluster, "--cluster")
    if state.get("status") != "up":
        raise AgentInputError(f"--cluster: cluster {cluster!r} is not up (status {state.get('status')})")
    hosts = state["hosts"]
    n = len(hosts)
    if n < 2:
        raise AgentInputError(f"--cluster: cluster {cluster!r} has {n} host; the mesh needs two or more")
    k = min(5, n - 1) if peers is None else peers
    if not 1 <= k <= n - 1:
        raise AgentInputError(f"--peers: K must be within 1..{n - 1} (the box has {n} hosts), got {k}")
    check_options("mesh", duration_s, rate_hz, spacing_ns, 0.0)
    timens = all(h.get("timens") for h in hosts)
    if host_clock == "auto":
        host_clock = "monotonic" if timens else "realtime"
    if host_clock not in ("realtime", "monotonic"):
        raise AgentInputError(f"--clock: {host_clock!r} is not auto, realtime or monotonic")
    if host_clock == "monotonic" and not timens:
        raise AgentInputError(f"--clock monotonic: cluster {cluster!r} has no time namespaces (cluster up --timens); "
                              "its hosts' CLOCK_MONOTONIC would all read alike")
    mono = host_clock == "monotonic"
    offset_spread_ns = (0.0 if mono else 100_000.0) if offset_spread_ns is None else offset_spread_ns
    drift_spread_ppm = (0.0 if mono else 30.0) if drift_spread_ppm is None else drift_spread_ppm
    if not 0 <= drift_spread_ppm <= MAX_DRIFT_PPM:
        raise AgentInputError(f"--drift-spread-ppm: must be within 0..{MAX_DRIFT_PPM:g}, got {drift_spread_ppm}")
    rng = np.random.default_rng(seed)
    if offsets_ns is None:
        offsets_ns = [int(v) for v in rng.uniform(-offset_spread_ns, offset_spread_ns, n)]
    if drifts_ppm is None:
        drifts_ppm = [float(v) for v in rng.uniform(-drift_spread_ppm, drift_spread_ppm, n)]
    if len(offsets_ns) != n or len(drifts_ppm) != n:
        raise AgentInputError(f"offsets/drifts: give one per host ({n})")
    for d in drifts_ppm:
        if not abs(d) <= MAX_DRIFT_PPM:
            raise AgentInputError(f"--drift-ppm: must be within ±{MAX_DRIFT_PPM:g} ppm, got {d}")
    graph = choose_peers(n, k, seed)
    epoch = time.time_ns() if epoch_ns is None else int(epoch_ns)
    start = time.time_ns() + int(start_delay_s * 1e9)
    with tempfile.TemporaryDirectory(prefix="fabriclab-clock-mesh-") as tmp:
        tmp = tmp if halves_dir is None else str(halves_dir)
        halves, argvs = [], []
        for i, h in enumerate(hosts):
            half = Path(tmp) / f"{h['label']}.half.parquet"
            halves.append(half)
            peer_spec = ",".join(f"{hosts[j]['label']}={hosts[j]['addr']}:{PORT}" for j in graph[i])
            argvs.append([*host_prefix(h), sys.executable, "-m", "fabriclab.cli", "clock", "agent", "--clock",
                          host_clock, "--name", h["label"], "--listen", f"{h['addr']}:{PORT}", "--peers", peer_spec,
                          "--duration-s", str(duration_s), "--rate-hz", str(rate_hz), "--spacing-ns",
                          str(spacing_ns), "--offset-ns", str(offsets_ns[i]), "--drift-ppm", repr(drifts_ppm[i]),
                          "--epoch-ns", str(epoch), "--start-ns", str(start), "--stamps", stamps, "--out", str(half)]
                         + ([] if flush_s is None else ["--flush-s", str(flush_s)]))
        run_agents(argvs, [f"the agent in {h['label']}" for h in hosts], start_delay_s + duration_s + 30,
                   "clock mesh", log=log, stop=stop)
        j = join(halves)
    pr.write(j.table, Path(out))
    truth = Path(out).with_name(Path(out).name.removesuffix(".parquet") + ".emulated.csv")
    lines = ["host,offset_ns,drift_ppm,epoch_ns,peers,clock,mono_offset_ns"]
    lines += [f"{h['label']},{offsets_ns[i]},{drifts_ppm[i]!r},{epoch},{' '.join(hosts[x]['label'] for x in graph[i])},"
              f"{host_clock},{h.get('mono_offset_ns', '') if mono else ''}" for i, h in enumerate(hosts)]
    truth.write_text("\n".join(lines) + "\n")
    return j

"""The cluster-in-a-box for real (root only): a 4-host star shaped to
100 Mbit/s, a plain TCP transfer's goodput against the rate, RTT against the
netem delays, a 4-rank allreduce through `fabriclab launch --cluster`, and
`cluster down` leaving nothing, also after `cluster up` was killed midway;
ECMP over both spines of a leaf-spine; strict priority between bands.
About 20 s in all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import why_no_box
from fabriclab.runtime.cluster.apply import list_namespaces, probe, state_path

reason = why_no_box()
pytestmark = pytest.mark.skipif(reason is not None, reason=reason or "")
PY = sys.executable
RATE = 100_000_000
DELAY_US = 2000
SUFFIX = str(os.getpid() % 10**6)  # concurrent runs on one machine do not meet
NAME = "t" + SUFFIX


def fl(*args, env=None):
    return subprocess.run([PY, "-m", "fabriclab.cli", *args], capture_output=True, text=True, env=env, timeout=120)


def veths() -> set[str]:
    r = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True, text=True)
    return {line.split(":")[1].strip() for line in r.stdout.splitlines()}


@pytest.fixture(scope="module")
def features():
    return probe(f"flbox-{NAME}-probe") if reason is None else set()


@pytest.fixture(scope="module")
def box(tmp_path_factory, features):
    """4 hosts, 100 Mbit/s; 2 ms per link end when the kernel has netem (else no delay)."""
    delay = f"{DELAY_US}us" if "netem" in features else "0us"
    f = tmp_path_factory.mktemp("box") / "star.toml"
    f.write_text(textwrap.dedent(f"""
        [topology]
        kind = "star"
        hosts = 4
        link_rate_bps = "{RATE // 10**6}Mbps"
        link_delay_ps = "{delay}"
        [queue]
        ecn_threshold_packets = "off"
        [transport]
        cc = "newreno"
    """))
    fl("cluster", "down", "--name", NAME)
    before = veths()
    r = fl("cluster", "up", str(f), "--name", NAME)
    assert r.returncode == 0, r.stderr
    yield {"delay_us": DELAY_US if "netem" in features else 0, "veths_before": before,
           "state": json.loads(state_path(NAME).read_text())}
    fl("cluster", "down", "--name", NAME)


def nsexec(host: str, *argv, **kw):
    return subprocess.Popen(["ip", "netns", "exec", f"flbox-{NAME}-{host}", *argv], text=True, **kw)


RECV = """
import socket, sys, time
s = socket.socket(); s.bind((sys.argv[1], 5001)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); total = int(sys.argv[2]); got = 0; buf = bytearray(1 << 20); t1 = None
while got < total:
    k = c.recv_into(buf)
    if not k: break
    got += k
    if t1 is None and got >= total // 4: t1, g1 = time.perf_counter(), got   # past slow start
print((got - g1) * 8 / (time.perf_counter() - t1), got, flush=True)
"""
SEND = """
import socket, sys
c = socket.create_connection((sys.argv[1], 5001)); c.sendall(bytes(int(sys.argv[2]))); c.close()
"""


def test_shaped_tcp_goodput_is_the_rate_less_headers(box):
    total = 6_000_000
    addr = box["state"]["hosts"][1]["addr"]
    rx = nsexec("h1", PY, "-c", RECV, addr, str(total), stdout=subprocess.PIPE)
    assert rx.stdout.readline().strip() == "ready"
    tx = nsexec("h0", PY, "-c", SEND, addr, str(total))
    assert tx.wait(30) == 0
    bps, got = rx.stdout.readline().split()
    rx.wait(10)
    assert int(got) == total
    ts = subprocess.run(["ip", "netns", "exec", f"flbox-{NAME}-h0", "sysctl", "-n", "net.ipv4.tcp_timestamps"],
                        capture_output=True, text=True).stdout.strip()
    # Per full segment: payload 1500 - 20 (IP) - 20 (TCP) - 12 (timestamp option, when on); on the wire
    # 1500 + 14 (Ethernet header) + 4 (FCS) + 8 (preamble) + 12 (gap) = 1538 bytes.
    payload = 1460 - (12 if ts != "0" else 0)
    expected = RATE * payload / 1538  # 94.15 Mbit/s with timestamps
    assert abs(float(bps) - expected) / expected < 0.05, (float(bps), expected)


ECHO = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 5002)); print("ready", flush=True)
for _ in range(int(sys.argv[2])):
    d, a = s.recvfrom(100); s.sendto(d, a)
"""
PING = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2); rtts = []
for i in range(int(sys.argv[2])):
    t = time.perf_counter(); s.sendto(b"x" * 56, (sys.argv[1], 5002)); s.recvfrom(100)
    rtts.append(time.perf_counter() - t); time.sleep(0.01)
rtts.sort(); print(rtts[len(rtts) // 2] * 1e6)
"""


def test_rtt_is_twice_the_delays_along_the_path(box):
    if not box["delay_us"]:
        pytest.skip("this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): the box cannot delay links")
    addr = box["state"]["hosts"][2]["addr"]
    rx = nsexec("h2", PY, "-c", ECHO, addr, "20", stdout=subprocess.PIPE)
    assert rx.stdout.readline().strip() == "ready"
    out = nsexec("h3", PY, "-c", PING, addr, "20", stdout=subprocess.PIPE).communicate(timeout=30)[0]
    rx.wait(10)
    # h3 -> sw -> h2 crosses two delayed link ends each way (h3's NIC, the switch port to h2; back: h2's
    # NIC, the switch port to h3): RTT = 2 x (2 x delay); serializing 98-byte frames at 100 Mbit/s adds 4 x 8 us
    expected = 2 * 2 * box["delay_us"]
    assert expected <= float(out) < expected + 1000, (float(out), expected)


WORKER = """
import os, socket, sys
import numpy as np
from fabriclab.runtime import Communicator
c = Communicator.from_env()
probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); probe.connect((os.environ["MASTER_ADDR"], 9))
x = np.random.default_rng(100 + c.rank).integers(-1000, 1000, 300_001).astype(np.int32)
c.allreduce(x, algo="ring")
np.save(os.path.join(sys.argv[1], f"r{c.rank}.npy"), x)
open(os.path.join(sys.argv[1], f"a{c.rank}"), "w").write(probe.getsockname()[0] + " " + os.environ["FABRICLAB_BIND_ADDR"])
c.close()
"""


def test_allreduce_through_launch_cluster_is_numpys_sum(box, tmp_path):
    r = fl("launch", "--cluster", NAME, "-n", "4", "--", PY, "-c", WORKER, str(tmp_path))
    assert r.returncode == 0, r.stderr
    expected = sum(np.random.default_rng(100 + k).integers(-1000, 1000, 300_001).astype(np.int32) for k in range(4))
    hosts = box["state"]["hosts"]
    for k in range(4):
        np.testing.assert_array_equal(np.load(tmp_path / f"r{k}.npy"), expected)
        # the rank ran in host k: its route to the master leaves from host k's address, its bind address
        assert (tmp_path / f"a{k}").read_text().split() == [hosts[k]["addr"]] * 2


def test_runtime_bench_runs_in_the_box(box):
    r = fl("runtime", "bench", "--cluster", NAME, "-n", "4", "--sizes", "256K", "--iters", "2", "--warmup", "1")
    assert r.returncode == 0, r.stderr
    assert f"4 ranks in cluster-in-a-box '{NAME}'" in r.stdout and "# Out of bounds values : 0 OK" in r.stdout
    # a 256 KiB ring allreduce moves 1.5 x 256 KiB per link: at 94.15 Mbit/s of goodput at least 33 ms
    t_us = float(next(x for x in r.stdout.splitlines() if x.strip().startswith("262144")).split()[5])
    assert t_us > 262144 * 1.5 * 8 / (RATE * 1448 / 1538) * 1e6


def test_down_after_a_crash_midway_leaves_nothing(box, tmp_path):
    f = Path(box["state"]["scenario"])
    env = dict(os.environ, FABRICLAB_CLUSTER_CRASH_AFTER="15")  # killed (SIGKILL) after 15 commands
    r = fl("cluster", "up", str(f), "--name", "c" + SUFFIX, env=env)
    assert r.returncode == -signal.SIGKILL
    state = json.loads(state_path("c" + SUFFIX).read_text())
    assert state["status"] == "creating"
    assert len(list_namespaces(f"flbox-c{SUFFIX}-")) == 5  # namespaces made, not all links
    st = fl("cluster", "status", "--name", "c" + SUFFIX)
    assert "creation did not finish" in st.stdout
    r = fl("cluster", "down", "--name", "c" + SUFFIX)
    assert r.returncode == 0, r.stderr
    assert list_namespaces(f"flbox-c{SUFFIX}-") == [] and not state_path("c" + SUFFIX).exists()
    assert veths() <= box["veths_before"]  # the box makes its veths inside its namespaces, never in the root


def test_missing_kernel_features_are_refused_naming_the_field(box, features, tmp_path):
    if "netem" in features and "red" in features:
        pytest.skip("this kernel has netem and red: nothing to refuse")
    f = tmp_path / "s.toml"
    f.write_text('[topology]\nkind = "star"\nhosts = 2\nlink_delay_ps = "10us"\n'
                 '[queue]\necn_threshold_packets = 65\n[transport]\ncc = "newreno"\n')
    r = fl("cluster", "up", str(f), "--name", "m" + SUFFIX)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr
    if "netem" not in features:
        assert "topology.link_delay_ps: this kernel lacks netem" in r.stderr
    if "red" not in features:
        assert "queue.ecn_threshold_packets: this kernel lacks red" in r.stderr
    assert list_namespaces(f"flbox-m{SUFFIX}-") == [] and not state_path("m" + SUFFIX).exists()
    r = fl("cluster", "up", str(f), "--name", "m" + SUFFIX, "--allow-missing")
    try:
        assert r.returncode == 0, r.stderr
        assert "not emulated: " in r.stdout
    finally:
        fl("cluster", "down", "--name", "m" + SUFFIX)


def test_down_leaves_nothing(box):
    assert len(list_namespaces(f"flbox-{NAME}-")) == 5
    r = fl("cluster", "down", "--name", NAME)
    assert r.returncode == 0 and "removed 5 namespace(s)" in r.stdout
    assert list_namespaces(f"flbox-{NAME}-") == []
    assert not state_path(NAME).exists()
    assert veths() <= box["veths_before"]
    r = fl("cluster", "status", "--name", NAME)
    assert "leftover namespaces: none" in r.stdout


FLOWS = """
import socket, sys, threading
addr, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(); s.bind((addr, 5003)); s.listen(n); print("ready", flush=True)
def drain(c):
    while c.recv(1 << 16): pass
for _ in range(n):
    c, _ = s.accept(); threading.Thread(target=drain, args=(c,)).start()
"""


def _sent_bytes(ns: str, dev: str) -> int:
    out = subprocess.run(["tc", "-n", ns, "-s", "qdisc", "show", "dev", dev], capture_output=True, text=True).stdout
    return int(out.split("Sent ")[1].split()[0])  # the root qdisc's counter


def test_leaf_spine_spreads_flows_over_both_spines(tmp_path):
    """16 TCP connections between two leaves: each picks a spine by its 5-tuple's hash (policy 1), so
    both uplinks of the sender's leaf carry some (all on one spine: probability 2^-15)."""
    f = tmp_path / "ls.toml"
    f.write_text('[topology]\nkind = "leaf_spine"\nleaves = 2\nhosts_per_leaf = 1\nspines = 2\n'
                 'link_rate_bps = "1Gbps"\nlink_delay_ps = "0us"\n[queue]\necn_threshold_packets = "off"\n'
                 '[transport]\ncc = "newreno"\n')
    fl("cluster", "down", "--name", "e" + SUFFIX)
    r = fl("cluster", "up", str(f), "--name", "e" + SUFFIX)
    try:
        assert r.returncode == 0, r.stderr
        hosts = json.loads(state_path("e" + SUFFIX).read_text())["hosts"]
        assert [h["addr"] for h in hosts] == ["10.1.0.1", "10.2.0.1"]
        before = [_sent_bytes(f"flbox-e{SUFFIX}-leaf0", f"up{s}") for s in (0, 1)]
        rx = subprocess.Popen(["ip", "netns", "exec", f"flbox-e{SUFFIX}-h1", PY, "-c", FLOWS, hosts[1]["addr"], "16", "0"],
                              stdout=subprocess.PIPE, text=True)
        assert rx.stdout.readline().strip() == "ready"
        send = ("import socket, sys\nfor _ in range(16):\n    c = socket.create_connection((sys.argv[1], 5003)); "
                "c.sendall(bytes(200_000)); c.close()\n")
        assert subprocess.run(["ip", "netns", "exec", f"flbox-e{SUFFIX}-h0", PY, "-c", send, hosts[1]["addr"]],
                              timeout=30).returncode == 0
        rx.wait(10)
        after = [_sent_bytes(f"flbox-e{SUFFIX}-leaf0", f"up{s}") for s in (0, 1)]
        moved = [a - b for a, b in zip(after, before)]
        assert sum(moved) > 16 * 200_000  # everything crossed a spine, headers on top
        assert min(moved) > 200_000, moved  # at least one whole connection on each spine
    finally:
        fl("cluster", "down", "--name", "e" + SUFFIX)


PRIO_RECV = """
import socket, sys, time
addr, port, t0, t1 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
s = socket.socket(); s.bind((addr, port)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); buf = bytearray(1 << 16); n = 0
while True:
    k = c.recv_into(buf)
    if not k: break
    if t0 <= time.time() < t1: n += k
print(n * 8 / (t1 - t0), flush=True)
"""
PRIO_SEND = """
import socket, sys, time
addr, port, tos, until = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
c = socket.socket(); c.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos); c.connect((addr, port))
data = bytes(1 << 16)
while time.time() < until: c.sendall(data)
c.close()
"""


def _two_senders_into_one_port(tmp_path, discipline: str) -> tuple[float, float]:
    """h0 sends class 0 (DSCP CS0, TOS 0x00) and h1 class 2 (CS2, TOS 0x40) to h2 over a 100 Mbit/s star;
    returns both goodputs (bit/s) over a 3 s window after both have ramped up."""
    f = tmp_path / f"{discipline}.toml"
    f.write_text('[topology]\nkind = "star"\nhosts = 3\nlink_rate_bps = "100Mbps"\nlink_delay_ps = "0us"\n'
                 f'[queue]\ndiscipline = "{discipline}"\nbands = 3\necn_threshold_packets = "off"\n'
                 '[transport]\ncc = "newreno"\n')
    fl("cluster", "down", "--name", "p" + SUFFIX)
    r = fl("cluster", "up", str(f), "--name", "p" + SUFFIX)
    try:
        assert r.returncode == 0, r.stderr
        dst = json.loads(state_path("p" + SUFFIX).read_text())["hosts"][2]["addr"]
        now = time.time()
        t0, t1, until = now + 1.0, now + 4.0, now + 4.5
        rx = [subprocess.Popen(["ip", "netns", "exec", f"flbox-p{SUFFIX}-h2", PY, "-c", PRIO_RECV, dst, str(port),
                                str(t0), str(t1)], stdout=subprocess.PIPE, text=True) for port in (5101, 5102)]
        for p in rx:
            assert p.stdout.readline().strip() == "ready"
        tx = [subprocess.Popen(["ip", "netns", "exec", f"flbox-p{SUFFIX}-h{h}", PY, "-c", PRIO_SEND, dst, str(port),
                                str(tos), str(until)]) for h, port, tos in ((0, 5101, 0x00), (1, 5102, 0x40))]
        for p in tx:
            assert p.wait(30) == 0
        high, low = (float(p.communicate(timeout=10)[0]) for p in rx)
        return high, low
    finally:
        fl("cluster", "down", "--name", "p" + SUFFIX)


def test_strict_priority_bands_on_a_switch_port(tmp_path):
    """Default priomap: class 0 -> band 0, class 2 -> band 2. Band 2 gets only what band 0 leaves (its
    1/1000 guarantee and scraps); the same two flows share the port under fifo."""
    goodput = 100e6 * 1448 / 1538
    high, low = _two_senders_into_one_port(tmp_path, "prio")
    assert high > 0.9 * goodput, (high, low)  # band 0 as if alone
    assert low < 0.05 * goodput, (high, low)
    high, low = _two_senders_into_one_port(tmp_path, "fifo")
    # Both get a share. Two real TCP flows through one tail-drop FIFO need
    # not split it evenly: one got 8.5 % over a 1.5 s window in CI, hence
    # 3 s and 5 %, still far from what strict priority leaves the low band.
    assert high + low > 0.9 * goodput and min(high, low) > 0.05 * goodput, (high, low)

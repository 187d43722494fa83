"""The real clock agent (observe/clock/agent.py; docs/clockwork.md, "The real agent").

Expectations are derived by hand from the emulation's definition: host h reads
C_h(t) = t + offset_h + drift_h x (t - epoch) at true CLOCK_REALTIME t. So b's
offset against a, at the instant a reads m, is off_b - off_a + (d_b - d_a)(t - epoch)
where t solves C_a(t) = m; and b's rate against a is (1 + d_b) / (1 + d_a) - 1.

- On loopback (no root needed): two agents, +50 us / +20 ppm and -30 us / -10 ppm,
  2 s of probes. Software stamps on loopback are good to about a µs (the measured
  spread of rx - tx above its floor has a p99 of ~2 µs, docs/clockwork.md), and the
  two directions take the same path, so Huygens' fit must land within 2 µs and 1 ppm
  (one window of 2 s: a µs at each end is 1 ppm of slope).
- In a cluster-in-a-box (root): a 4-host star, an agent in every host, seeded
  offsets and drifts; every host's offset within 500 ns of the emulated one (the
  issue's target for software stamps; measured: tens of ns).
About 15 s in all."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import why_no_box
from fabriclab.observe.clock import agent as ag
from fabriclab.observe.clock import estimate as est
from fabriclab.observe.clock import probes as pr

PY = sys.executable
ROOT = Path(__file__).resolve().parents[1]


def fl(*args, timeout=60):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    return subprocess.run([PY, "-m", "fabriclab.cli", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def free_udp_ports(n: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def expected(off_a, d_a, off_b, d_b, epoch, a_reads_abs):
    """b's offset against a (ns) when a's clock reads a_reads_abs (absolute ns), and b's rate against a (ppm)."""
    since_epoch = (int(a_reads_abs) - int(epoch) - off_a) / (1 + d_a * 1e-6)   # t - epoch, from C_a(t) = a_reads
    return off_b - off_a + (d_b - d_a) * 1e-6 * since_epoch, ((1 + d_b * 1e-6) / (1 + d_a * 1e-6) - 1) * 1e6


# ---------------------------------------------------------------- loopback: two agents


CLOCKS = {"a": (50_000, 20.0), "b": (-30_000, -10.0)}


@pytest.fixture(scope="module")
def loopback(tmp_path_factory):
    d = tmp_path_factory.mktemp("agents")
    pa_, pb = free_udp_ports(2)
    port = {"a": pa_, "b": pb}
    epoch = time.time_ns()
    start = epoch + 2_500_000_000     # both agents listen before either probes (Python starts in ~1 s)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    procs = []
    for me, other in (("a", "b"), ("b", "a")):
        off, drift = CLOCKS[me]
        procs.append(subprocess.Popen(
            [PY, "-m", "fabriclab.cli", "clock", "agent", "--name", me, "--listen", f"127.0.0.1:{port[me]}",
             "--peers", f"{other}=127.0.0.1:{port[other]}", "--duration-s", "2", "--rate-hz", "100",
             "--spacing-ns", "20000", "--offset-ns", str(off), "--drift-ppm", str(drift), "--epoch-ns", str(epoch),
             "--start-ns", str(start), "--out", str(d / f"{me}.parquet")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    for p in procs:
        _, e = p.communicate(timeout=30)
        assert p.returncode == 0, e
    j = ag.join([d / "a.parquet", d / "b.parquet"])
    pr.write(j.table, d / "probes.parquet")
    return {"dir": d, "join": j, "epoch": epoch}


def test_loopback_agents_use_kernel_stamps_and_measure_both_ways(loopback):
    j = loopback["join"]
    assert set(j.hosts) == {"a", "b"}
    for h in ("a", "b"):
        assert j.hosts[h]["stamps"] == "kernel"
        assert "no hardware stamps" in j.hosts[h]["hardware"]   # lo offers none
        assert j.hosts[h]["counts"]["tx_unstamped"] == 0
    t = j.table.to_pandas()
    # 2 s at 100 pairs/s each way, plus the echoes of each: about 4 x 200 pairs; a few lost at the edges
    for src, dst in (("a", "b"), ("b", "a")):
        pairs = t[(t.src == src) & (t.dst == dst)].pair.nunique()
        assert 300 <= pairs <= 420, (src, dst, pairs)
    assert j.dropped_pairs <= 20


def test_loopback_rows_carry_positive_sub_ms_delays(loopback):
    """rx_ns - tx_ns minus the emulated clock errors (from the emulation's parameters) is a delay in (0, 1 ms)."""
    j, epoch = loopback["join"], loopback["epoch"]
    t = j.table.to_pandas()
    o = j.origin_ns

    def err(host, true_ns):   # true_ns from the joined file's origin o (absolute ns lose precision in float64)
        off, d = CLOCKS[host]
        return off + d * 1e-6 * (true_ns + (o - epoch))

    true_tx = t.true_tx_ps.to_numpy(np.int64) / 1000
    true_rx = t.true_rx_ps.to_numpy(np.int64) / 1000
    src_err = np.where(t.src == "a", err("a", true_tx), err("b", true_tx))
    dst_err = np.where(t.dst == "a", err("a", true_rx), err("b", true_rx))
    delay = (t.rx_ns.to_numpy() - dst_err) - (t.tx_ns.to_numpy() - src_err)
    assert np.all(delay > 0), delay.min()
    assert np.all(delay < 1e6), delay.max()
    # and the recorded stamps are exactly the emulated clock at the true instants (rounded to ns)
    assert np.all(np.abs(delay - (true_rx - true_tx)) <= 2)


def test_loopback_estimator_recovers_offset_and_drift(loopback):
    j, epoch = loopback["join"], loopback["epoch"]
    p = pr.read(loopback["dir"] / "probes.parquet")
    r = est.estimate(p, ["huygens"], window_s=2.0, pure_bound_ns=2000.0, reference="a")
    c = r.clocks.to_pandas()
    b = c[c.host == "b"].iloc[0]
    off_a, d_a = CLOCKS["a"]
    off_b, d_b = CLOCKS["b"]
    want_off, want_drift = expected(off_a, d_a, off_b, d_b, epoch, int(b.window_mid_ns) + j.origin_ns)
    assert abs(b.offset_ns - want_off) <= 2000, (b.offset_ns, want_off)
    assert abs(b.drift_ppm - want_drift) <= 1.0, (b.drift_ppm, want_drift)
    # the estimator's own truth (from true_*_ps) agrees with the hand-derived one
    assert abs(b.true_offset_ns - want_off) <= 5, (b.true_offset_ns, want_off)


# ---------------------------------------------------------------- the join, by hand


def half(rows, host):
    t = pa.table({"side": [r[0] for r in rows], "src": [r[1] for r in rows], "dst": [r[2] for r in rows],
                  "pair": pa.array([r[3] for r in rows], pa.uint64()), "seq": pa.array([r[4] for r in rows], pa.uint8()),
                  "stamp_ns": pa.array([r[5] for r in rows], pa.int64()),
                  "true_ns": pa.array([r[6] for r in rows], pa.int64())}, schema=ag.HALF_SCHEMA)
    return t, {"host": host}


def test_join_matches_halves_drops_broken_pairs_and_moves_the_origin(tmp_path):
    T = 1_795_000_000_700_000_000   # an absolute CLOCK_REALTIME instant, ns
    x = half([("tx", "x", "y", 0, 0, T + 100, T), ("tx", "x", "y", 0, 1, T + 20_100, T + 20_000),
              ("tx", "x", "y", 1, 0, T + 5_000_100, T + 5_000_000), ("tx", "x", "y", 1, 1, T + 5_020_100, T + 5_020_000),
              ("rx", "y", "x", 7, 0, T + 40_200, T + 40_300), ("rx", "y", "x", 7, 1, T + 60_200, T + 60_300)], "x")
    # y lost probe (1, 1) of x's second pair; y's pair 7 is whole
    y = half([("rx", "x", "y", 0, 0, T + 900, T + 1_000), ("rx", "x", "y", 0, 1, T + 20_950, T + 21_050),
              ("rx", "x", "y", 1, 0, T + 5_000_900, T + 5_001_000),
              ("tx", "y", "x", 7, 0, T + 39_900, T + 40_000), ("tx", "y", "x", 7, 1, T + 59_900, T + 60_000)], "y")
    j = ag.join([x, y])
    assert j.origin_ns == T - 700_000_000      # a whole second at or before the first true stamp
    assert j.dropped_pairs == 1
    rows = j.table.to_pylist()
    assert [(r["src"], r["pair"], r["seq"]) for r in rows] == [("x", 0, 0), ("x", 0, 1), ("y", 7, 0), ("y", 7, 1)]
    o = 700_000_000
    assert rows[0]["tx_ns"] == o + 100 and rows[0]["rx_ns"] == o + 900
    assert rows[0]["true_tx_ps"] == o * 1000 and rows[0]["true_rx_ps"] == (o + 1_000) * 1000
    assert rows[3]["tx_ns"] == o + 59_900 and rows[3]["rx_ns"] == o + 60_200
    pr.write(j.table, tmp_path / "p.parquet")
    p = pr.read(tmp_path / "p.parquet")      # the schema's own reader takes it
    assert p.has_truth and len(p.src) == 2


def test_join_gives_monotonic_stamps_an_origin_of_their_own():
    # Stamps on CLOCK_MONOTONIC (days of uptime) beside true CLOCK_REALTIME times (since 1970): the stamps get
    # a whole second at or before their own first as origin, so the offset between x and y (2.5 s, the
    # difference of their time namespaces) and every delay survive in the file's small numbers.
    T = 1_795_000_000_700_000_000
    M = 400_000_123_000_000          # x's CLOCK_MONOTONIC at T
    D = 2_500_000_000                # y's namespace is 2.5 s ahead of x's
    x = half([("tx", "x", "y", 0, 0, M, T), ("tx", "x", "y", 0, 1, M + 20_000, T + 20_000)], "x")
    y = half([("rx", "x", "y", 0, 0, M + D + 900, T + 900), ("rx", "x", "y", 0, 1, M + D + 20_950, T + 20_950)],
             "y")
    j = ag.join([x, y])
    assert j.origin_ns == T - 700_000_000 and j.stamp_origin_ns == 400_000_000_000_000
    rows = j.table.to_pylist()
    assert rows[0]["tx_ns"] == 123_000_000 and rows[0]["rx_ns"] == 123_000_000 + D + 900
    assert rows[1]["rx_ns"] - rows[1]["tx_ns"] == D + 950
    meta = json.loads(j.table.schema.metadata[b"fabriclab.clock.join"])
    assert meta["stamp_origin_ns"] == j.stamp_origin_ns


def test_realtime_minus_monotonic_brackets_a_fresh_reading():
    # D = CLOCK_REALTIME - CLOCK_MONOTONIC is one constant; reading m1, r, m2 bounds it by r - m2 <= D <= r - m1.
    # A later bracket must overlap the first (no step in between), and the bracket is narrow (tens of ns on
    # vDSO reads; 20 us allows a preempted read on a busy machine).
    lo, hi = ag.realtime_minus_monotonic()
    assert lo <= hi and hi - lo < 20_000
    lo2, hi2 = ag.realtime_minus_monotonic(50)
    assert max(lo, lo2) <= min(hi, hi2) + 1000


# ---------------------------------------------------------------- bad input and the fallback


@pytest.mark.parametrize("args, option", [
    (["--peers", "b=127.0.0.1"], "--peers"),
    (["--duration-s", "0"], "--duration-s"),
    (["--duration-s", "-1"], "--duration-s"),
    (["--drift-ppm", "1500"], "--drift-ppm"),
    (["--drift-ppm", "-1000.5"], "--drift-ppm"),
    (["--listen", "127.0.0.1"], "--listen"),
    (["--offset-ns", str(86_400_000_000_001)], "--offset-ns"),   # beyond ±1 day (the runtime's bound)
    (["--offset-ns", str(-2**70)], "--offset-ns"),              # beyond i64: was a traceback
    (["--epoch-ns", str(2**62 + 1)], "--epoch-ns"),
])
def test_bad_agent_input_exits_2_naming_the_option(tmp_path, args, option):
    base = {"--name": "a", "--listen": "127.0.0.1:1", "--peers": "b=127.0.0.1:2", "--duration-s": "1",
            "--out": str(tmp_path / "a.parquet")}
    base.update(dict(zip(args[::2], args[1::2])))
    r = fl("clock", "agent", *[x for kv in base.items() for x in kv])
    assert r.returncode == 2, r.stderr
    assert option in r.stderr, r.stderr
    assert not (tmp_path / "a.parquet").exists()


def test_kernel_refusing_timestamps_falls_back_to_user_stamps(monkeypatch, capsys):
    monkeypatch.setattr(ag, "SO_TIMESTAMPING", 0x7fff)   # an option no kernel knows: setsockopt fails
    (port,) = free_udp_ports(1)
    a = ag.Agent("a", ("127.0.0.1", port), [], duration_s=0.05, linger_s=0.0, log=sys.stderr)
    a.run()
    assert a.mode == "user"
    assert "refused SO_TIMESTAMPING" in capsys.readouterr().err
    assert a.half_table().schema.metadata[b"fabriclab.clock.agent"].find(b'"stamps": "user"') >= 0


# ---------------------------------------------------------------- the cluster-in-a-box

box_reason = why_no_box()
SUFFIX = str(os.getpid() % 10**6)
BOX = "ck" + SUFFIX


@pytest.mark.skipif(box_reason is not None, reason=box_reason or "")
def test_box_mesh_recovers_emulated_offsets(tmp_path):
    from fabriclab.runtime.cluster.apply import list_namespaces

    fl("cluster", "down", "--name", BOX)
    r = fl("cluster", "up", str(ROOT / "examples" / "cluster-star4-1g.toml"), "--name", BOX, timeout=120)
    try:
        assert r.returncode == 0, r.stderr
        bad = fl("clock", "mesh", "--cluster", BOX, "--peers", "4", "--out", str(tmp_path / "x.parquet"))
        assert bad.returncode == 2 and "--peers" in bad.stderr, bad.stderr   # K beyond N - 1 = 3
        offsets = [20_000, -45_000, 70_000, 5_000]
        drifts = [15.0, -8.0, 25.0, -20.0]
        out = tmp_path / "probes.parquet"
        j = ag.mesh(BOX, out, duration_s=2.0, peers=2, rate_hz=100, offsets_ns=offsets, drifts_ppm=drifts,
                    start_delay_s=2.5, log=None)
        assert set(j.hosts) == {"h0", "h1", "h2", "h3"}
        assert all(m["stamps"] == "kernel" for m in j.hosts.values())
        epoch = j.hosts["h0"]["epoch_ns"]
        assert (tmp_path / "probes.emulated.csv").read_text().count("\n") == 5
        p = pr.read(out)
        res = est.estimate(p, ["huygens"], window_s=2.0, pure_bound_ns=2000.0, reference="h0")
        c = res.clocks.to_pandas()
        for i in range(1, 4):
            row = c[c.host == f"h{i}"].iloc[0]
            want, rate = expected(offsets[0], drifts[0], offsets[i], drifts[i], epoch, int(row.window_mid_ns) + j.origin_ns)
            assert abs(row.offset_ns - want) <= 500, (i, row.offset_ns, want)
            assert abs(row.drift_ppm - rate) <= 1.0, (i, row.drift_ppm, rate)
    finally:
        fl("cluster", "down", "--name", BOX)
    assert not list_namespaces(f"flbox-{BOX}-")


# ---------------------------------------------------------------- time namespaces in the box


MONO = [0, 1_234_567_891, -987_654_321, 42_000]   # CLOCK_MONOTONIC offsets of h0..h3, ns
TBOX = "tn" + SUFFIX


@pytest.fixture(scope="module")
def timens_box(tmp_path_factory):
    """A 4-host star with time namespaces of the offsets MONO; an agent mesh on CLOCK_MONOTONIC for 5 s and,
    while it probes, the runtime's allreduces (telemetry on) through the box."""
    import threading

    from fabriclab.runtime.cluster.apply import list_namespaces

    d = tmp_path_factory.mktemp("timens")
    fl("cluster", "down", "--name", TBOX)
    r = fl("cluster", "up", str(ROOT / "examples" / "cluster-star4-1g.toml"), "--name", TBOX, "--mono-offsets-ns",
           ",".join(map(str, MONO)), timeout=120)
    assert r.returncode == 0, r.stderr
    out = {"dir": d}
    try:
        out["offsets_seen"] = [fl("cluster", "exec", f"h{i}", "--name", TBOX, "--", "cat",
                                  "/proc/self/timens_offsets").stdout for i in range(4)]
        mesh = {}
        # every agent listens before any probes (Python's start takes seconds on a busy machine), and the
        # runtime's messages fall within the probes' span
        t = threading.Thread(target=lambda: mesh.update(j=ag.mesh(TBOX, d / "probes.parquet", duration_s=5.0,
                                                                  peers=2, rate_hz=100, start_delay_s=4.0, log=None)))
        t.start()
        time.sleep(4.5)
        rb = fl("runtime", "bench", "--cluster", TBOX, "-n", "4", "--sizes", "64K:256K", "--iters", "3", "--warmup",
                "1", "--telemetry", str(d / "rt"), timeout=60)
        t.join(timeout=60)
        out["bench"] = rb
        out["join"] = mesh.get("j")
    finally:
        fl("cluster", "down", "--name", TBOX)
    out["left"] = list_namespaces(f"flbox-{TBOX}-")
    out["timens_left"] = sorted(p.name for p in Path("/run/fabriclab/timens").glob(f"{TBOX}-*")) \
        if Path("/run/fabriclab/timens").is_dir() else []
    return out


@pytest.mark.skipif(box_reason is not None, reason=box_reason or "")
def test_box_time_namespace_offsets_are_recovered(timens_box):
    # Each host reads the offset the box was given (in the kernel's "monotonic S NS" form) ...
    for i, text in enumerate(timens_box["offsets_seen"]):
        s, ns = divmod(MONO[i], 10**9)
        assert "monotonic" in text and text.split()[1:3] == [str(s), str(ns)], (i, text)
    # ... and the estimator recovers every host's offset against h0 from the agents' CLOCK_MONOTONIC stamps
    # within the software-stamp target (500 ns), with the true relative drift 0: the fitted line stays within
    # that target at both ends of its window, |drift| <= 2 x 500 ns / the window's span. 2.5 s windows cut the
    # 5 s mesh (5-6 s of stamps as agents start on a busy machine) into two of at least 2.5 s each (0.4 ppm);
    # 2 s windows left a trailing window of about 1 s whose slope is four times noisier.
    j = timens_box["join"]
    assert j is not None and all(m["clock"] == "monotonic" for m in j.hosts.values())
    p = pr.read(timens_box["dir"] / "probes.parquet")
    c = est.estimate(p, ["huygens"], window_s=2.5, pure_bound_ns=2000.0, reference="h0").clocks.to_pandas()
    assert len(c) >= 4
    mids = sorted(set(c.window_mid_ns))
    assert len(mids) >= 2   # a whole first window places the rest
    last_start = mids[0] - 1_250_000_000 + (len(mids) - 1) * 2_500_000_000
    span_ns = {m: 2_500_000_000 if m != mids[-1] else 2 * (m - last_start) for m in mids}
    for _, row in c.iterrows():
        i = int(row.host[1:])
        assert abs(row.offset_ns - (MONO[i] - MONO[0])) <= 500, (row.host, row.offset_ns)
        assert abs(row.drift_ppm) * 1e-6 * span_ns[row.window_mid_ns] <= 2 * 500, (row.host, row.drift_ppm)
    # cluster down removed the namespaces and the time namespaces' files
    assert not timens_box["left"] and not timens_box["timens_left"]


@pytest.mark.skipif(box_reason is not None, reason=box_reason or "")
def test_box_runtime_one_way_delays_corrected_by_the_agent_clocks(timens_box):
    # The runtime's ranks ran in the same time namespaces, so their *_mono_ns carry the offsets MONO. With the
    # mesh's clocks, `fabriclab owd --clock mono` must give OWDs whose error against truth is within the target:
    # the truth is (arrival mono - receiver's offset) - (send mono - sender's offset), since every namespace's
    # CLOCK_MONOTONIC is the machine's plus its offset.
    from fabriclab.observe import owd as ow

    assert timens_box["bench"].returncode == 0, timens_box["bench"].stderr
    d = timens_box["dir"]
    r = fl("clock", "estimate", str(d / "probes.parquet"), "--out", str(d / "clocks.parquet"), "--pure-bound-ns",
           "2000", "--reference", "h0", "--window-s", "2")
    assert r.returncode == 0, r.stderr
    r = fl("owd", str(d / "rt"), "--clocks", str(d / "clocks.parquet"), "--hosts", "h0,h1,h2,h3", "--clock", "mono",
           "--out", str(d / "owd"))
    assert r.returncode == 0, r.stderr
    t = pd.read_parquet(d / "owd" / "owd.parquet")
    ccl, _ = ow.read_ccl(d / "rt")
    snd = ccl[ccl.kind == "send"].rename(columns={"rank": "src_rank", "peer": "dst_rank"})
    rcv = ccl[ccl.kind == "recv"].rename(columns={"rank": "dst_rank", "peer": "src_rank"})
    key = ["op_id", "src_rank", "dst_rank", "seq"]
    m = t.merge(snd[key + ["send_start_mono_ns"]], on=key).merge(rcv[key + ["recv_arrival_mono_ns"]], on=key)
    assert len(m) == len(t) and len(t) > 50
    off = {f"h{i}": v for i, v in enumerate(MONO)}
    true = ((m.recv_arrival_mono_ns.astype("int64") - m.dst.map(off)) -
            (m.send_start_mono_ns.astype("int64") - m.src.map(off))).astype(float)
    err = (m.owd_ns - true).abs()
    # Each host's clock is held to the 500 ns target (the test above); an OWD reads two hosts' clocks, so its
    # error is within the two targets' sum. (Measured idle: p99 116 ns; on a machine loaded by other work the
    # CPU-starved agents left one host pair ~470 ns apart, which p99 <= 500 alone would call a failure.)
    assert err.quantile(0.99) <= 2 * 500, err.describe()
    assert (true > 0).all()


def test_run_agents_ends_its_processes_when_told_to_stop():
    # A process that would run 60 s, stopped by the event after 0.3 s: terminated (SIGTERM), not an error,
    # and run_agents returns long before the process's own end or the 120 s timeout.
    import sys
    import threading

    from fabriclab.observe.clock.agent import run_agents

    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    t0 = time.monotonic()
    run_agents([[sys.executable, "-c", "import time; time.sleep(60)"]], ["sleeper"], 120.0, "test", stop=stop)
    assert time.monotonic() - t0 < 20


def test_the_live_flush_writes_the_records_so_far_whole_and_only_converts_new_ones(tmp_path):
    # Two flushes: the file holds every record each time (hand counts), the second converting only the rows
    # added since the first; the final whole half (write_half) holds the same rows, sorted.
    import pyarrow.parquet as pq

    from fabriclab.observe.clock import agent as ag

    a = ag.Agent(name="h0", listen=("127.0.0.1", 1), peers=[], duration_s=1.0)
    a.tx += [("h1", p, s, 10**18 + 1000 * p + s) for p in range(3) for s in (0, 1)]
    f = ag.HalfFlusher(a, tmp_path / "h0.half.parquet")
    assert f.flush()
    f.wait()
    assert pq.read_table(tmp_path / "h0.half.parquet").num_rows == 6
    a.rx += [("h1", 7, s, 10**18 + s) for s in (0, 1)]
    a.tx += [("h1", 3, 0, 10**18 + 3000)]
    assert f.flush()
    f.wait()
    assert (f.n_tx, f.n_rx) == (7, 2) and len(f.chunks) == 1
    t = pq.read_table(tmp_path / "h0.half.parquet")
    assert t.num_rows == 9 and t.column("side").to_pylist().count("rx") == 2
    ag.write_half(a, tmp_path / "whole.half.parquet")
    w = pq.read_table(tmp_path / "whole.half.parquet")
    key = lambda tb: sorted(zip(*(tb.column(c).to_pylist() for c in ("side", "src", "dst", "pair", "seq", "stamp_ns"))))  # noqa: E731
    assert key(w) == key(t)

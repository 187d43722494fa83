"""One-way delays of collective messages (fabriclab owd; docs/clockwork.md, "One-way delays").

The expectations are derived by hand from the scenario, not from the code: a lone
message on a 2-host star takes serialization plus propagation (the transport's wire
sizes, docs/architecture.md), and host clocks add their offsets and drifts."""

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import run_cli

RATE_BPS = 1_000_000_000          # 1 Gbit/s: a 1538-byte frame takes 12,304 ns
DELAY_NS = 3_000                  # each of the two links h0-s0, s0-h1
SEGMENTS = 10                     # within TCP's initial window (10 segments): no round trip waits
PAYLOAD = SEGMENTS * 1460         # MSS 1460
START_NS = 1_000_000              # the collective starts at 1 ms ...
OVERHEAD_NS = 1_000               # ... and its send leaves 1 us later (send_overhead_ps default)
OFFSET_NS = {"h0": -5_000, "h1": 37_000}
DRIFT_PPM = {"h0": 20.0, "h1": -15.0}

# By hand: the sender's NIC serializes 10 full segments of 1538 wire bytes back to back;
# the switch forwards each after receiving it whole (store and forward, same rate, no queue),
# so the last segment arrives 10 frame times + one more frame time at the switch + 2 delays.
FRAME_NS = 1538 * 8 * 1e9 / RATE_BPS
LONE_OWD_NS = (SEGMENTS + 1) * FRAME_NS + 2 * DELAY_NS  # 141,344 ns


def _clock(host, t_ns):
    """The host's clock at true time t (no wander, no stamping noise in ccl's reads)."""
    return t_ns + OFFSET_NS[host] + DRIFT_PPM[host] * 1e-6 * t_ns


def _scenario(tmp_path, payloads=(PAYLOAD,)):
    ranks0, ranks1 = [], []
    for k, b in enumerate(payloads):  # later messages each wait for the previous one's arrival
        deps = {"deps": [k - 1]} if k else {}
        ranks0.append({"op": "send", "peer": 1, "offset": 0, "bytes": b, **deps})
        ranks1.append({"op": "recv", "peer": 0, "offset": 0, "bytes": b, **deps})
    payload = max(payloads)
    plan = {"version": 1, "collective": "broadcast", "nranks": 2, "size_bytes": payload, "root": 0,
            "algorithm": "hand-made", "meta": {}, "ranks": [ranks0, ranks1]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    hosts = "".join(f'[clocks.hosts.{h}]\noffset_ps = "{OFFSET_NS[h]}ns"\ndrift_ppm = {DRIFT_PPM[h]}\n'
                    for h in ("h0", "h1"))
    (tmp_path / "s.toml").write_text(
        'name = "owd"\nbackend = "packet"\n'
        f'[topology]\nkind = "star"\nhosts = 2\nlink_rate_bps = "{RATE_BPS}bps"\nlink_delay_ps = "{DELAY_NS}ns"\n'
        f'[clocks]\nwander_ppm = 0\n{hosts}'
        f'[[collectives]]\nname = "one"\nplan = "plan.json"\nstart_ps = "{START_NS}ns"\n')
    run = tmp_path / "run"
    r = run_cli("run", str(tmp_path / "s.toml"), "--out", str(run), "-q")
    assert r.returncode == 0, r.stderr
    return run


def _true_clocks(path, hosts=("h0", "h1")):
    """A clocks table in the estimator's format, by hand, against true time: at true time (and reference
    reading) M, host h reads M + offset + drift M, so its offset is offset + drift M and its rate drift."""
    rows = []
    for w, mid in enumerate((0, 2_000_000_000)):
        for h in hosts:
            rows.append({"window": w, "window_mid_ns": mid, "host": h, "method": "huygens", "reference": "true",
                         "offset_ns": OFFSET_NS[h] + DRIFT_PPM[h] * 1e-6 * mid, "drift_ppm": DRIFT_PPM[h]})
    pq.write_table(pa.Table.from_pylist(rows), str(path))
    return path


@pytest.fixture(scope="module")
def lone(tmp_path_factory):
    return _scenario(tmp_path_factory.mktemp("lone"))


def _owd(run, *args, out):
    r = run_cli("owd", str(run), "--out", str(out), *args)
    assert r.returncode == 0, r.stderr
    return pd.read_parquet(out / "owd.parquet"), r.stdout


def test_lone_message_corrected_equals_serialization_plus_propagation(lone, tmp_path):
    t, stdout = _owd(lone, "--clocks", str(_true_clocks(tmp_path / "clocks.parquet")), out=tmp_path / "o")
    assert len(t) == 1
    m = t.iloc[0]
    assert (m["src"], m["dst"], m["bytes"]) == ("h0", "h1", PAYLOAD)
    assert LONE_OWD_NS == 141_344
    # ns readings are floored, so the corrected difference is within 1 ns (plus float rounding).
    assert abs(m["owd_ns"] - LONE_OWD_NS) <= 1.01
    assert m["true_owd_ns"] == LONE_OWD_NS
    assert abs(m["error_ns"]) <= 1.01
    assert m["base_ns"] == m["owd_ns"] and m["excess_ns"] == 0
    assert m["sender_delay_ns"] == OVERHEAD_NS  # post to send start: the send overhead
    # On the corrected clock (true time here) the send starts at 1 ms + the overhead.
    assert abs(m["send_start_ns"] - (START_NS + OVERHEAD_NS)) <= 1
    assert "corrected" in stdout and "UNCORRECTED" not in stdout
    assert pq.read_schema(tmp_path / "o" / "owd.parquet").metadata[b"clocks"] == b"corrected"
    assert (tmp_path / "o" / "owd_matrix.png").stat().st_size > 0
    assert (tmp_path / "o" / "owd_timeline.png").stat().st_size > 0


def test_lone_message_uncorrected_adds_receivers_minus_senders_clock(lone, tmp_path):
    t, stdout = _owd(lone, out=tmp_path / "o")
    m = t.iloc[0]
    send_true = START_NS + OVERHEAD_NS
    arrive_true = send_true + LONE_OWD_NS
    expected = _clock("h1", arrive_true) - _clock("h0", send_true)
    # = the true OWD + 37 us - (-5 us) + the drifts' few ns at ~1 ms.
    assert abs(expected - (LONE_OWD_NS + OFFSET_NS["h1"] - OFFSET_NS["h0"])) < 40
    assert abs(m["owd_ns"] - expected) <= 1.01
    assert abs(m["error_ns"] - (OFFSET_NS["h1"] - OFFSET_NS["h0"])) < 40
    assert "UNCORRECTED" in stdout
    assert pq.read_schema(tmp_path / "o" / "owd.parquet").metadata[b"clocks"] == b"uncorrected"
    assert m["send_window"] is pd.NA or pd.isna(m["send_window"])


def test_base_is_the_minimum_per_connection(tmp_path):
    # Three messages of 3, 1 and 2 full segments, one after another, each alone on the wire: n frames + 1 at
    # the switch + 2 delays. The connection's base is the least of them (the 1-segment message's), and the
    # excess of the others is their extra frames (the base is per connection, not per size).
    run = _scenario(tmp_path, payloads=(3 * 1460, 1460, 2 * 1460))
    t, _ = _owd(run, "--clocks", str(_true_clocks(tmp_path / "clocks.parquet")), out=tmp_path / "o")
    assert len(t) == 3 and set(zip(t["src"], t["dst"])) == {("h0", "h1")}
    t = t.sort_values("seq")
    segs = [3, 1, 2]
    for (_, m), n in zip(t.iterrows(), segs):
        assert abs(m["owd_ns"] - ((n + 1) * FRAME_NS + 2 * DELAY_NS)) <= 1.01
        assert abs(m["base_ns"] - (2 * FRAME_NS + 2 * DELAY_NS)) <= 1.01
        assert abs(m["excess_ns"] - (n - 1) * FRAME_NS) <= 2.02
    assert (t["base_ns"] == t["owd_ns"].min()).all()


def test_report_has_the_owd_section_when_owd_parquet_exists(lone, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(lone, run)
    r = run_cli("report", str(run))
    assert r.returncode == 0, r.stderr
    assert 'id="owd"' not in (run / "report.html").read_text()
    _owd(run, out=run)
    r = run_cli("report", str(run))
    assert r.returncode == 0, r.stderr
    html = (run / "report.html").read_text()
    assert 'id="owd"' in html and "uncorrected" in html


def test_run_dir_without_ccl_exits_2_naming_it(tmp_path):
    (tmp_path / "empty").mkdir()
    r = run_cli("owd", str(tmp_path / "empty"))
    assert r.returncode == 2
    assert "ccl.parquet" in r.stderr and "empty" in r.stderr


def test_clocks_missing_a_host_exits_2_naming_it(lone, tmp_path):
    clocks = _true_clocks(tmp_path / "clocks.parquet", hosts=("h0",))
    r = run_cli("owd", str(lone), "--clocks", str(clocks), "--out", str(tmp_path / "o"))
    assert r.returncode == 2
    assert "h1" in r.stderr and "no row for host" in r.stderr


def test_ground_truth_clocks_file_is_refused_with_a_hint(lone, tmp_path):
    # RUN_DIR/clocks.parquet is the simulator's truth (offset_ps per host), not an estimate.
    r = run_cli("owd", str(lone), "--clocks", str(lone / "clocks.parquet"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2
    assert "window_mid_ns" in r.stderr and "clock estimate" in r.stderr


def test_each_reading_is_corrected_by_its_own_window_at_epoch_scale():
    # Hand-built rows, wall clocks since the Unix epoch (1.7e18 ns: beyond float64's exact ns). Host a is
    # 100 ns ahead of the reference in window 0 and 300 ns in window 1 (no drift); b is 1,000 ns behind with
    # +50 ppm. Two messages a -> b, each 20,000 ns long in reference time, one in each window.
    from fabriclab.observe import owd as ow

    e = 1_700_000_000_000_000_000
    mids = (e, e + 1_000_000_000)
    clocks = pd.DataFrame([
        {"window": w, "window_mid_ns": mid, "host": h, "method": "huygens", "reference": "a0",
         "offset_ns": off, "drift_ppm": d}
        for w, mid in enumerate(mids)
        for h, off, d in (("a", (100.0, 300.0)[w], 0.0), ("b", -1000.0, 50.0))])

    def clock(h, ref):  # the host's reading when the reference reads ref (within the window of mid)
        w = 0 if ref < e + 500_000_000 else 1
        off = clocks[(clocks.window == w) & (clocks.host == h)].iloc[0]
        return mids[w] + int(round(ref - mids[w] + off.offset_ns + off.drift_ppm * 1e-6 * (ref - mids[w])))

    rows = []
    for k, ref_send in enumerate((e + 200_000_000, e + 1_200_000_000)):
        ref_arr = ref_send + 20_000
        base = {"op_id": 0, "collective": "broadcast", "seq": k, "stream": 0, "bytes": 100, "post_mono_ns": 0}
        rows.append({**base, "rank": 0, "peer": 1, "kind": "send", "send_start_mono_ns": 10,
                     "send_start_real_ns": clock("a", ref_send), "recv_arrival_mono_ns": None,
                     "recv_arrival_real_ns": None})
        rows.append({**base, "rank": 1, "peer": 0, "kind": "recv", "send_start_mono_ns": None,
                     "send_start_real_ns": None, "recv_arrival_mono_ns": 0, "recv_arrival_real_ns": clock("b", ref_arr)})
    ints = ("send_start_mono_ns", "send_start_real_ns", "recv_arrival_mono_ns", "recv_arrival_real_ns")
    ccl = pd.DataFrame({c: (pd.array([r[c] for r in rows], dtype="Int64") if c in ints else [r[c] for r in rows])
                        for c in rows[0]})  # Int64 from Python ints: no float64 on the way
    o = ow.compute(ccl, {(0, 0): "a", (0, 1): "b"}, clocks, source="runtime")
    t = o.table.sort_values("seq")
    assert list(t["send_window"]) == [0, 1] and list(t["recv_window"]) == [0, 1]
    # b's clock runs 50 ppm fast for the 200 ms from its window's middle: 10,001 ns, corrected away.
    assert (t["owd_ns"] - 20_000).abs().max() <= 1.0
    assert list(t["send_start_ns"]) == [e + 200_000_000, e + 1_200_000_000]
    assert t["true_owd_ns"].isna().all() and t["error_ns"].isna().all()  # the runtime: no truth
    # Uncorrected: b's reading minus a's, by hand: each arrival is 200.02 ms after its window's middle, where
    # b reads 50 ppm of that (10,001 ns) fast and 1,000 ns behind; a is 100 or 300 ns ahead.
    u = ow.compute(ccl, {(0, 0): "a", (0, 1): "b"}, None, source="runtime").table.sort_values("seq")
    assert list(u["owd_ns"]) == [20_000 - 1000 + 10_001 - 100, 20_000 - 1000 + 10_001 - 300]


def test_hosts_option_places_ranks_of_a_run_without_scenario(lone, tmp_path):
    # As the runtime's folders: ccl.parquet alone, its host column null. Ranks are rank<r> unless --hosts
    # names them.
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = tmp_path / "bare"
    run.mkdir()
    t = pq.read_table(lone / "ccl.parquet")
    i = t.schema.get_field_index("host")
    pq.write_table(t.set_column(i, t.schema.field(i), pa.nulls(len(t), pa.string())), run / "ccl.parquet")
    clocks = str(_true_clocks(tmp_path / "clocks.parquet"))
    r = run_cli("owd", str(run), "--clocks", clocks, "--out", str(tmp_path / "o1"))
    assert r.returncode == 2 and "rank0" in r.stderr
    t, _ = _owd(run, "--clocks", clocks, "--hosts", "h0,h1", out=tmp_path / "o2")
    assert (t.iloc[0]["src"], t.iloc[0]["dst"]) == ("h0", "h1")
    assert abs(t.iloc[0]["owd_ns"] - LONE_OWD_NS) <= 1.01
    r = run_cli("owd", str(run), "--hosts", "h0", "--out", str(tmp_path / "o3"))
    assert r.returncode == 2 and "--hosts" in r.stderr and "rank 1" in r.stderr


def test_training_jobs_messages_are_placed_on_their_workers_hosts(tmp_path):
    # A job's rank r runs on workers[r] (docs/scenario.md); every ccl row names that host, so `fabriclab owd`
    # places the job's messages without --hosts. Workers [2, 1]: rank 0 on h2, rank 1 on h1.
    (tmp_path / "s.toml").write_text(
        'name = "owd-job"\nbackend = "packet"\n[topology]\nkind = "star"\nhosts = 3\n'
        '[clocks]\nwander_ppm = 0\n'
        '[[jobs]]\nname = "j"\nworkers = [2, 1]\nprofile = "resnet50"\nlayers = 2\nmodel_bytes = 200000\n'
        'compute_ps = "100us"\niterations = 2\n')
    run = tmp_path / "run"
    r = run_cli("run", str(tmp_path / "s.toml"), "--out", str(run), "-q")
    assert r.returncode == 0, r.stderr
    ccl = pd.read_parquet(run / "ccl.parquet")
    assert len(ccl) > 0
    assert dict(ccl.groupby("rank")["host"].unique().map(list)) == {0: ["h2"], 1: ["h1"]}
    t, out = _owd(run, out=tmp_path / "o")
    assert set(zip(t["src"], t["dst"])) == {("h2", "h1"), ("h1", "h2")}
    # Uncorrected OWDs hold the receiver's minus the sender's clock offset; the truth is there regardless.
    assert t["true_owd_ns"].notna().all() and (t["true_owd_ns"] > 0).all()


def test_monotonic_readings_with_a_stamp_origin_and_real_truth(tmp_path):
    # The runtime in a box with time namespaces: its *_mono_ns are each host's CLOCK_MONOTONIC, the machine's
    # plus the namespace's offset (a: +5 s, b: -2 s), and its *_real_ns the one CLOCK_REALTIME (true time).
    # The clocks (as `fabriclab clock estimate` writes them from a joined mesh with --clock monotonic) are on
    # the stamps' scale less the join's stamp origin O, carried in the file's metadata. Two messages a -> b of
    # 20,000 ns true time; b is the reference, so a's offset against it is +7 s.
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fabriclab.observe import owd as ow

    mono0, real0 = 400_000_000_000_000, 1_700_000_000_000_000_000   # the machine's clocks at one instant
    off = {"a": 5_000_000_000, "b": -2_000_000_000}
    origin = 399_000_000_000_000
    rows = []
    for k, t in enumerate((1_000_000, 900_000_000)):          # ns after the instant
        base = {"op_id": 0, "collective": "broadcast", "seq": k, "stream": 0, "bytes": 100, "post_mono_ns": 0}
        rows.append({**base, "rank": 0, "peer": 1, "kind": "send", "send_start_mono_ns": mono0 + t + off["a"],
                     "send_start_real_ns": real0 + t, "recv_arrival_mono_ns": None, "recv_arrival_real_ns": None})
        rows.append({**base, "rank": 1, "peer": 0, "kind": "recv", "send_start_mono_ns": None,
                     "send_start_real_ns": None, "recv_arrival_mono_ns": mono0 + t + 20_000 + off["b"],
                     "recv_arrival_real_ns": real0 + t + 20_000})
    ints = ("send_start_mono_ns", "send_start_real_ns", "recv_arrival_mono_ns", "recv_arrival_real_ns")
    ccl = pd.DataFrame({c: (pd.array([r[c] for r in rows], dtype="Int64") if c in ints else [r[c] for r in rows])
                        for c in rows[0]})
    mid = mono0 + off["b"] - origin + 500_000_000                       # the reference's reading, less O
    clocks = pa.table({"window": [0, 0], "window_mid_ns": [mid, mid], "host": ["a", "b"],
                       "method": ["huygens"] * 2, "reference": ["b"] * 2,
                       "offset_ns": [float(off["a"] - off["b"]), 0.0], "drift_ppm": [0.0, 0.0]})
    path = tmp_path / "clocks.parquet"
    pq.write_table(clocks.replace_schema_metadata({b"fabriclab.clock.stamp_origin_ns": str(origin).encode()}),
                   str(path))
    c = ow.read_clocks(path)
    assert c.attrs["stamp_origin_ns"] == origin
    hosts = {(0, 0): "a", (0, 1): "b"}
    t = ow.compute(ccl, hosts, c, source="runtime", clock="mono", true_real=True).table
    assert (t["owd_ns"] - 20_000).abs().max() <= 1.0
    assert list(t["true_owd_ns"]) == [20_000, 20_000]
    assert t["error_ns"].abs().max() <= 1.0
    # The reference's readings come back on its own (unshifted) scale: b's CLOCK_MONOTONIC at each send.
    assert list(t["send_start_ns"]) == [mono0 + 1_000_000 + off["b"], mono0 + 900_000_000 + off["b"]]
    # Uncorrected, the mono readings carry b's minus a's namespace offset.
    u = ow.compute(ccl, hosts, None, source="runtime", clock="mono").table
    assert list(u["owd_ns"]) == [20_000 + off["b"] - off["a"]] * 2
    with pytest.raises(ow.OwdError, match="--clock"):
        ow.compute(ccl, hosts, c, source="runtime", clock="tai")

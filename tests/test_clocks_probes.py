"""Host clocks ([clocks]) and the probe mesh ([probes]), docs/clockwork.md:
a lone probe's delay and stamps against hand-computed values, groups,
determinism, and bad input naming its field."""

import math

import pyarrow.parquet as pq
import pytest

from fabriclab import Scenario, simulate

RATE_BPS = 10 * 10**9
DELAY_PS = 1_000_000
# A 64-byte probe on the wire: 64 + 40 (IPv4, TCP) + 18 (Ethernet, FCS) + 20 (preamble, gap).
WIRE_BYTES = 64 + 40 + 18 + 20
SER_PS = WIRE_BYTES * 8 * 10**12 // RATE_BPS  # 113,600 ps at 10 Gbit/s
ACK_SER_PS = 84 * 8 * 10**12 // RATE_BPS  # a pure ACK: 67,200 ps
# Host -> switch -> host: serialized at the host's NIC and at the switch, two propagations.
ONE_WAY_PS = 2 * SER_PS + 2 * DELAY_PS

CLOCKS = {"h0": (7_000, 12.5), "h1": (-3_000_000, -40.0), "h2": (250_000_000, 3.0)}


def _round(x: float) -> int:
    """Rounds half away from zero (Rust's f64::round)."""
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def reading_ps(host: str, t_ps: int) -> int:
    """Host's clock at true time t, by hand: t + offset + drift x t (no wander)."""
    offset, drift = CLOCKS[host]
    return t_ps + offset + _round(drift * t_ps / 1e6)


def star(hosts: int = 3, clocks: dict | None = None, probes: dict | None = None, **kw) -> Scenario:
    raw = {"name": "clk", "seed": 5,
           "topology": {"kind": "star", "hosts": hosts, "link_rate_bps": "10Gbps", "link_delay_ps": "1us"}}
    if clocks is not None:
        raw["clocks"] = clocks
    if probes is not None:
        raw["probes"] = probes
    raw.update(kw)
    return Scenario.from_dict(raw)


def explicit_clocks(**kw) -> dict:
    return {"wander_ppm": 0.0, "nic_sigma_ps": 0, **kw,
            "hosts": {h: {"offset_ps": o, "drift_ppm": d} for h, (o, d) in CLOCKS.items()}}


def test_lone_probe_delay_and_stamps_by_hand():
    s = star(clocks=explicit_clocks(), probes={"peers": 1, "pair_every_ps": "1ms", "duration_ps": "1ms",
                                                "spacing_ps": "20us"})
    res = simulate(s)
    p = res.probes.sort_values(["true_tx_ps", "src"]).reset_index(drop=True)
    # The first probe of the run meets an idle fabric.
    first = p.iloc[0]
    assert first["seq"] == 0
    assert first["true_rx_ps"] - first["true_tx_ps"] == ONE_WAY_PS == 2_227_200
    # Each stamp is its host's clock at the true time (noise 0), in ns rounded down.
    for _, r in p.iterrows():
        assert r["tx_ns"] == reading_ps(r["src"], r["true_tx_ps"]) // 1000
        assert r["rx_ns"] == reading_ps(r["dst"], r["true_rx_ps"]) // 1000
    # So rx - tx is the delay plus the receiver's minus the sender's clock error at those times.
    src, dst = first["src"], first["dst"]
    t0, t1 = int(first["true_tx_ps"]), int(first["true_rx_ps"])
    err = (reading_ps(dst, t1) - t1) - (reading_ps(src, t0) - t0)
    assert abs((first["rx_ns"] - first["tx_ns"]) * 1000 - (ONE_WAY_PS + err)) < 1000
    # The pair's second probe leaves when the sender's clock shows the first's send + spacing.
    second = p[(p["src"] == src) & (p["pair"] == first["pair"]) & (p["seq"] == 1)].iloc[0]
    t2 = int(second["true_tx_ps"])
    assert reading_ps(src, t2) >= reading_ps(src, t0) + 20_000_000 > reading_ps(src, t2 - 1)
    assert second["true_rx_ps"] - t2 == ONE_WAY_PS
    # The echo leaves the peer when the probe arrives, behind the ACK of that probe (TCP in the
    # packet backend): one ACK's serialization more at the peer's NIC.
    echo = p[(p["src"] == dst) & (p["dst"] == src) & (p["true_tx_ps"] == t1)].iloc[0]
    assert echo["seq"] == 0
    assert echo["true_rx_ps"] - echo["true_tx_ps"] == ONE_WAY_PS + ACK_SER_PS
    # Every probe arrived, and each was echoed once: as many probes each way of a pair.
    assert res.summary["probes"]["probes_arrived"] == res.summary["probes"]["probes_sent"] == len(p)
    assert len(p) % 4 == 0 and set(p["seq"]) == {0, 1}


def test_without_clocks_stamps_are_true_time():
    res = simulate(star(probes={"peers": 2, "pair_every_ps": "1ms", "duration_ps": "2ms"}))
    p = res.probes
    assert len(p) > 0 and res.clocks is None
    assert (p["tx_ns"] == p["true_tx_ps"] // 1000).all() and (p["rx_ns"] == p["true_rx_ps"] // 1000).all()


def test_hosts_of_a_group_share_one_oscillator():
    clocks = {"groups": [["h0", "h2"]], "hosts": {"h2": {"drift_ppm": 17.0}}}
    c = simulate(star(hosts=4, clocks=clocks)).clocks.set_index("host")
    assert c.loc["h0", "oscillator"] == c.loc["h2", "oscillator"]
    assert c.loc["h0", "drift_ppm"] == c.loc["h2", "drift_ppm"] == 17.0
    assert len(set(c["oscillator"])) == 3
    assert c.loc["h0", "offset_ps"] != c.loc["h2", "offset_ps"]


def test_probes_parquet_schema_and_determinism(tmp_path, cli):
    text = """
name = "det"
seed = 9
[topology]
kind = "star"
hosts = 4
[clocks]
stamping = "software"
groups = [["h1", "h3"]]
[clocks.hosts.h0]
stamping = "nic"
[probes]
peers = 3
pair_every_ps = "500us"
duration_ps = "3ms"
[[traffic]]
load = 0.3
duration_ps = "3ms"
"""
    (tmp_path / "s.toml").write_text(text)
    outs = []
    for k in range(2):
        r = cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / f"o{k}"), "-q")
        assert r.returncode == 0, r.stderr
        outs.append((tmp_path / f"o{k}" / "probes.parquet").read_bytes())
    assert outs[0] == outs[1]
    t = pq.read_table(tmp_path / "o0" / "probes.parquet")
    assert [(f.name, str(f.type)) for f in t.schema] == [
        ("src", "string"), ("dst", "string"), ("pair", "uint64"), ("seq", "uint8"), ("tx_ns", "int64"),
        ("rx_ns", "int64"), ("true_tx_ps", "uint64"), ("true_rx_ps", "uint64")]
    df = t.to_pandas()
    assert not df.duplicated(["src", "pair", "seq"]).any()
    assert (df["true_rx_ps"] > df["true_tx_ps"]).all()
    # Each host probes 3 distinct peers: all of them, on 4 hosts.
    assert all(set(g["dst"]) == {"h0", "h1", "h2", "h3"} - {h} for h, g in df.groupby("src"))
    c = pq.read_table(tmp_path / "o0" / "clocks.parquet").to_pandas().set_index("host")
    assert c.loc["h1", "drift_ppm"] == c.loc["h3", "drift_ppm"]


@pytest.mark.parametrize("extra, needles", [
    ("[probes]\npeers = 4\n", ["probes.peers", "the topology has 4"]),
    ("[probes]\npeers = 9\n", ["probes.peers", "give at most 3"]),
    ("[clocks.hosts.h1]\ndrift_ppm = 1000.5\n", ["clocks.hosts.h1.drift_ppm", "1000"]),
    ("[clocks]\ndrift_sigma_ppm = 2000\n", ["clocks.drift_sigma_ppm", "1000"]),
    ("[clocks.hosts.h9]\noffset_ps = 5\n", ["clocks.hosts.h9", "not a host"]),
    ("[clocks]\ngroups = [[\"h0\", \"h1\"], [\"h1\"]]\n", ["clocks.groups", "'h1' of groups[1]"]),
    ("[clocks]\ngroups = [[\"h0\", \"h1\"]]\n[clocks.hosts.h0]\ndrift_ppm = 1.0\n[clocks.hosts.h1]\ndrift_ppm = 2.0\n",
     ["clocks.groups", "different drift_ppm"]),
    ("[probes]\npeers = 2\npair_every_ps = \"10us\"\nspacing_ps = \"5us\"\n", ["probes.spacing_ps"]),
])
def test_bad_input_exits_2_naming_the_field(tmp_path, cli, extra, needles):
    (tmp_path / "s.toml").write_text('[topology]\nkind = "star"\nhosts = 4\n' + extra)
    r = cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "-q")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)


def _real_ns_bounds(host: str, mono_ns: int) -> tuple[int, int]:
    """The host's clock in ns over the picoseconds that floor to ``mono_ns`` (the reading is increasing)."""
    return reading_ps(host, mono_ns * 1000) // 1000, reading_ps(host, mono_ns * 1000 + 999) // 1000


def test_ccl_real_columns_read_the_hosts_clocks():
    """With [clocks], ccl.parquet's real columns are the row's host's clock; mono columns stay true time."""
    s = star(clocks=explicit_clocks(),
             collectives=[{"planner": "ring", "op": "allreduce", "size_bytes": "64KB", "hosts": [0, 2]}],
             jobs=[{"workers": [1, 2], "layers": 2, "model_bytes": "40KB", "compute_ps": "50us", "iterations": 1}])
    ccl = simulate(s).ccl
    hosts = {("collective", 0): "h0", ("collective", 1): "h2", ("job", 0): "h1", ("job", 1): "h2"}
    checked = 0
    for _, r in ccl.iterrows():
        host = hosts[("collective" if r["op_id"] == 0 else "job", r["rank"])]
        for what in ("post", "send_start", "send_end", "recv_arrival", "recv_done"):
            mono, real = r[f"{what}_mono_ns"], r[f"{what}_real_ns"]
            if mono is None or mono != mono:  # null
                assert real is None or real != real
                continue
            lo, hi = _real_ns_bounds(host, int(mono))
            assert lo <= real <= hi, (host, what, mono, real, lo, hi)
            checked += 1
    assert checked > 20 and set(ccl["op_id"]) >= {0, 1}


def test_overhead_per_link_matches_the_links_own_byte_counts(tmp_path, cli):
    # Probes alone on a star: every route is unique (acks take the reversed route exactly), so each link
    # direction's probe bytes as placed from messages.parquet must equal what the engine's port counted
    # (links.parquet), and the share is those bytes over rate x duration, by hand.
    text = """
name = "ovh"
seed = 4
stop_ps = "12ms"
[topology]
kind = "star"
hosts = 3
link_rate_bps = "10Gbps"
[clocks]
[probes]
peers = 2
pair_every_ps = "1ms"
size_bytes = 2000
duration_ps = "10ms"
"""
    (tmp_path / "s.toml").write_text(text)
    r = cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "run"), "-q")
    assert r.returncode == 0, r.stderr
    r = cli("clock", "overhead", str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr
    import pandas as pd

    o = pd.read_csv(tmp_path / "run" / "probe_links.csv")
    links = pq.read_table(tmp_path / "run" / "links.parquet").to_pandas()
    m = o.merge(links[["src_node", "dst_node", "bytes"]], on=["src_node", "dst_node"])
    assert len(m) == 6 and (m["bytes"] > 0).all()
    # 2000 bytes: a 1460-byte segment (1538 on the wire) and a 540-byte one (618), each acked by 84 bytes.
    assert (m["data_bytes"] % (1538 + 618) == 0).all() and (m["ack_bytes"] % (2 * 84) == 0).all()
    assert (m["data_bytes"] + m["ack_bytes"] == m["bytes"]).all()
    assert ((m["share"] - m["bytes"] * 8 / (10e9 * 0.010)).abs() < 1e-12).all()
    r = cli("clock", "overhead", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "not a folder" in r.stderr

"""The ns-3 comparison's flow-list generator (benches/ns3/flows.py); needs no ns-3.

Expected values come from closed forms: the offered load of a compound
Poisson process, the mean and second moment of a piecewise-linear CDF, the
binomial spread of the spine hash, and the two simulators' frame sizes.
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import pytest

from fabriclab import Scenario
from fabriclab.util.toml import tomllib
from fabriclab.scenario.cdfs import load_cdf

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches" / "ns3"))
import flows as gen  # noqa: E402

Z = 4.5  # bound in standard deviations: a miss by chance has probability below 1e-5


def cdf_moments(points):
    """E[X] and E[X^2] of fabriclab's CDF: a point mass at the first size,
    uniform between consecutive points (linear interpolation)."""
    x0, p0 = points[0]
    m1, m2 = p0 * x0, p0 * x0 * x0
    for (a, pa), (b, pb) in zip(points, points[1:]):
        w = pb - pa
        m1 += w * (a + b) / 2
        m2 += w * (a * a + a * b + b * b) / 3
    return m1, m2


def read_csv(path: Path) -> list[dict]:
    with open(path) as f:
        return [{k: int(v) for k, v in row.items()} for row in csv.DictReader(f)]


def read_fabriclab_flows(folder: Path) -> list[dict]:
    """The flows of the fabriclab scenario, through the CSV its flows_csv names."""
    name = tomllib.loads((folder / "scenario.toml").read_text())["flows_csv"]
    with open(folder / name) as f:
        return [{k: (v.split() if k == "path" else int(v)) for k, v in row.items()} for row in csv.DictReader(f)]


def test_offered_load_matches_target_within_compound_poisson_bounds(tmp_path):
    s = gen.Setup(topology="star", hosts=8, load=0.5, duration_ps=500_000_000_000, seed=11)
    flows = gen.write_case(s, tmp_path)
    mean, second = cdf_moments(load_cdf("websearch"))
    from fabriclab import _core

    assert _core.cdf_mean(load_cdf("websearch")) == pytest.approx(mean, abs=1.0)
    duration_s = s.duration_ps / 1e12
    rate = s.load * 8 * s.link_rate_bps / (8 * mean)  # flows per second
    n_expected = rate * duration_s
    assert abs(len(flows) - n_expected) <= Z * math.sqrt(n_expected)
    # Bytes offered: a compound Poisson sum, mean rate*T*E[X], variance rate*T*E[X^2].
    offered = sum(f["size_bytes"] for f in flows)
    target = s.load * 8 * s.link_rate_bps * duration_s / 8
    assert rate * duration_s * mean == pytest.approx(target)
    assert abs(offered - target) <= Z * math.sqrt(rate * duration_s * second)
    assert all(0 <= f["start_ps"] < s.duration_ps for f in flows)
    assert [f["start_ps"] for f in flows] == sorted(f["start_ps"] for f in flows)


def test_ns3_list_and_fabriclab_scenario_carry_identical_flows(tmp_path):
    s = gen.Setup(topology="leaf_spine", leaves=4, hosts_per_leaf=8, spines=3, load=0.3,
                  duration_ps=20_000_000_000, seed=5, prio_below_bytes=100_000)
    flows = gen.write_case(s, tmp_path)
    listed = read_csv(tmp_path / "flows.csv")
    toml = read_fabriclab_flows(tmp_path)
    assert len(listed) == len(toml) == len(flows) > 20
    for i, (a, b) in enumerate(zip(listed, toml)):
        assert a["flow_id"] == i
        assert (a["src"], a["dst"], a["size_bytes"], a["start_ps"], a["class"]) == (
            b["src"], b["dst"], b["size_bytes"], b["start_ps"], b["class"])
        assert a["class"] == (0 if a["size_bytes"] < 100_000 else 1)
    # fabriclab's own schema accepts the scenario, every pinned path included.
    sc = Scenario.load(tmp_path / "scenario.toml")
    read = sc.explicit_flows(sc.build_topology())
    assert [(f.src, f.dst, f.size_bytes, f.start_ps, f.class_) for f in read] == [
        (f["src"], f["dst"], f["size_bytes"], f["start_ps"], f["class"]) for f in flows]


def test_pinned_paths_follow_the_fabric_and_the_spine_column(tmp_path):
    s = gen.Setup(topology="leaf_spine", leaves=4, hosts_per_leaf=8, spines=4, load=0.6,
                  duration_ps=40_000_000_000, seed=2)
    gen.write_case(s, tmp_path)
    listed = read_csv(tmp_path / "flows.csv")
    toml = read_fabriclab_flows(tmp_path)
    per_spine = [0] * s.spines
    inter = 0
    for a, b in zip(listed, toml):
        ls, ld = a["src"] // 8, a["dst"] // 8
        assert a["src"] != a["dst"]
        if ls == ld:
            assert a["spine"] == -1
            assert b["path"] == [f"h{a['src']}", f"leaf{ls}", f"h{a['dst']}"]
        else:
            assert 0 <= a["spine"] < s.spines
            assert b["path"] == [f"h{a['src']}", f"leaf{ls}", f"spine{a['spine']}", f"leaf{ld}", f"h{a['dst']}"]
            per_spine[a["spine"]] += 1
            inter += 1
    # The hash spreads flows evenly: binomial(inter, 1/spines) per spine.
    p = 1 / s.spines
    for c in per_spine:
        assert abs(c - inter * p) <= Z * math.sqrt(inter * p * (1 - p))
    # Uniform distinct endpoints: a destination on another leaf with probability 24/31.
    q = 24 / 31
    assert abs(inter - len(listed) * q) <= Z * math.sqrt(len(listed) * q * (1 - q))


def test_case_file_matches_the_scenario_settings(tmp_path):
    s = gen.Setup(topology="leaf_spine", leaves=4, hosts_per_leaf=8, spines=2, load=0.2,
                  duration_ps=5_000_000_000, seed=3)
    gen.write_case(s, tmp_path)
    case = dict(line.split(" ", 1) for line in (tmp_path / "case.txt").read_text().splitlines()
                if line and not line.startswith("#"))
    sc = tomllib.loads((tmp_path / "scenario.toml").read_text())
    # Equal time per full segment: 1538 wire bytes at 10 Gbit/s = 1502 bytes at the ns-3 rate.
    assert int(case["host_link_rate_bps"]) == round(10e9 * 1502 / 1538)
    assert int(case["spine_link_rate_bps"]) == round(40e9 * 1502 / 1538)  # 8 x 10G over 2 spines
    assert sc["topology"]["spine_link_rate_bps"] == 40_000_000_000
    assert int(case["link_delay_ps"]) == sc["topology"]["link_delay_ps"] == 1_000_000
    # ns-3's device queue holds one packet below the queue disc: fabriclab's limit is one more.
    assert sc["queue"]["limit_packets"] == int(case["limit_packets"]) + 1 == 251
    assert sc["queue"]["ecn_threshold_packets"] == int(case["ecn_threshold_packets"]) == 65
    assert sc["host_queue"] == sc["queue"]
    assert sc["transport"]["min_rto_ps"] == int(case["min_rto_ps"]) == 5_000_000_000
    assert (case["cc"], case["queue"]) == ("dctcp", "red")


def test_same_seed_same_bytes_other_seed_other_flows(tmp_path):
    s = gen.Setup(load=0.4, duration_ps=10_000_000_000, seed=9)
    gen.write_case(s, tmp_path / "a")
    gen.write_case(s, tmp_path / "b")
    gen.write_case(gen.Setup(load=0.4, duration_ps=10_000_000_000, seed=10), tmp_path / "c")
    for name in ("flows.csv", "scenario.toml", "flows_fabriclab.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "flows.csv").read_bytes() != (tmp_path / "c" / "flows.csv").read_bytes()


@pytest.mark.parametrize("args, field", [
    (["--load", "1.5"], "--load"),
    (["--topology", "ring"], "--topology"),
    (["--duration", "10Gbps"], "--duration"),
    (["--cc", "cubic"], "--cc"),
])
def test_bad_options_exit_2_naming_the_option(tmp_path, capsys, args, field):
    assert gen.main(["--out", str(tmp_path / "x"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}: ") and "Traceback" not in err
    assert not (tmp_path / "x").exists()

"""Test 6: same scenario and seed give byte-identical flows.parquet; another
seed gives different results. Plus the seeded snapshot of the default
scenario's summary (regenerate on purpose with FABRICLAB_UPDATE_SNAPSHOTS=1)."""

import json
import os
from pathlib import Path

import pytest

from fabriclab import Scenario, simulate

SCEN = """
name = "det"
seed = 5
[topology]
kind = "leaf_spine"
leaves = 2
hosts_per_leaf = 4
spines = 2
[[traffic]]
load = 0.5
duration_ps = "20ms"
"""

SNAPSHOT = Path(__file__).parent / "snapshots" / "default_summary.json"


def test_same_seed_same_bytes_other_seed_differs(cli, tmp_path):
    scen = tmp_path / "s.toml"
    scen.write_text(SCEN)
    outs = []
    for name, seed in (("a", "5"), ("b", "5"), ("c", "6")):
        r = cli("run", str(scen), "--out", str(tmp_path / name), "--seed", seed, "-q")
        assert r.returncode == 0, r.stderr
        outs.append((tmp_path / name / "flows.parquet").read_bytes())
    assert outs[0] == outs[1]
    assert outs[0] != outs[2]
    la, lb = ((tmp_path / n / "links.parquet").read_bytes() for n in ("a", "b"))
    assert la == lb


def test_resolved_scenario_reproduces_the_run(cli, tmp_path):
    scen = tmp_path / "s.toml"
    scen.write_text(SCEN)
    assert cli("run", str(scen), "--out", str(tmp_path / "a"), "-q").returncode == 0
    resolved = tmp_path / "a" / "scenario.resolved.toml"
    text = resolved.read_text()
    assert "fabriclab_version" in text and "seed = 5" in text and "tsq_limit_bytes" in text
    # Running the resolved file gives the same flows.
    stripped = tmp_path / "r.toml"
    stripped.write_text("\n".join(l for l in text.splitlines() if not l.startswith("fabriclab_version")))
    assert cli("run", str(stripped), "--out", str(tmp_path / "b"), "-q").returncode == 0
    assert (tmp_path / "a" / "flows.parquet").read_bytes() == (tmp_path / "b" / "flows.parquet").read_bytes()


def _stable(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in ("performance", "fabriclab_version")}


def test_default_scenario_summary_snapshot():
    got = _stable(simulate(Scenario.default()).summary)
    got = json.loads(json.dumps(got))  # normalise types
    if os.environ.get("FABRICLAB_UPDATE_SNAPSHOTS") == "1" or not SNAPSHOT.exists():
        if os.environ.get("CI") and not SNAPSHOT.exists():
            pytest.fail("snapshot missing in CI; generate it with FABRICLAB_UPDATE_SNAPSHOTS=1")
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    want = json.loads(SNAPSHOT.read_text())
    _assert_same(got, want, "summary")


def _assert_same(got, want, where):
    """Integers and strings exactly; floats to 1e-9 relative (summation order
    inside numpy may differ between versions)."""
    if isinstance(want, dict):
        assert set(got) == set(want), where
        for k in want:
            _assert_same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-9), where
    else:
        assert got == want, where

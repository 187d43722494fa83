"""C4's Table 3 model (fabriclab/systems/c4/downtime.py): downtime accounted error by
error against a hand sum, the closed form against many seeded months, and
the reproduction command."""

from __future__ import annotations

import json
import math

import pytest

from fabriclab.systems.c4 import downtime as dt
from conftest import assert_quick_bands


def small_practice(auto=120.0):
    kinds = (dt.ErrorKind("A", 0.5, 1.0, 1000.0), dt.ErrorKind("B", 0.5, 0.0, 2000.0))
    return dt.Practice("t", errors_per_day=1.0, checkpoint_interval_s=3600.0, detection_s=60.0, reinit_s=300.0,
                       auto_isolation_s=auto, mix=kinds)


def test_accounted_downtime_is_the_hand_sum():
    p = small_practice()
    errors = [dt.Error(5000.0, "A", True), dt.Error(7300.0, "B", False)]
    r = dt.account(p, errors, productive_s=10_000.0)
    # Lost since the last checkpoint (every 3600 s): 5000 - 3600 = 1400 and 7300 - 7200 = 100.
    # A is localized and isolated automatically (120 s), B by hand (2000 s).
    assert r["seconds"] == {"post_checkpoint": 1500.0, "detection": 120.0, "diagnosis_isolation": 2120.0,
                            "reinitialization": 600.0, "total": 4340.0}
    assert r["percent"]["total"] == pytest.approx(100 * 4340 / 14_340)
    assert r["diagnosis_by_kind_percent"]["B"] == pytest.approx(100 * 2000 / 14_340)
    # Without automatic isolation A takes its manual 1000 s.
    r = dt.account(small_practice(auto=None), errors, productive_s=10_000.0)
    assert r["seconds"]["diagnosis_isolation"] == 3000.0


def test_the_closed_form_is_the_long_run_mean_of_seeded_months():
    p = small_practice()
    # Per error: 1800 lost on average + 60 + (0.5 x 120 + 0.5 x 2000) + 300 = 3220 s; one error a day.
    per_error = 1800 + 60 + 1060 + 300
    down = per_error / dt.DAY_S
    assert dt.expected(p)["percent"]["total"] == pytest.approx(100 * down / (1 + down))
    # 40 years of errors (about 14,600): the Poisson mean within 3 standard errors.
    r = dt.simulate(p, productive_s=40 * 365 * dt.DAY_S, seed=7)
    n = r["errors"]
    assert abs(n - 40 * 365) < 3 * math.sqrt(40 * 365)
    mean_per_error = r["seconds"]["total"] / n
    # Spread of one error's cost: lost work uniform on [0, 3600] (sd 1039), diagnosis 120 or 2000 (sd 940).
    se = math.sqrt(1039**2 + 940**2) / math.sqrt(n)
    assert abs(mean_per_error - per_error) < 4 * se


def test_bad_practices_name_the_field():
    with pytest.raises(ValueError, match="mix: error shares must add up to 1"):
        dt.Practice("x", 1.0, 3600.0, 1.0, 1.0, None, (dt.ErrorKind("A", 0.4, 1.0, 1.0),))
    with pytest.raises(ValueError, match="checkpoint_interval_s"):
        dt.Practice("x", 1.0, 0.0, 1.0, 1.0, None, (dt.ErrorKind("A", 1.0, 1.0, 1.0),))
    with pytest.raises(ValueError, match="unknown kind"):
        dt.account(small_practice(), [dt.Error(1.0, "Z", True)], 10.0)


def test_table1_mix_adds_up_and_c4d_cuts_downtime(cli, tmp_path):
    assert sum(k.share for k in dt.TABLE1) == pytest.approx(1.0)
    r = cli("reproduce", "c4-table3", "--quick", "--out", str(tmp_path / "t3"))
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "t3" / "summary.json").read_text())
    assert_quick_bands("c4-table3", s)
    june, c4d = s["june-2023"]["expected_percent"], s["c4d"]["expected_percent"]
    assert c4d["total"] < june["total"] / 5
    assert sum(june[p] for p in dt.PARTS) == pytest.approx(june["total"], abs=0.02)
    assert (tmp_path / "t3" / "table3_downtime.png").stat().st_size > 0

"""The registry of reproductions (fabriclab/systems/registry/, issue 29):
docs/reproductions.md's summary table is the registry's, each row's status
agrees with its machine-checkable numbers, the quick bands can fail, and
the quick modes no other test runs are run here and held to their bands
(the others are held to theirs by the test that already runs them: each
Reproduction names it)."""

import json
import re
from pathlib import Path

import pytest

from conftest import assert_quick_bands, run_cli
from fabriclab.systems import registry as R
from fabriclab.systems import reproduce as P

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reproductions.md"
HERE = "tests/test_registry.py"


def test_the_pages_summary_table_is_the_registrys():
    page = PAGE.read_text()
    assert P.replace_table(page) == page, "run: PYTHONPATH=python python scripts/gen_repro_table.py"


def test_the_table_parsed_back_gives_the_registrys_cells():
    # Independent of markdown_table: read the page's rows cell by cell.
    lines = PAGE.read_text().split("\n")
    i = lines.index("| " + " | ".join(P.HEADER) + " |")
    rows = []
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    assert rows == [r.cells() for r in R.ROWS]


def test_every_reproduction_has_rows_quick_checks_and_a_guard():
    names = [r.name for r in R.REPRODUCTIONS]
    assert len(set(names)) == len(names)
    assert {r.repro for r in R.ROWS} - {None} == set(names)
    assert {q.repro for q in R.QUICK} == set(names)
    for r in R.REPRODUCTIONS:
        assert r.quick_s is not None and r.quick_s > 0, r.name
        assert r.runs_on, r.name   # every reproduction states what it simulates on (issue 29)
        if r.ci and r.ci != HERE:
            # The test the registry names really checks this reproduction's quick bands.
            assert f'assert_quick_bands("{r.name}"' in (ROOT / r.ci).read_text(), (r.name, r.ci)


def test_the_cli_knows_every_reproduction_and_dispatches_each():
    src = (ROOT / "python" / "fabriclab" / "systems" / "reproduce.py").read_text()
    dispatched = set(re.findall(r'what == "([\w-]+)"', src))
    c4p = {n for n in P.names() if n.startswith("c4p-")}
    assert dispatched | c4p == set(P.names())


def test_a_rows_status_agrees_with_its_numbers():
    for r in R.ROWS:
        held = [c.band.holds(c.ours) for c in r.checks]
        if not held:
            continue
        if r.verdict == "holds":
            assert all(held), (r.metric, r.checks)
        elif r.verdict == "differs":
            assert not all(held), (r.metric, r.checks)


def test_bands_by_hand():
    b = R.Band(1.0, 2.0)
    assert b.holds(1.0) and b.holds(2.0) and not b.holds(0.999) and not b.holds(2.001)
    assert not b.holds(float("nan"))
    assert R.Band(1.0, None, open_lo=True).holds(1.01) and not R.Band(1.0, None, open_lo=True).holds(1.0)
    assert R.Band(None, 0.0).holds(-5.0) and not R.Band(None, 0.0).holds(0.1)
    q = R._q("x", "m", "a/b", "-", 2.0)
    assert (q.band.lo, q.band.hi) == (1.9, 2.1)
    q = R._q("x", "m", "a/b", "-", -18.1)
    assert q.band.lo == pytest.approx(-19.005) and q.band.hi == pytest.approx(-17.195)
    assert (R._q("x", "m", "a", "-", 0.0, floor=0.5).band.lo, R._q("x", "m", "a", "-", 0.0, floor=0.5).band.hi) == \
        (-0.5, 0.5)
    assert q.read({"a": {"b": 3}}) == 3.0 and R._q("x", "m", "a/1", "-", 1).read({"a": [5, 7]}) == 7.0


def test_every_quick_band_holds_its_value_and_can_fail():
    for q in R.QUICK:
        assert q.band.holds(q.value), q
        # No band reaches further than 5 % of its value or 0.5 (near zero): a larger move fails.
        limit = max(abs(q.value) * 0.05, 0.5) * 1.0001
        assert not q.band.holds(q.value + limit) and not q.band.holds(q.value - limit), q


def test_a_moved_number_fails_the_check():
    q = next(q for q in R.QUICK if q.repro == "blink" and q.key == "dgx1v_broadcast/geomean_speedup")
    summary = {"dgx1v_broadcast": {"geomean_speedup": q.value}}
    assert P.check_quick("blink", summary)[0]["holds"]
    summary["dgx1v_broadcast"]["geomean_speedup"] = q.value * 0.9
    row = P.check_quick("blink", summary)[0]
    assert not row["holds"]
    with pytest.raises(AssertionError, match="left its registry bands"):
        assert_quick_bands("blink", summary)
    # A missing number fails too.
    assert not P.check_quick("blink", {})[0]["holds"]


@pytest.mark.parametrize("name", [r.name for r in R.REPRODUCTIONS if r.ci == HERE])
def test_quick_run_stays_in_its_bands(name, tmp_path):
    summary = P.run(name, tmp_path / name, quick=True)
    assert json.loads((tmp_path / name / "summary.json").read_text()) == json.loads(json.dumps(summary))
    assert_quick_bands(name, summary)


def test_reproduce_list_and_bad_input(tmp_path):
    r = run_cli("reproduce", "--list")
    assert r.returncode == 0, r.stderr
    for x in R.REPRODUCTIONS:
        assert x.name in r.stdout
    for args, msg in ((["reproduce", "all", "--out", str(tmp_path / "a")], "only with --quick"),
                      (["reproduce"], "name a reproduction"),
                      (["reproduce", "nope"], "unknown reproduction 'nope'")):
        r = run_cli(*args)
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
    assert not (tmp_path / "a").exists()


def test_reproduce_all_quick_writes_the_table_and_csv(tmp_path):
    # The loop of `reproduce all --quick` on the quickest reproduction (the others run above and in their tests).
    rows = P.run_all_quick(tmp_path, only=("c4-table3",))
    assert rows and all(r["holds"] for r in rows)
    text = (tmp_path / "quick_checks.csv").read_text().splitlines()
    assert text[0].startswith("reproduction,metric,key,paper,ours,recorded,band,holds")
    assert len(text) == 1 + sum(q.repro == "c4-table3" for q in R.QUICK)
    table = P.quick_table(rows)
    assert "c4-table3" in table and "yes" in table and "NO" not in table

"""The input contract's mechanisms, each against an independent expectation:
exact unit parsing and the core's integer range, the path rule, the memory
estimate against counts of real runs, the output folder's atomic replace,
a core panic caught at the binding, and the CLI's internal-error path."""

import json
import os
import subprocess
import sys
import textwrap

import pyarrow.parquet as pq
import pytest
from pydantic import TypeAdapter, ValidationError

from fabriclab import Scenario
from fabriclab.cli.main import _run_guarded
from fabriclab import simulate
from fabriclab.sim.pipeline import build_simulator
from fabriclab.errors import InputError
from fabriclab.sim.pipeline import estimate
from fabriclab.sim.results import OutputFolder
from fabriclab.scenario.model import ScenarioError
from fabriclab.scenario.units import RateBps, SizeBytes, TimePs

U64_MAX = 2**64 - 1


@pytest.mark.parametrize("kind, text, value", [
    (TimePs, "1.5us", 1_500_000),             # exact, not 1.5 * 1e6 in floating point
    (TimePs, "0.000001s", 1_000_000),
    (SizeBytes, "18446744073709551615B", U64_MAX),
    (RateBps, "12.5Gbps", 12_500_000_000),
    (SizeBytes, "1.1e1KB", 11_000),
])
def test_units_parse_exactly(kind, text, value):
    assert TypeAdapter(kind).validate_python(text) == value


@pytest.mark.parametrize("kind, raw, word", [
    (SizeBytes, "18446744073709551616B", "out of range"),
    (SizeBytes, 2**64, "out of range"),
    (RateBps, 1e23, "out of range"),
    (RateBps, "1e400Gbps", "out of range"),
    (RateBps, float("inf"), "finite"),
    (TimePs, float("nan"), "finite"),
    (TimePs, "0.1ps", "whole number"),
    (TimePs, "1e-400s", "whole number"),
])
def test_units_refuse_what_the_core_cannot_hold(kind, raw, word):
    with pytest.raises(ValidationError, match=word):
        TypeAdapter(kind).validate_python(raw)


def _star_flow(path, hosts=4):
    return Scenario.from_dict({"topology": {"kind": "star", "hosts": hosts},
                               "flows": [{"src": 0, "dst": 2, "size_bytes": 1000, "path": path}]})


@pytest.mark.parametrize("path, words", [
    (["h0", "s0", "h1", "s0", "h2"], ["flows[0].path", "host 'h1'", "switches only"]),
    (["h0", "s0", "h2", "s0", "h2"], ["flows[0].path"]),  # ends at dst, but passes it first
    (["h0", "h2"], ["flows[0].path", "no link from 'h0' to 'h2'"]),
    (["h0", "s0", "h1"], ["flows[0].path", "end at the destination"]),
])
def test_paths_must_be_simple_and_forward_through_switches_only(path, words):
    with pytest.raises(ScenarioError) as e:
        build_simulator(_star_flow(path), "off")
    for w in words:
        assert w in str(e.value)


def test_a_loop_through_switches_is_refused():
    s = Scenario.from_dict({"topology": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 1, "spines": 2},
                            "flows": [{"src": 0, "dst": 1, "size_bytes": 1000,
                                       "path": ["h0", "leaf0", "spine0", "leaf0", "spine1", "leaf1", "h1"]}]})
    with pytest.raises(ScenarioError, match=r"flows\[0\]\.path: node 'leaf0' appears twice"):
        build_simulator(s, "off")


@pytest.mark.parametrize("topology", [
    {"kind": "star", "hosts": 5},
    {"kind": "leaf_spine", "leaves": 3, "hosts_per_leaf": 4, "spines": 2},
    {"kind": "fat_tree", "k": 4},
    {"kind": "fat_tree", "k": 6},
])
def test_memory_estimate_counts_the_topology_the_builder_makes(topology):
    s = Scenario.from_dict({"topology": topology})
    t = s.build_topology()
    (_, detail), = estimate(s).parts.values()
    assert detail == f"a topology of {len(t.nodes):,} nodes and {len(t.links):,} links"


def test_memory_estimate_of_flows_matches_the_arrivals_of_a_run():
    # Poisson arrivals: the expected count is load * rate * hosts * duration / (8 * mean size);
    # with ~2000 arrivals the run's count is within 3 standard deviations (~7 %).
    sizes = "size_bytes,cdf\n1000,0\n3000,1\n"  # mean 2000 bytes, by hand
    s = Scenario.from_dict({"backend": "flow", "topology": {"kind": "star", "hosts": 4, "link_rate_bps": "1Gbps"},
                            "traffic": [{"load": 0.5, "cdf": "x.csv", "duration_ps": "8ms"}]})
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        Path(d, "x.csv").write_text(sizes)
        s._base_dir = Path(d)
        expected = 0.5 * 1e9 * 4 * 8e-3 / (8 * 2000)
        est_bytes, detail = estimate(s).parts["traffic[0]"]
        assert f"about {expected:,.0f} flows" in detail
        flows = len(simulate(s).flows)
    assert abs(flows - expected) < 3 * expected**0.5, (flows, expected)


def test_memory_estimate_of_a_job_counts_its_timeline_rows():
    # One fusion (the model fits in fusion_bytes): rows = workers * iterations * (2 * layers + 1).
    s = Scenario.from_dict({"backend": "flow", "topology": {"kind": "star", "hosts": 4},
                            "jobs": [{"compute_ps": "2ms", "iterations": 3, "layers": 10, "model_bytes": "1MB"}]})
    detail = estimate(s).parts["jobs[0].iterations"][1]
    res = simulate(s)
    assert len(res.timeline) == 4 * 3 * (2 * 10 + 1)
    assert f"about {4 * 3 * (2 * 10 + 2):,} timeline rows" in detail  # the estimate allows one fusion more


def test_memory_refusal_names_the_field_before_building(tmp_path):
    s = Scenario.from_dict({"topology": {"kind": "fat_tree", "k": 400}})
    with pytest.raises(InputError, match=r"^topology\.k: the scenario would need about .* memory"):
        build_simulator(s, "1GiB")
    with pytest.raises(InputError, match="--memory-limit: .*cannot read"):
        build_simulator(s, "lots")


def test_force_replace_restores_the_old_folder_when_the_swap_fails(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old results")
    real = os.replace
    calls = []

    def flaky(a, b):
        calls.append((a, b))
        if len(calls) == 2:  # the move of the new results into place
            raise OSError(28, "No space left on device")
        return real(a, b)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OSError):
        with OutputFolder(out, force=True) as f:
            (f.staging / "new.txt").write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (out / "old.txt").read_text() == "old results"


def test_output_folder_removes_the_parents_it_made_on_failure(tmp_path):
    out = tmp_path / "a" / "b" / "out"
    with pytest.raises(RuntimeError):
        with OutputFolder(out):
            assert (tmp_path / "a" / "b").is_dir()
            raise RuntimeError("the run failed")
    assert list(tmp_path.iterdir()) == []


def test_output_folder_refuses_to_hold_an_input(tmp_path):
    inp = tmp_path / "in" / "s.toml"
    inp.parent.mkdir()
    inp.write_text("")
    with pytest.raises(InputError, match="--out: .* holds the input"):
        with OutputFolder(tmp_path / "in", force=True, inputs=(inp,)):
            pass


def test_a_core_panic_is_an_exception_with_no_report_on_stderr():
    # The core clamps RTOs with min <= max; the schema refuses the opposite, so the
    # core is handed one directly: the panic must come back as CorePanic, quietly.
    code = textwrap.dedent("""
        import json, fabriclab
        from fabriclab._core import Simulator, CorePanic
        from fabriclab.sim.pipeline import core_spec
        d = core_spec(fabriclab.Scenario.from_dict({"flows": [{"src": 0, "dst": 1, "size_bytes": 100000}]}))
        d["transport"]["min_rto_ps"], d["transport"]["max_rto_ps"] = 10**12, 10**9
        sim = Simulator(json.dumps(d))
        try:
            sim.run_until(10**12)
        except CorePanic as e:
            print("first:", e)
        try:
            sim.run_until(10**12)
        except CorePanic as e:
            print("second:", e)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "first: the simulation core panicked: panicked at" in r.stdout and "min > max" in r.stdout
    assert "second: the simulation core panicked earlier" in r.stdout
    assert r.stderr == ""


def test_an_unexpected_exception_is_an_internal_error_with_a_traceback_file(monkeypatch, tmp_path, capsys):
    import fabriclab.api

    def boom(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(fabriclab.api, "simulate", boom)
    rc = _run_guarded(["run", "--out", str(tmp_path / "o"), "-q"])
    err = capsys.readouterr().err
    assert rc == 3
    assert "Traceback" not in err and err.count("\n") == 1
    assert err.startswith("internal error: ZeroDivisionError: a bug (the traceback is in ")
    path = err.split("the traceback is in ")[1].split(";")[0]
    assert "ZeroDivisionError: a bug" in open(path).read() and "Traceback" in open(path).read()
    os.unlink(path)
    assert not (tmp_path / "o").exists() and list(tmp_path.iterdir()) == []


def test_resolved_scenario_with_relative_files_reruns_identically_from_elsewhere(tmp_path):
    d = tmp_path / "exp"
    d.mkdir()
    (d / "sizes.csv").write_text("size_bytes,cdf\n2000,0\n60000,1\n")
    (d / "s.toml").write_text('[topology]\nhosts = 4\n[[traffic]]\nload = 0.3\ncdf = "sizes.csv"\nduration_ps = "3ms"\n')
    run = lambda *a: subprocess.run([sys.executable, "-m", "fabriclab.cli", *a], capture_output=True, text=True,  # noqa: E731
                                    cwd=tmp_path)
    r1 = run("run", "exp/s.toml", "--out", "r1", "-q")
    assert r1.returncode == 0, r1.stderr
    r2 = run("run", "r1/scenario.resolved.toml", "--out", "r2", "-q")
    assert r2.returncode == 0, r2.stderr
    for f in ("flows.parquet", "links.parquet", "scenario.resolved.toml"):
        assert (tmp_path / "r1" / f).read_bytes() == (tmp_path / "r2" / f).read_bytes(), f
    s1, s2 = (json.loads((tmp_path / r / "summary.json").read_text()) for r in ("r1", "r2"))
    s1.pop("performance"), s2.pop("performance")
    assert s1 == s2 and pq.read_table(tmp_path / "r1" / "flows.parquet").num_rows > 0

"""The command line starts without the heavy libraries: `--help` and
`validate` must not import what only running, plotting or planning needs
(issue 13: start-up under 0.3 s; the timing itself is a benchmark,
benches/bench_startup.py, not a test). Each check runs in a fresh
interpreter, so that nothing this test session imported counts."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("pyarrow", "numpy", "pandas", "matplotlib", "networkx", "scipy", "ray", "torch")


def _modules_after(code: str) -> set[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "python"), os.environ.get("PYTHONPATH", "")]))
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return set(json.loads(r.stdout.strip().splitlines()[-1]))


def test_importing_the_cli_pulls_in_no_heavy_library():
    loaded = _modules_after("import fabriclab.cli.main")
    assert sorted(m for m in HEAVY if m in loaded) == []
    # The scenario schema (pydantic models) waits for a command that reads a scenario.
    assert "fabriclab.scenario.model" not in loaded


def test_help_and_validate_pull_in_no_heavy_library():
    scenario = ROOT / "examples" / "horovod_websearch.toml"
    for argv in (["--help"], ["validate", str(scenario)]):
        loaded = _modules_after(
            "import contextlib, io\n"
            "from fabriclab.cli.main import _run_guarded\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = _run_guarded({argv!r})\n"
            "assert rc == 0, rc")
        assert sorted(m for m in HEAVY if m in loaded) == [], argv
    assert "fabriclab.scenario.model" in loaded  # validate did read the scenario


def test_package_attributes_still_resolve_lazily():
    loaded = _modules_after("import fabriclab\nassert fabriclab.Scenario.__name__ == 'Scenario'\n"
                            "from fabriclab import ScenarioError\nassert issubclass(ScenarioError, Exception)")
    assert "fabriclab.scenario.model" in loaded
    assert "pandas" not in loaded


def test_run_with_only_the_cores_tables_imports_neither_numpy_nor_pyarrow(tmp_path):
    # A packet run of the built-in default scenario, shortened: flows,
    # links and messages (written by default) come from the core as Parquet
    # bytes with the summary's figures (fabriclab-io, issue 13).
    scenario = tmp_path / "s.toml"
    scenario.write_text('[topology]\nkind = "star"\nhosts = 4\n\n[[traffic]]\nload = 0.2\nduration_ps = "200us"\n')
    out = tmp_path / "out"
    loaded = _modules_after(
        "import contextlib, io\n"
        "from fabriclab.cli.main import _run_guarded\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = _run_guarded(['run', {str(scenario)!r}, '--out', {str(out)!r}, '--quiet'])\n"
        "assert rc == 0, rc")
    assert sorted(m for m in HEAVY if m in loaded) == []
    assert sorted(p.name for p in out.iterdir()) == ["flows.parquet", "links.parquet", "messages.parquet",
                                                     "scenario.resolved.toml", "summary.json"]

"""The quick path of `fabriclab run` and `validate` (fabriclab/cli/quick.py,
issue 13): which command lines it takes (the rest go to typer), that it
gives the same output, files and exit codes as the typer application, and
that it does not import typer."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabriclab.cli.quick import parse

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "python"), os.environ.get("PYTHONPATH", "")]))
TINY = '[topology]\nkind = "star"\nhosts = 4\n\n[[traffic]]\nload = 0.2\nduration_ps = "200us"\n'


def test_plain_lines_are_parsed_as_typer_would():
    assert parse(["validate", "s.toml"]) == ("validate", {"scenario": Path("s.toml"), "memory_limit": None})
    cmd, p = parse(["run", "--quiet", "s.toml", "--out=o", "--seed", "0", "--force", "--memory-limit", "off"])
    assert cmd == "run"
    assert p == {"scenario": Path("s.toml"), "out_dir": Path("o"), "force": True, "seed": 0, "backend": None,
                 "quiet": True, "memory_limit": "off"}
    _, p = parse(["run"])
    assert p["scenario"] is None and p["out_dir"] == Path("fabriclab-out") and not p["quiet"] and not p["force"]
    assert parse(["run", "-q", "--backend", "flow"])[1]["backend"] == "flow"


@pytest.mark.parametrize("argv", [
    [], ["--help"], ["topo", "show"], ["run", "--help"], ["validate"], ["validate", "a", "b"], ["run", "a", "b"],
    ["run", "--out"], ["run", "--out", "--force"], ["run", "--seed", "x"], ["run", "-q", "-q"],
    ["run", "--force=1"], ["run", "-qx"], ["run", "--", "a"], ["run", "-"], ["run", "--bogus"],
    ["validate", "s.toml", "--quiet"], ["run", "--seed=1", "--seed=2"],
])
def test_anything_else_goes_to_typer(argv):
    assert parse(argv) is None


def _cli(args, quick: bool, cwd):
    """The command line through `python -m fabriclab.cli` (quick path) or
    straight through the typer application (cli.main)."""
    code = ["-m", "fabriclab.cli", *args] if quick else \
        ["-c", f"from fabriclab.cli.main import main; main({list(args)!r})"]
    return subprocess.run([sys.executable, *code], env=ENV, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_quick_and_typer_paths_answer_alike(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(TINY)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    cases = [
        ["validate", str(scenario)],
        ["validate", str(tmp_path / "missing.toml")],
        ["run", str(scenario), "--backend", "fluid", "--out", "o1"],
        ["run", str(scenario), "--seed", "-3", "--out", "o2"],
        ["run", str(scenario), "--out", "full", "-q"],
        ["run", str(scenario), "--memory-limit", "lots", "--out", "o3"],
    ]
    for args in cases:
        q, t = _cli(args, True, tmp_path), _cli(args, False, tmp_path)
        assert (q.returncode, q.stdout, q.stderr) == (t.returncode, t.stdout, t.stderr), args
        assert q.returncode == 2 or args[0] == "validate", args
    assert _cli(["validate", str(scenario)], True, tmp_path).returncode == 0


def test_quick_and_typer_runs_write_the_same_results(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(TINY)
    for quick, out in ((True, "q"), (False, "t")):
        r = _cli(["run", str(scenario), "--out", out, "--seed", "7", "--quiet"], quick, tmp_path)
        assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stderr
    q, t = tmp_path / "q", tmp_path / "t"
    assert sorted(p.name for p in q.iterdir()) == sorted(p.name for p in t.iterdir())
    for f in q.iterdir():
        if f.name != "summary.json":
            assert f.read_bytes() == (t / f.name).read_bytes(), f.name
    sq, st = (json.loads((d / "summary.json").read_text()) for d in (q, t))
    sq.pop("performance"), st.pop("performance")
    assert sq == st


def test_quick_validate_imports_no_typer(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(TINY)
    # The quick path ends the process with os._exit; here it raises instead,
    # so that the probe can list the modules loaded by then.
    probe = ("import json, os, runpy, sys\n"
             "def _raise(code):\n    raise SystemExit(code)\n"
             "os._exit = _raise\n"
             f"sys.argv = ['fabriclab', 'validate', {str(scenario)!r}]\n"
             "try:\n    runpy.run_module('fabriclab.cli', run_name='__main__')\n"
             "except SystemExit as e:\n    assert e.code == 0, e.code\n"
             "print(json.dumps(sorted(sys.modules)))")
    r = subprocess.run([sys.executable, "-c", probe], env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = set(json.loads(r.stdout.strip().splitlines()[-1]))
    assert "fabriclab.scenario.model" in loaded
    assert not any(m == "typer" or m.startswith("typer.") for m in loaded)


def test_quick_path_with_stdout_closed_exits_cleanly(tmp_path):
    # The quick path ends with os._exit after flushing the streams; with
    # descriptor 1 closed there is no stdout to flush (sys.stdout is None).
    (tmp_path / "s.toml").write_text(TINY)
    for args in ("validate s.toml", "run s.toml --out o --quiet"):
        r = subprocess.run(["sh", "-c", f"{sys.executable} -m fabriclab.cli {args} >&-"], env=ENV, cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
        assert (r.returncode, r.stderr) == (0, ""), args
    assert (tmp_path / "o" / "summary.json").exists()

"""`fabriclab run` asks numpy's OpenBLAS for one thread unless the user
chose a count (commands.default_blas_threads, issue 13: start-up). Checked
where it matters: the value OpenBLAS sees is the environment at the moment
numpy is first imported, recorded by an audit hook in a fresh interpreter."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabriclab.cli.commands import BLAS_THREAD_VARS, default_blas_threads

ROOT = Path(__file__).resolve().parent.parent
# A job: its tables are built with numpy and pyarrow (a run with only the
# core's tables imports neither, tests/test_startup_imports.py).
TINY = ('[topology]\nkind = "star"\nhosts = 4\n\n[[traffic]]\nload = 0.2\nduration_ps = "200us"\n'
        '\n[[jobs]]\nworkers = [0, 1]\ncompute_ps = "1ms"\nlayers = 4\nmodel_bytes = "1MB"\niterations = 2\n')

# Prints, as JSON, the BLAS variables at numpy's first import and at the end.
PROBE = """
import json, os, sys
VARS = {vars!r}
seen = []
def hook(event, args):
    if event == "import" and args[0] == "numpy" and not seen:
        seen.append({{v: os.environ.get(v) for v in VARS}})
sys.addaudithook(hook)
{body}
print(json.dumps({{"at_numpy_import": seen[0] if seen else None, "after": {{v: os.environ.get(v) for v in VARS}}}}))
"""


def _probe(body: str, extra_env: dict, cwd: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARS}
    env.update(extra_env, PYTHONPATH=os.pathsep.join([str(ROOT / "python"), os.environ.get("PYTHONPATH", "")]))
    code = PROBE.format(vars=BLAS_THREAD_VARS, body=body)
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_default_is_set_only_when_no_count_was_chosen():
    env: dict = {}
    assert default_blas_threads(env) is True
    assert env == {"OPENBLAS_NUM_THREADS": "1"}
    for var in BLAS_THREAD_VARS:
        env = {var: "4", "PATH": "/bin"}
        assert default_blas_threads(env) is False
        assert env == {var: "4", "PATH": "/bin"}, var
    env = {"OPENBLAS_NUM_THREADS": ""}  # set, even if empty: OpenBLAS's business, not ours
    assert default_blas_threads(env) is False and env == {"OPENBLAS_NUM_THREADS": ""}


RUN = ("from fabriclab.cli.quick import run\n"
       "rc = run(['run', 'tiny.toml', '--out', 'out', '--quiet'])\n"
       "assert rc == 0, rc")


@pytest.mark.parametrize("user, at_import", [
    ({}, {"OPENBLAS_NUM_THREADS": "1", "GOTO_NUM_THREADS": None, "OMP_NUM_THREADS": None}),
    ({"OPENBLAS_NUM_THREADS": "2"}, {"OPENBLAS_NUM_THREADS": "2", "GOTO_NUM_THREADS": None, "OMP_NUM_THREADS": None}),
    ({"OMP_NUM_THREADS": "3"}, {"OPENBLAS_NUM_THREADS": None, "GOTO_NUM_THREADS": None, "OMP_NUM_THREADS": "3"}),
])
def test_a_run_sets_it_before_numpy_is_imported(tmp_path, user, at_import):
    (tmp_path / "tiny.toml").write_text(TINY)
    seen = _probe(RUN, user, tmp_path)
    assert seen["at_numpy_import"] == at_import
    assert (tmp_path / "out" / "jobs.parquet").exists()


def test_the_library_and_validate_leave_the_environment_alone(tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY)
    unset = {v: None for v in BLAS_THREAD_VARS}
    lib = _probe("import fabriclab\n"
                 "fabriclab.simulate(fabriclab.Scenario.load('tiny.toml'))", {}, tmp_path)
    assert lib == {"at_numpy_import": unset, "after": unset}
    val = _probe("import contextlib, io\nfrom fabriclab.cli.quick import run\n"
                 "with contextlib.redirect_stdout(io.StringIO()):\n"
                 "    assert run(['validate', 'tiny.toml']) == 0", {}, tmp_path)
    assert val == {"at_numpy_import": None, "after": unset}  # validate imports no numpy at all

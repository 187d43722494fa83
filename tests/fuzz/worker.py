"""A long-lived CLI worker for the fuzz harness (``python tests/fuzz/worker.py``).

Starting a CLI process costs about a second (Python, pydantic, pyarrow,
pandas, the core); this worker pays it once and then runs the CLI's entry
point in-process, one request at a time.

Protocol (one JSON object per line):

* on start it writes ``{"ready": PID}`` on stdout;
* request on stdin: ``{"argv": ["run", "s.toml", "--out", "out", "-q"],
  "cwd": "/dir", "capture": "/tmp/prefix"}``: ``argv`` are the arguments
  after ``fabriclab``; ``capture`` is a path prefix for two files
  (``.out``/``.err``) that receive everything written to file descriptors 1
  and 2 during the call (Rust panics and ``faulthandler`` write there, below
  Python), so the parent can still read them if the call kills the worker;
* answer on stdout: ``{"rc": int, "stdout": str, "stderr": str, "wall_s": float}``.

``rc`` is what ``sys.exit`` received (``None`` -> 0, a message -> 1), or 1
with the traceback in ``stderr`` for an exception that escaped ``main``, as a
separate process would show it. The parent enforces the time bound and the
memory limit (it kills and restarts the worker) and reports deaths by signal.
"""

from __future__ import annotations

import faulthandler
import io
import json
import os
import sys
import time
import traceback

# The protocol keeps its own copy of the original stdout; fds 1 and 2 are
# pointed at capture files during each call and at /dev/null between calls.
_proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
_null = os.open(os.devnull, os.O_WRONLY)
os.dup2(_null, 1)
# faulthandler writes to fd 2 whatever it points to when the fault happens.
faulthandler.enable(file=sys.__stderr__, all_threads=True)

# Pay the imports once.
import fabriclab.cli.main as cli  # noqa: E402

for _mod in ("fabriclab.sim.pipeline", "pyarrow.parquet", "pandas", "numpy", "tomli_w"):
    try:
        __import__(_mod)
    except Exception:  # the code under test is changing; the call itself will show it
        pass


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _call(argv: list[str], cwd: str | None, capture: str) -> dict:
    out_path, err_path = capture + ".out", capture + ".err"
    fo = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    fe = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    saved_err = os.dup(2)
    old = sys.stdout, sys.stderr, sys.argv, os.getcwd()
    py_out, py_err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    try:
        os.dup2(fo, 1)
        os.dup2(fe, 2)
        sys.stdout, sys.stderr = py_out, py_err
        sys.argv = ["fabriclab", *argv]
        if cwd:
            os.chdir(cwd)
        try:
            cli.main()
            rc = 0
        except SystemExit as e:
            code = e.code
            if code is None:
                rc = 0
            elif isinstance(code, int):
                rc = code
            else:
                print(code, file=py_err)
                rc = 1
        except BaseException:  # what the interpreter would print for an uncaught exception
            py_err.write(traceback.format_exc())
            rc = 1
    finally:
        sys.stdout, sys.stderr, sys.argv = old[0], old[1], old[2]
        try:
            os.chdir(old[3])
        except OSError:
            pass
        os.dup2(_null, 1)
        os.dup2(saved_err, 2)
        os.close(saved_err)
        os.close(fo)
        os.close(fe)
    wall = time.perf_counter() - t0
    return {"rc": rc, "stdout": py_out.getvalue() + _read(out_path), "stderr": py_err.getvalue() + _read(err_path),
            "wall_s": wall}


def main() -> None:
    _proto.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        res = _call(req["argv"], req.get("cwd"), req["capture"])
        _proto.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()

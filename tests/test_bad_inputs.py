"""Issue 8, every bad input a clear error: the corpus in tests/bad_inputs/
(one [[case]] per invocation in cases.toml, see its header) run through the
real CLI, one subprocess per case, plus a good-path rerun of
scenario.resolved.toml.

The contract every failing invocation must meet:

- exit code 2 and a stderr line starting ``error: `` whose text holds the
  case's ``expect`` substrings (the field in dotted form or the CLI option,
  and a word of the rule), printed literally (no rich markup swallowed);
- no Python traceback, no Rust panic, no death by signal, an answer within
  60 s (``max_seconds`` when the case asks for a fast refusal), all under a
  3 GiB address-space limit that catches runaway allocations;
- the file system left as it was found: no output folder created, an
  existing ``--out``/``--csv`` target untouched, no dot-folder leftovers.

Cases run in a small thread pool (``FABRICLAB_BAD_INPUT_JOBS``, default: the
number of cores, at most 4), each in its own temporary folder, which is also
its working directory; the test of each case waits for its own result.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fabriclab.util.toml import tomllib

CORPUS = Path(__file__).resolve().parent / "bad_inputs"
CASES: list[dict] = tomllib.loads((CORPUS / "cases.toml").read_text())["case"]
BY_ID = {c["id"]: c for c in CASES}

TIMEOUT_S = 60
# RLIMIT_AS (address space) at 3 GiB: checked (test_good_runs_fit_the_memory_limit,
# the rerun test and the class 5 cases of the manifest) that normal runs, a
# sweep with a worker process, bench and report fit in it with pyarrow, numpy
# and the core's threads loaded, so neither RLIMIT_DATA nor a larger value is
# needed; a runaway allocation fails here instead of swapping a CI machine.
MEMORY_LIMIT_BYTES = 3 * 2**30
JOBS = max(1, int(os.environ.get("FABRICLAB_BAD_INPUT_JOBS", min(4, os.cpu_count() or 1))))
# Options whose target must not be created or changed by a failing command.
OUTPUT_OPTIONS = ("--out", "--csv")
KNOWN_KEYS = {"id", "class", "argv", "setup", "expect_exit", "expect", "expect_re", "forbid", "max_seconds",
              "error_line", "note"}
REFERENCE = re.compile(r"""["']([^"'\n]+\.(?:toml|json|csv))["']""")  # file names inside a corpus file
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


# ------------------------------------------------------------------ setups
def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


STAR = b'[topology]\nkind = "star"\nhosts = 4\nlink_rate_bps = "10Gbps"\nlink_delay_ps = "1us"\n'
JOB = (b'\n[[jobs]]\nworkers = [0, 1]\ncompute_ps = "1ms"\nlayers = 4\nmodel_bytes = "1MB"\niterations = 2\n')


def _copy_tiny(work: Path, rel: str) -> None:
    _write(work / rel, (CORPUS / "good" / "tiny.toml").read_bytes())
    _write(work / rel.rsplit("/", 1)[0] / "notes.txt", b"the user's own notes\n")


def _truncated_parquet_bytes() -> bytes:
    """The first half of a real Parquet file: a truncated write."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({"flow_id": list(range(100)), "fct_ps": list(range(100))}), buf)
    data = buf.getvalue()
    return data[: len(data) // 2]


def _plan_latin1() -> bytes:
    ranks = [[{"op": "send", "peer": 1 - r, "offset": 0, "bytes": 10},
              {"op": "recv", "peer": 1 - r, "offset": 0, "bytes": 10, "reduce": True, "deps": [0]}] for r in (0, 1)]
    text = json.dumps({"version": 1, "collective": "allreduce", "nranks": 2, "size_bytes": 10, "root": None,
                       "algorithm": "ALGO", "meta": {}, "ranks": ranks})
    return text.encode().replace(b"ALGO", b"fait \xe0 la main")  # latin-1 "à"


# Each setup runs in the case's folder (``work``) before the command; files
# that are awkward to check in (non-UTF-8, corrupt binaries, folders) are made here.
SETUPS = {
    "regular_file": lambda w: _write(w / "afile", b"a regular file, not a folder\n"),
    "cwd_has_file": lambda w: _write(w / "keep.txt", b"the user's file in the working directory\n"),
    "out_is_file": lambda w: _write(w / "out", b"a regular file where the output folder would go\n"),
    "out_has_old": lambda w: _write(w / "out" / "keep.txt", b"results of an earlier run\n"),
    "csv_is_folder": lambda w: (w / "table.csv").mkdir(),
    "pics_folder": lambda w: _write(w / "pics" / "old.png", b"\x89PNG\r\n\x1a\n an old picture"),
    "scenario_in_folder": lambda w: _copy_tiny(w, "proj/s.toml"),
    "scenario_in_subfolder": lambda w: _copy_tiny(w, "proj/sub/s.toml"),
    "empty_run_folder": lambda w: (w / "vacant").mkdir(),
    "corrupt_flows_parquet": lambda w: _write(w / "run" / "flows.parquet", b"PAR1" + b"\x00garbage" * 64 + b"PAR1"),
    "corrupt_summary_json": lambda w: _write(w / "run" / "summary.json", b'{"flows_total": 3, "fct": {'),
    "truncated_flows_parquet": lambda w: _write(w / "run" / "flows.parquet", _truncated_parquet_bytes()),
    "latin1_scenario": lambda w: _write(w / "latin1.toml", b'# r\xe9seau de test\nname = "caf\xe9"\n'),
    "binary_scenario": lambda w: _write(w / "zipped.toml", b"PK\x03\x04\x14\x00\x08\x00" + bytes(range(256))),
    "latin1_flows_csv": lambda w: (
        _write(w / "s.toml", b'flows_csv = "flows.csv"\n' + STAR),
        _write(w / "flows.csv", b"# d\xe9bit\nsrc,dst,size_bytes\n0,1,10000\n")),
    "latin1_cdf_csv": lambda w: (
        _write(w / "s.toml", STAR + b'\n[[traffic]]\nload = 0.3\nduration_ps = "1ms"\ncdf = "sizes.csv"\n'),
        _write(w / "sizes.csv", b"# taille (octets) \xb5\n1000,0\n2000,1\n")),
    "latin1_topology": lambda w: (
        _write(w / "s.toml", b'[topology]\nkind = "file"\npath = "net.toml"\n'),
        _write(w / "net.toml", b'nodes = [{name = "h\xe90", kind = "host"}, {name = "h1", kind = "host"},\n'
                               b'         {name = "s", kind = "switch"}]\n'
                               b'links = [{a = "h\xe90", b = "s", rate_bps = "10Gbps", delay_ps = "1us"},\n'
                               b'         {a = "h1", b = "s", rate_bps = "10Gbps", delay_ps = "1us"}]\n')),
    "latin1_profile": lambda w: (
        _write(w / "s.toml", STAR + JOB.replace(b'compute_ps = "1ms"\nlayers = 4\nmodel_bytes = "1MB"\n',
                                                b'profile = "prof.csv"\n')),
        _write(w / "prof.csv", b"# couche \xe9\nparam_bytes,fwd_ps,bwd_ps\n100000,100000,200000\n")),
    "latin1_plan": lambda w: (
        _write(w / "s.toml", STAR + JOB + b'allreduce = "plan.json"\n'),
        _write(w / "plan.json", _plan_latin1())),
    "latin1_sweep": lambda w: _write(w / "grid.toml", b'# balayage \xe9\n[base]\nname = "x"\n\n[grid]\n"seed" = [1]\n'),
}


# ------------------------------------------------------------------ running
def _limit_memory() -> None:  # runs in the child between fork and exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


_SPAWN = threading.Lock()  # one fork at a time: preexec_fn is only safe without concurrent forks


def run_cli(argv: list[str], cwd: Path, timeout: float = TIMEOUT_S) -> tuple[int | None, str, str, float]:
    """(returncode or None on timeout, stdout, stderr, seconds) of the real
    CLI under the memory limit; on timeout the whole process group is killed."""
    env = dict(os.environ, COLUMNS="200", TERM="dumb", NO_COLOR="1", PYTHONUNBUFFERED="1")
    env.pop("FORCE_COLOR", None)
    t0 = time.monotonic()
    with _SPAWN:
        proc = subprocess.Popen([sys.executable, "-m", "fabriclab.cli", *argv], cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=_limit_memory, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        rc = None
    seconds = time.monotonic() - t0
    dec = lambda b: ANSI.sub("", b.decode("utf-8", "replace"))  # noqa: E731
    return rc, dec(out), dec(err), seconds


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under root: folders, files (by content hash), symlinks."""
    snap: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                snap[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                snap[rel] = ("dir",)
            else:
                snap[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
    return snap


def substitute(arg: str, work: Path) -> str:
    return arg.replace("{dir}", str(CORPUS)).replace("{out}", str(work / "out")).replace("{tmp}", str(work))


def output_targets(argv: list[str], work: Path) -> list[Path]:
    targets = []
    for i, a in enumerate(argv[:-1]):
        if a in OUTPUT_OPTIONS:
            v = argv[i + 1]
            targets.append(Path(os.path.normpath(Path(work, v))) if v else work)
    return targets


@dataclass
class Outcome:
    argv: list[str]
    rc: int | None
    stdout: str
    stderr: str
    seconds: float
    changes: list[str] = field(default_factory=list)  # file-system changes a failing command must not make


def execute(case: dict, root: Path) -> Outcome:
    """Runs one case in root/work (its own folder and working directory)."""
    work = root / "work"
    work.mkdir()
    if case.get("setup"):
        SETUPS[case["setup"]](work)
    argv = [substitute(a, work) for a in case["argv"]]
    outside = [t for t in output_targets(argv, work) if root not in t.parents and t != root]
    before, before_out = snapshot(root), {t: os.path.lexists(t) for t in outside}
    rc, out, err, seconds = run_cli(argv, work)
    res = Outcome(argv, rc, out, err, seconds)
    after = snapshot(root)
    for rel in sorted(set(before) | set(after)):
        if before.get(rel) != after.get(rel):
            what = "created" if rel not in before else "removed" if rel not in after else "changed"
            res.changes.append(f"{what} {rel}")
    for t, existed in before_out.items():
        if os.path.lexists(t) != existed:
            res.changes.append(f"{'created' if not existed else 'removed'} {t}")
    return res


def _has(text: str, needle) -> bool:
    """needle: a substring (case-insensitive) or a list of alternatives."""
    if isinstance(needle, list):
        return any(_has(text, n) for n in needle)
    return needle.lower() in text.lower()


def problems(case: dict, r: Outcome) -> list[str]:
    """Every way the outcome breaks the contract (empty: the case passes)."""
    want = case.get("expect_exit", 2)
    both = r.stdout + r.stderr
    found = []
    if r.rc is None:
        found.append(f"no answer within {TIMEOUT_S} s (killed)")
    elif r.rc < 0:
        found.append(f"died of signal {-r.rc}")
    elif r.rc != want:
        found.append(f"exit {r.rc}, expected {want}")
    if "Traceback" in both:
        found.append("printed a Python traceback")
    if "panicked at" in both:
        found.append("printed a Rust panic")
    if want != 0:
        if case.get("error_line", True) and not any(ln.startswith("error: ") for ln in r.stderr.splitlines()):
            found.append("no stderr line starting 'error: '")
        text = r.stderr
    else:
        text = both
    missing = [n for n in case.get("expect", []) if not _has(text, n)]
    missing += [f"/{rx}/" for rx in case.get("expect_re", []) if not re.search(rx, text)]
    if missing:
        found.append(f"message lacks {missing}")
    shown = [f for f in case.get("forbid", []) if _has(both, f)]
    if shown:
        found.append(f"message shows forbidden {shown}")
    if case.get("max_seconds") and r.seconds > case["max_seconds"]:
        found.append(f"took {r.seconds:.1f} s, allowed {case['max_seconds']} s")
    if want != 0 and r.changes:
        found.append("left the file system changed: " + ", ".join(r.changes[:5]) + (" ..." if len(r.changes) > 5 else ""))
    return found


def _report(r: Outcome) -> str:
    tail = lambda s: s if len(s) < 3000 else "..." + s[-3000:]  # noqa: E731
    return (f"\nargv: {r.argv}\nexit: {r.rc} after {r.seconds:.1f} s\n--- stderr ---\n{tail(r.stderr)}"
            f"\n--- stdout ---\n{tail(r.stdout)}")


# ------------------------------------------------------------------ the corpus
@pytest.fixture(scope="session")
def corpus_runs(request, tmp_path_factory):
    """Runs the selected cases in a thread pool as soon as the first one is
    needed; ``get(id)`` waits for one case's outcome."""
    futures: dict = {}
    pool = ThreadPoolExecutor(max_workers=JOBS, thread_name_prefix="bad-input") if JOBS > 1 else None
    if pool:
        for item in request.session.items:
            if getattr(item, "originalname", None) == "test_bad_input" and hasattr(item, "callspec"):
                cid = item.callspec.params["case_id"]
                futures[cid] = pool.submit(execute, BY_ID[cid], tmp_path_factory.mktemp("case"))

    def get(cid: str) -> Outcome:
        if cid in futures:
            return futures[cid].result()
        return execute(BY_ID[cid], tmp_path_factory.mktemp("case"))

    yield get
    if pool:
        pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("case_id", [c["id"] for c in CASES], ids=[c["id"] for c in CASES])
def test_bad_input(corpus_runs, case_id):
    case = BY_ID[case_id]
    r = corpus_runs(case_id)
    found = problems(case, r)
    assert not found, "; ".join(found) + _report(r)


def test_manifest():
    """At least 150 cases over every class 1-9, well-formed, and no case that a
    message could satisfy just by echoing a corpus file's name."""
    assert len(CASES) >= 150
    assert {c["class"] for c in CASES} == set(range(1, 10))
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "duplicate ids"
    bad = []
    for c in CASES:
        if set(c) - KNOWN_KEYS or not {"id", "class", "argv", "expect"} <= set(c):
            bad.append(f"{c['id']}: keys {sorted(c)}")
        if c.get("setup") and c["setup"] not in SETUPS:
            bad.append(f"{c['id']}: unknown setup {c['setup']!r}")
        if c.get("expect_exit", 2) not in (0, 2) or c["class"] not in range(1, 10):
            bad.append(f"{c['id']}: expect_exit/class")
        if c.get("expect_exit", 2) == 2 and not c["expect"] and c.get("error_line", True):
            bad.append(f"{c['id']}: a failing case must expect something")
        for rx in c.get("expect_re", []):
            re.compile(rx)
        for a in c["argv"]:
            if "{dir}/" not in a:
                continue
            rel = a.split("{dir}/", 1)[1]
            if not (CORPUS / rel).exists():
                bad.append(f"{c['id']}: {rel} is not in the corpus")
                continue
            # The argument and the files it names (a message may print their paths).
            names = [rel] + (REFERENCE.findall((CORPUS / rel).read_text()) if (CORPUS / rel).is_file() else [])
            for needle in c["expect"]:
                for n in needle if isinstance(needle, list) else [needle]:
                    if n.lower().endswith((".toml", ".json", ".csv")):
                        continue  # a file name: an echo is what the case asks for
                    for name in names:
                        if n.lower() in name.lower():
                            bad.append(f"{c['id']}: expected {n!r} is in the path {name!r}; an echo would satisfy it")
    assert not bad, "\n".join(bad)


_CORPUS_BEFORE = snapshot(CORPUS)


# ------------------------------------------------------------------ class 5: good path
def test_good_runs_fit_the_memory_limit(tmp_path):
    """The limit the corpus runs under does not break normal commands (the
    class 5 cases of the manifest run more of them)."""
    scen = CORPUS / "good" / "tiny.toml"
    rc, out, err, _ = run_cli(["run", str(scen), "--out", str(tmp_path / "o"), "-q"], tmp_path)
    assert rc == 0, err
    assert (tmp_path / "o" / "summary.json").is_file()
    rc, out, err, _ = run_cli(["report", str(tmp_path / "o")], tmp_path)
    assert rc == 0, err


def _tables(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.parquet"))}


@pytest.mark.parametrize("name", ["rerun-plain", "rerun-files"])
def test_resolved_scenario_reruns_identically(tmp_path, name):
    """`fabriclab run DIR/scenario.resolved.toml` (from another working
    directory) reproduces the run: byte-identical Parquet tables and the same
    summary apart from `performance`. rerun-files names its topology, CDF,
    flows CSV and profile relative to the scenario file."""
    first, second = tmp_path / "first", tmp_path / "second"
    (tmp_path / "cwd1").mkdir()
    (tmp_path / "cwd2").mkdir()
    rc, _, err, _ = run_cli(["run", str(CORPUS / "good" / f"{name}.toml"), "--out", str(first), "-q"], tmp_path / "cwd1")
    assert rc == 0, err
    resolved = first / "scenario.resolved.toml"
    rc, _, err, _ = run_cli(["run", str(resolved), "--out", str(second), "-q"], tmp_path / "cwd2")
    assert rc == 0, err
    assert "Traceback" not in err
    t1, t2 = _tables(first), _tables(second)
    assert {"flows.parquet", "links.parquet"} <= set(t1)
    assert sorted(t1) == sorted(t2)
    for k in t1:
        assert t1[k] == t2[k], f"{k} differs"
    s1, s2 = (json.loads((d / "summary.json").read_text()) for d in (first, second))
    s1.pop("performance", None)
    s2.pop("performance", None)
    assert s1 == s2


def test_corpus_untouched():
    """No case wrote into the checked-in corpus (runs last: every case of
    this module has finished by then)."""
    assert snapshot(CORPUS) == _CORPUS_BEFORE

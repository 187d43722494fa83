"""Runs scenarios through the real CLI and checks the scenario contract.

The contract (tests/fuzz/README.md): ``fabriclab validate FILE`` and
``fabriclab run FILE --out DIR -q`` each end in exactly one of

* exit 0 (``run``: DIR holds flows.parquet, links.parquet — unless
  ``[outputs]`` switches them off —, summary.json, scenario.resolved.toml);
* exit 2 with a stderr line starting ``error: `` whose message names a field
  (a dotted path such as ``traffic[0].load``); DIR then does not exist and no
  dot-prefixed temporary sibling of DIR remains;

never a Python traceback, a Rust panic, death by signal, another exit code
(3 = internal error) or running past the time bound. And ``validate`` exit 0
implies ``run`` does not exit 2 (a refusal for lack of memory excepted).

Two ways to run the CLI:

* ``worker`` (default): long-lived ``tests/fuzz/worker.py`` processes call
  the CLI's entry point in-process; a worker that dies or exceeds the time
  bound is killed and restarted, and the call is reported (signal/timeout).
* ``subprocess`` (``FABRICLAB_FUZZ_MODE=subprocess``): one
  ``python -m fabriclab.cli`` process per call, as a user runs it.

``validate`` and ``run`` of one example go to two processes at once.
Every process gets an address-space limit (``resource.setrlimit`` in
``preexec_fn``) and no core dumps.

Environment: ``FABRICLAB_FUZZ_MODE`` (worker | subprocess),
``FABRICLAB_FUZZ_TIMEOUT`` (seconds per call, default 60),
``FABRICLAB_FUZZ_MEMORY`` (address-space limit, default ``3G``; ``off``),
``FABRICLAB_FUZZ_RLIMIT`` (``AS``, default, or ``DATA``),
``FABRICLAB_FUZZ_PARALLEL`` (processes, default 2),
``FABRICLAB_FUZZ_CHECK_RESOLVED=1`` (also check that
``scenario.resolved.toml`` validates again — a promise of docs/scenario.md
beyond the contract).

As a script::

    python tests/fuzz/harness.py replay FAILING.toml [--mode subprocess] [--timeout S]
    python tests/fuzz/harness.py minimize FAILING.toml [--kind KIND] [--budget S]
"""

from __future__ import annotations

import json
import os
import re
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import mutations  # noqa: E402
import fixtures  # noqa: E402
import strategies  # noqa: E402
from fabriclab.sim.pipeline import core_spec

WORKER = HERE / "worker.py"
SCENARIO_NAME = "s.toml"
OUT_NAME = "out"


# --------------------------------------------------------------------------- configuration


def _size(text: str) -> int | None:
    text = text.strip().lower()
    if text in ("", "0", "off", "none"):
        return None
    mult = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    if text[-1] in mult:
        return int(float(text[:-1]) * mult[text[-1]])
    return int(text)


@dataclass
class Config:
    mode: str = "worker"
    timeout_s: float = 60.0
    memory_bytes: int | None = 3 * 2**30
    rlimit: str = "AS"
    parallel: int = 2
    check_resolved: bool = False

    @classmethod
    def from_env(cls) -> "Config":
        e = os.environ
        return cls(
            mode=e.get("FABRICLAB_FUZZ_MODE", "worker"),
            timeout_s=float(e.get("FABRICLAB_FUZZ_TIMEOUT", "60")),
            memory_bytes=_size(e.get("FABRICLAB_FUZZ_MEMORY", "3G")),
            rlimit=e.get("FABRICLAB_FUZZ_RLIMIT", "AS").upper(),
            parallel=max(1, int(e.get("FABRICLAB_FUZZ_PARALLEL", "2"))),
            check_resolved=e.get("FABRICLAB_FUZZ_CHECK_RESOLVED", "") not in ("", "0"),
        )


def _preexec(cfg: Config):
    limit = cfg.memory_bytes
    which = resource.RLIMIT_DATA if cfg.rlimit == "DATA" else resource.RLIMIT_AS

    def fn():
        if limit is not None:
            resource.setrlimit(which, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return fn


def _env() -> dict:
    env = dict(os.environ)
    env["NO_COLOR"] = "1"  # plain "error: " lines
    env["PYTHONFAULTHANDLER"] = "1"  # a stack on SIGSEGV/SIGABRT
    env.setdefault("COLUMNS", "200")
    env.setdefault("RUST_BACKTRACE", "1")  # the core frame of a panic or abort, for grouping
    return env


# --------------------------------------------------------------------------- running the CLI


@dataclass
class Call:
    argv: list[str]
    cwd: str


@dataclass
class Result:
    argv: list[str]
    rc: int | None  # None: timed out; negative: killed by that signal
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0
    timed_out: bool = False

    @property
    def cmd(self) -> str:
        return self.argv[0] if self.argv else "?"

    @property
    def output(self) -> str:
        return self.stdout + "\n" + self.stderr


class SubprocessRunner:
    """One ``python -m fabriclab.cli`` process per call."""

    def __init__(self, cfg: Config):
        self.cfg = cfg

    def invoke_many(self, calls: list[Call]) -> list[Result]:
        results: list[Result | None] = [None] * len(calls)
        for start in range(0, len(calls), self.cfg.parallel):
            batch = list(enumerate(calls))[start:start + self.cfg.parallel]
            procs = []
            for i, c in batch:
                t0 = time.perf_counter()
                p = subprocess.Popen([sys.executable, "-m", "fabriclab.cli", *c.argv], cwd=c.cwd, env=_env(),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     preexec_fn=_preexec(self.cfg), start_new_session=True)
                procs.append((i, c, p, t0))
            deadline = time.monotonic() + self.cfg.timeout_s
            for i, c, p, t0 in procs:
                try:
                    out, err = p.communicate(timeout=max(0.0, deadline - time.monotonic()))
                    results[i] = Result(c.argv, p.returncode, _dec(out), _dec(err), time.perf_counter() - t0)
                except subprocess.TimeoutExpired:
                    _kill_group(p)
                    out, err = p.communicate()
                    results[i] = Result(c.argv, None, _dec(out), _dec(err), time.perf_counter() - t0, timed_out=True)
        return results  # type: ignore[return-value]

    def close(self) -> None:
        pass


def _dec(b: bytes | None) -> str:
    return (b or b"").decode("utf-8", "replace")


def _kill_group(p: subprocess.Popen) -> None:
    """Kills a process we started (and its session, which we also started)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            p.kill()
        except ProcessLookupError:
            pass


class _Worker:
    def __init__(self, cfg: Config, capture_prefix: str):
        self.cfg = cfg
        self.capture = capture_prefix
        with open(capture_prefix + ".boot", "wb") as boot:  # what it says before and between calls
            self.proc = subprocess.Popen([sys.executable, str(WORKER)], env=_env(), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=boot,
                                         preexec_fn=_preexec(cfg), start_new_session=True)
        self.buf = b""
        ready = self._read_line(120.0)
        if ready is None or "ready" not in ready:
            err = _read_text(self.capture + ".boot")
            self.kill()
            raise RuntimeError(f"fuzz worker did not start (rc {self.proc.returncode}): {err[-2000:]}")

    def _read_line(self, timeout: float) -> dict | None:
        """The next JSON line, or None on EOF or timeout (self.timed_out tells)."""
        self.timed_out = False
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        try:
            while b"\n" not in self.buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.timed_out = True
                    return None
                if not sel.select(left):
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return None
                self.buf += chunk
        finally:
            sel.close()
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def send(self, call: Call) -> None:
        for ext in (".out", ".err"):
            try:
                os.unlink(self.capture + ext)
            except FileNotFoundError:
                pass
        req = {"argv": call.argv, "cwd": call.cwd, "capture": self.capture}
        self.t0 = time.perf_counter()
        self.deadline = time.monotonic() + self.cfg.timeout_s
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()

    def receive(self, call: Call) -> Result:
        msg = self._read_line(max(0.0, self.deadline - time.monotonic()))
        wall = time.perf_counter() - self.t0
        if msg is not None:
            return Result(call.argv, msg["rc"], msg["stdout"], msg["stderr"], msg["wall_s"])
        out, err = _read_text(self.capture + ".out"), _read_text(self.capture + ".err")
        if self.timed_out:
            self.kill()
            return Result(call.argv, None, out, err, wall, timed_out=True)
        rc = self.proc.wait()  # EOF: the worker died during the call
        boot = _read_text(self.capture + ".boot")
        return Result(call.argv, rc if rc != 0 else 1, out, err + boot + f"\n[worker exited with {rc}]", wall)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            _kill_group(self.proc)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for s in (self.proc.stdin, self.proc.stdout):
            try:
                s.close()
            except Exception:
                pass


def _read_text(path: str) -> str:
    try:
        return Path(path).read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


class WorkerRunner:
    """``cfg.parallel`` long-lived workers; a dead or hung one is replaced.
    A worker is also recycled after a call that failed or spoke of memory
    (its heap may be fragmented up to the address-space limit, which would
    make later calls fail where a fresh process would not) and after
    ``RECYCLE_AFTER`` calls."""

    RECYCLE_AFTER = 200

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.dir = tempfile.mkdtemp(prefix="fabriclab-fuzz-workers-")
        self.workers: list[_Worker | None] = [None] * cfg.parallel
        self.calls = [0] * cfg.parallel
        self.restarts = 0

    def _get(self, i: int) -> _Worker:
        w = self.workers[i]
        if w is None or not w.alive():
            if w is not None:
                w.kill()
                self.restarts += 1
            w = self.workers[i] = _Worker(self.cfg, os.path.join(self.dir, f"w{i}"))
            self.calls[i] = 0
        return w

    def _after(self, i: int, r: Result) -> None:
        self.calls[i] += 1
        w = self.workers[i]
        if w is not None and w.alive() and (r.rc not in (0, 2) or "memory" in r.output.lower()
                                            or self.calls[i] >= self.RECYCLE_AFTER):
            w.kill()

    def invoke_many(self, calls: list[Call]) -> list[Result]:
        results: list[Result] = []
        for start in range(0, len(calls), len(self.workers)):
            batch = calls[start:start + len(self.workers)]
            ws = [self._get(i) for i in range(len(batch))]
            for w, c in zip(ws, batch):
                w.send(c)
            for i, (w, c) in enumerate(zip(ws, batch)):
                r = w.receive(c)
                self._after(i, r)
                results.append(r)
        return results

    def close(self) -> None:
        for w in self.workers:
            if w is not None:
                w.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def make_runner(cfg: Config | None = None):
    cfg = cfg or Config.from_env()
    if cfg.mode == "subprocess":
        return SubprocessRunner(cfg)
    if cfg.mode == "worker":
        return WorkerRunner(cfg)
    raise ValueError(f"FABRICLAB_FUZZ_MODE: 'worker' or 'subprocess', got {cfg.mode!r}")


# --------------------------------------------------------------------------- the contract


@dataclass
class Violation:
    kind: str  # e.g. "internal-error: OverflowError", "timeout", "signal: SIGABRT: ..."
    detail: str = ""
    cmd: str = ""  # validate | run | "" (both: consistency)


@dataclass
class Outcome:
    scenario: dict
    toml: str
    validate: Result | None = None
    run: Result | None = None
    violations: list[Violation] = field(default_factory=list)
    workdir: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.violations

    def report(self) -> str:
        lines = [f"- {v.kind}{f' ({v.cmd})' if v.cmd else ''}: {v.detail}" for v in self.violations]
        muts = getattr(self.scenario, "mutations", None)
        if muts:
            lines.append("mutations: " + "; ".join(muts))
        for r in (self.validate, self.run):
            if r is not None:
                lines.append(f"$ fabriclab {' '.join(r.argv)}  -> rc {r.rc}{' (timeout)' if r.timed_out else ''}, "
                             f"{r.wall_s:.2f} s")
                text = (r.stderr.strip() or r.stdout.strip()).splitlines()
                shown = text if len(text) <= 16 else text[:8] + ["..."] + text[-8:]
                lines += ["    " + x[:300] for x in shown]
        lines += ["scenario (s.toml):", "```toml", self.toml.rstrip(), "```"]
        return "\n".join(lines)


ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
PATH_RE = re.compile(r"(?<![\w.\]/-])([A-Za-z_][\w-]*(?:\[\d+\])*(?:\.[A-Za-z_][\w-]*(?:\[\d+\])*)*)")


def _schema_keys() -> tuple[set[str], set[str]]:
    tops = set(strategies.root_spec().fields)
    every: set[str] = set()
    seen = set()

    def walk(ms):
        if ms.name in seen:
            return
        seen.add(ms.name)
        for k, f in ms.fields.items():
            every.add(k)
            every.add(f.name)
            for t in _types(f.type):
                if t.kind == "model":
                    walk(t.model)

    walk(strategies.root_spec())
    return tops, every


def _types(t):
    yield t
    if t.item is not None:
        yield from _types(t.item)
    for o in t.options:
        yield from _types(o)


def names_field(message: str, scenario: dict | None = None) -> bool:
    """Whether an error message names a field. Messages read
    ``[FILE.toml: ]LOCATION: RULE``; the location must start at a top-level
    key (``traffic[0].load``, ``topology``, ``flows_csv row 2.dst``), or a
    dotted path from a top-level key must appear in the message, or a schema
    field name must be followed by a colon (``... src: ...``)."""
    tops, every = _schema_keys()
    if re.search(r": unknown field\b", message):  # "<where>: unknown field" names the (odd) key itself
        return True
    if isinstance(scenario, dict):
        tops |= {str(k) for k in scenario}
    rest = re.sub(r"^\s*\S+\.(?:toml|json|csv)(?: row \d+)?: ", "", message)
    loc = rest.split(": ", 1)[0] if ": " in rest else ""
    m = re.match(r"([A-Za-z_][\w-]*)", loc)
    if m and m.group(1) in tops:
        return True
    for m in PATH_RE.finditer(message):
        p = m.group(1)
        after = message[m.end():m.end() + 1]
        parts = [x for x in re.split(r"\.|\[\d+\]", p) if x]
        if not parts:
            continue
        if parts[0] in tops and (len(parts) > 1 or "[" in p or after in (":", ".", "[")):
            return True
        if parts[-1] in every and after == ":":
            return True
    return False


def _exc_type(text: str) -> str:
    """The exception type of a traceback or an 'internal error: X: ...' line."""
    m = re.search(r"internal error[^:]*:\s*([A-Za-z_][\w.]*)(?::|\s|$)", text)
    if m:
        return m.group(1)
    lines = [x for x in text.strip().splitlines() if x and not x.startswith(" ")]
    for x in reversed(lines):
        m = re.match(r"([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Panic\w*))\b", x)
        if m:
            return m.group(1)
    return "?"


def _panic_site(text: str) -> str:
    m = re.search(r"panicked at ([^\n:]+(?::\d+)?)", text)
    return m.group(1).strip() if m else "?"


def _core_frame(text: str) -> str:
    """The innermost fabriclab frame of a Rust backtrace, if there is one."""
    m = re.search(r"^\s*\d+: (fabriclab\w*::[^\n]*)$", text, re.M)
    return re.sub(r"::\{\{closure\}\}|<.*?>", "", m.group(1)).strip() if m else ""


def _death_note(text: str) -> str:
    """The line that says why a process died."""
    for pat in (r"memory allocation of \d+ bytes failed", r"panicked at [^\n]*", r"Fatal Python error: [^\n]*",
                r"MemoryError[^\n]*", r"Segmentation fault[^\n]*"):
        m = re.search(pat, text)
        if m:
            return re.sub(r"\d{4,}", "N", m.group(0)) if pat.startswith("memory") else m.group(0)
    return ""


def _error_lines(text: str) -> list[str]:
    return [x for x in ANSI.sub("", text).splitlines() if x.startswith("error: ")]


def _error_message(text: str) -> str:
    """The 'error: ' line and its continuation lines (multi-error messages)."""
    lines = ANSI.sub("", text).splitlines()
    for i, x in enumerate(lines):
        if x.startswith("error: "):
            j = i + 1
            while j < len(lines) and lines[j].startswith("  "):
                j += 1
            return "\n".join(lines[i:j])
    return ""


def is_memory_refusal(text: str) -> bool:
    return "memory" in _error_message(text).lower()


def check_result(r: Result, scenario: dict, out_dir: Path | None) -> list[Violation]:
    v: list[Violation] = []
    c = r.cmd
    text = r.output
    first = (ANSI.sub("", r.stderr).strip().splitlines() or [""])[-1][:300]
    if r.timed_out:
        return [Violation("timeout", f"no answer within the time bound ({r.wall_s:.1f} s)", c)]
    if r.rc is not None and r.rc < 0:
        try:
            name = signal.Signals(-r.rc).name
        except ValueError:
            name = str(-r.rc)
        note, frame = _death_note(text), _core_frame(text)
        key = f"signal: {name}" + (f": {note}" if note.startswith("memory") else "") + (f" @ {frame}" if frame else "")
        return [Violation(key, note or first, c)]
    if "panicked at" in text:
        v.append(Violation(f"panic: {_panic_site(text)}", first, c))
    if "Traceback" in text:
        v.append(Violation(f"traceback: {_exc_type(text)}", first, c))
    if r.rc == 3:
        v.append(Violation(f"internal-error: {_exc_type(r.stderr)}", first, c))
    elif r.rc not in (0, 2):
        v.append(Violation(f"exit-{r.rc}", first, c))
    if r.rc == 2:
        msg = _error_message(r.stderr)
        if not msg:
            v.append(Violation("exit2-without-error-line", first, c))
        elif not names_field(msg[len("error: "):], scenario):
            v.append(Violation("exit2-message-names-no-field", msg[:300], c))
    if c == "run" and out_dir is not None:
        leftovers = sorted(p.name for p in out_dir.parent.iterdir() if p.name.startswith(f".{out_dir.name}"))
        if leftovers:
            v.append(Violation("leftover-temporary", ", ".join(leftovers), c))
        if r.rc == 2 and out_dir.exists():
            v.append(Violation("out-dir-after-refusal", str(sorted(x.name for x in out_dir.iterdir())), c))
        if r.rc == 0:
            missing = [n for n in expected_outputs(scenario, out_dir) if not (out_dir / n).is_file()]
            if missing:
                v.append(Violation("missing-output", ", ".join(missing), c))
    return v


def expected_outputs(scenario: dict, out_dir: Path | None = None) -> list[str]:
    """The files a successful run writes. ``[outputs]`` is read from the
    resolved scenario when there is one (it holds the validated values:
    ``links = 0`` means false)."""
    outs = scenario.get("outputs") if isinstance(scenario.get("outputs"), dict) else {}
    resolved = out_dir / "scenario.resolved.toml" if out_dir is not None else None
    if resolved is not None and resolved.is_file():
        try:
            from fabriclab.util.toml import tomllib

            outs = tomllib.loads(resolved.read_text()).get("outputs", {})
        except Exception:
            pass
    tables = [f"{t}.parquet" for t in ("flows", "links") if outs.get(t, True) is not False]
    if isinstance(scenario.get("recovery"), dict):
        # A run with [recovery] writes its cycles and the job's iterations, and each
        # segment's own results under segments/<k>/ (docs/c4-recovery.md): the first at least.
        return ["summary.json", "scenario.resolved.toml", "recovery.parquet", "jobs.parquet",
                "segments/1/summary.json", *(f"segments/1/{t}" for t in tables)]
    return ["summary.json", "scenario.resolved.toml", *tables]


def check_scenario(scenario: dict, runner, workdir: Path, cfg: Config | None = None, toml: str | None = None) -> Outcome:
    """Validates and runs one scenario (both at once) and checks the contract."""
    cfg = cfg or getattr(runner, "cfg", None) or Config.from_env()
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    fixtures.write_fixtures(workdir)
    if toml is None:
        toml = strategies.to_toml(scenario)
    scen = workdir / SCENARIO_NAME
    scen.write_text(toml)
    out = workdir / OUT_NAME
    o = Outcome(scenario=scenario, toml=toml, workdir=workdir)
    o.validate, o.run = runner.invoke_many([
        Call(["validate", str(scen)], str(workdir)),
        Call(["run", str(scen), "--out", str(out), "-q"], str(workdir)),
    ])
    o.violations += check_result(o.validate, scenario, None)
    o.violations += check_result(o.run, scenario, out)
    v, r = o.validate, o.run
    if v.rc == 0 and r.rc == 2 and not is_memory_refusal(r.stderr):
        o.violations.append(Violation("validate-ok-but-run-refused", _error_message(r.stderr)[:300]))
    if v.rc == 2 and r.rc == 0:
        o.violations.append(Violation("validate-refused-but-run-ok", _error_message(v.stderr)[:300]))
    if cfg.check_resolved and r.rc == 0 and (out / "scenario.resolved.toml").is_file():
        o.violations += _check_resolved(out / "scenario.resolved.toml", workdir)
    return o


def _check_resolved(path: Path, base: Path) -> list[Violation]:
    """docs/scenario.md: scenario.resolved.toml is the same scenario with the
    defaults filled in, plus the fabriclab version; running it again gives
    the same results. Checked in this process: it validates and resolves
    (files, host indices) from where it was written."""
    from fabriclab.util.toml import tomllib
    from fabriclab.scenario.model import Scenario

    out: list[Violation] = []
    raw = tomllib.loads(path.read_text())
    if "fabriclab_version" in raw:
        try:
            Scenario.from_dict(dict(raw))
        except Exception as e:
            if "fabriclab_version" in str(e):
                out.append(Violation("resolved-toml-refuses-its-fabriclab_version", str(e)[-200:], "run"))
        raw.pop("fabriclab_version")
    try:
        s = Scenario.from_dict(raw)
        s._base_dir = path.parent
        core_spec(s)
    except Exception as e:
        msg = re.sub(r"/\S+/", ".../", str(e))
        m = re.match(r"(?:\S+\.toml: )?([\w.\[\]]+):", msg)
        out.append(Violation(f"resolved-toml-does-not-resolve: {m.group(1) if m else type(e).__name__}",
                             msg[:300], "run"))
    return out


def kind_of(o: Outcome) -> list[str]:
    return [v.kind for v in o.violations]


# --------------------------------------------------------------------------- minimising a failure


def minimize(scenario: dict, kind: str, runner, workdir: Path, budget_s: float = 120.0,
             log=lambda s: None) -> dict:
    """Greedy delta debugging: drops keys and list items, shortest paths
    first, while the violation ``kind`` persists (each try runs the CLI)."""
    import copy

    t_end = time.monotonic() + budget_s
    best = copy.deepcopy(dict(scenario))

    def still(d) -> bool:
        try:
            strategies.to_toml(d)
        except Exception:
            return False
        o = check_scenario(d, runner, workdir)
        return kind in kind_of(o)

    changed = True
    while changed and time.monotonic() < t_end:
        changed = False
        paths = sorted((p for p, _ in mutations._walk(best)), key=len)
        for p in paths:
            if time.monotonic() >= t_end:
                break
            cand = copy.deepcopy(best)
            try:
                cp = mutations._get(cand, p[:-1])
                if isinstance(cp, list):
                    cp.pop(p[-1])
                else:
                    del cp[p[-1]]
            except (KeyError, IndexError, TypeError):
                continue
            if still(cand):
                best = cand
                changed = True
                log(f"dropped {mutations._fmt(p)}")
                break
    return best


# --------------------------------------------------------------------------- command line


def _main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("replay", "minimize"):
        p = sub.add_parser(name)
        p.add_argument("toml", type=Path)
        p.add_argument("--mode", choices=["worker", "subprocess"], default=None)
        p.add_argument("--timeout", type=float, default=None)
        p.add_argument("--keep", action="store_true", help="keep the work folder")
        if name == "minimize":
            p.add_argument("--kind", default=None, help="violation kind to keep (default: the first one)")
            p.add_argument("--budget", type=float, default=300.0, help="seconds")
    a = ap.parse_args(argv)
    cfg = Config.from_env()
    if a.mode:
        cfg.mode = a.mode
    if a.timeout:
        cfg.timeout_s = a.timeout
    from fabriclab.util.toml import tomllib

    text = a.toml.read_text()
    scenario = tomllib.loads(text)
    runner = make_runner(cfg)
    work = Path(tempfile.mkdtemp(prefix="fabriclab-fuzz-replay-"))
    try:
        o = check_scenario(scenario, runner, work / "case", cfg, toml=text)
        print("contract holds" if o.ok else "CONTRACT VIOLATED")
        print(o.report())
        if a.cmd == "minimize" and not o.ok:
            kind = a.kind or o.violations[0].kind
            print(f"\nminimizing for {kind!r} ...", flush=True)
            small = minimize(scenario, kind, runner, work / "min", a.budget, log=lambda s: print("  " + s, flush=True))
            print(strategies.to_toml(small))
        return 0 if o.ok else 1
    finally:
        runner.close()
        if a.keep:
            print(f"work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

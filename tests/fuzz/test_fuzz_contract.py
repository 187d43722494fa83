"""Fuzzing the scenario contract (issue 8): every scenario file ends in exit 0
with the outputs, or exit 2 with one ``error: `` line naming a field and
nothing written — never a traceback, a panic, a signal, exit 1 or 3, or a
hang. See tests/fuzz/README.md.

Budget (environment):

* default (CI): 40 mutated + 15 valid examples, ``derandomize=True`` and no
  example database, so every run tries the same examples; about a minute on
  two cores while the contract holds (a call that hangs costs its timeout).
* ``FABRICLAB_FUZZ_EXAMPLES=2000 python -m pytest tests/fuzz -q``: that many
  examples, 40:15 mutated:valid, fresh random ones every run.
* ``FABRICLAB_FUZZ_SECONDS=600 python -m pytest tests/fuzz -q``: as many as fit
  in ten minutes (70% mutated, 30% valid), fresh random ones every run.
* ``FABRICLAB_FUZZ_SEED=N``: reproducible examples with either of the two above.
* ``FABRICLAB_FUZZ_SHRINK=1``: raise at the first violation of each kind and
  let Hypothesis shrink it (slow: every step runs the CLI). By default every
  example runs, violations are collected, and the test fails at the end with
  one example per kind (the smallest seen).
* ``FABRICLAB_FUZZ_ARTIFACTS=DIR``: where failing scenarios are written
  (default: a pytest temporary folder; the failure message names it).
* Harness settings — ``FABRICLAB_FUZZ_MODE=subprocess`` (one CLI process per
  call instead of the in-process workers), ``FABRICLAB_FUZZ_TIMEOUT`` (60 s),
  ``FABRICLAB_FUZZ_MEMORY`` (3G), ``FABRICLAB_FUZZ_PARALLEL`` (2): see harness.py.

Failures print the TOML of the failing scenario; replay one with
``python tests/fuzz/harness.py replay FILE.toml``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import mutations  # noqa: E402
import strategies  # noqa: E402

ENV = os.environ
EXAMPLES = int(ENV["FABRICLAB_FUZZ_EXAMPLES"]) if ENV.get("FABRICLAB_FUZZ_EXAMPLES") else None
SECONDS = float(ENV["FABRICLAB_FUZZ_SECONDS"]) if ENV.get("FABRICLAB_FUZZ_SECONDS") else None
SEED = int(ENV["FABRICLAB_FUZZ_SEED"]) if ENV.get("FABRICLAB_FUZZ_SEED") else None
SHRINK = ENV.get("FABRICLAB_FUZZ_SHRINK", "") not in ("", "0")
ON_DEMAND = EXAMPLES is not None or SECONDS is not None
# CI: a soft cap per test so a run with many hangs still ends (it says so).
CI_CAP_S = 600.0

MUTATED_SHARE = 40 / 55


def _budget(family: str) -> tuple[int, float | None]:
    """(max examples, seconds or None) for a family."""
    share = MUTATED_SHARE if family == "mutated" else 1 - MUTATED_SHARE
    if SECONDS is not None:
        share = 0.7 if family == "mutated" else 0.3
        return 10**9, SECONDS * share
    if EXAMPLES is not None:
        return max(1, round(EXAMPLES * share)), None
    return (40 if family == "mutated" else 15), CI_CAP_S


# --------------------------------------------------------------------------- collecting


def _fields(muts: list[str]) -> str:
    """The fields a scenario's mutations touched ("number traffic[0].load = nan" -> "number traffic[].load")."""
    out = []
    for m in muts:
        parts = m.split()
        if len(parts) > 1:
            f = f"{parts[1]} at {parts[3]}" if parts[0] == "cross" and len(parts) > 3 and parts[2] == "at" else parts[1]
            out.append(parts[0] + " " + re.sub(r"\[\d+\]", "[]", f))
    return ", ".join(dict.fromkeys(out)) or "(valid scenario)"


class Collector:
    def __init__(self, family: str, artifacts: Path):
        self.family = family
        self.artifacts = artifacts
        self.n = 0
        self.wall = 0.0
        self.rcs: dict[str, dict] = {"validate": {}, "run": {}}
        self.kinds: dict[str, dict] = {}  # kind -> {count, cmds, fields: {..: n}, best: Outcome}
        self.stopped_early = False
        self.duplicates = 0
        self.hang_s = 0.0  # time spent waiting for calls that timed out
        self.refusals: dict[str, int] = {}  # valid family: what refused them
        self.t0 = time.perf_counter()

    def add(self, o: harness.Outcome) -> None:
        self.n += 1
        if o.validate.timed_out or o.run.timed_out:  # the two calls run at once
            self.hang_s += max(o.validate.wall_s, o.run.wall_s)
        for r in (o.validate, o.run):
            key = "timeout" if r.timed_out else str(r.rc)
            self.rcs[r.cmd][key] = self.rcs[r.cmd].get(key, 0) + 1
        if self.family == "valid":
            for r in (o.validate, o.run):
                if r.rc == 2:
                    msg = re.sub(r"^error: \S+\.toml: ", "", harness._error_message(r.stderr))
                    msg = re.sub(r"\d+", "N", msg)[:120]
                    self.refusals[msg] = self.refusals.get(msg, 0) + 1
        fields = _fields(getattr(o.scenario, "mutations", []))
        kinds: dict[str, set] = {}
        for v in o.violations:
            kinds.setdefault(v.kind, set()).add(v.cmd or "validate+run")
        for kind, cmds in kinds.items():
            k = self.kinds.setdefault(kind, {"count": 0, "cmds": set(), "fields": {}, "best": o})
            k["count"] += 1
            k["cmds"] |= cmds
            k["fields"][fields] = k["fields"].get(fields, 0) + 1
            if len(o.toml) < len(k["best"].toml):
                k["best"] = o

    def per_minute(self, without_hangs: bool = False) -> float:
        el = time.perf_counter() - self.t0 - (self.hang_s if without_hangs else 0.0)
        return 60 * self.n / el if el > 0 else 0.0

    def stats(self) -> str:
        el = time.perf_counter() - self.t0
        return (f"fuzz {self.family}: {self.n} examples ({self.duplicates} repeats skipped) in {el:.1f} s "
                f"({self.per_minute():.0f}/min; {self.per_minute(True):.0f}/min without the {self.hang_s:.0f} s of "
                f"timeouts; mode "
                f"{harness.Config.from_env().mode}); exit codes validate {self.rcs['validate']}, run {self.rcs['run']}; "
                f"{len(self.kinds)} violation kinds" + ("; stopped early: time budget" if self.stopped_early else ""))

    def write(self) -> None:
        self.artifacts.mkdir(parents=True, exist_ok=True)
        summary = {"family": self.family, "examples": self.n, "seconds": time.perf_counter() - self.t0,
                   "per_minute": self.per_minute(),
                   "per_minute_without_timeouts": self.per_minute(True), "timeout_seconds": self.hang_s, "exit_codes": self.rcs, "mode": harness.Config.from_env().mode,
                   "duplicates_skipped": self.duplicates, "valid_refusals": self.refusals, "kinds": {}}
        for i, (kind, k) in enumerate(sorted(self.kinds.items())):
            slug = re.sub(r"[^A-Za-z0-9]+", "-", kind).strip("-")[:80]
            path = self.artifacts / f"{self.family}-{i:02d}-{slug}.toml"
            o = k["best"]
            head = [f"# {v.kind} ({v.cmd}): {v.detail[:200]}" for v in o.violations]
            head += [f"# mutation: {m}" for m in getattr(o.scenario, "mutations", [])]
            path.write_text("\n".join(x.replace("\n", " ") for x in head) + "\n" + o.toml)
            summary["kinds"][kind] = {"count": k["count"], "commands": sorted(k["cmds"]), "fields": k["fields"],
                                      "example": path.name}
            k["file"] = path
        (self.artifacts / f"{self.family}-summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    def failure_report(self) -> str:
        lines = [self.stats(), f"failing scenarios written to {self.artifacts} "
                 f"(replay: python tests/fuzz/harness.py replay FILE.toml)", ""]
        for kind, k in sorted(self.kinds.items(), key=lambda kv: -kv[1]["count"]):
            fields = "; ".join(f"{f} ({n})" for f, n in sorted(k["fields"].items(), key=lambda x: -x[1])[:6])
            lines += [f"== {kind}  [{'/'.join(sorted(k['cmds']))}; {k['count']} examples; mutated: {fields}]",
                      k["best"].report(), ""]
        return "\n".join(lines)


_EXC: dict[str, type] = {}


def _violation_exception(kind: str) -> type:
    """One exception class per violation kind, so that Hypothesis shrinks and
    reports each kind separately (FABRICLAB_FUZZ_SHRINK=1)."""
    if kind not in _EXC:
        _EXC[kind] = type("ContractViolation_" + re.sub(r"\W+", "_", kind), (AssertionError,), {})
    return _EXC[kind]


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def runner():
    r = harness.make_runner()
    yield r
    r.close()


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> Path:
    if ENV.get("FABRICLAB_FUZZ_ARTIFACTS"):
        p = Path(ENV["FABRICLAB_FUZZ_ARTIFACTS"])
        p.mkdir(parents=True, exist_ok=True)
        return p
    return tmp_path_factory.mktemp("fuzz-failures")


def _say(request, text: str) -> None:
    """One line on the terminal even when the test passes and output is captured."""
    pm = request.config.pluginmanager
    tr, capman = pm.get_plugin("terminalreporter"), pm.get_plugin("capturemanager")
    if tr is None or capman is None:
        print(text)
        return
    with capman.global_and_fixture_disabled():
        tr.write_line("")
        tr.write_line(text)


def _fuzz(request, runner, artifacts: Path, tmp_path: Path, family: str, strategy) -> None:
    n, seconds = _budget(family)
    col = Collector(family, artifacts)
    t_end = None if seconds is None else time.monotonic() + seconds
    counter = [0]
    seen: dict[str, harness.Outcome] = {}  # Hypothesis may draw the same scenario again: run each once

    def one(scenario) -> None:
        if t_end is not None and time.monotonic() >= t_end:
            col.stopped_early = SECONDS is None
            return
        toml = strategies.to_toml(scenario)
        o = seen.get(toml)
        if o is not None:
            col.duplicates += 1
        else:
            counter[0] += 1
            o = seen[toml] = harness.check_scenario(scenario, runner, tmp_path / f"ex{counter[0] % 4}", toml=toml)
            col.add(o)
        if SHRINK and not o.ok:
            raise _violation_exception(o.violations[0].kind)(o.report())

    rounds = 1 if SECONDS is None else 10**9  # with a time budget: fresh batches until it is spent
    batch = n if SECONDS is None else 25
    try:
        for rnd in range(rounds):
            test = settings(
                max_examples=batch,
                deadline=None,
                database=None,
                derandomize=not ON_DEMAND,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if SHRINK else []),
                print_blob=SHRINK,
            )(given(strategy)(one))
            if SEED is not None and ON_DEMAND:
                test = seed(SEED + rnd)(test)
            test()
            if t_end is None or time.monotonic() >= t_end:
                break
    finally:
        col.write()
        _say(request, col.stats())
    if col.kinds:
        pytest.fail(col.failure_report(), pytrace=False)


def test_mutated_scenarios_keep_the_contract(request, runner, artifacts, tmp_path):
    """Scenarios with 1-3 mutations: exit 0, or exit 2 naming a field."""
    _fuzz(request, runner, artifacts, tmp_path, "mutated", mutations.mutated_scenarios())


def test_valid_scenarios_keep_the_contract(request, runner, artifacts, tmp_path):
    """Small valid scenarios: they should mostly run (exit 0); any refusal
    must name a field, and validate and run must agree."""
    _fuzz(request, runner, artifacts, tmp_path, "valid", strategies.valid_scenarios())

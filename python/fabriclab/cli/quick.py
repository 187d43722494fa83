"""The quick path of `fabriclab run` and `fabriclab validate` (issue 13:
start-up): a plain command line of one of these two commands is parsed here
and run without importing typer, click's copy, rich or the other commands'
modules (about 0.08 s of CPU of every run). Anything else (help, another
command, an unknown or repeated option, a value typer would refuse or read
differently) returns None and goes to the typer application in main.py,
which then gives its usual answer. Errors raised while running go to main.py's
handler: the same message and exit code either way."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import Optional

# Per command: options taking a value (name -> parameter), flags (name -> parameter).
_VALUED = {
    "run": {"--out": "out_dir", "--seed": "seed", "--backend": "backend", "--memory-limit": "memory_limit"},
    "validate": {"--memory-limit": "memory_limit"},
}
_FLAGS = {"run": {"--force": "force", "--quiet": "quiet", "-q": "quiet"}, "validate": {}}


def parse(argv: list[str]) -> Optional[tuple[str, dict]]:
    """(command, its parameters) of a plain `run` or `validate` line, else None."""
    if not argv or argv[0] not in _VALUED:
        return None
    cmd, rest = argv[0], argv[1:]
    valued, flags = _VALUED[cmd], _FLAGS[cmd]
    given: dict = {}
    positional: list[str] = []
    i = 0
    while i < len(rest):
        tok = rest[i]
        i += 1
        if not tok.startswith("-"):
            positional.append(tok)
            continue
        name, eq, value = tok.partition("=")
        if name in valued and not eq:
            if i == len(rest) or rest[i].startswith("-"):
                return None  # typer's own message for a missing value
            value = rest[i]
            i += 1
        elif name not in valued and (name not in flags or eq):
            return None  # --help, "-", "--", unknown options, short-flag groups
        param = valued.get(name) or flags[name]
        if param in given:
            return None  # repeated: typer keeps the last
        given[param] = value if name in valued else True
    if len(positional) > 1 or (cmd == "validate" and not positional):
        return None
    if "seed" in given:
        try:
            given["seed"] = int(given["seed"])  # as click's INT type converts it
        except ValueError:
            return None
    scenario = Path(positional[0]) if positional else None
    if cmd == "validate":
        return cmd, {"scenario": scenario, "memory_limit": given.get("memory_limit")}
    return cmd, {
        "scenario": scenario,
        "out_dir": Path(given.get("out_dir", "fabriclab-out")),
        "force": given.get("force", False),
        "seed": given.get("seed"),
        "backend": given.get("backend"),
        "quiet": given.get("quiet", False),
        "memory_limit": given.get("memory_limit"),
    }


def run(argv: list[str]) -> Optional[int]:
    """Runs a plain `run` or `validate` line; its exit code, or None when
    the line is for the typer application."""
    parsed = parse(argv)
    if parsed is None:
        return None
    cmd, params = parsed
    # pydantic looks for plugins (observability hooks named in entry points)
    # when it builds the first model, reading the entry points of every
    # installed distribution: 11-14 ms of every start on a machine with 143
    # of them (issue 13). fabriclab uses none; a user who wants theirs sets
    # PYDANTIC_DISABLE_PLUGINS (empty keeps them all), which this respects.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from . import commands

    try:
        getattr(commands, cmd)(**params)
        return 0
    except KeyboardInterrupt:
        return 130  # as typer's runner: Exit(130), nothing printed
    except BaseException as e:
        if isinstance(e, OSError) and e.errno == errno.EPIPE:
            return 1  # as typer's runner: a closed pipe exits 1
        if isinstance(e, EOFError):  # as typer's runner: a new line, then Abort
            print(file=sys.stderr)
            from typer import Abort

            e = Abort()
        from .main import _exit_code_for

        return _exit_code_for(e)


def exit_now(rc: int) -> None:
    """Ends the process after a quick-path command without the interpreter's
    teardown (issue 13: freeing every module and object of pydantic, numpy
    and pyarrow one by one took 0.03-0.05 s of CPU of a 0.6 s run, measured
    with perf stat, 8 runs each, alternating). By then the command has
    written and closed its files and renamed its output folder into place,
    and no thread of ours is working: only the standard streams are left to
    flush. A stream that cannot be flushed (a closed pipe) exits 1, as
    typer's runner does; a closed descriptor (no stream) is skipped. Under a
    profiler, a tracer or coverage the process exits normally, so that their
    exit handlers write their data."""
    if sys.getprofile() is not None or sys.gettrace() is not None or "coverage" in sys.modules:
        sys.exit(rc)
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            rc = rc or 1
    os._exit(rc)


def main() -> None:
    """The `fabriclab` console script: the quick path, else cli.main."""
    rc = run(sys.argv[1:])
    if rc is not None:
        exit_now(rc)
    from .main import main as cli_main

    cli_main()

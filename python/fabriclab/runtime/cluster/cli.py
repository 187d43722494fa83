"""`fabriclab cluster up/down/status/exec`: the cluster-in-a-box (docs/cluster.md).
`register(app)` adds them to the main CLI; bad input is ClusterError (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

NAME = typer.Option("box", "--name", help="The cluster's name (1..12 lowercase letters or digits).")


def register(app: typer.Typer) -> typer.Typer:
    """Adds `fabriclab cluster ...`; returns its Typer (systems add `cluster select` to it)."""
    cluster_app = typer.Typer(no_args_is_help=True, help="Cluster-in-a-box: hosts as network namespaces, tc-shaped links.")
    app.add_typer(cluster_app, name="cluster")

    @cluster_app.command("up")
    def up_cmd(
        scenario: Path = typer.Argument(..., help="Scenario file: its [topology] and [queue] shape the box."),
        name: str = NAME,
        allow_missing: bool = typer.Option(False, "--allow-missing", help="Build without what this kernel lacks "
                                           "(netem delays, red ECN marking, the congestion control); status lists it."),
        gso: bool = typer.Option(False, "--gso", help="Keep the kernel's GSO super-packets: cheaper on CPU, but tc "
                                 "counts the 24 bytes of preamble, gap and FCS once per super-packet (up to 1.6 %% "
                                 "more goodput than the rate allows)."),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Print every command run."),
        timens: bool = typer.Option(False, "--timens", help="Give every host a time namespace: its CLOCK_MONOTONIC "
                                    "reads a known offset (seeded within ±--mono-offset-spread-ns, or "
                                    "--mono-offsets-ns) more than the machine's; CLOCK_REALTIME is not moved."),
        mono_offsets_ns: str = typer.Option(None, "--mono-offsets-ns", help="The hosts' CLOCK_MONOTONIC offsets, ns, "
                                            "comma-separated, h0 first (implies --timens)."),
        mono_offset_spread_ns: int = typer.Option(1_000_000_000, "--mono-offset-spread-ns", help="With --timens: "
                                                  "offsets drawn uniformly within ±this (ns)."),
        seed: int = typer.Option(0, "--seed", help="With --timens: the seed of the drawn offsets."),
    ) -> None:
        """Build the box (as root): one namespace per host and switch, veth links, routes, tc on every link end."""
        from .apply import ClusterFailure, up

        offsets = _mono_offsets(scenario, mono_offsets_ns, mono_offset_spread_ns, seed) \
            if (timens or mono_offsets_ns is not None) else None
        try:
            state = up(str(scenario), name, allow_missing, gso, log=typer.echo if verbose else None,
                       mono_offsets_ns=offsets)
        except ClusterFailure as e:
            typer.echo(f"error: {e} (the box was removed again)", err=True)
            raise typer.Exit(1) from None
        typer.echo(_summary(state))

    @cluster_app.command("down")
    def down_cmd(
        name: str = NAME,
        all_: bool = typer.Option(False, "--all", help="Remove every cluster (every state file and namespace "
                                  "named flbox-*)."),
    ) -> None:
        """Remove the box: its namespaces (with their veths, routes and qdiscs) and its state file; also after a crash."""
        from .apply import ClusterFailure, check_can_build, names, remove
        from .plan import check_name

        check_name(name)
        check_can_build()
        try:
            gone = [ns for n in (names() if all_ else [name]) for ns in remove(n)]
        except ClusterFailure as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1) from None
        typer.echo(f"removed {len(gone)} namespace(s)" + (f": {' '.join(gone)}" if gone else ""))

    @cluster_app.command("status")
    def status_cmd(name: str = typer.Option(None, "--name", help="Only this cluster.")) -> None:
        """The clusters that are up: hosts, addresses, links, what is not emulated."""
        import json

        from .apply import list_namespaces, load_state, names, state_path
        from .plan import PREFIX

        chosen = [name] if name else names()
        if not chosen:
            typer.echo("no cluster is up")
        for n in chosen:
            if not state_path(n).exists():
                left = list_namespaces(f"{PREFIX}{n}-")
                typer.echo(f"cluster {n}: no state file; leftover namespaces: {' '.join(left) or 'none'} "
                           f"(fabriclab cluster down --name {n} removes them)")
                continue
            state = load_state(n)
            typer.echo(_summary(state))
            present = set(list_namespaces(f"{PREFIX}{n}-"))
            missing = [ns for ns in state["namespaces"] if ns not in present]
            if missing:
                typer.echo(f"  namespaces missing: {' '.join(missing)}")
            if name:
                typer.echo(json.dumps(state.get("links", []), indent=1))

    @cluster_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def exec_cmd(
        host: str = typer.Argument(..., help="h0, h1, ... (or 0, 1, ...); or a switch: sw, leaf0, spine0."),
        cmd: List[str] = typer.Argument(None, metavar="-- CMD ...", help="The command to run in its namespace."),
        name: str = NAME,
    ) -> None:
        """Run a command in a host's (or switch's) namespace."""
        import os

        from .apply import host_ns, load_state
        from .plan import ClusterError
        from .timens import prefix

        state = load_state(name)
        ns = host_ns(state, host)
        if not cmd:
            raise ClusterError("CMD: give the command after --, e.g. fabriclab cluster exec h0 -- ip addr")
        entry = next((h for h in state.get("hosts", []) if h["ns"] == ns), {"ns": ns})
        try:
            os.execvp("ip", [*prefix(entry), *cmd])
        except OSError as e:
            raise ClusterError(f"CMD: cannot run ip netns exec: {e.strerror}") from None

    return cluster_app


def _mono_offsets(scenario: Path, given: str | None, spread_ns: int, seed: int) -> list[int]:
    """The hosts' CLOCK_MONOTONIC offsets: given, or drawn (seeded) within ±spread."""
    import numpy as np

    from ...scenario.model import Scenario
    from .plan import ClusterError, build_plan

    n = len(build_plan(Scenario.load(str(scenario)), "x").hosts)
    if given is not None:
        try:
            out = [int(v) for v in given.split(",") if v.strip()]
        except ValueError:
            raise ClusterError(f"--mono-offsets-ns: {given!r} is not a comma-separated list of integers (ns)") from None
        if len(out) != n:
            raise ClusterError(f"--mono-offsets-ns: give one offset per host ({n}), got {len(out)}")
        return out
    if not 0 <= spread_ns <= 10**15:
        raise ClusterError(f"--mono-offset-spread-ns: must be within 0..1e15 ns, got {spread_ns}")
    return [int(v) for v in np.random.default_rng(seed).integers(-spread_ns, spread_ns, n, endpoint=True)]


def _summary(state: dict) -> str:
    hosts = state.get("hosts", [])
    lines = [f"cluster {state['name']}: {state['status']}, {state['kind']}, {len(hosts)} hosts "
             f"(scenario {state['scenario']}){', GSO on' if state.get('gso') else ''}"]
    for h in hosts:
        tn = f"  CLOCK_MONOTONIC {h['mono_offset_ns']:+,} ns (time namespace {h['timens']})" if h.get("timens") else ""
        lines.append(f"  {h['label']:>4}  {h['addr']:<12}  ip netns exec {h['ns']} ...{tn}")
    for o in state.get("others", []):
        what = f"noisy neighbour on {o['machine']}, {o['rate_bps'] / 1e6:g} Mbit/s to ext" if o["role"] == "neighbour" \
            else "the neighbours' sink"
        lines.append(f"  {o['label']:>4}  {o['addr']:<12}  {what}")
    rates = sorted({(lk["rate_bps"], lk["delay_ps"]) for lk in state.get("links", [])})
    for r, d in rates:
        lines.append(f"  links: {r / 1e6:g} Mbit/s, {d / 1e6:g} us delay per direction")
    for o in state.get("omitted", []):
        lines.append(f"  not emulated: {o}")
    if state["status"] != "up":
        lines.append(f"  (creation did not finish: pid {state.get('pid')}; fabriclab cluster down --name "
                     f"{state['name']} cleans up)")
    return "\n".join(lines)

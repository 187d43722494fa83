"""`fabriclab cluster up/down/status/exec`: the cluster-in-a-box (docs/cluster.md).
`register(app)` adds them to the main CLI; bad input is ClusterError (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

NAME = typer.Option("box", "--name", help="The cluster's name (1..12 lowercase letters or digits).")


def register(app: typer.Typer) -> None:
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
    ) -> None:
        """Build the box (as root): one namespace per host and switch, veth links, routes, tc on every link end."""
        from .apply import ClusterFailure, up

        try:
            state = up(str(scenario), name, allow_missing, gso, log=typer.echo if verbose else None)
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

        state = load_state(name)
        ns = host_ns(state, host)
        if not cmd:
            raise ClusterError("CMD: give the command after --, e.g. fabriclab cluster exec h0 -- ip addr")
        try:
            os.execvp("ip", ["ip", "netns", "exec", ns, *cmd])
        except OSError as e:
            raise ClusterError(f"CMD: cannot run ip netns exec: {e.strerror}") from None


def _summary(state: dict) -> str:
    hosts = state.get("hosts", [])
    lines = [f"cluster {state['name']}: {state['status']}, {state['kind']}, {len(hosts)} hosts "
             f"(scenario {state['scenario']}){', GSO on' if state.get('gso') else ''}"]
    for h in hosts:
        lines.append(f"  {h['label']:>4}  {h['addr']:<12}  ip netns exec {h['ns']} ...")
    rates = sorted({(lk["rate_bps"], lk["delay_ps"]) for lk in state.get("links", [])})
    for r, d in rates:
        lines.append(f"  links: {r / 1e6:g} Mbit/s, {d / 1e6:g} us delay per direction")
    for o in state.get("omitted", []):
        lines.append(f"  not emulated: {o}")
    if state["status"] != "up":
        lines.append(f"  (creation did not finish: pid {state.get('pid')}; fabriclab cluster down --name "
                     f"{state['name']} cleans up)")
    return "\n".join(lines)

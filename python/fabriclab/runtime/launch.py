"""`fabriclab launch`: N local processes with torchrun's variables.

Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR=127.0.0.1, MASTER_PORT (a free port unless given) and a random
FABRICLAB_TOKEN. SIGINT, SIGTERM and SIGHUP are forwarded to every rank.
When a rank fails the others are stopped (SIGTERM, then SIGKILL after a
grace period) and the launcher exits with that rank's code. With ``--cluster NAME``
rank i runs in host i of a cluster-in-a-box (docs/cluster.md)."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time

from .errors import RuntimeInputError

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def free_port(addr: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def rank_env(rank: int, n: int, port: int, token: str, addr: str = "127.0.0.1", base=None) -> dict:
    env = dict(os.environ if base is None else base)
    env.update(RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(n),
               MASTER_ADDR=addr, MASTER_PORT=str(port), FABRICLAB_TOKEN=token)
    return env


def _exit_code(rc: int) -> int:
    return 128 - rc if rc < 0 else rc


def cluster_hosts(name: str, n: int) -> list[dict]:
    """The first ``n`` hosts of cluster-in-a-box ``name`` (docs/cluster.md): rank i runs in host i.
    ``NAME:LABEL,LABEL,...`` picks the hosts and their order (rank i in the i-th label), e.g. the ring
    order `fabriclab cluster select` prints."""
    from .cluster.apply import load_state

    name, _, pick = name.partition(":")
    state = load_state(name, "--cluster")
    hosts = state.get("hosts", [])
    if state.get("status") != "up":
        raise RuntimeInputError(f"--cluster: cluster {name!r} is not up (status {state.get('status')})")
    if pick:
        by_label = {h["label"]: h for h in hosts}
        labels = [x.strip() for x in pick.split(",") if x.strip()]
        unknown = [x for x in labels if x not in by_label]
        if unknown or len(set(labels)) != len(labels):
            what = f"has no host {unknown[0]!r}" if unknown else "is given a host twice"
            raise RuntimeInputError(f"--cluster: {name}:{pick} {what} (its hosts: {', '.join(by_label)})")
        hosts = [by_label[x] for x in labels]
    if n > len(hosts):
        raise RuntimeInputError(f"-n: cluster {name!r} has {len(hosts)} hosts, so at most {len(hosts)} ranks; got {n}")
    return hosts[:n]


def launch(n: int, cmd: list[str], master_port: int | None = None, grace_s: float = 3.0,
           env=None, log=sys.stderr, cluster: str | None = None) -> int:
    """Runs ``cmd`` as ranks 0..n-1; returns 0 if all succeed, else the first failure's exit code.
    With ``cluster``, rank i runs in the box's host i (``ip netns exec``, and ``nsenter --time`` into its time
    namespace when the box has them), MASTER_ADDR is host 0's
    address and FABRICLAB_BIND_ADDR the rank's own."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1024:
        raise RuntimeInputError(f"-n: the number of processes must be within 1..1024, got {n!r}")
    if not cmd:
        raise RuntimeInputError("CMD: give the command to run after --, e.g. fabriclab launch -n 4 -- python train.py")
    if master_port is not None and not 1 <= master_port <= 65535:
        raise RuntimeInputError(f"--master-port: must be within 1..65535, got {master_port}")
    hosts = cluster_hosts(cluster, n) if cluster is not None else None
    from .cluster.timens import prefix as host_prefix
    port = master_port or (29500 if hosts else free_port())  # a fresh namespace: torchrun's default port is free
    token = secrets.token_hex(16)
    procs: list[subprocess.Popen] = []
    old = {s: signal.getsignal(s) for s in FORWARDED}
    stopping = []

    def forward(sig, _frame):
        stopping.append(sig)
        for p in procs:
            if p.poll() is None:
                p.send_signal(sig)

    try:
        for s in FORWARDED:
            signal.signal(s, forward)
        for r in range(n):
            try:
                if hosts:
                    e = rank_env(r, n, port, token, hosts[0]["addr"], base=env)
                    e["FABRICLAB_BIND_ADDR"] = hosts[r]["addr"]
                    argv = [*host_prefix(hosts[r]), *cmd]
                else:
                    e, argv = rank_env(r, n, port, token, base=env), cmd
                procs.append(subprocess.Popen(argv, env=e, start_new_session=True))
            except (FileNotFoundError, PermissionError) as e:
                _stop(procs, grace_s)
                raise RuntimeInputError(f"CMD: cannot run {cmd[0]!r}: {e.strerror}") from None
        failed = None
        while True:
            codes = [p.poll() for p in procs]
            bad = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if bad and failed is None:
                failed = bad[0]
                if not stopping:
                    print(f"fabriclab launch: rank {failed[0]} exited with code {_exit_code(failed[1])}; "
                          "stopping the other ranks", file=log, flush=True)
                _stop(procs, grace_s)
                continue
            if all(c is not None for c in codes):
                break
            time.sleep(0.02)
        return 0 if failed is None else (_exit_code(failed[1]) or 1)
    finally:
        _stop(procs, grace_s)
        for s, h in old.items():
            signal.signal(s, h)


def _stop(procs: list[subprocess.Popen], grace_s: float) -> None:
    alive = [p for p in procs if p.poll() is None]
    for p in alive:
        p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in alive:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

"""Baselines for `fabriclab runtime bench --baseline mpi|gloo`: the same
allreduce sizes, timing and table as the runtime's bench, with mpi4py's
``Allreduce`` (Open MPI over its TCP transport, launched by ``mpirun``) or
torch.distributed's Gloo ``all_reduce``. Installed by
scripts/install-baselines.sh. Each rank checks one run on known inputs
(``#wrong``) and times ``iters`` back-to-back allreduces per size and
placement after ``warmup`` ones and a barrier; the reported time is the
slowest rank's mean, as for the runtime. Out of place, MPI reduces from the
send buffer into the receive buffer; Gloo has no output buffer, so the input
is copied first, as the runtime does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .errors import RuntimeFailure, RuntimeInputError

BASELINES = ("mpi", "gloo")


def _loop(np, dt, sizes, iters, warmup, rank, n, run, barrier) -> list[dict]:
    """Both placements per size, timed and checked as the runtime's own bench does."""
    from .timing import time_placements

    return [time_placements(np, "allreduce", max(1, size // np.dtype(dt).itemsize), dt, rank, n, 0, run,
                            iters, warmup, barrier) for size in sizes]


def _enter_netns_keeping_pmix(ns: str) -> None:
    """Moves this rank into network namespace ``ns`` before MPI_Init while keeping its way to mpirun's
    PMIx server, which listens on 127.0.0.1 of the root namespace (PMIx 4 has no Unix-socket transport):
    sockets stay in the namespace they were made in, so a few are made here first; after setns a
    listener on the namespace's 127.0.0.1 at the server's port relays each connection through one
    (in a child process)."""
    import ctypes
    import re
    import socket
    import threading

    uris = " ".join(v for k, v in os.environ.items() if k.startswith("PMIX_SERVER_URI"))
    ports = sorted({int(p) for p in re.findall(r"tcp4://127\.0\.0\.1:(\d+)", uris)})
    outside = {p: [socket.socket() for _ in range(4)] for p in ports}  # made in the root namespace
    libc = ctypes.CDLL(None, use_errno=True)
    with open(f"/run/netns/{ns}") as f:
        if libc.setns(f.fileno(), 0x40000000) != 0:  # CLONE_NEWNET
            raise OSError(ctypes.get_errno(), f"setns into {ns} failed")

    def pump(a, b):
        try:
            while data := a.recv(1 << 16):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for x in (a, b):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def relay(port, lst):
        while True:
            c, _ = lst.accept()
            o = outside[port].pop()
            o.connect(("127.0.0.1", port))
            for a, b in ((c, o), (o, c)):
                threading.Thread(target=pump, args=(a, b), daemon=True).start()

    listeners = []
    for port in ports:
        lst = socket.socket()
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind(("127.0.0.1", port))
        lst.listen(8)
        listeners.append((port, lst))
    # the relay runs in a child process: MPI_Init holds this process's GIL, so threads here would stall
    if os.fork() == 0:
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL: go with the rank
        for port, lst in listeners:
            threading.Thread(target=relay, args=(port, lst), daemon=True).start()
        threading.Event().wait()
    for _, lst in listeners:
        lst.close()
    for socks in outside.values():
        for x in socks:
            x.close()


def mpi_worker(spec: dict, out_dir: str) -> None:
    import numpy as np

    if spec.get("ns_prefix"):
        _enter_netns_keeping_pmix(spec["ns_prefix"] + "h" + os.environ["OMPI_COMM_WORLD_RANK"])
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    r, n = comm.Get_rank(), comm.Get_size()
    rows = _loop(np, np.dtype(spec["dtype"]).type, spec["sizes"], spec["iters"], spec["warmup"], r, n,
                 lambda src, dst: comm.Allreduce(MPI.IN_PLACE if dst is src else src, dst, op=MPI.SUM), comm.Barrier)
    Path(out_dir, f"rank{r}.json").write_text(json.dumps(rows))


def gloo_worker(spec: dict, out_dir: str) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the launcher
    r, n = dist.get_rank(), dist.get_world_size()

    def allreduce(src, dst):  # torch's all_reduce has no output buffer: copy, then in place
        if dst is not src:
            np.copyto(dst, src)
        dist.all_reduce(torch.from_numpy(dst))  # shares dst's memory

    rows = _loop(np, np.dtype(spec["dtype"]).type, spec["sizes"], spec["iters"], spec["warmup"], r, n,
                 allreduce, dist.barrier)
    Path(out_dir, f"rank{r}.json").write_text(json.dumps(rows))
    dist.destroy_process_group()


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def run_baseline(kind: str, sizes: list[int], n: int, iters: int, warmup: int, dtype: str,
                 master_port: int | None = None, cluster: str | None = None) -> list[dict]:
    """Every rank's rows (timing.time_placements: per size, each placement's mean time and wrong elements)."""
    from .launch import cluster_hosts, launch

    if kind not in BASELINES:
        raise RuntimeInputError(f"--baseline: unknown baseline {kind!r} (known: {', '.join(BASELINES)})")
    if kind == "mpi" and not (_has("mpi4py") and _which("mpirun")):
        raise RuntimeInputError("--baseline: mpi needs mpirun and mpi4py (scripts/install-baselines.sh mpi)")
    if kind == "gloo" and not _has("torch"):
        raise RuntimeInputError("--baseline: gloo needs torch (scripts/install-baselines.sh gloo)")
    spec = {"sizes": sizes, "iters": iters, "warmup": warmup, "dtype": dtype,
            "ns_prefix": cluster_hosts(cluster, n)[0]["ns"][:-len("h0")] if cluster else None}
    with tempfile.TemporaryDirectory(prefix="fabriclab-baseline-") as d:
        code = (f"import sys, json; from fabriclab.runtime.baselines import {kind}_worker; "
                f"{kind}_worker(json.loads(sys.argv[1]), sys.argv[2])")
        cmd = [sys.executable, "-c", code, json.dumps(spec), d]
        if kind == "gloo":
            env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0" if cluster else "lo")
            rc = launch(n, cmd, master_port=master_port, env=env, cluster=cluster)
        else:
            rc = _mpirun(n, cmd, bool(cluster))
        if rc != 0:
            raise RuntimeFailure(f"bench: the {kind} baseline failed (exit code {rc}); its error is printed above",
                                 "bench")
        per_rank = [json.loads(Path(d, f"rank{r}.json").read_text()) for r in range(n)]
    if cluster:
        cluster_hosts(cluster, n)  # still up
    return per_rank


def _which(prog: str) -> bool:
    import shutil

    return shutil.which(prog) is not None


def _mpirun(n: int, cmd: list[str], cluster: bool) -> int:
    """Open MPI over TCP only (btl tcp,self: no shared memory, so ranks talk over the network as in the
    runtime). In a cluster every rank moves into its host's namespace before MPI_Init
    (_enter_netns_keeping_pmix) and MPI's TCP transport uses the box's 10.0.0.0/8 addresses."""
    mca = ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]
    if cluster:
        mca += ["--mca", "btl_tcp_if_include", "10.0.0.0/8"]
    else:
        mca += ["--mca", "btl_tcp_if_include", "lo"]
    argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(n), *mca, *cmd]
    return subprocess.run(argv).returncode

"""Time namespaces for the box's hosts (docs/cluster.md, "Time namespaces").

A Linux time namespace (kernel >= 5.6) shifts CLOCK_MONOTONIC and CLOCK_BOOTTIME of the processes in
it by fixed offsets; CLOCK_REALTIME is not shifted. ``create(path, offset_ns)`` makes one with
CLOCK_MONOTONIC (and CLOCK_BOOTTIME) moved by ``offset_ns`` and keeps it without a process by
bind-mounting its nsfs file on ``path``, as ``ip netns add`` keeps a network namespace:

1. a short-lived child (this interpreter, so that nothing else runs in between) calls
   ``unshare(CLONE_NEWTIME)``: the new namespace becomes its ``time_for_children``, which no process
   has entered yet, so its offsets may still be written;
2. it writes ``monotonic S NS`` and ``boottime S NS`` to ``/proc/self/timens_offsets`` (the kernel
   takes them only before a process enters the namespace);
3. it execs ``mount --bind /proc/self/ns/time_for_children PATH`` (exec keeps the pid, so
   ``/proc/self`` is still the child).

A process enters it with ``nsenter --time=PATH`` (``setns``: it reads the shifted clocks at once).
``remove(path)`` unmounts and deletes the file; the namespace dies with its last user.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .plan import ClusterError

CLONE_NEWTIME = 0x80
_CHILD = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(0x80) != 0:
    e = ctypes.get_errno()
    sys.exit(f"unshare(CLONE_NEWTIME): {os.strerror(e)}")
off = int(sys.argv[2])
s, ns = divmod(off, 10**9)
try:
    with open("/proc/self/timens_offsets", "w") as f:
        f.write(f"monotonic {s} {ns}\nboottime {s} {ns}\n")
except OSError as e:
    sys.exit(f"writing /proc/self/timens_offsets: {e.strerror}")
os.execvp("mount", ["mount", "--bind", "/proc/self/ns/time_for_children", sys.argv[1]])
"""


def supported() -> str | None:
    """Why time namespaces cannot be used here (None: they can)."""
    if not Path("/proc/self/timens_offsets").exists():
        return "this kernel has no time namespaces (Linux >= 5.6 with CONFIG_TIME_NS; no /proc/self/timens_offsets)"
    from shutil import which

    for tool in ("nsenter", "mount"):
        if which(tool) is None:
            return f"the {tool!r} command (util-linux) is missing"
    return None


def create(path: Path, offset_ns: int) -> None:
    """A persistent time namespace at ``path`` whose CLOCK_MONOTONIC reads ``offset_ns`` more than the root's."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    r = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(int(offset_ns))], capture_output=True, text=True)
    if r.returncode != 0:
        path.unlink(missing_ok=True)
        why = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
        raise ClusterError(f"--timens: cannot make a time namespace with CLOCK_MONOTONIC offset {offset_ns} ns "
                           f"({why}); the offset must keep CLOCK_MONOTONIC >= 0 (uptime now) and within ±2^61 ns")


def offset_ns(path: Path) -> int:
    """The CLOCK_MONOTONIC offset of the time namespace at ``path`` (read inside it)."""
    r = subprocess.run(["nsenter", f"--time={path}", "cat", "/proc/self/timens_offsets"], capture_output=True,
                       text=True)
    for line in r.stdout.splitlines():
        f = line.split()
        if f and f[0] in ("monotonic", "1"):
            return int(f[1]) * 10**9 + int(f[2])
    raise ClusterError(f"--timens: cannot read the offsets of {path}: {r.stderr.strip() or r.stdout.strip()}")


def remove(path: Path) -> None:
    path = Path(path)
    if not path.exists():
        return
    subprocess.run(["umount", str(path)], capture_output=True)
    path.unlink(missing_ok=True)


def prefix(host: dict) -> list[str]:
    """The argv prefix that runs a command in a box host: its network namespace, and its time namespace
    when the box has them."""
    argv = ["ip", "netns", "exec", host["ns"]]
    if host.get("timens"):
        argv += ["nsenter", f"--time={host['timens']}", "--"]
    return argv

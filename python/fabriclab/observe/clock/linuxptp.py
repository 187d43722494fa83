"""linuxptp (``ptp4l``) as a baseline in the cluster-in-a-box (docs/clockwork.md, "Against linuxptp").

Host h0 runs ptp4l as the master, every other host as a slave, all with software timestamping on their
``eth0`` veth and ``free_running 1``: ptp4l then measures its offset from the master at every Sync but
never adjusts a clock (its clock id is CLOCK_INVALID), so the CLOCK_REALTIME that every namespace of the
machine shares is left alone.

**Why its offset is its error.** All of the box's namespaces read one CLOCK_REALTIME (time namespaces do
not move it), and ptp4l with software stamps measures CLOCK_REALTIME (the kernel's stamps). The true
offset between any slave and the master is therefore exactly 0, and the offset ptp4l reports is its error.

**Transport.** The box's switch is a Linux router (a namespace forwarding IPv4), not a bridge: PTP's
layer-2 multicast (``-2``, 01:1B:19:00:00:00) and UDPv4 multicast (224.0.1.129) do not cross it (no
multicast routing). So the slaves use unicast negotiation over UDPv4 (IEEE 1588 16.1): a
``unicast_master_table`` naming h0's address, and the master runs with ``unicast_listen 1``; Announce,
Sync (two-step, with Follow_Up) and Delay_Resp are granted per slave and routed like any unicast UDP.

**Reading the offsets.** In free-running mode ptp4l 3.1 logs no "master offset" line per Sync; it keeps the
last one in its TIME_STATUS_NP data set. A ``pmc`` per slave asks for it every ``poll_s`` over the slave's
own UNIX socket (``uds_address``: one per instance, since the namespaces share the file system), and each
Sync's offset is kept once, keyed by its ``ingress_time`` (the slave's receive stamp of that Sync,
CLOCK_REALTIME ns). That offset is ptp4l's ``t2 - t1 - meanPathDelay`` (its path delay filtered over
``delay_filter_length`` exchanges, 10 by default): exactly what its servo would act on.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SYNC_LOG_INTERVAL = -4   # 16 Syncs and Delay_Reqs per second per slave


def missing() -> str | None:
    """Why linuxptp cannot run here (None: it can)."""
    for tool in ("ptp4l", "pmc"):
        if shutil.which(tool) is None:
            return f"linuxptp's {tool} is not installed (sudo scripts/install-baselines.sh ptp)"
    return None


def config(role: str, uds: str, master_addr: str | None = None, log_interval: int = SYNC_LOG_INTERVAL) -> str:
    """ptp4l's configuration for the master or a slave (unicast negotiation over UDPv4, software stamps,
    free-running)."""
    lines = ["[global]", f"uds_address {uds}", "time_stamping software", "free_running 1",
             f"logSyncInterval {log_interval}", f"logMinDelayReqInterval {log_interval}",
             "logAnnounceInterval -2", "domainNumber 0"]
    if role == "master":
        lines += ["unicast_listen 1", "priority1 1"]
    else:
        lines += ["slaveOnly 1", "[unicast_master_table]", "table_id 1", "logQueryInterval 0",
                  f"UDPv4 {master_addr}", "[eth0]", "unicast_master_table 1"]
    return "\n".join(lines) + "\n"


_OFFSET = re.compile(r"master_offset\s+(-?\d+)\s+ingress_time\s+(\d+)")


def parse_pmc(text: str) -> list[tuple[int, int]]:
    """pmc's TIME_STATUS_NP answers -> [(ingress_time_ns, master_offset_ns)], one per Sync (repeats of the
    same Sync, and the zero ingress time before the first, left out), in ingress order."""
    seen: dict[int, int] = {}
    for m in _OFFSET.finditer(text):
        off, ingress = int(m.group(1)), int(m.group(2))
        if ingress:
            seen.setdefault(ingress, off)
    return sorted(seen.items())


@dataclass
class PtpRun:
    """ptp4l master on hosts[0], slaves on the others, and a pmc poller per slave; ``stop()`` ends them all and
    returns each slave's [(ingress_ns, offset_ns)]."""

    hosts: list[dict]
    workdir: Path
    poll_s: float = 0.02
    tag: str = "fl"
    procs: list = field(default_factory=list)
    pollers: dict = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> "PtpRun":
        from ...runtime.cluster.timens import prefix

        self.workdir.mkdir(parents=True, exist_ok=True)
        master = self.hosts[0]
        for i, h in enumerate(self.hosts):
            uds = f"/var/run/{self.tag}-ptp4l-{h['label']}"
            cfg = self.workdir / f"ptp4l-{h['label']}.cfg"
            cfg.write_text(config("master" if i == 0 else "slave", uds, master["addr"]))
            log = open(self.workdir / f"ptp4l-{h['label']}.log", "w")
            self.procs.append(subprocess.Popen([*prefix(h), "ptp4l", "-f", str(cfg), "-i", "eth0", "-m", "-q"],
                                               stdout=log, stderr=subprocess.STDOUT))
            if i:
                self.pollers[h["label"]] = (h, uds)
        time.sleep(0.5)
        self._threads = []
        for label, (h, uds) in self.pollers.items():
            out = open(self.workdir / f"pmc-{label}.txt", "w")
            p = subprocess.Popen([*prefix(h), "pmc", "-u", "-b", "0", "-s", uds, "-i",
                                  str(self.workdir / f"pmc-{label}.sock")],
                                 stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, text=True)
            self.procs.append(p)
            t = threading.Thread(target=self._poll, args=(p,), daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def _poll(self, p: subprocess.Popen) -> None:
        while not self._stop.is_set() and p.poll() is None:
            try:
                p.stdin.write("GET TIME_STATUS_NP\n")
                p.stdin.flush()
            except (BrokenPipeError, ValueError):
                return
            time.sleep(self.poll_s)

    def stop(self) -> dict[str, list[tuple[int, int]]]:
        self._stop.set()
        for t in getattr(self, "_threads", []):
            t.join(timeout=2)
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        out = {}
        for label in self.pollers:
            f = self.workdir / f"pmc-{label}.txt"
            out[label] = parse_pmc(f.read_text()) if f.exists() else []
        return out


def errors_in(samples: dict[str, list[tuple[int, int]]], t0_ns: int, t1_ns: int) -> np.ndarray:
    """|offset| of every slave's Syncs received within [t0, t1] (CLOCK_REALTIME ns): ptp4l's error, the true
    offset being 0."""
    vals = [abs(o) for s in samples.values() for ing, o in s if t0_ns <= ing <= t1_ns]
    return np.asarray(vals, dtype=np.float64)


def window_means(samples: dict[str, list[tuple[int, int]]], t0_ns: int, t1_ns: int, window_s: float) -> np.ndarray:
    """|mean offset| per slave and window of ``window_s`` from t0 (the windows the estimator uses): ptp4l's
    offsets averaged as a servo's low-pass would, for a comparison with one estimate per window."""
    out = []
    w = int(window_s * 1e9)
    for s in samples.values():
        a = np.asarray([(ing, o) for ing, o in s if t0_ns <= ing < t1_ns], dtype=np.float64).reshape(-1, 2)
        if not len(a):
            continue
        k = ((a[:, 0] - t0_ns) // w).astype(np.int64)
        for j in np.unique(k):
            out.append(abs(a[k == j, 1].mean()))
    return np.asarray(out, dtype=np.float64)

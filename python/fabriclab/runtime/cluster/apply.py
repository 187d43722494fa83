"""Builds and removes the box: runs a plan's commands (plan.py) with
subprocess. A state file (``/run/fabriclab/cluster-<name>.json``) is written
before anything is created and lists every namespace the box will have; all
veths, addresses, routes and qdiscs live inside those namespaces, so deleting
the namespaces removes everything. ``down`` also sweeps namespaces whose
names carry the box's prefix, so a crash at any point leaves nothing that
``down`` cannot find."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from ...scenario.model import Scenario
from .plan import OMITTABLE, PREFIX, ClusterError, Plan, build_plan, check_name

STATE_DIR = Path(os.environ.get("FABRICLAB_CLUSTER_STATE_DIR", "/run/fabriclab"))


class ClusterFailure(RuntimeError):
    """A command that builds the box failed (the box was removed again)."""


def state_path(name: str) -> Path:
    return STATE_DIR / f"cluster-{name}.json"


def _write_state(name: str, state: dict) -> None:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = state_path(name).with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, state_path(name))


def load_state(name: str, field: str = "--name") -> dict:
    check_name(name)
    p = state_path(name)
    if not p.exists():
        raise ClusterError(f"{field}: no cluster {name!r} is up (no {p}); start one with fabriclab cluster up")
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise ClusterError(f"{field}: cannot read the state file {p}: {e}") from None


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True)


def list_namespaces(prefix: str = PREFIX) -> list[str]:
    r = _run(["ip", "netns", "list"])
    return [line.split()[0] for line in r.stdout.splitlines() if line.startswith(prefix)]


def check_can_build() -> None:
    if os.geteuid() != 0:
        raise ClusterError("cluster: building the box needs root (network namespaces, veth, tc); run as root")
    try:
        r = _run(["ip", "netns", "list"])
    except FileNotFoundError:
        raise ClusterError("cluster: the 'ip' command (iproute2) is missing; install iproute2") from None
    if r.returncode != 0:
        raise ClusterError(f"cluster: 'ip netns' does not work here: {r.stderr.strip()}")


def probe(ns: str) -> set[str]:
    """Kernel features the box may need, tried for real in a throwaway namespace: qdiscs netem and red,
    the congestion controls the kernel offers (cc:<name>)."""
    have: set[str] = set()
    _run(["ip", "netns", "add", ns])
    try:
        _run(["ip", "-n", ns, "link", "add", "pa", "type", "veth", "peer", "name", "pb"])
        for feature, args in (("netem", ["netem", "delay", "1ms"]),
                              ("red", ["red", "limit", "400000", "min", "30000", "max", "31514", "avpkt", "1514",
                                       "burst", "20", "probability", "1.0", "bandwidth", "1gbit", "ecn"])):
            if _run(["tc", "-n", ns, "qdisc", "add", "dev", "pa", "root", *args]).returncode == 0:
                have.add(feature)
                _run(["tc", "-n", ns, "qdisc", "del", "dev", "pa", "root"])
        r = _run(["ip", "netns", "exec", ns, "cat", "/proc/sys/net/ipv4/tcp_available_congestion_control"])
        have.update(f"cc:{c}" for c in r.stdout.split())
    finally:
        _run(["ip", "netns", "del", ns])
    return have


def timens_dir() -> Path:
    return STATE_DIR / "timens"


def up(scenario_path: str, name: str = "box", allow_missing: bool = False, gso: bool = False, log=None,
       mono_offsets_ns: list[int] | None = None) -> dict:
    """Builds the box; returns its state. Bad input and missing kernel features raise ClusterError
    (naming the field) before anything stays behind; a failed command removes the box and raises
    ClusterFailure. With ``mono_offsets_ns`` (one per host) every host also gets a time namespace whose
    CLOCK_MONOTONIC reads that much more than the root's (timens.py)."""
    from . import timens

    s = Scenario.load(scenario_path)
    check_name(name)
    plan = build_plan(s, name)
    if mono_offsets_ns is not None:
        if len(mono_offsets_ns) != len(plan.hosts):
            raise ClusterError(f"--mono-offsets-ns: give one offset per host ({len(plan.hosts)}), got "
                               f"{len(mono_offsets_ns)}")
        why = timens.supported()
        if why:
            raise ClusterError(f"--timens: {why}")
    check_can_build()
    if state_path(name).exists() or list_namespaces(f"{PREFIX}{name}-"):
        raise ClusterError(f"--name: a cluster {name!r} exists already (state {state_path(name)}); "
                           f"run fabriclab cluster down --name {name} first")
    probe_ns = f"{PREFIX}{name}-probe"
    state = {"name": name, "scenario": str(Path(scenario_path).resolve()), "pid": os.getpid(), "status": "creating",
             "kind": plan.kind, "gso": gso, "namespaces": plan.namespaces + [probe_ns], "hosts": [], "omitted": []}
    _write_state(name, state)
    try:
        have = probe(probe_ns)
        missing = {f: field for f, field in plan.needs.items() if f.split(":")[0] in ("netem", "red", "cc")
                   and f not in have}
        if missing and not allow_missing:
            what = "; ".join(f"{field}: this kernel lacks {f} ({_why(f)})" for f, field in missing.items())
            raise ClusterError(f"{what}. Change the scenario, or pass --allow-missing to build the box without it "
                               "(cluster status lists what is left out)")
        omit = frozenset(OMITTABLE[f.split(":")[0]] for f in missing)
        plan = build_plan(s, name, omit, gso)
        state["omitted"] = sorted(f"{field} ({OMITTABLE[f.split(':')[0]]} not emulated: no {f})"
                                  for f, field in missing.items())
        state["namespaces"] = plan.namespaces
        _write_state(name, state)
        _build(plan, log)
        hosts = [{"label": plan.label(h), "ns": h, "addr": a} for h, a in zip(plan.hosts, plan.host_addrs)]
        if plan.others:
            state["others"] = plan.others
            state["noise_pids"] = start_noise(plan.others)
            _write_state(name, state)
        if mono_offsets_ns is not None:
            for h, off in zip(hosts, mono_offsets_ns):
                h["timens"] = str(timens_dir() / f"{name}-{h['label']}")
                h["mono_offset_ns"] = int(off)
                timens.create(Path(h["timens"]), int(off))
    except BaseException:
        remove(name)
        raise
    state.update(status="up", hosts=hosts,
                 switches=[plan.label(x) for x in plan.switches],
                 links=[{"a": plan.label(lk.a_ns), "a_dev": lk.a_dev, "b": plan.label(lk.b_ns), "b_dev": lk.b_dev,
                         "rate_bps": lk.rate_bps, "delay_ps": lk.delay_ps} for lk in plan.links])
    _write_state(name, state)
    return state


def start_noise(others: list[dict]) -> list[int]:
    """Starts the noisy neighbours' traffic of a [cloud] box (noise.py): the sink in ``ext``, Poisson
    bursts from each neighbour to it; each detached, in its namespace. Returns their pids."""
    from . import noise

    sink = next(o for o in others if o["role"] == "sink")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3])] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    pids = []
    for k, o in enumerate([sink] + [o for o in others if o["role"] == "neighbour"]):
        args = ["sink", sink["addr"], str(noise.PORT)] if o is sink else \
            ["send", sink["addr"], str(noise.PORT), str(o["rate_bps"]), str(k)]
        p = subprocess.Popen(["ip", "netns", "exec", o["ns"], sys.executable, "-m", noise.MARK, *args], env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        pids.append(p.pid)
    return pids


def stop_noise(pids: list[int]) -> None:
    """Stops the recorded noise processes that are still ours (their command line names noise.py)."""
    from . import noise

    for pid in pids:
        try:
            if noise.MARK.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass


def _why(feature: str) -> str:
    if feature == "netem":
        return "the netem qdisc, CONFIG_NET_SCH_NETEM, which the box needs for link delays; set the delay to 0"
    if feature == "red":
        return "the red qdisc, CONFIG_NET_SCH_RED, which the box needs to mark ECN; set the threshold to \"off\""
    return f"the congestion control {feature[3:]}; give another transport.cc"


def _build(plan: Plan, log=None) -> None:
    crash_after = int(os.environ.get("FABRICLAB_CLUSTER_CRASH_AFTER", "-1"))  # test hook: die like a crash
    done = 0
    for ns in plan.namespaces:
        _check(["ip", "netns", "add", ns])
    for argv in plan.commands():
        if done == crash_after:
            os.kill(os.getpid(), signal.SIGKILL)
        _check(argv)
        done += 1
        if log is not None:
            log(" ".join(argv))


def _check(argv: list[str]) -> None:
    r = _run(argv)
    if r.returncode != 0:
        raise ClusterFailure(f"cluster up: {' '.join(argv)} failed: {r.stderr.strip() or r.returncode}")


def _kill_inside(ns: str) -> None:
    """Kills what still runs in a namespace (`ip netns del` stops no process): noise senders started by an `up`
    that died before recording their pids, agents or ranks left behind."""
    r = _run(["ip", "netns", "pids", ns])
    for pid in r.stdout.split() if r.returncode == 0 else []:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def remove(name: str) -> list[str]:
    """Deletes the box's namespaces (what the state lists and whatever carries its prefix) and its state
    file; returns the namespaces deleted. Removing a namespace removes its veths, routes and qdiscs."""
    listed: list[str] = []
    p = state_path(name)
    if p.exists():
        try:
            st = json.loads(p.read_text())
            listed = st.get("namespaces", [])
            stop_noise(st.get("noise_pids", []))
        except (OSError, ValueError):
            listed = []
    present = set(list_namespaces())
    gone = []
    for ns in dict.fromkeys(listed + list_namespaces(f"{PREFIX}{name}-")):
        if ns in present:
            _kill_inside(ns)
            r = _run(["ip", "netns", "del", ns])
            if r.returncode != 0:
                raise ClusterFailure(f"cluster down: ip netns del {ns} failed: {r.stderr.strip()}")
            gone.append(ns)
    from . import timens

    if timens_dir().is_dir():
        for f in timens_dir().glob(f"{name}-*"):
            timens.remove(f)
    p.unlink(missing_ok=True)
    return gone


def names() -> list[str]:
    """Clusters with a state file or leftover namespaces."""
    found = {f.name[len("cluster-"):-len(".json")] for f in STATE_DIR.glob("cluster-*.json")} if STATE_DIR.is_dir() \
        else set()
    for ns in list_namespaces():
        found.add(ns[len(PREFIX):].split("-")[0])
    return sorted(found)


def host_ns(state: dict, host: str) -> str:
    """A host by label (h2), by index (2), or a switch by label (sw, leaf0, spine1)."""
    label = f"h{host}" if host.isdigit() else host
    for ns in state["namespaces"]:
        if ns == f"{PREFIX}{state['name']}-{label}":
            return ns
    known = ", ".join(x["label"] for x in state.get("hosts", [])) + ", " + ", ".join(state.get("switches", []))
    raise ClusterError(f"HOST: cluster {state['name']!r} has no host {host!r} (it has {known})")

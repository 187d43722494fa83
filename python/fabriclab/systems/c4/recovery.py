"""Isolation and restart of a failed training job (C4 section 3.1 and
figure 3; docs/c4-recovery.md): a scenario with ``[recovery]`` runs in
segments. A segment runs the job with the faults in force until the
detector's first alarm; the job stops there; the suspect is isolated (a
host replaced by a spare, a fabric link taken out of service); after the
diagnosis and isolation time and the re-initialisation the job restarts
from its last complete checkpoint in a new segment. A fault on a
component that was not isolated stays in force. The time is accounted in
the paper's four parts (section 2, figure 1; Table 3), as
``fabriclab/systems/c4/downtime.py`` models them.

Entry point: :func:`simulate` (``fabriclab run`` calls it for a scenario
with ``[recovery]``)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from ...scenario.faults import RANK_KINDS, SYNDROME, FaultConfig, component, link_name

if TYPE_CHECKING:
    import pandas as pd

    from ...sim.results import Results
    from ...scenario.model import Scenario
    from .detector import Alarm

# A run's end for the detectors once nothing happens any more: the job is
# stuck and the world goes on, so the masters' timers may fire at any time.
FOREVER_PS = 2**63
MS = 10**9
# The detector reads a segment's telemetry after this many nominal
# iterations of simulated time, then after twice as long each time. Its
# alarms carry the time their evidence existed, so this changes only how
# far past an alarm a segment was simulated and how often the master reads
# the telemetry again (each time from the start: a few reads, not one per
# iteration, keep that cost near one read of the whole segment).
CHECK_ITERATIONS = 8
PARTS = ("post_checkpoint", "detection", "diagnosis_isolation", "reinitialization")

# detector(ccl, messages, hosts (names, rank order), run_end_ps) -> first alarm or None
Detector = Callable[["pd.DataFrame", "pd.DataFrame", list, int], Optional["Alarm"]]


def make_detector(r, job: str) -> Detector:
    """The scenario's detector: C4D's master (first alarm), with NCCL's
    watchdog still armed behind it (the earlier of the two), or the
    watchdog alone."""
    from .detector import diagnose, job_view

    def detect(ccl, messages, hosts, run_end_ps):
        wd = watchdog_alarm(ccl, run_end_ps, r.watchdog_timeout_ps)
        if r.detector == "watchdog":
            return wd
        c4 = diagnose(ccl, job_view(job, hosts, messages), run_end_ps)
        if c4 is None or (wd is not None and wd.time_ps < c4.time_ps):
            return wd
        return c4

    return detect


def watchdog_alarm(ccl, run_end_ps: int, timeout_ps: int):
    """c4/baselines.py's watchdog with another timeout: its rule fires at an
    op's first event + TIMEOUT_PS if that is within the run, so with the run
    end moved by (TIMEOUT_PS - timeout) and the alarm moved back, it fires at
    first event + timeout within the real run."""
    from .baselines import TIMEOUT_PS, watchdog

    shift = TIMEOUT_PS - timeout_ps
    a = watchdog(ccl, run_end_ps + shift)
    if a is not None:
        a.time_ps -= shift
    return a


@dataclass
class _Fault:
    """A scenario fault during the recovery (global times)."""
    index: int
    cfg: FaultConfig
    # A rank fault, once struck, stays with the hardware: the host it struck.
    host: Optional[int] = None


@dataclass
class _State:
    topology: object
    job: str
    workers: list  # host index per rank
    spares: list  # host indices, in the order they are taken
    faults: list
    isolated_hosts: list = field(default_factory=list)
    isolated_links: list = field(default_factory=list)  # (a, b) node names, sorted
    start_ps: int = 0  # global time of the segment's local 0
    first_iteration: int = 0  # the checkpoint it restarts from (iterations done)
    restarts: int = 0
    # Host name -> host index; link name (link_name) -> its two node names, sorted.
    hosts_by_name: dict = field(default_factory=dict)
    links_by_name: dict = field(default_factory=dict)


@dataclass
class _Segment:
    scenario: "Scenario"
    results: "Results"
    alarm: Optional["Alarm"]
    cut_ps: int  # local time the segment was stopped at (its outputs run to it)
    finished: bool
    stopped: bool  # reached the scenario's stop_ps
    job_links: set  # (a, b) node names, sorted, of every link a job message crossed


@dataclass
class RecoveryResults:
    """What a run with ``[recovery]`` produced: the recovery cycles, the
    job's iterations over all segments (global times and iteration
    numbers), the summary, and each segment's own results."""

    summary: dict
    resolved: dict
    recovery_arrow: object
    jobs_arrow: object
    faults_arrow: object
    segments: list

    @property
    def recovery(self) -> "pd.DataFrame":
        return self.recovery_arrow.to_pandas()

    @property
    def jobs(self) -> "pd.DataFrame":
        return self.jobs_arrow.to_pandas()

    def write(self, out_dir, force: bool = False) -> Path:
        from ...sim.results import OutputFolder

        with OutputFolder(Path(out_dir), force) as folder:
            self.write_into(folder.staging)
        return Path(out_dir)

    def write_into(self, folder: Path) -> None:
        """recovery.parquet, jobs.parquet, faults.parquet, summary.json,
        scenario.resolved.toml, and segments/<k>/ with each segment's
        outputs (its scenario.resolved.toml reruns it alone)."""
        import pyarrow.parquet as pq
        import tomli_w

        pq.write_table(self.recovery_arrow, folder / "recovery.parquet")
        pq.write_table(self.jobs_arrow, folder / "jobs.parquet")
        if self.faults_arrow is not None:
            pq.write_table(self.faults_arrow, folder / "faults.parquet")
        (folder / "summary.json").write_text(json.dumps(self.summary, indent=2, sort_keys=True) + "\n")
        (folder / "scenario.resolved.toml").write_text(tomli_w.dumps(self.resolved))
        for k, seg in enumerate(self.segments, 1):
            d = folder / "segments" / str(k)
            d.mkdir(parents=True)
            seg.write_into(d)


def simulate(scenario: "Scenario", memory_limit=None, detector: Detector | None = None) -> RecoveryResults:
    """Runs a scenario with ``[recovery]`` to the job's end, or until it is
    given up. ``detector`` replaces the scenario's (tests use it to play a
    wrong diagnosis)."""
    from ...scenario.model import ScenarioError

    s = scenario
    r = s.recovery
    if r is None:
        raise ScenarioError("recovery: the scenario has no [recovery] section")
    from ...sim.apps.jobs import job_core
    from ...sim.pipeline import checked_topology
    from ...scenario.recovery import spare_hosts

    _, t = checked_topology(s, memory_limit)  # as a plain run: refused before a topology too big is built
    core_job = job_core(s, 0, s.jobs[0], t)
    workers = list(core_job["workers"])
    names = [n["name"] for n in t.nodes]
    host_name = [names[node] for node in t.hosts]
    st = _State(topology=t, job=s.jobs[0].name, workers=workers, spares=spare_hosts(s, t, workers),
                faults=[_Fault(i, f) for i, f in enumerate(s.faults)],
                hosts_by_name={n: h for h, n in enumerate(host_name)},
                links_by_name={link_name(*ab): tuple(sorted(ab))
                               for ab in ((names[lk["a"]], names[lk["b"]]) for lk in t.links)})
    detect = detector or make_detector(r, s.jobs[0].name)
    nominal = sum(layer["fwd_ps"] + layer["bwd_ps"] for layer in core_job["layers"])
    check_ps = max(MS, CHECK_ITERATIONS * nominal)
    target = s.jobs[0].iterations
    wall0 = time.perf_counter()
    cycles, segments, seg_rows = [], [], []
    outcome = None
    end_ps = None
    useful = stalled = 0
    checkpoints = 0
    done_iterations = 0  # iterations whose work useful_ps holds
    while outcome is None:
        k = len(segments) + 1
        done_iterations = st.first_iteration
        if s.stop_ps is not None and s.stop_ps <= st.start_ps:
            outcome = "stopped"
            break
        seg_s = _segment_scenario(s, st, k, t)
        seg = _run_segment(seg_s, detect, [host_name[h] for h in st.workers], check_ps, memory_limit)
        segments.append(seg)
        info = _checkpoints(seg.results, len(st.workers))
        job_start = s.jobs[0].start_ps if k == 1 else 0
        stopped_at = seg.cut_ps if seg.alarm is None else seg.alarm.time_ps
        seg_rows.append({"segment": k, "start_ps": st.start_ps, "job_start_ps": st.start_ps + job_start,
                         "end_ps": st.start_ps + stopped_at, "simulated_to_ps": st.start_ps + seg.cut_ps,
                         "first_iteration": st.first_iteration,
                         "workers": [host_name[h] for h in st.workers], "folder": f"segments/{k}"})
        if seg.alarm is None:
            ends = _iteration_ends(seg.results, len(st.workers))
            checkpoints += len(info)
            if seg.finished:
                outcome = "completed"
                end_ps = st.start_ps + ends[-1]
                useful += ends[-1] - job_start
                done_iterations = target
            else:
                # The job's time to its last finished iteration is useful (those
                # iterations count as done, saved or not); the rest is stalled.
                outcome = "stopped" if seg.stopped else "stalled"
                last = ends[-1] if ends else job_start
                end_ps = st.start_ps + seg.cut_ps
                useful += max(0, last - job_start)
                stalled = max(0, seg.cut_ps - last)  # none if stopped before the job started
                done_iterations = st.first_iteration + len(ends)
            break
        a = seg.alarm
        alarm = a.time_ps
        automatic = r.detector == "c4d" and a.component is not None
        named = _isolation_target(a.component, st) if automatic else None
        fault = _cycle_fault(st, a, named, seg.job_links)
        fault_local = alarm if fault is None else max(0, fault.cfg.at_ps - st.start_ps)
        valid = [(it, e) for it, e in info if e <= fault_local]
        kept, ckpt_local = (valid[-1][0] + 1, valid[-1][1]) if valid else (0, job_start)
        checkpoints += len(valid)
        done = sum(1 for e in _iteration_ends(seg.results, len(st.workers)) if e <= alarm)
        fault_at = max(fault_local, job_start)
        post = max(0, fault_at - ckpt_local)
        detection = alarm - max(fault_at, ckpt_local)
        useful += ckpt_local - job_start
        done_iterations = st.first_iteration + kept
        truth = None if fault is None else _fault_target(fault, st)
        row = {"cycle": len(cycles) + 1, "segment": k,
               "fault": None if fault is None else fault.index,
               "fault_kind": None if fault is None else fault.cfg.kind,
               "fault_component": None if fault is None else _fault_component(fault, st),
               "fault_ps": None if fault is None else st.start_ps + fault_at,
               "alarm_ps": st.start_ps + alarm, "syndrome": a.syndrome,
               "named_component": a.component, "diagnosis": "automatic" if automatic else "manual",
               "isolated": None, "replaced_rank": None, "spare": None,
               "checkpoint_iteration": st.first_iteration + kept, "checkpoint_ps": st.start_ps + ckpt_local,
               "iterations_redone": done - kept, "correct": None, "restart_ps": None,
               "post_checkpoint_ps": post, "detection_ps": detection,
               "diagnosis_isolation_ps": 0, "reinitialization_ps": 0}
        cycles.append(row)
        # People find the faulty component itself (the manual practice of Table 3).
        target_of = named if automatic else truth
        if fault is not None:
            row["correct"] = target_of is not None and target_of == truth
        _bind_struck_faults(st, alarm)
        if st.restarts >= r.max_restarts:
            outcome, end_ps = "restarts_exhausted", st.start_ps + alarm
            break
        if target_of is not None:
            row["isolated"] = link_name(*target_of[1]) if target_of[0] == "link" else host_name[target_of[1]]
            if not _isolate(st, target_of, row, host_name):
                outcome, end_ps = "no_spare", st.start_ps + alarm
                break
        iso = r.isolation_ps if automatic else r.manual_diagnosis_ps
        restart = st.start_ps + alarm + iso + r.reinit_ps
        if s.stop_ps is not None and s.stop_ps < restart:
            # The run ends during the downtime: its parts end at stop_ps too.
            left = s.stop_ps - (st.start_ps + alarm)
            row["diagnosis_isolation_ps"] = min(iso, left)
            row["reinitialization_ps"] = left - row["diagnosis_isolation_ps"]
            outcome, end_ps = "stopped", s.stop_ps
            break
        row["diagnosis_isolation_ps"] = iso
        row["reinitialization_ps"] = r.reinit_ps
        row["restart_ps"] = restart
        st.first_iteration += kept
        st.start_ps = restart
        st.restarts += 1
    if end_ps is None:  # stopped before a segment could start
        end_ps = s.stop_ps
    summary = _summary(s, st, cycles, seg_rows, outcome, end_ps, useful, stalled, checkpoints, done_iterations,
                       host_name, target, time.perf_counter() - wall0)
    return RecoveryResults(summary=summary, resolved=s.resolved_dict(), recovery_arrow=_recovery_table(cycles),
                           jobs_arrow=_jobs_table(segments, seg_rows, cycles, s.jobs[0].name),
                           faults_arrow=_faults_truth(s), segments=[g.results for g in segments])


# ---------------------------------------------------------------- segments
def _segment_scenario(s: "Scenario", st: _State, k: int, t) -> "Scenario":
    """Segment ``k`` as a scenario of its own: the job on its current hosts
    from its checkpoint, time shifted so that the segment starts at 0, the
    faults still in force, the isolated links down."""
    from ...scenario.model import Scenario

    g = st.start_ps
    d = s.resolved_dict()
    d.pop("fabriclab_version", None)
    d.pop("recovery", None)
    if k > 1:
        # Fresh random draws (jitter, arrivals) for a new segment; deterministic.
        d["seed"] = (s.seed + k - 1) % 2**64
    if s.stop_ps is not None:
        d["stop_ps"] = s.stop_ps - g
    j = d["jobs"][0]
    j["workers"] = list(st.workers)
    j["iterations"] = s.jobs[0].iterations - st.first_iteration
    if k > 1:
        j["start_ps"] = 0
    traffic = []
    for tr in d.get("traffic", []):
        start, dur = tr["start_ps"] - g, tr["duration_ps"]
        if start < 0:
            start, dur = 0, dur + start
        if dur > 0:
            traffic.append({**tr, "start_ps": start, "duration_ps": dur})
    d["traffic"] = traffic
    flows = [f.model_dump(by_alias=True, exclude_none=True) for f in s.explicit_flows(t)]
    d.pop("flows_csv", None)
    d["flows"] = [{**f, "start_ps": f["start_ps"] - g} for f in flows if f["start_ps"] >= g]
    kept = [(x, _segment_fault(x, st, g)) for x in st.faults]
    # A link fault that struck before the restart becomes link events: its
    # effect joins the links' state at the restart, its later edges follow.
    struck = [x for x in st.faults if x.cfg.kind not in RANK_KINDS and x.cfg.at_ps < g and not _isolated(x, st)]
    d["link_events"] = _segment_link_events(d.get("link_events", []), struck, st, g)
    d["faults"] = [f for x, f in kept if f is not None and x not in struck]
    seg = Scenario.from_dict(d, source=f"recovery segment {k}")
    seg._base_dir = s._base_dir
    return seg


def _segment_link_events(user: list, struck: list, st: _State, g: int) -> list:
    """The segment's link events: for each link, its state at the restart
    (the result of every earlier event, the user's and the struck faults',
    in the order the simulator applied them: by time, the user's first at
    a tie, as the faults app lists them), then the later events shifted by ``g``;
    an isolated link is down from 0 and nothing else changes it. Events are
    per pair of nodes (every parallel link between them), as
    ``[[link_events]]`` are; a rate is the first parallel link's."""
    from ...scenario.fabric import links_joining
    from ...sim.apps.faults import fault_link_events, host_node

    t = st.topology
    names = [n["name"] for n in t.nodes]
    index = {n: i for i, n in enumerate(names)}
    evs = [(e["at_ps"], tuple(sorted(e["link"])), e["action"], e.get("rate_bps"), e.get("loss")) for e in user]
    for x in struck:
        f = x.cfg
        if f.kind == "pcie_slow":
            node = host_node(f.host, t, index, "faults.host")
            links = [(k, next(n for n in (t.links[k]["a"], t.links[k]["b"]) if n != node))
                     for k, lk in enumerate(t.links) if node in (lk["a"], lk["b"])]
            pairs = {}
            for k, other in links:
                pairs.setdefault(tuple(sorted((names[node], names[other]))), k)
        else:
            k = links_joining(t, index[f.link[0]], index[f.link[1]])[0]
            pairs = {tuple(sorted(f.link)): k}
        for pair, k in pairs.items():
            evs += [(e["at_ps"], pair, e["action"], e["rate_bps"], e["loss"])
                    for e in fault_link_events(f, k, t.links[k]["rate_bps"])]
    evs = [e for e in sorted(evs, key=lambda e: e[0]) if e[1] not in st.isolated_links]  # stable: ties keep order
    state: dict = {}  # pair -> {"down": bool, "rate": bps, "loss": p}
    for at, pair, action, rate, loss in evs:
        if at >= g:
            continue
        p = state.setdefault(pair, {})
        if action in ("down", "up"):
            p["down"] = action == "down"
        elif action == "rate":
            p["rate"] = rate
        else:
            p["loss"] = loss
    out = []
    for pair, p in state.items():
        if "rate" in p:
            out.append({"at_ps": 0, "link": list(pair), "action": "rate", "rate_bps": p["rate"]})
        if "loss" in p:
            out.append({"at_ps": 0, "link": list(pair), "action": "loss", "loss": p["loss"]})
        if p.get("down"):
            out.append({"at_ps": 0, "link": list(pair), "action": "down"})
    out += [{"at_ps": 0, "link": list(lk), "action": "down"} for lk in st.isolated_links]
    for at, pair, action, rate, loss in evs:
        if at >= g:
            e = {"at_ps": at - g, "link": list(pair), "action": action}
            if action == "rate":
                e["rate_bps"] = rate
            elif action == "loss":
                e["loss"] = loss
            out.append(e)
    return out


def _isolated(x: _Fault, st: _State) -> bool:
    """Whether the fault's component was taken out (it no longer reaches the job)."""
    f = x.cfg
    if f.kind in RANK_KINDS:
        return x.host is not None and x.host not in st.workers  # the process on the spare is sound
    if f.kind == "pcie_slow":
        return _fault_host(f, st) in st.isolated_hosts
    return tuple(sorted(f.link)) in st.isolated_links


def _segment_fault(x: _Fault, st: _State, g: int) -> dict | None:
    """The fault as the segment sees it (None: it no longer reaches the job's segment)."""
    f = x.cfg
    if _isolated(x, st):
        return None
    d = f.model_dump(exclude_none=True)
    if f.until_ps is not None:
        if f.until_ps <= g:
            return None
        d["until_ps"] = f.until_ps - g
    # A fault already in force is in force from the restart on.
    d["at_ps"] = max(0, f.at_ps - g)
    if f.kind in RANK_KINDS:
        d.pop("job", None)
        if x.host is not None:
            d["rank"] = st.workers.index(x.host)
    return d


def _run_segment(seg: "Scenario", detect: Detector, hosts: list, check_ps: int, memory_limit) -> _Segment:
    """Runs a segment, letting the detector read the telemetry after
    ``check_ps`` of simulated time, then after twice as long each time (the
    master's alarms carry the time their evidence existed, so the checks do
    not change them); stops at the first alarm, at the job's end, or when
    nothing happens any more. An alarm at or after the job's last iteration
    end (C4D's times are whole ns: within that ns too) finds a job already
    done; one after ``stop_ps`` comes too late."""
    from ...observe.clock.calibrate import calibrated
    from ...sim.pipeline import collect_results, resolve_and_build

    # Packet Rocket on estimated clocks: each segment (its own seed, so its own clocks) calibrates them first.
    seg, calibration = calibrated(seg)
    sim, _ = resolve_and_build(seg, memory_limit)
    job = seg.jobs[0]
    stop = seg.stop_ps
    wall0 = time.perf_counter()
    now, alarm, finished, stopped = 0, None, False, False
    while True:
        now = now + check_ps if stop is None else min(now + check_ps, stop)
        check_ps *= 2
        more = sim.run_until(now)
        tables = sim.app_tables()
        last_end = _last_end(tables, job.iterations)
        finished = last_end is not None
        ccl, msgs = _telemetry(sim, tables, job)
        alarm = detect(ccl, msgs, hosts, now if more else FOREVER_PS)
        if alarm is not None and finished and alarm.time_ps >= last_end - last_end % 1000:
            alarm = None
        if alarm is not None and stop is not None and alarm.time_ps > stop:
            alarm, now, stopped = None, stop, True
            break
        if alarm is not None or finished or not more:
            break
        if stop is not None and now >= stop:
            stopped = True
            break
    if finished and alarm is None:
        sim.run_until(stop if stop is not None else FOREVER_PS)  # the rest of the run, as a plain one
        now = max(now, sim.now_ps)
    if alarm is not None:
        finished = False
    cut = seg if finished else seg.replace(stop_ps=max(now, 1))
    cut._base_dir = seg._base_dir
    res = collect_results(cut, sim, time.perf_counter() - wall0)
    if calibration is not None:
        res.summary["packet_rocket"]["calibration"] = calibration
    return _Segment(seg, res, alarm, now, finished, stopped, _crossed_links(msgs, job.name))


def _last_end(tables: dict, iterations: int) -> Optional[int]:
    """The end of the job's last iteration at its last worker (None: not every worker ended it yet)."""
    it = tables.get("job_iterations")
    if not it or not it["job"]:
        return None
    last = [e for i, e in zip(it["iteration"], it["end_ps"]) if i == iterations - 1]
    return max(last) if last and all(e is not None for e in last) else None


def _telemetry(sim, tables: dict, job):
    import pandas as pd

    from ...collectives.ccl import from_jobs
    from ...sim.results import read_parquet_bytes

    msgs = read_parquet_bytes(sim.messages_parquet()).to_pandas()
    jc = tables.get("job_ccl")
    if not jc or not jc["job"]:
        # No allreduce has begun yet: nothing for the detectors to read.
        return pd.DataFrame(columns=["op_id", "rank", "post_mono_ns"]), msgs
    return from_jobs(jc, {job.name: str(job.allreduce)}, 0, host_names=sim.host_names).to_pandas(), msgs


def _crossed_links(msgs, job: str) -> set:
    """(a, b) node names, sorted, of every link a message of the job crossed."""
    out = set()
    for p in msgs.loc[msgs["app"] == job, "path"].unique():
        nodes = [x for x in str(p).split() if x != ">"]
        out.update(tuple(sorted(ab)) for ab in zip(nodes, nodes[1:]))
    return out


def _checkpoints(res: "Results", n: int) -> list[tuple[int, int]]:
    """(iteration, end) of every complete checkpoint of a segment (every
    worker's pause over), in order; end = the last worker's."""
    tl = res.timeline
    if tl is None:
        return []
    c = tl[tl.kind == "checkpoint"].groupby("iteration").end_ps.agg(["count", "max"])
    return [(int(i), int(row["max"])) for i, row in c.iterrows() if row["count"] == n]


def _iteration_ends(res: "Results", n: int) -> list[int]:
    """End of each iteration at the last of the ``n`` workers, while every worker ended it."""
    j = res.jobs
    if j is None:
        return []
    out = []
    for _, g in j.groupby("iteration"):
        if len(g) < n or g.end_ps.isna().any():
            break
        out.append(int(g.end_ps.max()))
    return out


# ---------------------------------------------------------------- faults and isolation
def _fault_host(f: FaultConfig, st: _State) -> int:
    """The host index of a ``pcie_slow`` fault's host."""
    from ...sim.apps.faults import host_node

    t = st.topology
    node = host_node(f.host, t, {n["name"]: i for i, n in enumerate(t.nodes)}, "faults.host")
    return t.hosts.index(node)


def _affects_job(x: _Fault, st: _State, job_links: set) -> bool:
    """Whether a fault can affect the job now: a rank or host fault on one
    of its hosts; a host's access link of one of its hosts; a fabric link
    that a message of the job crossed in the segment."""
    f = x.cfg
    if f.kind in RANK_KINDS:
        return x.host is None or x.host in st.workers
    if f.kind == "pcie_slow":
        return _fault_host(f, st) in st.workers
    hosts = [st.hosts_by_name[n] for n in f.link if n in st.hosts_by_name]
    if hosts:
        return any(h in st.workers for h in hosts)
    return tuple(sorted(f.link)) in job_links


def _is_hang(syndrome: str) -> bool:
    return syndrome.endswith("hang")


def _cycle_fault(st: _State, alarm, named, job_links: set) -> Optional[_Fault]:
    """The fault a cycle is charged to: the one the alarm is about. Among the
    faults in force by the alarm that can affect the job: the earliest whose
    component is the one C4D named (``named``: its isolation target); else
    the earliest whose kind shows the alarm's kind of syndrome (a hang or a
    slowdown; faults.SYNDROME); else the earliest. None: a false alarm. A
    fault that raised no alarm is not charged and leaves the checkpoints
    taken after it valid."""
    cands = []
    for x in st.faults:
        if x.cfg.at_ps - st.start_ps > alarm.time_ps:
            continue
        if x.cfg.until_ps is not None and x.cfg.until_ps <= st.start_ps:
            continue
        if _segment_fault(x, st, st.start_ps) is None or not _affects_job(x, st, job_links):
            continue
        cands.append(x)
    cands.sort(key=lambda x: (x.cfg.at_ps, x.index))
    for rule in (lambda x: named is not None and _fault_target(x, st) == named,
                 lambda x: _is_hang(SYNDROME[x.cfg.kind]) == _is_hang(alarm.syndrome),
                 lambda x: True):
        hit = [x for x in cands if rule(x)]
        if hit:
            return hit[0]
    return None


def _bind_struck_faults(st: _State, alarm_local: int) -> None:
    """A rank fault that struck in this segment stays with its host."""
    for x in st.faults:
        if x.cfg.kind in RANK_KINDS and x.host is None and x.cfg.at_ps - st.start_ps <= alarm_local:
            x.host = st.workers[x.cfg.rank]


def _fault_component(x: _Fault, st: _State) -> str:
    """The fault's component as the detectors name it (a rank by its
    position in the segment)."""
    if x.cfg.kind in RANK_KINDS:
        return f"{st.job}:{x.cfg.rank if x.host is None else st.workers.index(x.host)}"
    return component(x.cfg, st.job)[1]


def _fault_target(x: _Fault, st: _State):
    """What isolating the fault's own component takes out."""
    if x.cfg.kind in RANK_KINDS:
        return ("host", x.host if x.host is not None else st.workers[x.cfg.rank])
    if x.cfg.kind == "pcie_slow":
        return ("host", _fault_host(x.cfg, st))
    return _isolation_target(link_name(*x.cfg.link), st)


def _isolation_target(name: Optional[str], st: _State):
    """What isolating a named component takes out: ('host', index) for a
    rank (its host), a host, or a host's access link (the server with its
    NIC and cable); ('link', (a, b)) for a fabric link (C4P isolates faulty
    leaf-spine links, section 3.2). None for a name not in the topology."""
    if name is None:
        return None
    workers = st.workers
    if name.startswith(f"{st.job}:") and name[len(st.job) + 1:].isdigit():
        r = int(name[len(st.job) + 1:])
        return ("host", workers[r]) if r < len(workers) else None
    if name in st.hosts_by_name:
        return ("host", st.hosts_by_name[name])
    ends = st.links_by_name.get(name)
    if ends is None:
        return None
    for end in ends:
        if end in st.hosts_by_name:
            return ("host", st.hosts_by_name[end])
    return ("link", ends)


def _isolate(st: _State, target, row: dict, host_name) -> bool:
    """Takes the target out; a job host is replaced by the first spare.
    False when a spare was needed and none is left."""
    kind, what = target
    if kind == "link":
        if what not in st.isolated_links:
            st.isolated_links.append(what)
        return True
    if what not in st.isolated_hosts:
        st.isolated_hosts.append(what)
    if what in st.spares:
        st.spares.remove(what)
    if what not in st.workers:
        return True
    if not st.spares:
        return False
    r = st.workers.index(what)
    spare = st.spares.pop(0)
    st.workers[r] = spare
    row["replaced_rank"] = r
    row["spare"] = host_name[spare]
    return True


# ---------------------------------------------------------------- outputs
def _summary(s, st, cycles, seg_rows, outcome, end_ps, useful, stalled, checkpoints, done, host_name, target,
             wall_s):
    from ..._version import __version__

    r = s.recovery
    parts = {p: sum(c[f"{p}_ps"] for c in cycles) for p in PARTS}
    down = sum(parts.values())
    start = s.jobs[0].start_ps
    wall = max(0, (end_ps or start) - start)
    pct = (lambda v: 100 * v / wall if wall > 0 else 0.0)
    return {
        "fabriclab_version": __version__, "scenario": s.name, "seed": s.seed,
        "recovery": {
            "job": s.jobs[0].name, "detector": r.detector, "outcome": outcome,
            "target_iterations": target, "iterations_done": done,
            "cycles": len(cycles), "restarts": st.restarts,
            "start_ps": start, "end_ps": end_ps, "wall_ps": wall, "useful_ps": useful, "stalled_ps": stalled,
            "checkpoints": checkpoints,
            "checkpoint_pause_ps": checkpoints * (s.jobs[0].checkpoint_ps or 0),
            "downtime_ps": {**parts, "total": down},
            "downtime_percent": {**{p: pct(v) for p, v in parts.items()}, "total": pct(down)},
            "iterations_redone": sum(c["iterations_redone"] for c in cycles),
            "isolated_hosts": [host_name[h] for h in st.isolated_hosts],
            "isolated_links": [link_name(*lk) for lk in st.isolated_links],
            "spares_left": [host_name[h] for h in st.spares], "workers": [host_name[h] for h in st.workers],
            "segments": seg_rows,
        },
        # Wall-clock figures vary run to run; everything above is deterministic.
        "performance": {"wall_time_s": wall_s},
    }


RECOVERY_COLUMNS = {
    "cycle": "uint32", "segment": "uint32", "fault": "uint32", "fault_kind": "string", "fault_component": "string",
    "fault_ps": "uint64", "alarm_ps": "uint64", "syndrome": "string", "named_component": "string",
    "diagnosis": "string", "isolated": "string", "replaced_rank": "uint32", "spare": "string",
    "correct": "bool_", "checkpoint_iteration": "uint32", "checkpoint_ps": "uint64", "iterations_redone": "uint32",
    "post_checkpoint_ps": "uint64", "detection_ps": "uint64", "diagnosis_isolation_ps": "uint64",
    "reinitialization_ps": "uint64", "restart_ps": "uint64",
}


def _recovery_table(cycles: list[dict]):
    import pyarrow as pa

    return pa.table({c: pa.array([row[c] for row in cycles], type=getattr(pa, t)())
                     for c, t in RECOVERY_COLUMNS.items()})


def _jobs_table(segments, seg_rows, cycles, name: str):
    """Every worker's iterations over all segments: global iteration number
    and times; ``kept`` when the work survived (saved in the checkpoint
    the next segment restarts from, or the last segment's)."""
    import pyarrow as pa

    cols = {c: [] for c in ("job", "segment", "worker", "host", "iteration", "start_ps", "end_ps", "kept")}
    for k, (seg, info) in enumerate(zip(segments, seg_rows), 1):
        j = seg.results.jobs
        if j is None:
            continue
        g, first = info["start_ps"], info["first_iteration"]
        stop = seg.alarm.time_ps if seg.alarm is not None else None
        keep = cycles[k - 1]["checkpoint_iteration"] - first if seg.alarm is not None else None
        for w, it, s0, e in zip(j.worker, j.iteration, j.start_ps, j.end_ps):
            e = None if e != e or e is None else int(e)
            if (it > 0 and s0 == 0) or (stop is not None and s0 >= stop):
                continue  # never started (or only after the job was stopped)
            if stop is not None and e is not None and e > stop:
                e = None
            cols["job"].append(name)
            cols["segment"].append(k)
            cols["worker"].append(int(w))
            cols["host"].append(info["workers"][int(w)])
            cols["iteration"].append(first + int(it))
            cols["start_ps"].append(g + int(s0))
            cols["end_ps"].append(None if e is None else g + e)
            cols["kept"].append(e is not None and (keep is None or it < keep))
    types = {"segment": pa.uint32(), "worker": pa.uint32(), "iteration": pa.uint32(), "start_ps": pa.uint64(),
             "end_ps": pa.uint64(), "kept": pa.bool_()}
    return pa.table({c: pa.array(v, type=types.get(c, pa.string())) for c, v in cols.items()})


def _faults_truth(s):
    from ...sim.apps.faults import ground_truth

    return ground_truth(s) if s.faults else None


def print_summary(console, rec: RecoveryResults) -> None:
    """The recovery's outcome and time split, and one line per cycle."""
    from rich.table import Table

    r = rec.summary["recovery"]
    sec = (lambda ps: f"{ps / 1e12:,.3f}")
    t = Table(title=f"Recovery of job {r['job']} ({r['detector']}): {r['outcome']}, "
                    f"{r['iterations_done']}/{r['target_iterations']} iterations, {r['restarts']} restarts")
    t.add_column("part")
    t.add_column("seconds", justify="right")
    t.add_column("% of the job's time", justify="right")
    t.add_row("useful (checkpoint pauses included)", sec(r["useful_ps"]),
              f"{100 * r['useful_ps'] / r['wall_ps']:.2f}" if r["wall_ps"] else "-")
    for p in (*PARTS, "total"):
        t.add_row(p.replace("_", " "), sec(r["downtime_ps"][p]), f"{r['downtime_percent'][p]:.2f}")
    console.print(t)
    for c in rec.recovery_arrow.to_pylist():
        console.print(f"cycle {c['cycle']}: fault {c['fault_kind'] or 'none'} {c['fault_component'] or ''} "
                      f"alarm {c['syndrome']} at {sec(c['alarm_ps'])} s, named {c['named_component'] or '-'} "
                      f"({c['diagnosis']}), isolated {c['isolated'] or '-'}"
                      f"{', spare ' + c['spare'] if c['spare'] else ''}, "
                      f"{c['iterations_redone']} iterations redone from checkpoint {c['checkpoint_iteration']}")

"""Isolation and restart of a failed job (python/fabriclab/systems/c4/recovery.py,
docs/c4-recovery.md), against hand sums of the accounting rules:

- a cycle's post-checkpoint time is the fault time minus the end of the
  last checkpoint every worker finished before it (read off the segment's
  timeline), its detection the alarm minus the fault; the restart comes
  isolation + re-initialisation after the alarm, and the job's wall time is
  its useful time plus the four parts;
- the restarted job runs on the spare in the isolated host's place;
- a wrong diagnosis leaves the fault in force, so the job fails again;
- without a fault the only change is the checkpoints' pauses;
- restarts or spares running out end the run with that outcome."""

from __future__ import annotations

import copy

import pytest

from fabriclab.systems.c4 import recovery
from fabriclab import simulate
from fabriclab.scenario.model import Scenario, ScenarioError
from fabriclab.sim.pipeline import core_spec

MS = 10**9
S = 10**12
ISOLATION, REINIT = 5 * S, 7 * S
CRASH_AT = 15 * MS


def scenario(faults=(), **rec) -> dict:
    """Four ranks on h0..h3 of a star of six, spares h4 and h5; 12
    iterations of 2 ms compute, a checkpoint every 3 with a 1 ms pause."""
    return {"name": "rec", "seed": 5,
            "topology": {"kind": "star", "hosts": 6, "link_rate_bps": "10Gbps"},
            "transport": {"min_rto_ps": "10ms", "initial_rto_ps": "10ms"},
            "jobs": [{"name": "j", "workers": [0, 1, 2, 3], "profile": "resnet50", "layers": 4,
                      "model_bytes": 400_000, "compute_ps": "2ms", "fusion_bytes": 8_000_000, "iterations": 12,
                      "end_run": True, "checkpoint_iterations": 3, "checkpoint_ps": "1ms"}],
            "faults": list(faults),
            "outputs": {"flows": False, "links": False},
            "recovery": {"spares": [4, 5], "isolation_ps": ISOLATION, "reinit_ps": REINIT, **rec}}


def run(d: dict, **kw) -> recovery.RecoveryResults:
    return recovery.simulate(Scenario.from_dict(d), **kw)


@pytest.fixture(scope="module")
def crash():
    return run(scenario([{"kind": "crash", "rank": 1, "at_ps": CRASH_AT}]))


def test_crash_is_accounted_by_hand(crash):
    (c,) = crash.recovery_arrow.to_pylist()
    # By hand: an iteration is at least 2 ms of compute + the ring's 2 (n - 1) / n
    # x 400 kB = 600 kB at 10 Gbit/s (0.48 ms), and at most a few ms. The
    # checkpoint after 3 iterations ends near 3 x 2.6 + 1 = 9 ms, before the
    # crash; the one after 6 cannot end before 6 x 2.48 + 2 x 1 = 16.9 ms > 15 ms.
    assert c["checkpoint_iteration"] == 3
    seg1 = crash.segments[0]
    # The last checkpoint every worker finished before the crash: the latest
    # iteration whose four checkpoint rows all end by then.
    tl = seg1.timeline
    ck = tl[tl.kind == "checkpoint"].groupby("iteration").end_ps.agg(["count", "max"])
    ok = ck[(ck["count"] == 4) & (ck["max"] <= CRASH_AT)]
    last_it, last_end = int(ok.index.max()), int(ok.loc[ok.index.max(), "max"])
    assert c["fault_ps"] == CRASH_AT and c["fault_kind"] == "crash"
    assert c["checkpoint_iteration"] == last_it + 1 and c["checkpoint_ps"] == last_end
    assert c["post_checkpoint_ps"] == CRASH_AT - last_end
    assert c["detection_ps"] == c["alarm_ps"] - CRASH_AT > 0
    assert c["diagnosis"] == "automatic" and c["named_component"] == "j:1" and c["correct"]
    assert c["diagnosis_isolation_ps"] == ISOLATION and c["reinitialization_ps"] == REINIT
    assert c["restart_ps"] == c["alarm_ps"] + ISOLATION + REINIT
    # Iterations lost: those every worker finished by the alarm, less the checkpoint's.
    j = seg1.jobs
    done = sum(1 for _, g in j.groupby("iteration") if g.end_ps.notna().all() and g.end_ps.max() <= c["alarm_ps"])
    assert c["iterations_redone"] == done - (last_it + 1)
    r = crash.summary["recovery"]
    # Segment 2 restarts at the checkpoint and runs the remaining iterations.
    seg2 = crash.segments[1]
    assert seg2.jobs.iteration.max() + 1 == 12 - c["checkpoint_iteration"]
    end2 = int(seg2.jobs.groupby("iteration").end_ps.max().max())
    assert r["outcome"] == "completed" and r["end_ps"] == c["restart_ps"] + end2
    parts = r["downtime_ps"]
    assert parts["total"] == c["post_checkpoint_ps"] + c["detection_ps"] + ISOLATION + REINIT
    # Useful: to the checkpoint in segment 1, all of segment 2.
    assert r["useful_ps"] == last_end + end2
    assert r["wall_ps"] == r["useful_ps"] + parts["total"]


def test_the_restarted_job_runs_on_a_spare_not_on_the_isolated_host(crash):
    r = crash.summary["recovery"]
    assert r["isolated_hosts"] == ["h1"]
    assert r["workers"] == ["h0", "h4", "h2", "h3"]  # rank 1 on the first spare
    assert r["spares_left"] == ["h5"]
    seg2 = Scenario.from_dict({k: v for k, v in crash.segments[1].resolved.items() if k != "fabriclab_version"})
    assert seg2.jobs[0].workers == [0, 4, 2, 3]
    hosts = set(crash.jobs[crash.jobs.segment == 2].host)
    assert "h1" not in hosts and "h4" in hosts
    # The crash went with h1: no fault in the restarted segment.
    assert not seg2.faults
    # Global iteration numbers: segment 2 redoes from the checkpoint on.
    ck = int(crash.recovery.checkpoint_iteration[0])
    assert sorted(set(crash.jobs[crash.jobs.segment == 2].iteration)) == list(range(ck, 12))


def test_a_wrong_diagnosis_leaves_the_fault_and_a_second_cycle_follows():
    d = scenario([{"kind": "crash", "rank": 1, "at_ps": CRASH_AT}])
    real = recovery.make_detector(Scenario.from_dict(d).recovery, "j")
    first = ["h0", "h1", "h2", "h3"]

    def wrong_first(ccl, msgs, hosts, end):
        a = real(ccl, msgs, hosts, end)
        if a is not None and hosts == first:
            a.component = "j:2"  # blames rank 2 (h2) for rank 1's crash
        return a

    res = run(d, detector=wrong_first)
    c1, c2 = res.recovery_arrow.to_pylist()
    assert c1["isolated"] == "h2" and c1["correct"] is False and c1["spare"] == "h4"
    # h1 is still faulty: the restarted rank 1 halts at once and the job fails again.
    assert c2["fault"] == 0 and c2["fault_ps"] == c1["restart_ps"]
    assert c2["post_checkpoint_ps"] == 0
    # Nothing completes with a rank halted from the start: C4D has no rhythm,
    # the watchdog fires 1 s after the first allreduce began, people diagnose.
    assert c2["diagnosis"] == "manual" and c2["named_component"] is None
    assert c2["diagnosis_isolation_ps"] == 3 * 3600 * S
    assert c2["isolated"] == "h1" and c2["correct"] and c2["spare"] == "h5"
    r = res.summary["recovery"]
    assert r["outcome"] == "completed" and r["restarts"] == 2
    assert r["workers"] == ["h0", "h5", "h4", "h3"]


def test_no_fault_no_downtime_and_only_the_checkpoint_pauses_differ():
    d = scenario()
    res = run(d)
    r = res.summary["recovery"]
    assert r["outcome"] == "completed" and r["cycles"] == 0
    assert r["downtime_ps"]["total"] == 0 and not len(res.recovery)
    # 12 iterations, a checkpoint every 3: before iterations 3, 6 and 9.
    assert r["checkpoints"] == 3 and r["checkpoint_pause_ps"] == 3 * MS
    plain = copy.deepcopy(d)
    del plain["recovery"]
    for k in ("checkpoint_iterations", "checkpoint_ps"):
        del plain["jobs"][0][k]
    p = simulate(Scenario.from_dict(plain)).jobs.set_index(["worker", "iteration"]).end_ps
    got = res.jobs.set_index(["worker", "iteration"]).end_ps
    for (w, it), end in p.items():
        assert got[(w, it)] == end + (it // 3) * MS, (w, it)
    assert r["wall_ps"] == r["useful_ps"] == int(p.max()) + 3 * MS


def test_fabriclab_simulate_runs_the_recovery_as_the_cli_does(crash):
    import fabriclab

    res = fabriclab.simulate(Scenario.from_dict(scenario([{"kind": "crash", "rank": 1, "at_ps": CRASH_AT}])))
    assert isinstance(res, recovery.RecoveryResults)
    assert res.summary["recovery"] == crash.summary["recovery"]


def test_restarts_exhausted_ends_the_run_with_that_outcome():
    res = run(scenario([{"kind": "hang", "rank": 2, "at_ps": CRASH_AT}], max_restarts=0))
    r = res.summary["recovery"]
    (c,) = res.recovery_arrow.to_pylist()
    assert r["outcome"] == "restarts_exhausted" and r["restarts"] == 0 and len(res.segments) == 1
    assert c["restart_ps"] is None and c["isolated"] is None
    assert r["end_ps"] == c["alarm_ps"]
    assert r["wall_ps"] == r["useful_ps"] + c["post_checkpoint_ps"] + c["detection_ps"]
    # The useful time runs to the checkpoint: the iterations it saved are the ones done.
    assert r["useful_ps"] == c["checkpoint_ps"] and r["iterations_done"] == c["checkpoint_iteration"] == 3


def test_no_spare_left_ends_the_run_with_that_outcome():
    res = run(scenario([{"kind": "crash", "rank": 0, "at_ps": CRASH_AT}], spares=[]))
    r = res.summary["recovery"]
    assert r["outcome"] == "no_spare" and r["restarts"] == 0
    (c,) = res.recovery_arrow.to_pylist()
    assert c["isolated"] == "h0" and c["spare"] is None and c["restart_ps"] is None


def test_spare_pool_default_is_8_per_128_rounded_up():
    from fabriclab.scenario.recovery import spare_hosts

    s = Scenario.from_dict(scenario() | {"recovery": {}})
    assert spare_hosts(s, s.build_topology(), [0, 1, 2, 3]) == [4]  # ceil(4 * 8 / 128) = 1, the lowest free host
    d = scenario() | {"topology": {"kind": "star", "hosts": 140}}
    d["jobs"][0]["workers"] = list(range(129))
    d["recovery"] = {}
    s = Scenario.from_dict(d)
    assert spare_hosts(s, s.build_topology(), list(range(129))) == list(range(129, 138))  # ceil(129 / 16) = 9


@pytest.mark.parametrize("change, field", [
    ({"spares": [1]}, "recovery.spares[0]"),
    ({"spares": ["h9"]}, "recovery.spares[0]"),
    ({"spares": 3}, "recovery.spares"),
])
def test_a_spare_pool_that_cannot_be_had_is_refused(change, field):
    s = Scenario.from_dict(scenario(**change))
    with pytest.raises(ScenarioError, match=field.replace("[", r"\[").replace("]", r"\]")):
        core_spec(s)


def test_same_scenario_same_results_and_the_cli_writes_them(crash, tmp_path):
    import json

    import pyarrow.parquet as pq
    import tomli_w

    from fabriclab.cli.main import _run_guarded

    d = scenario([{"kind": "crash", "rank": 1, "at_ps": CRASH_AT}])
    path = tmp_path / "s.toml"
    path.write_text(tomli_w.dumps(d))
    assert _run_guarded(["run", str(path), "--out", str(tmp_path / "out"), "-q"]) == 0
    out = tmp_path / "out"
    assert pq.read_table(out / "recovery.parquet").equals(crash.recovery_arrow)
    assert pq.read_table(out / "jobs.parquet").equals(crash.jobs_arrow)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["recovery"] == crash.summary["recovery"]
    for k in (1, 2):
        assert (out / "segments" / str(k) / "scenario.resolved.toml").is_file()


def test_the_example_finds_the_throttled_gpu_and_swaps_its_host(tmp_path):
    """examples/c4_recovery.toml: rank 3 of workers h0..h7 slows to half speed at
    60 ms; spares h8, h9. C4D must name rank 3, whose host is h3, and the job must
    finish its 30 iterations on h8 in h3's place."""
    from pathlib import Path

    import pyarrow.parquet as pq

    from fabriclab.cli.main import _run_guarded

    example = Path(__file__).resolve().parents[1] / "examples" / "c4_recovery.toml"
    assert _run_guarded(["run", str(example), "--out", str(tmp_path / "out"), "-q"]) == 0
    rows = pq.read_table(tmp_path / "out" / "recovery.parquet").to_pylist()
    assert len(rows) == 1
    row = rows[0]
    assert (row["fault_kind"], row["named_component"], row["isolated"], row["spare"]) == \
        ("compute_slow", "train:3", "h3", "h8")
    assert row["alarm_ps"] > row["fault_ps"] == 60 * MS
    assert row["restart_ps"] == row["alarm_ps"] + 900 * S  # 300 s isolation + 600 s re-initialisation


def _identity(r) -> None:
    """The job's wall time is its useful time, the four parts and its stalled end."""
    assert r["wall_ps"] == r["useful_ps"] + r["downtime_ps"]["total"] + r["stalled_ps"]


def test_a_job_starting_late_is_accounted_from_its_start(crash):
    """Job start 100 ms, crash 100 ms later than the fixture's: nothing else
    runs, so everything is the fixture's shifted by 100 ms (no allreduce has
    begun at the detector's first reading: that must not stop the run)."""
    d = scenario([{"kind": "crash", "rank": 1, "at_ps": CRASH_AT + 100 * MS}])
    d["jobs"][0]["start_ps"] = 100 * MS
    res = run(d)
    (c,) = res.recovery_arrow.to_pylist()
    (c0,) = crash.recovery_arrow.to_pylist()
    assert c["fault_ps"] == CRASH_AT + 100 * MS and c["checkpoint_iteration"] == 3
    for k in ("alarm_ps", "checkpoint_ps", "restart_ps"):
        assert c[k] == c0[k] + 100 * MS, k
    r, r0 = res.summary["recovery"], crash.summary["recovery"]
    assert r["start_ps"] == 100 * MS and r["end_ps"] == r0["end_ps"] + 100 * MS
    assert r["wall_ps"] == r0["wall_ps"] and r["useful_ps"] == r0["useful_ps"]
    _identity(r)


def test_stop_ps_during_the_downtime_truncates_its_parts():
    """Stopped at 6 s: the alarm comes within the first second (C4D reads
    the job's iterations of a few ms), isolation takes its 5 s, the
    re-initialisation only what is left to 6 s; no restart."""
    d = scenario([{"kind": "crash", "rank": 1, "at_ps": CRASH_AT}])
    d["stop_ps"] = 6 * S
    res = run(d)
    (c,) = res.recovery_arrow.to_pylist()
    r = res.summary["recovery"]
    assert r["outcome"] == "stopped" and r["restarts"] == 0 and len(res.segments) == 1
    assert c["alarm_ps"] < S and c["restart_ps"] is None
    assert c["diagnosis_isolation_ps"] == ISOLATION
    assert c["reinitialization_ps"] == 6 * S - c["alarm_ps"] - ISOLATION
    assert r["end_ps"] == r["wall_ps"] == 6 * S
    _identity(r)
    assert r["iterations_done"] == 3 and r["useful_ps"] == c["checkpoint_ps"]
    # Stopped within the isolation: no re-initialisation at all.
    d["stop_ps"] = 2 * S
    (c,) = run(d).recovery_arrow.to_pylist()
    assert c["diagnosis_isolation_ps"] == 2 * S - c["alarm_ps"] and c["reinitialization_ps"] == 0


def test_stop_ps_before_anything_happens_runs_cleanly():
    d = scenario([{"kind": "crash", "rank": 1, "at_ps": CRASH_AT}])
    d["stop_ps"] = 1
    r = run(d).summary["recovery"]
    assert (r["outcome"], r["cycles"], r["wall_ps"], r["useful_ps"], r["stalled_ps"], r["iterations_done"]) == \
        ("stopped", 0, 1, 0, 1, 0)
    # Stopped before the job starts: it has no time at all.
    d["jobs"][0]["start_ps"] = 100 * MS
    d["stop_ps"] = 50 * MS
    r = run(d).summary["recovery"]
    assert (r["outcome"], r["wall_ps"], r["useful_ps"], r["stalled_ps"]) == ("stopped", 0, 0, 0)


def test_two_faults_the_cycle_is_the_alarms_fault_and_the_silent_one_spoils_no_checkpoint():
    """Rank 2 1 % slow from 5 ms (too little for C4D), rank 1 crashes at
    15 ms: the alarm names rank 1, so the cycle is the crash's, restored
    from the checkpoint of 3 iterations (1 % changes none of the bounds of
    the crash test). The slow GPU stays (h2 is not isolated) but raised no
    alarm: the restarted segment's checkpoints count (before iterations 6
    and 9): 3 in all."""
    res = run(scenario([{"kind": "compute_slow", "rank": 2, "factor": 1.01, "at_ps": 5 * MS},
                        {"kind": "crash", "rank": 1, "at_ps": CRASH_AT}]))
    (c,) = res.recovery_arrow.to_pylist()
    assert (c["fault"], c["fault_kind"], c["fault_ps"], c["named_component"], c["isolated"], c["correct"]) == \
        (1, "crash", CRASH_AT, "j:1", "h1", True)
    assert c["checkpoint_iteration"] == 3 and c["post_checkpoint_ps"] == CRASH_AT - c["checkpoint_ps"]
    r = res.summary["recovery"]
    assert r["outcome"] == "completed" and r["checkpoints"] == 3
    seg2 = res.segments[1].resolved
    assert [(f["kind"], f["rank"], f["at_ps"]) for f in seg2["faults"]] == [("compute_slow", 2, 0)]
    _identity(r)


def _leaf_spine(faults=()) -> dict:
    """Two leaves of four hosts (h0..h3 under leaf0), two spines; the job on
    h0, h1 (leaf0) and h4, h5 (leaf1), spares h2, h3; 12 iterations."""
    d = scenario(faults)
    d["topology"] = {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 4, "spines": 2, "link_rate_bps": "10Gbps"}
    d["jobs"][0]["workers"] = [0, 1, 4, 5]
    d["recovery"]["spares"] = [2, 3]
    return d


def _alarm_once(at_ps, syndrome, component_kind, component):
    """A detector that raises one alarm at ``at_ps`` in the first segment."""
    from fabriclab.systems.c4.detector import Alarm

    fired = []

    def detect(ccl, msgs, hosts, end):
        if not fired and end >= at_ps and len(ccl):
            fired.append(1)
            return Alarm(at_ps, syndrome, component_kind, component, 0)
        return None

    return detect


def test_a_fabric_link_named_is_taken_out_of_service_in_the_next_segment():
    d = _leaf_spine([{"kind": "link_degraded", "link": ["spine0", "leaf0"], "factor": 8.0, "at_ps": 10 * MS}])
    res = run(d, detector=_alarm_once(20 * MS, "comm_slow", "link", "leaf0-spine0"))
    c = res.recovery_arrow.to_pylist()[0]
    assert (c["fault"], c["isolated"], c["correct"], c["spare"], c["diagnosis"]) == \
        (0, "leaf0-spine0", True, None, "automatic")
    r = res.summary["recovery"]
    assert r["isolated_links"] == ["leaf0-spine0"] and r["workers"] == ["h0", "h1", "h4", "h5"]
    seg2 = res.segments[1].resolved
    # Down from the restart; the fault on it is gone with it.
    assert [(e["at_ps"], sorted(e["link"]), e["action"]) for e in seg2["link_events"]] == \
        [(0, ["leaf0", "spine0"], "down")]
    assert not seg2.get("faults")


def test_a_fabric_link_the_job_never_crossed_is_no_cause_of_its_alarm():
    """Job on h0..h3 (all under leaf0: no message goes up to a spine); a
    degraded leaf1-spine0 cannot be the cause of an alarm on it: a false alarm."""
    d = _leaf_spine([{"kind": "link_degraded", "link": ["leaf1", "spine0"], "factor": 8.0, "at_ps": 5 * MS}])
    d["jobs"][0]["workers"] = [0, 1, 2, 3]
    d["recovery"]["spares"] = [4, 5]
    res = run(d, detector=_alarm_once(20 * MS, "comm_slow", None, None))
    c = res.recovery_arrow.to_pylist()[0]
    assert c["fault"] is None and c["correct"] is None and c["isolated"] is None
    assert c["post_checkpoint_ps"] == 20 * MS - c["checkpoint_ps"] and c["detection_ps"] == 0


def test_a_restart_keeps_each_links_state_and_shifts_traffic_flows_and_events():
    """Segment from S on, by hand: h6-leaf1 went down (fault, 1 ms) and up
    (user, 2 ms): up, no event. leaf1-spine1: rate 5 Gbit/s (3 ms), down
    (4 ms), up at S + 2 ms: rate and down at 0, up at 2 ms. leaf0-spine1
    flaps (period 4 ms from S - 1 ms to S + 10 ms): down at S - 1 ms, so
    down at 0, then up 1, down 3, up 5, down 7, up 9 ms. A fault from
    S + 5 ms stays a fault at 5 ms; traffic keeps its global window; a flow
    before S is dropped, one after moves by S."""
    from fabriclab.systems.c4.recovery import _Fault, _segment_scenario, _State

    d = _leaf_spine([{"kind": "link_down", "link": ["h6", "leaf1"], "at_ps": 1 * MS},
                     {"kind": "flapping", "link": ["spine1", "leaf0"], "at_ps": S - MS, "period_ps": 4 * MS,
                      "until_ps": S + 10 * MS},
                     {"kind": "link_degraded", "link": ["leaf1", "spine0"], "factor": 2.0, "at_ps": S + 5 * MS}])
    d["link_events"] = [{"at_ps": S + 2 * MS, "link": ["leaf1", "spine1"], "action": "up"},
                        {"at_ps": 2 * MS, "link": ["h6", "leaf1"], "action": "up"},
                        {"at_ps": 3 * MS, "link": ["leaf1", "spine1"], "action": "rate", "rate_bps": 5 * 10**9},
                        {"at_ps": 4 * MS, "link": ["spine1", "leaf1"], "action": "down"}]
    d["flows"] = [{"src": 6, "dst": 7, "size_bytes": 1000, "start_ps": MS},
                  {"src": 6, "dst": 7, "size_bytes": 1000, "start_ps": S + 3 * MS}]
    d["traffic"] = [{"hosts": [6, 7], "load": 0.01, "start_ps": 0, "duration_ps": 2 * S},
                    {"hosts": [6, 7], "load": 0.01, "start_ps": 0, "duration_ps": S // 2}]
    s = Scenario.from_dict(d)
    t = s.build_topology()
    st = _State(topology=t, job="j", workers=[0, 1, 4, 5], spares=[2, 3],
                faults=[_Fault(i, f) for i, f in enumerate(s.faults)], start_ps=S)
    seg = _segment_scenario(s, st, 2, t).resolved_dict()
    got = [(e["at_ps"], e["link"], e["action"], e.get("rate_bps")) for e in seg["link_events"]]
    assert got == [(0, ["leaf1", "spine1"], "rate", 5 * 10**9), (0, ["leaf1", "spine1"], "down", None),
                   (0, ["leaf0", "spine1"], "down", None),
                   (1 * MS, ["leaf0", "spine1"], "up", None), (2 * MS, ["leaf1", "spine1"], "up", None),
                   (3 * MS, ["leaf0", "spine1"], "down", None), (5 * MS, ["leaf0", "spine1"], "up", None),
                   (7 * MS, ["leaf0", "spine1"], "down", None), (9 * MS, ["leaf0", "spine1"], "up", None)]
    assert [(f["kind"], f["at_ps"]) for f in seg["faults"]] == [("link_degraded", 5 * MS)]
    assert [(tr["start_ps"], tr["duration_ps"]) for tr in seg["traffic"]] == [(0, S)]
    assert [(f["start_ps"], f["size_bytes"]) for f in seg["flows"]] == [(3 * MS, 1000)]


def test_the_watchdog_alone_fires_its_timeout_after_the_stuck_allreduce_and_people_diagnose():
    """The crashed rank leaves the allreduce it was due in unfinished: the
    watchdog fires 1 s (its timeout) after that op's first event, which
    lies within an iteration (< 3 ms) of the crash; people take 3 h
    (the default manual diagnosis) and isolate h1 itself."""
    res = run(scenario([{"kind": "crash", "rank": 1, "at_ps": CRASH_AT}], detector="watchdog"))
    (c,) = res.recovery_arrow.to_pylist()
    assert CRASH_AT - 3 * MS < c["alarm_ps"] - S < CRASH_AT + 3 * MS
    assert (c["diagnosis"], c["named_component"], c["isolated"], c["correct"]) == ("manual", None, "h1", True)
    assert c["diagnosis_isolation_ps"] == 3 * 3600 * S and c["checkpoint_iteration"] == 3
    assert c["detection_ps"] == c["alarm_ps"] - CRASH_AT
    r = res.summary["recovery"]
    assert r["outcome"] == "completed" and r["iterations_done"] == 12
    _identity(r)


def test_a_fault_after_the_job_ends_costs_nothing():
    res = run(scenario([{"kind": "crash", "rank": 1, "at_ps": 10 * S}]))
    r = res.summary["recovery"]
    assert (r["outcome"], r["cycles"], r["iterations_done"], r["downtime_ps"]["total"]) == ("completed", 0, 12, 0)
    assert r["wall_ps"] == r["useful_ps"]


def test_an_alarm_on_the_last_iteration_does_not_restart_a_finished_job():
    """Rank 1 three times slower from 33 ms: the last iteration (11) begins
    after 11 x 2.48 + 3 x 1 = 30.3 ms and ends after 33 ms, so only it is slowed;
    C4D's evidence of the straggler is that iteration's end, when the job is
    done: no cycle."""
    res = run(scenario([{"kind": "compute_slow", "rank": 1, "factor": 3.0, "at_ps": 33 * MS}]))
    r = res.summary["recovery"]
    assert (r["outcome"], r["cycles"], r["iterations_done"]) == ("completed", 0, 12)
    _identity(r)


@pytest.mark.parametrize("spares, field", [
    ([1], "recovery.spares[0]"),
    (["h9"], "recovery.spares[0]"),
    (3, "recovery.spares"),
    (True, "recovery.spares"),
])
def test_the_cli_refuses_a_spare_pool_that_cannot_be_had_with_exit_2(spares, field, tmp_path, capsys):
    import tomli_w

    from fabriclab.cli.main import _run_guarded

    path = tmp_path / "s.toml"
    path.write_text(tomli_w.dumps(scenario([{"kind": "crash", "rank": 1, "at_ps": CRASH_AT}], spares=spares)))
    assert _run_guarded(["run", str(path), "--out", str(tmp_path / "out"), "-q"]) == 2
    e = capsys.readouterr().err
    assert field in e and "Traceback" not in e
    assert not (tmp_path / "out").exists()


def test_a_sweep_point_of_a_recovery_run_ships_its_segment_folders(tmp_path):
    """The Ray path returns a point's files to the driver: a recovery run's
    segments/<k>/ must come back too, and be written where they were."""
    from fabriclab.sweep import _run_point_files, _write_point

    base = scenario([{"kind": "crash", "rank": 1, "at_ps": CRASH_AT}]) | {"__base_dir": str(tmp_path)}
    files = _run_point_files(base, {"seed": 5})
    assert "summary.json" in files and "segments/2/scenario.resolved.toml" in files
    _write_point(tmp_path, "p", files)
    assert (tmp_path / "p" / "segments" / "1" / "jobs.parquet").is_file()

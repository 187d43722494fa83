"""Isolation and restart of a failed job (python/fabriclab/c4/recovery.py,
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

from fabriclab.c4 import recovery
from fabriclab.engine import simulate
from fabriclab.scenario import Scenario, ScenarioError

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


def test_no_spare_left_ends_the_run_with_that_outcome():
    res = run(scenario([{"kind": "crash", "rank": 0, "at_ps": CRASH_AT}], spares=[]))
    r = res.summary["recovery"]
    assert r["outcome"] == "no_spare" and r["restarts"] == 0
    (c,) = res.recovery_arrow.to_pylist()
    assert c["isolated"] == "h0" and c["spare"] is None and c["restart_ps"] is None


def test_spare_pool_default_is_8_per_128_rounded_up():
    from fabriclab.c4.recovery_config import spare_hosts

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
        s.to_core()


def test_same_scenario_same_results_and_the_cli_writes_them(crash, tmp_path):
    import json

    import pyarrow.parquet as pq
    import tomli_w

    from fabriclab.cli import _run_guarded

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

    from fabriclab.cli import _run_guarded

    example = Path(__file__).resolve().parents[1] / "examples" / "c4_recovery.toml"
    assert _run_guarded(["run", str(example), "--out", str(tmp_path / "out"), "-q"]) == 0
    rows = pq.read_table(tmp_path / "out" / "recovery.parquet").to_pylist()
    assert len(rows) == 1
    row = rows[0]
    assert (row["fault_kind"], row["named_component"], row["isolated"], row["spare"]) == \
        ("compute_slow", "train:3", "h3", "h8")
    assert row["alarm_ps"] > row["fault_ps"] == 60 * MS
    assert row["restart_ps"] == row["alarm_ps"] + 900 * S  # 300 s isolation + 600 s re-initialisation

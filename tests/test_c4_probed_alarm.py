"""C4D + probes raising an alarm (detector.Master._probed_slow, probes.blame):
the probes blame one link and every connection of the job through it ran
slower than its healthy median, in two consecutive ops. Hand-built rings and
probe results (test_c4_faults.hand_ring, test_c4_probes.results) whose
answers follow from their construction."""

from fabriclab.systems.c4.detector import RATE_MIN, diagnose
from fabriclab.systems.c4.probes import blame
from test_c4_faults import RING4, RING4_LEAF, STEPS, hand_ring, route
from test_c4_probes import ALARM, PERIOD_JOB, PATHS, results, through

OP_PS = 10_000_000_000  # hand_ring: op k starts at k x 10 ms


def prober_from(link, first_op, last_op=10**9):
    """The probes blame ``link`` at the ends of ops first_op..last_op."""
    return lambda t, period: link if first_op * OP_PS <= t < (last_op + 1) * OP_PS else None


def test_probes_and_a_job_slowdown_below_the_matrix_threshold_raise_an_alarm():
    # h3's link 1.1x slower from op 8: h3's two connections each send four
    # messages 100 us apart, the last one 110 us: busy 410 us against 400,
    # ratio 1.025, below RATE_MIN (1.3): C4D alone raises nothing.
    assert 410 / 400 < RATE_MIN
    ccl, view = hand_ring(12, slow_from=8, factor=1.1)
    assert diagnose(ccl, view, 10**15) is None
    # The probes blame h3-leaf1 from op 8 on; both connections through it
    # (h2 -> h3, h3 -> h0) are above their median (ratio 1.025 > 1) in ops 8
    # and 9: the alarm comes at op 9's last completion, 410 us after it began.
    a = diagnose(ccl, view, 10**15, prober_from("h3-leaf1", 8))
    assert (a.syndrome, a.component_kind, a.component, a.op) == ("comm_slow", "link", "h3-leaf1", 9)
    assert a.time_ps == (9 * OP_PS // 1000 + STEPS * 100_000 + 10_000) * 1000


def test_probes_alone_without_a_job_slowdown_raise_nothing():
    # The same probes, but the job's connections run as before (ratio 1,
    # not above the median): the link does not slow the job.
    ccl, view = hand_ring(12)
    assert diagnose(ccl, view, 10**15, prober_from("h3-leaf1", 8)) is None


def test_probes_in_one_op_only_raise_nothing():
    ccl, view = hand_ring(12, slow_from=8, factor=1.1)
    assert diagnose(ccl, view, 10**15, prober_from("h3-leaf1", 8, 8)) is None
    # Two ops, but the second blames another link: nothing either.
    two = lambda t, period: {8: "h3-leaf1", 9: "h2-leaf1"}.get(t // OP_PS)
    assert diagnose(ccl, view, 10**15, two) is None


def test_blame_names_the_one_link_whose_every_probe_is_bad_and_that_explains_them_all():
    everything = set()
    for p in PATHS:
        nodes = p.split(" > ")
        everything |= {"-".join(sorted(ab)) for ab in zip(nodes, nodes[1:])}
    # h6-leaf1 at a lower rate: its two probes (h5 -> h6, h6 -> h4) slower.
    assert blame(results(through("h6-leaf1"), slower=1.2), ALARM, PERIOD_JOB, everything) == "h6-leaf1"
    # h5-leaf1 down: all six of its probes lost.
    assert blame(results(through("h5-leaf1"), lost=True), ALARM, PERIOD_JOB, everything) == "h5-leaf1"
    # A probe queued elsewhere too (h1 -> h2 inside leaf0): h6-leaf1 no
    # longer explains every bad probe, and nothing is blamed.
    r = results(through("h6-leaf1") + ["h1 > leaf0 > h2"], slower=1.2)
    assert blame(r, ALARM, PERIOD_JOB, everything) is None
    # leaf1-spine0's two probes stalled: h5-leaf1 lies on both but has four
    # good ones, so leaf1-spine0 alone is blamed.
    r = results(through("leaf1-spine0"), stall=True, until=47 * 10**9)
    assert blame(r, ALARM, PERIOD_JOB, everything) == "leaf1-spine0"
    # Only the job's links can be blamed.
    assert blame(results(through("h6-leaf1"), slower=1.2), ALARM, PERIOD_JOB, everything - {"h6-leaf1"}) is None
    assert blame(results(), ALARM, PERIOD_JOB, everything) is None


def test_a_fault_after_the_jobs_last_iteration_is_not_observable():
    import pandas as pd

    from fabriclab.systems.c4.repro_diagnosis import finished_by

    # Two workers, two iterations; the last one ends at 20 ms (worker 1).
    jobs = pd.DataFrame({"job": ["train"] * 4, "worker": [0, 1, 0, 1], "iteration": [0, 0, 1, 1],
                         "end_ps": [10, 10, 19, 20]}).assign(end_ps=lambda d: d.end_ps * 10**9)
    assert not finished_by(jobs, 15 * 10**9, 2, 2) and not finished_by(jobs, 20 * 10**9 - 1, 2, 2)
    assert finished_by(jobs, 20 * 10**9, 2, 2) and finished_by(jobs, 25 * 10**9, 2, 2)
    # A job of three iterations halted after its second by a crash at 22 ms
    # did not finish: the crash is observable.
    assert not finished_by(jobs, 22 * 10**9, 3, 2)
    # Worker 1 crashed before ending its last iteration (no end, or no row):
    # the others' ends are all before the fault, but the job did not finish.
    halted = jobs.assign(end_ps=[10 * 10**9, 10 * 10**9, 19 * 10**9, None])
    assert not finished_by(halted, 25 * 10**9, 2, 2)
    assert not finished_by(jobs.iloc[:3], 25 * 10**9, 2, 2)


def test_a_fault_after_the_end_makes_a_fault_free_run():
    """Its alarm is a false one: precision 1 right / 2 alarms; the false-alarm rate 1 of 2 such runs."""
    import pandas as pd

    from fabriclab.systems.c4.repro_diagnosis import score

    cols = ["time_ps", "correct", "detected", "latency_iterations"]
    row = lambda kind, eff, after, alarm, ok: {  # noqa: E731
        "kind": kind, "effective": eff, "after_end": after, "at_ps": 0 if kind != "none" else None,
        **dict(zip((f"c4d_{c}" for c in cols), (5 if alarm else None, ok, ok, 1 if ok else None)))}
    df = pd.DataFrame([row("crash", True, False, True, True), row("crash", False, True, True, False),
                       row("none", True, False, False, False)])
    t = score(df, "c4d").set_index("kind")
    assert t.loc["overall", "alarms"] == 2 and t.loc["overall", "precision"] == 0.5
    assert t.loc["overall", "recall"] == 1.0 and t.loc["overall", "runs"] == 1
    assert t.loc["fault-free (false-alarm rate)", "runs"] == 2 and t.loc["fault-free (false-alarm rate)", "f1"] == 0.5


def test_probes_blaming_a_link_the_job_no_longer_crosses_raise_the_alarm_in_that_op():
    from fabriclab.systems.c4.detector import VANISH_MIN

    # spine1 routed around from op 8: leaf0-spine1 carried 4 messages per op
    # and none in op 8. The telemetry alone waits for VANISH_MIN (8) = 4 x 2
    # empty ops, op 9; the probes, which lose every probe through the dead
    # link, name it at op 8's last completion.
    assert VANISH_MIN == 8
    ccl, view = hand_ring(12, dead_from=8)
    assert diagnose(ccl, view, 10**15).op == 9
    a = diagnose(ccl, view, 10**15, prober_from("leaf0-spine1", 8))
    assert (a.syndrome, a.component_kind, a.component, a.op) == ("comm_slow", "link", "leaf0-spine1", 8)
    assert a.time_ps == (8 * OP_PS // 1000 + STEPS * 100_000) * 1000


def test_probes_blaming_a_link_that_still_carries_the_job_or_never_did_raise_nothing_at_once():
    # Nothing dead: the probes blame leaf0-spine0, which the job still
    # crosses at its usual rate (ratio 1: not slower), or leaf2-spine0, which
    # it never crossed.
    ccl, view = hand_ring(12)
    assert diagnose(ccl, view, 10**15, prober_from("leaf0-spine0", 8)) is None
    assert diagnose(ccl, view, 10**15, prober_from("leaf2-spine0", 8)) is None


def test_probes_name_a_link_of_one_message_per_op_after_empty_ops_with_its_mean_from_before():
    from fabriclab.systems.c4.detector import VANISH_MIN

    # The ring's cross-leaf messages all through spine0, except rank 1's step
    # 1 through spine1 until op 7: leaf0-spine1 carries one message per op,
    # then none from op 8 (mu = 1: the telemetry alone waits VANISH_MIN = 8
    # empty ops, ops 8..15). The probes blame it from op 10, its third empty
    # op: its mean before the empty ops is 1 (the last 8 ops, two of them
    # empty, average 0.75), so the alarm comes at op 10.
    assert VANISH_MIN == 8
    ccl, view = hand_ring(20)
    leaf = RING4_LEAF
    for (k, r, st), links in view.paths.items():
        if len(links) == 4:
            hs, hd = RING4[r], RING4[(r + 1) % 4]
            spine = "spine1" if (r, st) == (1, 1) and k < 8 else "spine0"
            view.paths[(k, r, st)] = route([hs, leaf[hs], spine, leaf[hd], hd])
    assert diagnose(ccl, view, 10**15).op == 15
    a = diagnose(ccl, view, 10**15, prober_from("leaf0-spine1", 10))
    assert (a.component, a.op) == ("leaf0-spine1", 10)


def test_job_view_reads_the_moved_messages_from_reroutes():
    import numpy as np
    import pandas as pd

    from fabriclab.systems.c4.detector import job_view

    # Tags: op << 32 | step << 16 | sender; the second message (op 3, step
    # 2, sender 1) moved once; with first_op 5 it is op 8 to the master.
    tags = [(3 << 32) | (0 << 16) | 0, (3 << 32) | (2 << 16) | 1]
    m = pd.DataFrame({"app": "train", "tag": np.array(tags, dtype=np.uint64),
                      "path": ["h0 > leaf0 > h1", "h1 > leaf0 > spine1 > leaf1 > h2"], "reroutes": [0, 1]})
    assert job_view("train", ["h0", "h1", "h2"], m, first_op=5).rerouted == {(8, 1, 2)}
    # A messages table without the column (an older run): nothing moved.
    assert job_view("train", ["h0", "h1", "h2"], m.drop(columns="reroutes")).rerouted == set()

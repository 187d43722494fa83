"""C4D + probes (c4/probes.py): the probe schedule covers every host link of
the job's leaves and every leaf-spine link twice, its load is what the
schedule's bytes give by hand, and the tomography names the link whose every
probe went bad, on hand-built probe results whose answer follows from the
paths: a lost, stalled or slower probe is blamed on the link all bad probes
share and no good probe crosses."""

import math

import numpy as np
import pandas as pd
import pytest

from fabriclab.systems.c4.detector import Alarm, JobView
from fabriclab.systems.c4.probes import LOST_PS, PROBE_BYTES, localise, probe_flows, probe_load
from fabriclab.systems.c4.repro_diagnosis import with_probes

MS = 10**9
PERIOD = 2 * MS
# Three leaves of four hosts, two spines; the job on h1 (leaf0) and h5 (leaf1).
FLOWS = probe_flows(3, 4, 2, [1, 5], PERIOD, MS, 61 * MS)
PATHS = sorted({" > ".join(f["path"]) for f in FLOWS})
BASE_PS = 10_000_000  # every probe's time on an idle path, 10 us
ALARM = 60 * MS
PERIOD_JOB = 4 * MS  # the job's period: the window is 16 ms + LOST_PS (1 ms)


def links_of(path):
    nodes = path.split(" > ")
    return {"-".join(sorted(ab)) for ab in zip(nodes, nodes[1:])}


def test_schedule_covers_each_host_link_of_the_job_and_each_leaf_spine_link_twice():
    # Per period: a ring of 3 inside leaf0 (h1 and two more: h0, h2) and
    # leaf1 (h5 with h4, h6), and a ring of the 3 leaves through each of 2
    # spines (probers h1, h5 and leaf2's first host h8): 3 + 3 + 6 probes.
    assert len(FLOWS) == 30 * 12 and len(PATHS) == 12
    counts = {}
    for p in PATHS:
        for lk in links_of(p):
            counts[lk] = counts.get(lk, 0) + 1
    for h in (0, 1, 2, 4, 5, 6):
        assert counts[f"h{h}-leaf{h // 4}"] == 2 + (4 if h in (1, 5) else 0)  # a prober also probes the fabric
    assert counts["h8-leaf2"] == 4
    for L in range(3):
        for S in range(2):
            assert counts[f"leaf{L}-spine{S}"] == 2
    assert not any(f"h{h}-leaf{h // 4}" in counts for h in (3, 7, 9, 10, 11))
    assert {f["size_bytes"] for f in FLOWS} == {PROBE_BYTES}


def test_probe_load_by_hand():
    # h1 -> leaf0 carries h1's probe to h2 and its two probes to leaf1:
    # 3 x 4,000 bytes per 2 ms = 48 Mbit/s, 0.48 % of 10 Gbit/s.
    assert math.isclose(probe_load(FLOWS, PERIOD, 10**10), 3 * PROBE_BYTES * 8 / 2e-3 / 1e10)


def results(bad_paths=(), lost=False, stall=False, slower=1.0, jitter=True, until=None):
    """Probe results: every probe BASE_PS (plus queueing on some), except on
    ``bad_paths`` from 31 ms on (inside the window before ALARM; probes
    start at odd milliseconds), until ``until``."""
    rows = []
    rng = np.random.default_rng(1)
    for f in FLOWS:
        p = " > ".join(f["path"])
        t = f["start_ps"]
        fct = BASE_PS * (1 + (rng.uniform(0, 3) if jitter and (t // PERIOD) % 2 else 0))  # half the probes queue
        end = t + fct
        if p in bad_paths and t >= 31 * MS and (until is None or t < until):
            if lost:
                end = np.nan
            elif stall:
                end = t + 10 * MS
            else:
                end = t + fct * slower
        rows.append({"path": p, "start_ps": t, "end_ps": end})
    return pd.DataFrame(rows)


def through(*links):
    return [p for p in PATHS if set(links) <= links_of(p)]


def test_nothing_bad_names_nothing():
    assert localise(results(), ALARM, PERIOD_JOB) is None


def test_a_host_link_whose_probes_are_lost():
    # h4-leaf1 is on h4 -> h5 and h6 -> h4; h6-leaf1 also on h5 -> h6 (good),
    # h5-leaf1 also on h5 -> h6 and four fabric probes (good).
    v = localise(results(through("h4-leaf1"), lost=True), ALARM, PERIOD_JOB)
    assert (v.link, v.bad_paths, v.probed_paths) == ("h4-leaf1", 2, 2)


def test_a_leaf_spine_link_whose_probes_stall():
    # leaf1-spine0 is on leaf0 -> leaf1 and leaf1 -> leaf2 through spine0;
    # leaf0-spine0 and leaf2-spine0 each also carry a good probe.
    v = localise(results(through("leaf1-spine0"), stall=True, until=47 * MS), ALARM, PERIOD_JOB)
    assert (v.link, v.bad_paths, v.probed_paths) == ("leaf1-spine0", 2, 2)


def test_a_dead_prober_link_explains_more_than_its_uplinks():
    # h5-leaf1 is on all six probes through it; leaf1-spine0 and
    # leaf1-spine1 on two each, all of them bad too: the host link explains all.
    v = localise(results(through("h5-leaf1"), lost=True), ALARM, PERIOD_JOB)
    assert (v.link, v.bad_paths, v.probed_paths) == ("h5-leaf1", 6, 6)


def test_a_slower_link_by_its_fastest_probe():
    # The last 1.5 job periods (6 ms) hold probes at 55, 57 and 59 ms, one
    # of them without queueing: its time is BASE_PS x 1.2.
    v = localise(results(through("h6-leaf1"), slower=1.2), ALARM, PERIOD_JOB)
    assert v.link == "h6-leaf1"
    # 4 % slower is within RISE (5 %): not evidence.
    assert localise(results(through("h6-leaf1"), slower=1.04, jitter=False), ALARM, PERIOD_JOB) is None


def test_only_what_happened_by_the_alarm_counts():
    # The probes are lost from 31 ms on; an alarm at 30 ms has not seen it,
    # nor one before the first loss could be known (LOST_PS after 31 ms).
    bad = results(through("h5-leaf1"), lost=True)
    assert localise(bad, 30 * MS, PERIOD_JOB) is None
    assert localise(bad, 31 * MS + LOST_PS - 1, PERIOD_JOB) is None
    assert localise(bad, 31 * MS + LOST_PS, PERIOD_JOB).link == "h5-leaf1"


# The job of h1 and h5: its messages cross their host links and both spines.
VIEW = JobView("train", ["h1", "h5"],
               {(0, 0, 0): ["h1-leaf0", "leaf0-spine0", "leaf1-spine0", "h5-leaf1"],
                (0, 1, 0): ["h5-leaf1", "leaf1-spine1", "leaf0-spine1", "h1-leaf0"]},
               {"h1": {"h1-leaf0"}, "h5": {"h5-leaf1"}})


@pytest.mark.parametrize("syndrome,kind,component,expected", [
    ("comm_slow", "link", "leaf1-spine1", "h5-leaf1"),
    ("comm_hang", "host", "h1", "h5-leaf1"),
    ("noncomm_slow", "rank", "train:3", "train:3"),  # not a communication alarm: unchanged
])
def test_with_probes_renames_communication_alarms_only(syndrome, kind, component, expected):
    # All six probes through h5-leaf1 lost: leaf1-spine1 and h1-leaf0 lie
    # on two of them, h5-leaf1 on all.
    a = Alarm(ALARM, syndrome, kind, component, 7, period_ps=PERIOD_JOB)
    got = with_probes(a, results(through("h5-leaf1"), lost=True), VIEW)
    assert got.component == expected and got.syndrome == syndrome and got.time_ps == ALARM
    assert with_probes(a, results(), VIEW).component == component
    assert with_probes(None, results(), VIEW) is None


def test_the_telemetry_answer_stands_when_it_explains_the_probes_too():
    # Two stalled probes, both through h5 and spine0: leaf1-spine0 (both of
    # its probes bad) and h5-leaf1 (two of six) each explain them.
    # (Until 47 ms: every stalled probe is back by the alarm.)
    r = results([p for p in through("h5-leaf1") if "spine0" in p], stall=True, until=47 * MS)
    assert localise(r, ALARM, PERIOD_JOB).link == "leaf1-spine0"
    assert localise(r, ALARM, PERIOD_JOB, prior={"h5-leaf1"}).link == "h5-leaf1"
    a = Alarm(ALARM, "comm_slow", "host", "h5", 7, period_ps=PERIOD_JOB)
    assert with_probes(a, r, VIEW).component == "h5"
    b = Alarm(ALARM, "comm_slow", "link", "leaf0-spine1", 7, period_ps=PERIOD_JOB)
    assert with_probes(b, r, VIEW).component == "leaf1-spine0"


def test_lost_probes_outrank_slower_ones():
    # leaf0-spine0 loses its probes; the traffic moved over leaf0-spine1
    # slows that link's probes: the lost ones name the link.
    r = results(through("leaf0-spine0"), lost=True)
    slow = results(through("leaf0-spine1"), slower=1.5)
    moved = r.path.isin(through("leaf0-spine1"))
    r.loc[moved, "end_ps"] = slow.loc[moved, "end_ps"]
    assert localise(r, ALARM, PERIOD_JOB).link == "leaf0-spine0"


def test_a_lossy_link_need_not_stall_every_probe():
    # A lossy h5-leaf1 stalls four of its six probes: those through spine0
    # and the two inside leaf1. leaf1-spine0 has both its probes bad but
    # explains only two of the four; h5-leaf1 explains all four.
    bad = [p for p in through("h5-leaf1") if "spine1" not in p]
    assert len(bad) == 4
    v = localise(results(bad, stall=True, until=47 * MS), ALARM, PERIOD_JOB)
    assert (v.link, v.bad_paths, v.probed_paths) == ("h5-leaf1", 4, 6)


def test_bad_probes_no_single_link_explains_name_nothing():
    # h1 -> h2 inside leaf0 and h6 -> h4 inside leaf1 share no link.
    bad = [p for p in PATHS if p in ("h1 > leaf0 > h2", "h6 > leaf1 > h4")]
    assert len(bad) == 2
    assert localise(results(bad, lost=True), ALARM, PERIOD_JOB) is None


def test_only_the_job_links_are_named():
    # h2 -> h0 crosses two links no rank uses (h0 and h2 only close leaf0's
    # ring): its loss is not read; h5-leaf1's loss is. The job's links: its
    # ranks' (h1, h5) and the fabric's.
    job = {"h1-leaf0", "h5-leaf1"} | {f"leaf{L}-spine{S}" for L in range(3) for S in range(2)}
    lost = results(["h2 > leaf0 > h0"], lost=True)
    # Each of h2-leaf0 and h0-leaf0 lost one of its two probes: a tie names nothing.
    assert localise(lost, ALARM, PERIOD_JOB) is None
    assert localise(lost, ALARM, PERIOD_JOB, job) is None
    assert localise(results(through("h5-leaf1") + ["h2 > leaf0 > h0"], lost=True), ALARM, PERIOD_JOB,
                    job).link == "h5-leaf1"


def test_lost_probes_name_the_most_specific_link_whatever_the_telemetry_said():
    # leaf1-spine0 down: its two probes lost; h5-leaf1 lies on both too (two
    # of six), but a down h5-leaf1 would have lost all six.
    r = results(through("leaf1-spine0"), lost=True)
    assert localise(r, ALARM, PERIOD_JOB, prior={"h5-leaf1"}).link == "leaf1-spine0"
    a = Alarm(ALARM, "comm_hang", "host", "h5", 7, period_ps=PERIOD_JOB)
    assert with_probes(a, r, VIEW).component == "leaf1-spine0"


def test_one_lost_probe_does_not_overrule_the_telemetry_and_a_tie_names_nothing():
    # One probe not back 1 ms after it left: a lossy link's retransmission
    # timeout (10 ms) looks the same as a down link for that long. h4 -> h5
    # inside leaf1: h4-leaf1 lost one of its two probes, h5-leaf1 (leaf1's
    # prober, also on the fabric ring) one of six. Neither lost every probe
    # through it, so the telemetry's link stands when it explains the lost
    # probe; without it, the most specific link is named.
    r = results(["h4 > leaf1 > h5"], lost=True)
    assert localise(r, ALARM, PERIOD_JOB, prior={"h5-leaf1"}).link == "h5-leaf1"
    v = localise(r, ALARM, PERIOD_JOB)
    assert (v.link, v.bad_paths, v.probed_paths) == ("h4-leaf1", 1, 2)
    # h2 -> h0 inside leaf0: each of h2-leaf0 and h0-leaf0 lost one of its
    # two probes. A tie names nothing, or the telemetry's link of the two.
    tie = results(["h2 > leaf0 > h0"], lost=True)
    assert localise(tie, ALARM, PERIOD_JOB) is None
    assert localise(tie, ALARM, PERIOD_JOB, prior={"h0-leaf0"}).link == "h0-leaf0"
    # A link that lost every probe through it is down: it overrules the
    # telemetry's answer.
    down = results(through("h4-leaf1"), lost=True)
    assert localise(down, ALARM, PERIOD_JOB, prior={"h5-leaf1"}).link == "h4-leaf1"


def test_slower_probes_are_not_blamed_on_a_link_that_also_has_good_ones():
    # leaf1-spine0 at a lower rate slows both its probes (h1 -> h5 and
    # h5 -> h8 through spine0); a third probe, h4 -> h5 inside leaf1, queues
    # behind the job's traffic. h5-leaf1 lies on all three slower paths but
    # also on three good ones (h5 -> h6 and both through spine1): a lower
    # rate would have slowed those too, so it is not the answer; no link with
    # only slower probes explains all three, and the telemetry's link stands.
    slower = through("leaf1-spine0") + ["h4 > leaf1 > h5"]
    assert len(slower) == 3
    r = results(slower, slower=1.2)
    assert localise(r, ALARM, PERIOD_JOB) is None
    a = Alarm(ALARM, "comm_slow", "link", "leaf1-spine0", 7, period_ps=PERIOD_JOB)
    assert with_probes(a, r, VIEW).component == "leaf1-spine0"
    # Without the queued probe, leaf1-spine0's two slower probes name it.
    assert localise(results(through("leaf1-spine0"), slower=1.2), ALARM, PERIOD_JOB).link == "leaf1-spine0"

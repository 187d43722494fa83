"""Labelled faults (``[[faults]]``) and the C4D master on a small ring job:
each fault kind injected alone is diagnosed with its syndrome and its
component, a fault-free job with jitter raises no alarm, and the schema
refuses bad faults naming the field. Expected diagnoses are the faults'
definitions (docs/c4.md), not the program's output."""

import numpy as np
import pytest

from fabriclab.systems.c4.detector import diagnose, job_view
from fabriclab.sim.apps.faults import compile_faults
from fabriclab import simulate
from fabriclab.errors import InputError
from fabriclab.systems.c4.repro_diagnosis import matches
from fabriclab.scenario.model import Scenario
from fabriclab.sim.pipeline import core_spec
from conftest import assert_quick_bands

MS = 10**9
# Eight ranks over three leaves of four hosts (every ring hop but one crosses
# a spine), compute 4 ms per iteration: an iteration takes about 7 ms.
HOSTS = [0, 4, 8, 1, 5, 9, 2, 6]
AT_PS = 60 * MS


def ring_job(faults=(), iterations=16, stop_ps=2_000 * MS):
    return {
        "name": "c4-test", "seed": 5, "stop_ps": stop_ps,
        "topology": {"kind": "leaf_spine", "leaves": 3, "hosts_per_leaf": 4, "spines": 2,
                     "link_rate_bps": "10Gbps", "oversubscription": 0.5},
        "transport": {"min_rto_ps": "10ms", "initial_rto_ps": "10ms"},
        "routing": {"convergence_ps": "1ms"},
        "jobs": [{"name": "train", "workers": HOSTS, "profile": "resnet50", "layers": 4, "model_bytes": 2_000_000,
                  "compute_ps": "4ms", "fusion_bytes": 8_000_000, "iterations": iterations, "jitter": 0.02,
                  "end_run": True}],
        "faults": [dict(f, at_ps=AT_PS) for f in faults],
        "outputs": {"flows": False, "links": False},
    }


def iterations_to(jobs, at_ps, alarm_ps):
    """Iterations that ended (at every worker) after the fault and by the
    alarm (telemetry has nanoseconds: 1 ns of slack)."""
    ends = jobs.groupby("iteration").end_ps.max()
    return int(((ends > at_ps) & (ends <= alarm_ps + 1000)).sum())


def run(faults=(), **kw):
    s = ring_job(faults, **kw)
    r = simulate(Scenario.from_dict(s))
    view = job_view("train", [f"h{h}" for h in HOSTS], r.messages)
    return diagnose(r.ccl, view, s["stop_ps"]), r


# rank 3 runs on h1 (leaf0); rank 4 on h5 (leaf1).
CASES = [
    ({"kind": "crash", "rank": 3}, {"noncomm_hang"}, "train:3"),
    ({"kind": "hang", "rank": 6}, {"noncomm_hang"}, "train:6"),
    ({"kind": "compute_slow", "rank": 2, "factor": 2.0}, {"noncomm_slow"}, "train:2"),
    ({"kind": "link_degraded", "link": ["h5", "leaf1"], "factor": 3.0}, {"comm_slow"}, "h5-leaf1"),
    ({"kind": "link_degraded", "link": ["h5", "leaf1"], "loss": 0.02}, {"comm_slow"}, "h5-leaf1"),
    ({"kind": "link_down", "link": ["h1", "leaf0"]}, {"comm_hang"}, "h1-leaf0"),
    ({"kind": "flapping", "link": ["h1", "leaf0"], "period_ps": "20ms", "until_ps": "2s"},
     {"comm_slow", "comm_hang"}, "h1-leaf0"),
    ({"kind": "pcie_slow", "host": "h5", "factor": 3.0}, {"comm_slow"}, "h5"),
    # Fabric links run at 40 Gbit/s: a lone ring hop slows once one is below 10.
    ({"kind": "link_degraded", "link": ["leaf1", "spine1"], "factor": 8.0}, {"comm_slow"}, "leaf1-spine1"),
    ({"kind": "link_degraded", "link": ["leaf2", "spine1"], "loss": 0.02}, {"comm_slow"}, "leaf2-spine1"),
    # A leaf-spine link with an alternative path: one stall, then routed around.
    ({"kind": "link_down", "link": ["leaf1", "spine1"]}, {"comm_slow"}, "leaf1-spine1"),
]


@pytest.mark.parametrize("fault,syndromes,component", CASES, ids=[c[0]["kind"] + str(i) for i, c in enumerate(CASES)])
def test_each_fault_alone_is_diagnosed(fault, syndromes, component):
    alarm, r = run([fault])
    assert alarm is not None, "no alarm"
    assert alarm.time_ps >= AT_PS, "alarm before the fault"
    assert alarm.syndrome in syndromes
    assert matches(component, alarm.component), alarm
    late_its = iterations_to(r.jobs, AT_PS, alarm.time_ps)
    if alarm.syndrome.endswith("hang"):
        assert alarm.time_ps - AT_PS <= 2 * 10**12  # within 2 s of simulated time
    elif "loss" in fault or fault["kind"] == "flapping":
        # Intermittent: losses stall a message now and then, a port flaps
        # every period; two stalls on a common link are needed.
        assert late_its <= 20
    else:
        assert late_its <= 3


def test_fault_free_job_with_jitter_raises_no_alarm_over_100_iterations():
    alarm, r = run(iterations=100, stop_ps=5_000 * MS)
    assert r.jobs.iteration.max() == 99 and r.jobs.end_ps.notna().all()
    assert alarm is None, alarm


def test_ground_truth_names_the_components():
    _, r = run([{"kind": "pcie_slow", "host": 5, "factor": 2.0}], iterations=2)
    t = r.faults_arrow.to_pandas()
    assert list(t.component) == ["h5"] and list(t.component_kind) == ["host"]
    assert list(t.syndrome) == ["comm_slow"] and list(t.at_ps) == [AT_PS]


def compiled(faults):
    s = Scenario.from_dict(ring_job(faults, iterations=2))
    t = s.build_topology()
    names = {n["name"]: i for i, n in enumerate(t.nodes)}
    return compile_faults(s, t, names), t, names


def test_rate_degradation_divides_the_link_rate():
    (jobs, events), t, names = compiled([{"kind": "link_degraded", "link": ["leaf0", "spine1"], "factor": 4.0}])
    # Leaf-spine rate: 4 hosts x 10 Gbit/s / (2 spines x 0.5) = 40 Gbit/s; / 4 = 10 Gbit/s.
    assert [(e["action"], e["rate_bps"], e["at_ps"]) for e in events] == [("rate", 10_000_000_000, AT_PS)]
    assert jobs == {}


def test_flapping_alternates_down_and_up_every_half_period():
    (_, events), _, _ = compiled([{"kind": "flapping", "link": ["h1", "leaf0"], "period_ps": "10ms",
                                   "until_ps": AT_PS + 30 * MS}])
    got = [(e["action"], (e["at_ps"] - AT_PS) // MS) for e in events]
    assert got == [("down", 0), ("up", 5), ("down", 10), ("up", 15), ("down", 20), ("up", 25)]


def test_pcie_slow_slows_every_link_of_the_host_and_rank_faults_go_to_the_job():
    (jobs, events), t, names = compiled([{"kind": "pcie_slow", "host": "h5", "factor": 2.0},
                                         {"kind": "compute_slow", "rank": 7, "factor": 1.5}])
    h5 = names["h5"]
    assert len(events) == sum(1 for lk in t.links if h5 in (lk["a"], lk["b"])) == 1
    assert events[0]["rate_bps"] == 5_000_000_000
    assert jobs == {0: [{"worker": 7, "at_ps": AT_PS, "kind": "slow", "factor": 1.5}]}


@pytest.mark.parametrize("fault,field", [
    ({"kind": "crash"}, "rank"),
    ({"kind": "compute_slow", "rank": 1}, "factor"),
    ({"kind": "link_degraded", "link": ["h1", "leaf0"]}, "factor"),
    ({"kind": "link_degraded", "link": ["h1", "leaf0"], "factor": 2.0, "loss": 0.1}, "factor"),
    ({"kind": "flapping", "link": ["h1", "leaf0"], "period_ps": "1ms"}, "until_ps"),
    ({"kind": "crash", "rank": 1, "link": ["h1", "leaf0"]}, "link"),
    ({"kind": "compute_slow", "rank": 1, "factor": 0.5}, "factor"),
])
def test_schema_names_the_bad_field(fault, field):
    with pytest.raises(InputError) as e:
        Scenario.from_dict(ring_job([fault], iterations=2))
    assert "faults[0]" in str(e.value) and field in str(e.value)


@pytest.mark.parametrize("fault,field", [
    ({"kind": "crash", "rank": 8}, "faults[0].rank"),
    ({"kind": "link_down", "link": ["h1", "spine0"]}, "faults[0].link"),
    ({"kind": "pcie_slow", "host": "leaf0", "factor": 2.0}, "faults[0].host"),
])
def test_compile_names_the_bad_component(fault, field):
    s = Scenario.from_dict(ring_job([fault], iterations=2))
    with pytest.raises(InputError) as e:
        core_spec(s)
    assert field in str(e.value)


def test_reproduce_c4_diagnosis_quick(cli, tmp_path):
    import json

    import pandas as pd

    out = tmp_path / "c4"
    r = cli("reproduce", "c4-diagnosis", "--quick", "--out", str(out))
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert_quick_bands("c4-diagnosis", s)
    runs = pd.read_parquet(out / "runs.parquet")
    assert s["scenarios"] == len(runs) == 10
    # Scenario 0 is fault-free; the others carry one fault each, kinds in turn.
    assert runs.kind.iloc[0] == "none" and (runs.kind.iloc[1:] != "none").all()
    # The watchdog names no component, so it never diagnoses.
    assert not runs.watchdog_correct.any()
    assert {"c4d", "c4d_probes", "watchdog", "outlier"} == {x["detector"] for x in s["scores"]}


def test_job_telemetry_rows_match_their_messages_and_the_join_is_the_backward_end():
    s = ring_job(iterations=3)
    s["jobs"][0]["jitter"] = 0.0
    r = simulate(Scenario.from_dict(s))
    c, tl = r.ccl, r.timeline
    n = len(HOSTS)
    # A ring allreduce: 2(n - 1) rounds, each rank one send and one receive per round.
    assert (c.groupby("op_id").size() == 2 * n * 2 * (n - 1)).all()
    send = c[c.kind == "send"].set_index(["op_id", "rank", "peer", "seq"])
    recv = c[c.kind == "recv"].set_index(["op_id", "peer", "rank", "seq"])
    recv.index.names = send.index.names
    # The k-th send from a to b is the k-th receive at b from a: the send ends when it arrives.
    both = send.join(recv.add_suffix("_r"), how="inner")
    assert len(both) == len(send) == len(recv)
    assert (both.send_end_mono_ns == both.recv_arrival_mono_ns_r).all()
    # A rank joins op k when its backward pass of iteration k ends (one fusion per iteration).
    join = c.groupby(["op_id", "rank"]).post_mono_ns.min()
    bwd = tl[(tl.kind == "backward") & (tl["index"] == 0)].set_index(["iteration", "worker"]).end_ps // 1000
    assert (join.to_numpy() == bwd.loc[join.index].to_numpy()).all()


def test_compute_slow_multiplies_the_steps_started_after_the_fault():
    s = ring_job([{"kind": "compute_slow", "rank": 2, "factor": 1.5}], iterations=12)
    s["jobs"][0]["jitter"] = 0.0
    tl = simulate(Scenario.from_dict(s)).timeline
    tl = tl[tl.kind.isin(["forward", "backward"])]
    d = tl.assign(ps=tl.end_ps - tl.start_ps)
    nominal = d[d.worker == 0].groupby(["kind", "index"]).ps.first()
    mine = d[d.worker == 2].set_index(["kind", "index"])
    before = mine[mine.start_ps < AT_PS]
    after = mine[mine.start_ps >= AT_PS]
    assert len(after) and (before.ps.to_numpy() == nominal.loc[before.index].to_numpy()).all()
    # Rounded half away from zero, as the core rounds.
    assert (after.ps.to_numpy() == np.floor(nominal.loc[after.index].to_numpy() * 1.5 + 0.5)).all()


def test_a_halted_rank_stops_its_job():
    _, r = run([{"kind": "crash", "rank": 4}], iterations=12)
    tl = r.timeline
    assert tl[tl.worker == 4].end_ps.max() < AT_PS
    assert r.jobs.end_ps.isna().any()  # the job never finishes


# -- the master on hand-built telemetry ---------------------------------------
# Four ranks in a ring on h0..h3; h0, h1 under leaf0 and h2, h3 under leaf1.
# Ranks 1 and 3 send across the spines, step s through spine s % 2 (ECMP),
# so leaf0-spine1 and leaf1-spine1 carry 2 senders x 2 odd steps = 4 messages
# per op. Every message takes 100 us; op k starts at k x 10 ms.
RING4 = ["h0", "h1", "h2", "h3"]
RING4_LEAF = {"h0": "leaf0", "h1": "leaf0", "h2": "leaf1", "h3": "leaf1"}
STEPS = 4


def message_rows(op: int, t0: int, s: int, d: int, step: int, a: int, e: int) -> list[dict]:
    """ccl.parquet's two rows of one hand-built message of op ``op`` (posted
    at ``t0``, ns): rank s's send, leaving at ``a`` and delivered at ``e``,
    and rank d's receive of it."""
    common = {"op_id": op, "algorithm": "ring", "step": step, "bytes": 125_000, "post_mono_ns": t0}
    return [dict(common, rank=s, peer=d, kind="send", send_start_mono_ns=a, send_end_mono_ns=e,
                 recv_arrival_mono_ns=None, recv_done_mono_ns=None),
            dict(common, rank=d, peer=s, kind="recv", send_start_mono_ns=None, send_end_mono_ns=None,
                 recv_arrival_mono_ns=e, recv_done_mono_ns=e)]


def route(nodes: list[str]) -> list[str]:
    """The detector's names of the links of a path of nodes."""
    return ["-".join(sorted(p)) for p in zip(nodes, nodes[1:])]


def hand_view(hosts: list[str], leaf: dict, rows: list[dict], paths: dict):
    """The hand-built job's ccl rows and its JobView (each host's access
    link to its ``leaf``)."""
    import pandas as pd

    from fabriclab.systems.c4.detector import JobView

    host_links = {h: {"-".join(sorted((h, leaf[h])))} for h in hosts}
    return pd.DataFrame(rows), JobView("train", hosts, paths, host_links)


def hand_ring(ops, dead_from=None, slow_from=None, slow_host="h3", factor=3):
    """ccl rows and routes of ``ops`` ring ops; from op ``dead_from`` on,
    spine1 is no longer used (its link to leaf0 is down and routed around);
    from op ``slow_from`` on, every message to or from ``slow_host`` takes
    ``factor`` x 100 us (its link degraded)."""
    leaf = RING4_LEAF
    rows, paths = [], {}
    for k in range(ops):
        t0 = k * 10_000_000  # ns
        for r in range(4):
            v = (r + 1) % 4
            for st in range(STEPS):
                slow = slow_from is not None and k >= slow_from and slow_host in (RING4[r], RING4[v])
                a = t0 + st * 100_000
                rows += message_rows(k, t0, r, v, st, a, a + (factor if slow else 1) * 100_000)
                hs, hd = RING4[r], RING4[v]
                if leaf[hs] == leaf[hd]:
                    nodes = [hs, leaf[hs], hd]
                else:
                    spine = "spine0" if dead_from is not None and k >= dead_from else f"spine{st % 2}"
                    nodes = [hs, leaf[hs], spine, leaf[hd], hd]
                paths[(k, r, st)] = route(nodes)
    return hand_view(RING4, leaf, rows, paths)


def test_a_link_no_message_crosses_any_more_is_named_after_enough_empty_ops():
    from fabriclab.systems.c4.detector import VANISH_MIN

    # 4 messages per op (mu = 4): empty in op 8 (mu k = 4) and op 9 (8 = VANISH_MIN).
    assert VANISH_MIN == 8
    ccl, view = hand_ring(12, dead_from=8)
    alarm = diagnose(ccl, view, 10**15)
    assert alarm is not None and alarm.syndrome == "comm_slow"
    # leaf0-spine1 and leaf1-spine1 vanish together; both are the dead spine's.
    assert alarm.component in ("leaf0-spine1", "leaf1-spine1") and alarm.op == 9
    # The alarm's time is the last completion of op 9: 9 x 10 ms + 4 x 100 us.
    assert alarm.time_ps == (9 * 10_000_000 + STEPS * 100_000) * 1000


def test_the_same_ring_without_the_dead_link_raises_no_alarm():
    ccl, view = hand_ring(12)
    assert diagnose(ccl, view, 10**15) is None


def test_one_empty_op_is_not_enough_for_a_link_of_four_messages():
    # Dead from op 11 of 12: one empty op, mu k = 4 < 8.
    ccl, view = hand_ring(12, dead_from=11)
    assert diagnose(ccl, view, 10**15) is None


def test_a_link_whose_every_connection_is_slow_is_named_after_two_ops():
    from fabriclab.systems.c4.detector import FULL_MIN, PERSIST, RATE_MIN

    # h3's link slowed 3x from op 10 of 12: its two connections (h2 -> h3,
    # h3 -> h0) send 4 messages of 300 us, 100 us apart, busy 600 us for
    # 500 kB against 400 us: ratio 1.5 > RATE_MIN. h3-leaf1 is the only link
    # both cross, and every connection through it is high (2 >= FULL_MIN):
    # confirmed in ops 10 and 11, where PERSIST (3) ops would need op 12.
    assert (FULL_MIN, PERSIST) == (2, 3) and 600 / 400 > RATE_MIN
    ccl, view = hand_ring(12, slow_from=10)
    alarm = diagnose(ccl, view, 10**15)
    assert alarm is not None and alarm.syndrome == "comm_slow" and alarm.op == 11
    # Rank 3's row (h3 -> h0) and column (h2 -> h3): its host.
    assert (alarm.component_kind, alarm.component, alarm.pattern) == ("host", "h3", "host")
    # Op 11's last completion: its last slow message, 300 + 300 us in.
    assert alarm.time_ps == (11 * 10_000_000 + 600_000) * 1000


def test_one_op_with_a_slow_link_is_not_enough():
    ccl, view = hand_ring(12, slow_from=11)
    assert diagnose(ccl, view, 10**15) is None


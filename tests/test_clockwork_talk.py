"""The Clockwork talk's reproductions (issue 27; docs/clockwork-control.md,
"Reproducing the talk"): the time model's closed forms by hand, a quiet
cloud's all-reduce against the ring's bandwidth bound, and the quick modes
held to their registry bands."""

import json

import pytest

from conftest import assert_quick_bands
from fabriclab.systems.clockwork import repro_nccl as N
from fabriclab.systems.clockwork import repro_ray as R

MIB = 1 << 20


def test_nvlink_stages_by_hand():
    # 16 MiB all-reduce on two GPUs over one NVLink at 20 Gbit/s (25 GB/s scaled by 1/10): a reduce-scatter
    # and an all-gather, each 8 MiB each way: 2 x 8 x 2^20 x 8 bits / 2e10 bit/s = 6.7108864 ms.
    assert N.nvlink_ps("allreduce", 16 * MIB) == 6_710_886_400
    # The other tasks have one exchange of half the buffer.
    for op in ("allgather", "reduce_scatter", "broadcast"):
        assert N.nvlink_ps(op, 16 * MIB) == 3_355_443_200
    with pytest.raises(ValueError, match="alltoall"):
        N.nvlink_ps("alltoall", MIB)


def test_packet_rockets_threshold_from_the_paths_base_delay_by_hand():
    # VM -> machine -> ToR -> spine -> ToR -> machine -> VM: six links of 1 us; a 1500-byte frame (12,000 bits)
    # serialised at the VM cap 3.2 Gbit/s (3.75 us) twice, at the NIC 10 Gbit/s (1.2 us) twice, and at the
    # spine links (4 x 10 / 2 = 20 Gbit/s: 0.6 us) twice: 6 + 7.5 + 2.4 + 1.2 = 17.1 us; T is one base RTT.
    assert N.base_owd_ps(N.cloud(0)) == 17_100_000
    assert N.threshold_ps(N.cloud(0)) == 34_200_000


def test_the_base_delay_follows_an_oversubscribed_spine_by_hand():
    # 2:1 halves the spine links to 4 x 10 / (2 x 2) = 10 Gbit/s: a frame takes 1.2 us there instead of 0.6 us,
    # twice on the path: 17.1 + 1.2 = 18.3 us (the sensitivity study's oversubscribed clouds).
    f = {**N.cloud(0)["cloud"]["fabric"], "oversubscription": 2.0}
    assert N.base_owd_ps(N.cloud(0, fabric=f)) == 18_300_000


def test_drop_places_by_hand():
    import pandas as pd

    links = pd.DataFrame({"src_node": ["vm0", "pm0", "pm0", "tor0", "spine1", "tor1", "pm3"],
                          "dst_node": ["pm0", "tor0", "vm5", "spine1", "tor1", "pm3", "vm20"],
                          "drops": [1, 2, 4, 8, 16, 32, 64]})
    flows = pd.DataFrame({"src": [0, 19, 20, 33], "retransmits": [1, 2, 4, 8]})
    r = N.drop_places(links, flows, pool=20)
    assert r["drops_by_place"] == {"vm": 1, "hypervisor": 2, "to_vm": 4 + 64, "fabric": 8 + 16 + 32}
    assert r["tenant_retransmits"] == 3 and r["tenant_flows"] == 2


def test_a_busy_clouds_drops_by_place_add_up_and_the_rings_flows_count():
    # The reproduction's cloud 0 with its neighbours; the tenant's first 16 VMs, one 2 MiB task. Every drop is
    # at one of the four places; the tenant's flows are 2 rings x 16 VMs x 2 (16 - 1) ring steps = 960.
    t = N.tasks(0, list(range(16)), 16, runs=1, size=2 * MIB, gap_ms=100, detail=True)
    assert t["drops"] > 0
    assert sum(t["drops_by_place"].values()) == t["drops"]
    assert t["tenant_flows"] == 960
    assert 0 <= t["tenant_retransmits"] <= t["retransmits"]
    with pytest.raises(ValueError, match="rocket_clock"):
        N.tasks(0, list(range(16)), 16, runs=1, size=MIB, rocket=True, rocket_clock="host")


def test_ray_runs_sum_their_iterations_and_overheads_by_hand():
    assert R.RAY_OVERHEAD_PS == 4_500_000_000  # 32 calls x 0.125 ms + 0.5 ms
    assert R.run_times([1.0, 2.0, 3.0, 4.0], 2, overhead_ps=4_500_000_000) == [12.0, 16.0]
    with pytest.raises(ValueError, match="whole runs"):
        R.run_times([1.0, 2.0, 3.0], 2)


def test_a_quiet_clouds_all_reduce_sits_just_above_the_rings_bandwidth_bound():
    # No other tenants: each VM sends 2 (n - 1) / n of its buffer through its 3.2 Gbit/s cap (the two rings
    # of half the buffer each share it), so a 4 MiB task takes at least 2 x 15/16 x 4 MiB x 8 / 3.2e9 s
    # = 19.66 ms plus the NVLink stages (1.68 ms). TCP's ramp and 30 steps' latencies add a little.
    t = N.tasks(0, list(range(16)), 16, runs=1, size=4 * MIB, gap_ms=100, occupancy=0.0)
    bound = 2 * 15 / 16 * 4 * MIB * 8 / 3.2e9 * 1e3 + N.nvlink_ps("allreduce", 4 * MIB) / 1e9
    assert bound == pytest.approx(21.34, abs=0.01)
    assert bound <= t["ms"][0] <= 1.25 * bound
    assert t["drops"] == 0 and t["overlapped"] == 0
    # An all-gather sends (n - 1) / n of the buffer out of each VM: 9.83 ms, plus one NVLink stage (0.84 ms).
    t = N.tasks(0, list(range(16)), 16, "allgather", runs=1, size=4 * MIB, gap_ms=100, occupancy=0.0)
    bound = 15 / 16 * 4 * MIB * 8 / 3.2e9 * 1e3 + N.nvlink_ps("allgather", 4 * MIB) / 1e9
    assert bound == pytest.approx(10.67, abs=0.01)
    assert bound <= t["ms"][0] <= 1.25 * bound


def test_reproduce_clockwork_nccl_quick(tmp_path, cli):
    out = tmp_path / "n"
    r = cli("reproduce", "clockwork-nccl", "--quick", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert_quick_bands("clockwork-nccl", s)
    # The headline numbers from the runs themselves: the median of all runs, and its change.
    runs = json.loads((out / "clockwork_nccl_runs.json").read_text())
    for k in ("assigned", "chosen"):
        ms = sorted(x for c in runs for x in c[f"{k}_runs"]["ms"])
        mid = len(ms) // 2
        assert s["configs"][k]["median_ms"] == pytest.approx((ms[mid] + ms[~mid]) / 2)
    assert s["configs"]["chosen"]["change_pct"] == pytest.approx(
        (s["configs"]["chosen"]["median_ms"] / s["configs"]["assigned"]["median_ms"] - 1) * 100, abs=0.01)
    for c in runs:  # both clusters are 16 distinct VMs of the pool of 20
        for k in ("assigned", "chosen"):
            assert len(set(c[k])) == 16 and set(c[k]) <= set(range(20))
    if not N.rocket_available():
        assert "not run" in s["chosen_rocket"]
    else:  # the third configuration on the chosen VMs, and the four tasks with and without
        assert runs[0]["chosen_rocket_runs"]["ms"] and s["threshold_ps"] == 34_200_000
        assert set(s["rocket_alone"]) == set(N.TASKS)


def test_reproduce_clockwork_ray_quick(tmp_path, cli):
    out = tmp_path / "r"
    r = cli("reproduce", "clockwork-ray", "--quick", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert_quick_bands("clockwork-ray", s)
    runs = json.loads((out / "clockwork_ray_runs.json").read_text())
    for c in runs:
        for k in ("assigned", "chosen"):
            it = c[f"{k}_runs"]["iteration_ms"]
            assert len(it) == R.QUICK_RUNS * R.QUICK_ITERATIONS
            # A run is its iterations plus Ray's overhead per iteration.
            assert c[f"{k}_runs"]["ms"][0] == pytest.approx(sum(it[:R.QUICK_ITERATIONS]) + R.QUICK_ITERATIONS * 4.5)

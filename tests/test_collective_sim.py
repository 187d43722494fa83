"""Plans run in the simulator: closed-form ring allreduce time, nccl-tests'
bus bandwidth, both backends, and the bench command's errors."""

import csv

import pytest

from fabriclab.collectives import rings as R
from fabriclab.collectives.algos import Allocation, make_plan
from fabriclab.collectives.metrics import bus_bandwidth
from fabriclab.sim.plans import run_plan
from fabriclab.scenario.gpus import gpu_server
from fabriclab.scenario.topology import TopologyData
from conftest import assert_quick_bands

B = 100 * 10**9  # 100 Gbit/s ring links
D = 500_000  # 0.5 us
O = 1_000_000  # 1 us send overhead
RED = 2_000 * 10**9  # reduction at 2 Tbit/s


def ring_topology(n):
    t = TopologyData()
    hosts = [t.add_node(f"g{i}", "host", 0) for i in range(n)]
    for i in range(n):
        t.add_link(hosts[i], hosts[(i + 1) % n], B, D)
    sw = t.add_node("slow", "switch", 1)  # keeps every pair reachable; never on a ring hop
    for h in hosts:
        t.add_link(h, sw, 10**9, D)
    return t


def wire_bytes(size):
    full, rest = divmod(size, 1460)
    return full * 1538 + (max(rest + 58, 64) + 20 if rest else 0)


@pytest.mark.parametrize("n", [2, 4, 8, 16])
@pytest.mark.parametrize("size", [64 * 2**20, 10**9 + 7])
def test_ring_allreduce_matches_closed_form(n, size):
    plan = R.ring_allreduce(n, size)
    run = run_plan(plan, ring_topology(n), list(range(n)), reduce_bps=RED, send_overhead_ps=O)
    # 2(n-1) steps; each moves one slice of about S/n bytes over every ring link
    # at once, after the send overhead, plus propagation; the n-1 reduce-scatter
    # steps also pay the reduction of a slice. Slices differ by at most one byte:
    # the largest sets the pace.
    slice_bytes = -(-size // n)
    step = O + wire_bytes(slice_bytes) * 8 / B * 1e12 + D
    expect = 2 * (n - 1) * step + (n - 1) * slice_bytes * 8 / RED * 1e12
    assert abs(run.time_ps - expect) / expect < 0.03, (run.time_ps, expect)
    # The bandwidth term alone is the textbook 2(n-1)/n * S / B (headers aside).
    textbook = 2 * (n - 1) / n * size * 8 / B * 1e12
    assert run.time_ps > textbook


def test_plans_default_to_line_rate_from_the_first_byte():
    # NVLink/PCIe peer copies and RDMA have no congestion window: one message of
    # S bytes over one link takes the send overhead, its wire bits at the link's
    # rate and the propagation delay, exactly (issue 29). With flow_model="tcp"
    # it pays slow start: here the path's bandwidth-delay product (RTT 2 x 10 us
    # at 100 Gbit/s, about 171 segments) is far above the initial window of 10,
    # so at least one round trip more.
    d = 10_000_000
    t = TopologyData()
    a, b = (t.add_node(f"g{i}", "host", 0) for i in range(2))
    t.add_link(a, b, B, d)
    size = 8 << 20
    plan = R.chain_broadcast(2, size, 0)
    fluid = run_plan(plan, t, [0, 1], send_overhead_ps=O).time_ps
    assert fluid == pytest.approx(O + wire_bytes(size) * 8 / B * 1e12 + d, rel=1e-6)
    tcp = run_plan(plan, t, [0, 1], send_overhead_ps=O, flow_model="tcp").time_ps
    assert tcp >= fluid + 2 * d
    assert run_plan(plan, t, [0, 1], send_overhead_ps=O, scenario={"flow_model": "tcp"}).time_ps == tcp


def test_busbw_is_nccl_tests_formula(tmp_path, cli):
    out = tmp_path / "b.csv"
    r = cli("bench", "--topology", "dgx1v", "--gpus", "0-3", "--op", "allreduce", "--algo", "ring",
            "--sizes", "1M:16M", "--factor", "4", "--chunk", "none", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(out.open()))
    assert [int(x["size_bytes"]) for x in rows] == [2**20, 2**22, 2**24]
    for x in rows:
        n, s, t_ps = int(x["nranks"]), int(x["size_bytes"]), int(x["time_ps"])
        algbw = s / (t_ps / 1e12)
        assert float(x["algbw_GBps"]) == pytest.approx(algbw / 1e9, abs=1e-4)
        assert float(x["busbw_GBps"]) == pytest.approx(algbw * 2 * (n - 1) / n / 1e9, abs=1e-4)
    assert "busbw" in r.stdout


def test_factors_per_collective():
    assert bus_bandwidth("allreduce", 8, 8, 10**12)[1] == pytest.approx(8 * 2 * 7 / 8)
    assert bus_bandwidth("allgather", 4, 8, 10**12)[1] == pytest.approx(8 * 3 / 4)
    assert bus_bandwidth("broadcast", 4, 8, 10**12)[1] == pytest.approx(8)


def test_packet_backend_runs_plans_too():
    t = gpu_server("dgx1v")
    a = Allocation(t, [0, 1, 2, 3])
    plan = make_plan("ring", "allreduce", a, 4 << 20, 1 << 20)
    flow = run_plan(plan, t, a.rank_hosts, backend="flow").time_ps
    pkt = run_plan(plan, t, a.rank_hosts, backend="packet")
    assert pkt.flows["fct_ps"].notna().all()
    # Slow start and queueing can only add time to the fluid model's.
    assert pkt.time_ps >= flow * 0.98


def test_trees_beat_pcie_ring_on_fragmented_allocation():
    # GPUs 0,1,2,4: GPU 4's only NVLink is to GPU 0, so no NVLink ring exists
    # and the ring falls back to PCIe (10 GB/s); trees use the NVLinks.
    t = gpu_server("dgx1v")
    a = Allocation(t, [0, 1, 2, 4])
    ring = run_plan(make_plan("ring", "broadcast", a, 64 << 20, 1 << 20), t, a.rank_hosts).time_ps
    trees = run_plan(make_plan("trees", "broadcast", a, 64 << 20, 1 << 20), t, a.rank_hosts).time_ps
    assert ring / trees > 2


@pytest.mark.parametrize("args, needle", [
    (["--gpus", "0,1,99"], "unknown GPU id 99"),
    (["--gpus", "0,0,1"], "listed twice"),
    (["--gpus", "3"], "at least two GPUs"),
    (["--sizes", "0:8"], "--sizes"),
    (["--algo", "magic"], "--algo"),
    (["--op", "alltoallv"], "--op"),
    (["--topology", "dgx9"], "--topology"),
    (["--gpus", "a,b"], "--gpus"),
    (["--algo", "tree", "--op", "broadcast"], "allreduce only"),
])
def test_bench_bad_input(cli, args, needle):
    r = cli("bench", "--sizes", "1K:1K", *args) if "--sizes" not in args else cli("bench", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_bench_on_a_topology_file_and_a_disconnected_allocation(cli, tmp_path):
    topo = tmp_path / "t.toml"
    topo.write_text(
        'nodes = [{name = "a", kind = "host"}, {name = "b", kind = "host"}, {name = "c", kind = "host"},\n'
        '         {name = "d", kind = "host"}, {name = "sw", kind = "switch"}]\n'
        'links = [{a = "a", b = "sw", rate_bps = "10Gbps", delay_ps = "1us"},\n'
        '         {a = "b", b = "sw", rate_bps = "10Gbps", delay_ps = "1us"},\n'
        '         {a = "c", b = "d", rate_bps = "10Gbps", delay_ps = "1us"}]\n'
    )
    bad = cli("bench", "--topology", str(topo), "--gpus", "0,2", "--sizes", "1M:1M")
    assert bad.returncode == 2 and "disconnected allocation" in bad.stderr
    joined = tmp_path / "j.toml"
    extra = ('{a = "c", b = "sw", rate_bps = "10Gbps", delay_ps = "1us"},\n'
             '{a = "d", b = "sw", rate_bps = "10Gbps", delay_ps = "1us"},\n{a = "c", b = "d"')
    joined.write_text(topo.read_text().replace('{a = "c", b = "d"', extra))
    ok = cli("bench", "--topology", str(joined), "--gpus", "0,1,2", "--sizes", "1M:1M")
    assert ok.returncode == 0, ok.stderr
    # The whole file must be connected, as every scenario's topology.
    whole = cli("bench", "--topology", str(topo), "--gpus", "0,1", "--sizes", "1M:1M")
    assert whole.returncode == 2 and "cannot reach" in whole.stderr


def test_hybrid_split_formula_by_hand():
    from fabriclab.collectives.algos import hybrid_split

    # 10 GB/s PCIe, 40 GB/s NVLink, 100 MB: PCIe takes a fifth, 20 MB.
    assert hybrid_split(100_000_000, 80 * 10**9, 320 * 10**9) == 20_000_000
    # A 100 us link-switch latency removes T*Bp*Bn/(Bp+Bn) = 1e-4 * 10e9 * 40e9 / 50e9 = 800 kB.
    assert hybrid_split(100_000_000, 80 * 10**9, 320 * 10**9, 100_000_000) == 19_200_000


def test_hybrid_and_hierarchical_plans_verify_and_run():
    from fabriclab.collectives.verify import verify
    from fabriclab.scenario.gpus import gpu_cluster

    t = gpu_server("dgx1v")
    a = Allocation(t, [0, 1, 2, 4])
    for op in ("allreduce", "broadcast"):
        p = make_plan("hybrid", op, a, 1 << 20, 64 << 10)
        verify(p)
        assert p.meta["pcie_bytes"] > 0 and p.meta["nvlink_bytes"] > 0
        run_plan(p, t, a.rank_hosts)
    c = gpu_cluster("dgx1v", 2, 100 * 10**9)
    alloc = Allocation(c, [0, 1, 2, 8, 9, 10, 11, 12])
    h = make_plan("hierarchical", "allreduce", alloc, 3 << 20, 256 << 10)
    verify(h)
    ring = make_plan("ring", "allreduce", alloc, 3 << 20, 256 << 10)
    verify(ring)
    assert run_plan(h, c, alloc.rank_hosts).time_ps < run_plan(ring, c, alloc.rank_hosts).time_ps


def test_auto_picks_the_fastest_candidate():
    from fabriclab.sim.plans import choose_plan

    t = gpu_server("dgx1v")
    a = Allocation(t, [0, 1, 2, 4])
    plan, table = choose_plan("allreduce", a, 8 << 20, chunk_choices=(None, 1 << 20))
    best = min(table, key=lambda r: r[2])
    assert plan.algorithm == best[0]
    assert len({r[0] for r in table}) >= 4


def test_reproduce_blink_quick(cli, tmp_path):
    import json

    out = tmp_path / "b"
    r = cli("reproduce", "blink", "--quick", "--out", str(out))
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert_quick_bands("blink", s)
    # Some fragmented allocations have no NVLink ring: trees then beat the PCIe ring by far.
    assert s["dgx1v_broadcast"]["max_speedup"] > 2
    assert (out / "blink.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("backend", ["flow", "packet"])
def test_alltoall_bytes_on_a_star_are_the_hand_count(backend):
    # 4 hosts on a 10 Gbit/s star, blocks of 100 full segments: each host link
    # carries the 3 blocks its host sends (3/4 of the buffer) one way and the 3 it
    # receives the other, 100 x 1538 wire bytes each; on the packet backend also
    # one 84-byte ACK per segment the other way.
    from fabriclab.collectives.alltoall import direct_alltoall
    from fabriclab.scenario.topology import star

    n, blk, rate, d = 4, 100 * 1460, 10**10, 1_000_000
    run = run_plan(direct_alltoall(n, n * blk), star(n, rate, d), list(range(n)), backend=backend)
    data = (n - 1) * wire_bytes(blk)
    acks = (n - 1) * 100 * 84 if backend == "packet" else 0
    assert run.links["bytes"].tolist() == [data + acks] * (2 * n)
    if backend == "flow":
        # All 3 messages of a host share its link (every receiver gets 3 too):
        # overhead, 3 blocks' wire bits at the link's rate, two hops' propagation.
        assert run.time_ps == O + data * 8 * 10**12 // rate + 2 * d


@pytest.mark.parametrize("backend", ["flow", "packet"])
@pytest.mark.parametrize("algo", ["direct", "hierarchical"])
def test_alltoall_fabric_bytes_on_two_dgx1v(algo, backend):
    # 2 x DGX-1V: each NIC serves 2 GPUs, each GPU has 8 blocks for the other
    # server: 16 blocks each way on every NIC's fabric link, whichever algorithm
    # (hierarchical sends them as one 8-block message per GPU, direct as 8);
    # on the packet backend also an 84-byte ACK per segment coming the other way.
    from fabriclab.scenario.gpus import gpu_cluster

    t = gpu_cluster("dgx1v", 2, 100 * 10**9)
    a = Allocation(t, list(range(16)))
    blk = 10 * 1460
    plan = make_plan(algo, "alltoall", a, 16 * blk)
    run = run_plan(plan, t, a.rank_hosts, backend=backend)
    fabric = run.links[(run.links["src_node"] == "tor") | (run.links["dst_node"] == "tor")]
    assert len(fabric) == 16
    acks = 16 * 10 * 84 if backend == "packet" else 0
    assert fabric["bytes"].tolist() == [16 * wire_bytes(blk) + acks] * 16


def test_alltoall_bench_busbw_hand_numbers(cli, tmp_path):
    # The star above as a topology file: 4 x 146000 bytes take 1 us + 3 x 153800 wire
    # bytes at 10 Gbit/s + 2 x 1 us = 372.12 us; algbw = 584000 B / 372.12 us =
    # 1.5694 GB/s; nccl-tests' all-to-all busbw = algbw x (n-1)/n = 1.1770 GB/s.
    topo = tmp_path / "star.toml"
    topo.write_text(
        'nodes = [' + ", ".join(f'{{name = "h{i}", kind = "host"}}' for i in range(4)) + ', {name = "s0", kind = "switch"}]\n'
        'links = [' + ", ".join(f'{{a = "h{i}", b = "s0", rate_bps = "10Gbps", delay_ps = "1us"}}' for i in range(4)) + ']\n')
    out = tmp_path / "a2a.csv"
    r = cli("bench", "--topology", str(topo), "--op", "alltoall", "--algo", "direct", "--sizes", "584000",
            "--chunk", "none", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    (row,) = list(csv.DictReader(out.open()))
    assert int(row["time_ps"]) == 372_120_000
    assert float(row["algbw_GBps"]) == pytest.approx(1.5694, abs=1e-4)
    assert float(row["busbw_GBps"]) == pytest.approx(1.1770, abs=1e-4)
    assert "none" in r.stdout  # no reduction operator


@pytest.mark.parametrize("args, needle", [
    (["--gpus", "0-2", "--sizes", "1K"], "--sizes: an all-to-all over 3 ranks splits the buffer into 3 equal blocks"),
    (["--gpus", "0-3", "--sizes", "1K", "--algo", "ring"], "--algo ring: alltoall is planned by direct or hierarchical"),
    (["--gpus", "0-2,8-12", "--servers", "2", "--sizes", "8K", "--algo", "hierarchical"],
     "same number of GPUs on every server"),
])
def test_alltoall_bench_bad_input(cli, args, needle):
    r = cli("bench", "--op", "alltoall", "--chunk", "none", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr and "Traceback" not in r.stderr

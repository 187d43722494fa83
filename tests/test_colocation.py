"""The VM-colocation detector (``fabriclab clock colocation``,
docs/clockwork.md): hand-built clock tables with known drifts give the
hand-expected groups; a hand-built probe file gives the hand-expected delay
correlation; bad input exits 2; the benchmark's quick mode scores pairs
against the placement."""

import json
from math import comb

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fabriclab.observe.clock import colocation as co
from fabriclab.observe.clock.probes import Probes
from fabriclab.scenario.cloud import CloudConfig, place
from scipy.stats import chi2
from conftest import assert_quick_bands

MIDS_NS = np.arange(6) * 100e6 + 50e6  # six windows of 100 ms


def clocks_table(hosts: dict[str, tuple[float, float, float]], noise_ns: float = 2.0) -> pa.Table:
    """A clocks table: per host (offset at 0 in ns, true drift in ppm, the drift column's value in ppm); each
    host's offsets follow its true drift exactly, plus a fixed +-noise_ns pattern of its own."""
    rows = {c: [] for c in ("window", "window_mid_ns", "host", "method", "reference", "offset_ns", "drift_ppm",
                            "offset_uncertainty_ns", "drift_uncertainty_ppm")}
    for k, (name, (off0, drift, drift_col)) in enumerate(hosts.items()):
        signs = np.where((np.arange(6) + k) % 2, 1.0, -1.0) * (1 + k % 3) / 3
        for w, mid in enumerate(MIDS_NS):
            rows["window"].append(w)
            rows["window_mid_ns"].append(int(mid))
            rows["host"].append(name)
            rows["method"].append("huygens")
            rows["reference"].append("A")
            rows["offset_ns"].append(off0 + drift * 1e-6 * mid + noise_ns * signs[w])
            rows["drift_ppm"].append(drift_col)
            rows["offset_uncertainty_ns"].append(5.0)
            rows["drift_uncertainty_ppm"].append(0.1)
    return pa.table(rows)


HOSTS = {"A": (1000.0, 3.0, 3.0),
         "B": (-5000.0, 3.0, 3.05),  # A's oscillator; its drift estimate 0.05 ppm off, within the 0.1 uncertainty
         "C": (200.0, 3.5, 3.5),  # 0.5 ppm apart: its offset moves 250 ns against A's over the 500 ms
         "D": (0.0, -4.0, -4.0),
         "E": (7000.0, 10.0, 10.0)}


def test_equal_drifts_within_uncertainty_group_others_stand_alone():
    r = co.detect(clocks_table(HOSTS))
    assert sorted(map(sorted, r.group_sets())) == [["A", "B"], ["C"], ["D"], ["E"]]
    pairs = {(a, b): p for a, b, p in zip(*(r.pairs.column(c).to_pylist() for c in ("a", "b", "p_same")))}
    assert pairs[("A", "B")] > 0.5
    assert max(p for k, p in pairs.items() if k != ("A", "B")) < 1e-10
    g = r.groups.to_pandas().set_index("host")
    # Confidence: a group's least p_same over its pairs; a lone host's one minus its largest p_same.
    assert g.confidence["A"] == g.confidence["B"] == pytest.approx(pairs[("A", "B")])
    assert g.confidence["E"] == pytest.approx(1 - max(pairs[k] for k in pairs if "E" in k))
    assert list(g["size"][["A", "B", "C"]]) == [2, 2, 1]
    assert set(r.pairs.column("dof").to_pylist()) == {2 * 6 - 1}


def test_equal_drift_columns_but_diverging_offsets_are_two_machines():
    # C's drift column says 3.0 ppm like A's, but its offsets move as 3.5 ppm: the offsets tell them apart.
    hosts = dict(HOSTS, C=(200.0, 3.5, 3.0))
    r = co.detect(clocks_table(hosts))
    assert ["C"] in [sorted(g) for g in r.group_sets()]


def test_the_chi_square_of_a_hand_pair():
    # Two hosts only, no offset noise: the offset term is 0 and the drift term, per window, is
    # 0.05^2 / (0.1^2 + 0.1^2 + 2 x 0.05^2) = 0.1; six windows give X = 0.6 on 11 degrees of freedom.
    t = clocks_table({"A": HOSTS["A"], "B": HOSTS["B"]}, noise_ns=0.0)
    r = co.detect(t, offset_floor_ns=3.0, drift_floor_ppm=0.05)
    assert r.pairs.column("chi2")[0].as_py() == pytest.approx(0.6)
    assert r.pairs.column("p_same")[0].as_py() == pytest.approx(chi2.sf(0.6, 11))


def test_sender_side_delays_correlate_behind_one_queue():
    # A and B send to C and D every 0.5 ms for 40 ms through one queue: 5 us of queueing in every other
    # 4 ms; C's probes queue 3 us in every other 3 ms of its own; D's never. Clocks are perfect.
    src, dst, tx = [], [], []
    for t in np.arange(0, 40e6, 0.5e6):
        for s, ds in (("A", "CD"), ("B", "CD"), ("C", "AB"), ("D", "AB")):
            for d in ds:
                src.append(s), dst.append(d), tx.append(t)
    tx = np.array(tx)
    q = np.where(np.isin(src, ["A", "B"]), 5000.0 * ((tx // 4e6) % 2), 0.0)
    q += np.where(np.array(src) == "C", 3000.0 * ((tx // 3e6) % 2 == 0), 0.0)
    hosts = ["A", "B", "C", "D"]
    code = {h: i for i, h in enumerate(hosts)}
    rx = tx + 1000.0 + q
    p = Probes(hosts, np.array([code[s] for s in src]), np.array([code[d] for d in dst]), tx.astype(np.int64),
               tx.astype(np.int64) + 10_000, rx.astype(np.int64), rx.astype(np.int64) + 10_000)
    zero = clocks_table({h: (0.0, 0.0, 0.0) for h in hosts}, noise_ns=0.0)
    corr = co.delay_correlation(p, zero, hosts)
    assert corr[0, 1] == pytest.approx(1.0)  # A and B: one queue
    assert np.isnan(corr[0, 3]) and np.isnan(corr[2, 3])  # D never queues: no variation, no correlation
    # A against C: 4 ms and 3 ms square waves over 40 bins, worked out by hand from the bins' values.
    a = 5000.0 * ((np.arange(40) // 4) % 2)
    c = 3000.0 * ((np.arange(40) // 3) % 2 == 0)
    assert corr[0, 2] == pytest.approx(np.corrcoef(a, c)[0, 1])
    assert abs(corr[0, 2]) < 0.5


@pytest.mark.parametrize("drop,needles", [
    (["drift_ppm"], ["clocks: missing column(s) drift_ppm"]),
    (["window", "offset_ns"], ["window", "offset_ns", "clock estimate"]),
])
def test_a_clocks_file_missing_columns_exits_2(tmp_path, cli, drop, needles):
    t = clocks_table(HOSTS)
    t = t.drop(drop)
    pq.write_table(t, tmp_path / "c.parquet")
    r = cli("clock", "colocation", str(tmp_path / "c.parquet"), "--out", str(tmp_path / "g.parquet"))
    assert r.returncode == 2, r.stdout + r.stderr
    for n in needles:
        assert n in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "g.parquet").exists()


def test_the_command_writes_groups_and_pairs(tmp_path, cli):
    pq.write_table(clocks_table(HOSTS), tmp_path / "c.parquet")
    r = cli("clock", "colocation", str(tmp_path / "c.parquet"), "--out", str(tmp_path / "g.parquet"),
            "--hosts", "A,B,C")
    assert r.returncode == 0, r.stderr
    g = pq.read_table(tmp_path / "g.parquet").to_pydict()
    assert sorted(g["host"]) == ["A", "B", "C"] and len(set(g["group"])) == 2
    assert pq.read_table(tmp_path / "g.pairs.parquet").num_rows == 3
    r = cli("clock", "colocation", str(tmp_path / "c.parquet"), "--out", str(tmp_path / "h.parquet"), "--hosts", "Z")
    assert r.returncode == 2 and "--hosts: 'Z'" in r.stderr


def test_reproduce_colocation_quick_scores_pairs_against_the_placement(tmp_path, cli):
    from fabriclab.systems.clockwork import repro_colocation as R

    out = tmp_path / "co"
    r = cli("reproduce", "colocation", "--quick", "--workers", "2", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert_quick_bands("colocation", s)
    # The positives from the placement alone: pairs of the tenant's VMs sharing a machine.
    positives = 0
    for seed in range(R.QUICK_CLOUDS):
        c = CloudConfig.model_validate(R.scenario(seed)["cloud"])
        tenant, _, _ = place(c, seed)
        per = {}
        for m, _ in tenant:
            per[m] = per.get(m, 0) + 1
        positives += sum(comb(k, 2) for k in per.values())
    assert s["clouds"] == R.QUICK_CLOUDS and s["pairs"] == R.QUICK_CLOUDS * comb(8, 2)
    assert s["positives"] == positives == s["true_positives"] + s["false_negatives"]
    assert s["precision"] == pytest.approx(s["true_positives"] / (s["true_positives"] + s["false_positives"]))
    assert s["precision"] >= 0.8 and s["recall"] >= 0.8

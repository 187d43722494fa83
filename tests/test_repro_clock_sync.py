"""``fabriclab reproduce clock-sync`` (issue 26's sync-accuracy benchmark): the quick mode's CSV holds every
method and configuration; its numbers are errors against true time (an idle fabric with noise-free NIC stamps
gives Huygens errors of a few ns, as the setup implies), and Huygens beats NTP-style at 40 % load."""

import csv
import json

import numpy as np
from conftest import assert_quick_bands, run_cli
from fabriclab.systems.clockwork import repro_sync as R


def test_quick_mode_writes_every_method_and_configuration(tmp_path):
    out = tmp_path / "cs"
    r = run_cli("reproduce", "clock-sync", "--out", str(out), "--quick", "--workers", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "huygens p50/p99/max" in r.stdout
    with open(out / "clock_sync.csv") as f:
        rows = list(csv.DictReader(f))
    want = {(c["fabric"], c["load"], c["stamps"], c["k"], m) for c in R.grid(True) for m in R.METHOD_NAMES}
    got = {(x["fabric"], float(x["load"]), x["stamps"], int(x["k"]), x["method"]) for x in rows}
    assert got == want and len(rows) == len(want)
    for x in rows:
        assert not x["refused"], x
        assert int(x["samples"]) == 31  # 32 hosts but the reference, one window
        assert 0 <= float(x["p50_ns"]) <= float(x["p99_ns"]) <= float(x["max_ns"])
    assert (out / "summary.json").is_file()
    assert_quick_bands("clock-sync", json.loads((out / "summary.json").read_text()))
    # At 40 %: Huygens is better than NTP-style at p99.
    by = {(float(x["load"]), x["method"]): float(x["p99_ns"]) for x in rows}
    assert by[(0.4, "huygens")] < by[(0.4, "ntp")]


def test_errors_are_against_true_time_a_noise_free_idle_fabric_gives_a_few_ns():
    # No load, NIC stamps without noise, no wander: every probe crosses an idle fabric over the same hops
    # each way, so both directions' least delays are equal but for one thing: an echo leaves behind the
    # TCP ACK of the probe it answers (tests/test_clocks_probes.py), 84 wire bytes = 67.2 ns at 10 Gbit/s.
    # An edge probed one way only (its reverse probes all echoes) has bounds 67.2 ns asymmetric, so its
    # max-margin line is 33.6 ns off, plus under 1 ns of rounding (stamps are ns rounded down from ps);
    # an edge probed both ways by its hosts' own pairs is exact to 1 ns. The network effect averages such
    # edges, so every host is within 34.6 ns, and most far closer; against a wrong truth (the clocks'
    # 100 us offsets) the errors would be microseconds. With 20 ns stamp noise (the default) the errors
    # are larger.
    cfg = dict(fabric="leaf-spine", load=0.0, stamps="nic", k=5, duration_ms=100)
    quiet = R.errors(cfg, clocks={"nic_sigma_ps": 0, "wander_ppm": 0.0})
    noisy = R.errors(cfg)
    h = np.abs(quiet["errors"]["huygens"])
    assert h.size == 31
    assert h.max() < 33.6 + 1.0, h
    assert np.median(h) < 15.0, h
    assert np.median(np.abs(noisy["errors"]["huygens"])) > np.median(h)
    # Every method's errors are against the same truth: the baselines on an idle, symmetric fabric are
    # also within tens of ns.
    for m in R.METHOD_NAMES:
        assert np.abs(quiet["errors"][m]).max() < 100.0, m

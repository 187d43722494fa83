"""The linuxptp baseline's pieces that need no root and no linuxptp (observe/clock/linuxptp.py): reading
pmc's TIME_STATUS_NP answers, the per-window means, the configurations. The runs themselves are in
benches/bench_box_clock.py (root, linuxptp)."""

from __future__ import annotations


from fabriclab.observe.clock import linuxptp as lp


def answer(offset: int, ingress: int) -> str:
    return (f"sending: GET TIME_STATUS_NP\n\tea549d.fffe.cb576f-0 seq 0 RESPONSE MANAGEMENT TIME_STATUS_NP \n"
            f"\t\tmaster_offset              {offset}\n\t\tingress_time               {ingress}\n"
            f"\t\tcumulativeScaledRateOffset +0.000000000\n\t\tgmPresent                  true\n")


def test_pmc_answers_give_one_offset_per_sync():
    text = answer(0, 0) + answer(-8657, 1_000) + answer(-8657, 1_000) + answer(1126, 3_000) + answer(-5, 2_000)
    # the zero ingress (no Sync yet) left out, the repeated Sync once, sorted by ingress
    assert lp.parse_pmc(text) == [(1_000, -8657), (2_000, -5), (3_000, 1126)]


def test_window_means_average_each_slave_per_window():
    # windows of 1 s from t0 = 10 s: slave a has 100 and 300 in window 0 (mean 200) and -50 in window 1;
    # slave b has -400 in window 0; a sample at 12 s (t1) is outside.
    s = 10**9
    samples = {"a": [(10 * s, 100), (10 * s + 5, 300), (11 * s + 1, -50), (12 * s, 7)], "b": [(10 * s + 9, -400)]}
    assert sorted(lp.window_means(samples, 10 * s, 12 * s, 1.0)) == [50.0, 200.0, 400.0]
    assert sorted(lp.errors_in(samples, 10 * s, 12 * s)) == [7.0, 50.0, 100.0, 300.0, 400.0]


def test_configs_free_run_on_software_stamps_over_unicast():
    m = lp.config("master", "/var/run/x-h0")
    sl = lp.config("slave", "/var/run/x-h1", "10.1.0.1")
    for c in (m, sl):
        assert "free_running 1" in c and "time_stamping software" in c
    assert "unicast_listen 1" in m and "unicast_master_table" not in m
    assert "UDPv4 10.1.0.1" in sl and "slaveOnly 1" in sl and sl.index("[eth0]") > sl.index("UDPv4")
    assert "uds_address /var/run/x-h1" in sl

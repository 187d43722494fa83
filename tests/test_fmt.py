"""fabriclab.observe.fmt: quantities in readable units (values chosen by hand)."""

import math

import numpy as np
import pytest

from fabriclab.observe import fmt


@pytest.mark.parametrize("ps, text", [
    (0, "0 ps"),
    (1, "1 ps"),
    (850, "850 ps"),
    (999, "999 ps"),            # the last picosecond count
    (999.4, "999 ps"),
    (999.6, "1.00 ns"),         # rounds to 1000 ps: shown in the next unit, never "1000 ps"
    (1000, "1.00 ns"),
    (12_345, "12.3 ns"),
    (999_999, "1.00 us"),
    (4_560_000, "4.56 us"),
    (12_000_000, "12.0 us"),    # trailing zeros kept: three significant digits
    (12_250_000, "12.3 us"),    # a tie rounds up, as by hand (Python's format would give 12.2)
    (1_234_000_000, "1.23 ms"),
    (2_500_000_000_000, "2.50 s"),
    (3_600_000_000_000_000, "3,600 s"),  # past the largest unit: more digits, no exponent
    (0.5, "0.500 ps"),
    (-1_500_000, "-1.50 us"),   # a negative difference keeps its sign
    (np.uint64(850), "850 ps"),
    (np.float64(4.56e6), "4.56 us"),
])
def test_time_ps(ps, text):
    assert fmt.time_ps(ps) == text


@pytest.mark.parametrize("missing", [None, float("nan"), np.nan, np.float64("nan")])
def test_missing_values_are_a_dash(missing):
    for f in (fmt.time_ps, fmt.size_bytes, fmt.rate_bps, fmt.percent, fmt.slowdown, fmt.count, fmt.number):
        assert f(missing) == "—"
    assert fmt.format_value("fct_ps", missing) == "—"


@pytest.mark.parametrize("b, text", [
    (0, "0 B"), (850, "850 B"), (999, "999 B"), (1000, "1 KB"), (1500, "1.5 KB"), (12_000_000, "12 MB"),
    (950_840, "951 KB"), (1_000_000_000, "1 GB"), (12.5, "12.5 B"), (999_500, "1 MB"),
])
def test_size_bytes_decimal_si(b, text):
    # 1 KB = 1000 bytes, the 'KB' of scenario files (units.py: "kb": 10**3)
    assert fmt.size_bytes(b) == text


def test_size_bytes_with_the_exact_count():
    assert fmt.size_bytes(1500, exact=True) == "1.5 KB (1,500 B)"
    assert fmt.size_bytes(950_840, exact=True) == "951 KB (950,840 B)"
    assert fmt.size_bytes(850, exact=True) == "850 B"  # already exact


def test_size_units_match_the_scenario_parser():
    from fabriclab.scenario.units import _SIZE

    assert _SIZE["kb"] == 1000 and _SIZE["mb"] == 10**6 and _SIZE["gb"] == 10**9
    assert fmt.size_bytes(_SIZE["mb"] * 8) == "8 MB"


@pytest.mark.parametrize("bps, text", [
    (10_000_000_000, "10 Gbit/s"), (25e9, "25 Gbit/s"), (2_500_000, "2.5 Mbit/s"), (100, "100 bit/s"),
    (1_000, "1 kbit/s"), (400e12, "400 Tbit/s"),
])
def test_rate_bps(bps, text):
    assert fmt.rate_bps(bps) == text


@pytest.mark.parametrize("frac, text", [
    (0, "0%"), (0.4335, "43.4%"), (1, "100.0%"), (0.001, "0.1%"), (0.00012, "0.0120%"), (1.5, "150.0%"),
])
def test_percent(frac, text):
    assert fmt.percent(frac) == text


def test_slowdown_count_number():
    assert fmt.slowdown(2.3104) == "×2.31"
    assert fmt.slowdown(1) == "×1.00"
    assert fmt.slowdown(0.98333) == "×0.983"
    assert fmt.slowdown(1234.5) == "×1,235"
    assert fmt.count(85_929_200) == "85,929,200"
    assert fmt.count(9517.0) == "9,517"  # a whole float (pandas column with NaN) is a count
    assert fmt.number(0.0625) == "0.0625"
    assert fmt.number(1e-7) == "0.0000001"
    assert fmt.number(1.5e20) == "150,000,000,000,000,000,000"
    assert fmt.number(123.456) == "123.5"


def test_fixed_unit():
    assert fmt.fixed(950_840, 1e3, "KB") == "951 KB"
    assert fmt.fixed(30_000, 1e3, "KB") == "30.0 KB"
    assert fmt.fixed(0, 1e3, "KB") == "0 KB"
    assert fmt.fixed(31_500_000_000, 1e9, "ms") == "31.5 ms"
    assert fmt.fixed(1_234_567e9, 1e9, "ms") == "1,234,567 ms"
    assert fmt.fixed(None, 1e9, "ms") == "—"


def test_time_unit_for_axes():
    assert fmt.time_unit(999) == ("ps", 1)
    assert fmt.time_unit(5_000_000) == ("us", 1e6)
    assert fmt.time_unit(98e9) == ("ms", 1e9)


@pytest.mark.parametrize("key, value, text", [
    ("fct_p50_ps", 12_000_000, "12.0 us"),
    ("fct.small.fct_p99_ps", 1_718_138_821.16, "1.72 ms"),
    ("max_queue_bytes", 950_840, "951 KB (950,840 B)"),
    ("bytes", 1500, "1.5 KB (1,500 B)"),
    ("topology.link_rate_bps", 10_000_000_000, "10 Gbit/s"),
    ("links.max_utilization", 0.47599, "47.6%"),
    ("traffic.0.load", 0.4, "40.0%"),
    ("slowdown_p99", 24.518, "×24.5"),
    ("events", 85_929_200, "85,929,200"),
    ("performance.events_per_s", 11_967_897.2, "11,967,897/s"),
    ("traffic.0.flows_per_s", 184, "184/s"),          # a rate per second, not a time in seconds
    ("performance.wall_time_s", 7.18, "7.18 s"),
    ("iteration_time_ms", 30.25, "30.3 ms"),
    ("jobs.j.gradient_slack_ps.mean", 3_611_111_111.0, "3.61 ms"),  # the unit of the nearest named parent
    ("seed", 12345, "12345"),                           # ids as they are
    ("transport.dctcp_g", 0.0625, "0.0625"),
    ("finished", True, "yes"),
    ("backend", "packet", "packet"),
    ("payload_count", 3, "3"),
    ("iteration_times_ps", [37_551_603_635.0, 30_252_928_001.0], "37.6 ms, 30.3 ms"),
])
def test_format_value_by_key(key, value, text):
    assert fmt.format_value(key, value) == text


def test_long_lists_are_summarised():
    values = [i * 1_000_000 for i in range(1, 21)]  # 1 us .. 20 us
    assert fmt.format_value("per_layer_mean_ps", values) == "20 values: min 1.00 us, median 10.5 us, max 20.0 us"
    assert fmt.format_value("x", ["a"] * 13) == "13 values"
    assert fmt.format_value("x", []) == "(none)"


def test_no_scientific_notation():
    for v in (1e-9, 3.2e-5, 1e15, 2.5e21, 6.02e23):
        for f in (fmt.time_ps, fmt.size_bytes, fmt.rate_bps, fmt.number, fmt.count, fmt.percent, fmt.slowdown):
            text = f(v)
            assert "e+" not in text and "e-" not in text, (f.__name__, v, text)


def test_non_numbers_are_refused():
    with pytest.raises(TypeError):
        fmt.time_ps("12us")
    with pytest.raises(TypeError):
        fmt.size_bytes(True)


def test_infinity():
    assert fmt.time_ps(math.inf) == "∞"
    assert fmt.number(-math.inf) == "-∞"


@pytest.mark.parametrize("key, text", [
    ("fct.small.fct_p99_ps", "small FCT p99"),
    ("fct.all.fct_p999_ps", "all FCT p99.9"),
    ("param.traffic.0.load", "traffic.0.load"),
    ("links.max_utilization", "links max utilization"),
    ("jobs.horovod.mean_iteration_time_ps", "jobs horovod mean iteration time"),
])
def test_label(key, text):
    assert fmt.label(key) == text


def test_infinite_values_do_not_break_key_formatting():
    for key in ("max_queue_bytes", "events", "seed", "fct_ps", "link_rate_bps", "iteration_time_ms"):
        assert fmt.format_value(key, math.inf) == "∞"
    assert fmt.format_value("load", math.inf) == "∞%"
    assert fmt.format_value("slowdown", math.inf) == "×∞"

"""Test 8: flow sizes and offered load of the Poisson generator."""

import numpy as np
import pytest

import fabriclab._core as core
from fabriclab import simulate
from fabriclab.scenario.cdfs import load_cdf

from conftest import star_scenario


def quantile_mean(points):
    """E[X] = integral over u in [0, 1] of the quantile function, integrated
    numerically on a fine grid (independent of the core's closed form)."""
    xs = np.array([p[0] for p in points])
    ps = np.array([p[1] for p in points])
    u = (np.arange(2_000_000) + 0.5) / 2_000_000
    # Linear interpolation of the quantile; below the first probability the
    # quantile is the first size (a point mass).
    q = np.interp(u, ps, xs, left=xs[0])
    return q.mean()


@pytest.mark.parametrize("name", ["websearch", "datamining"])
def test_sampled_sizes_match_cdf_mean(name):
    pts = load_cdf(name)
    sizes = np.array(core.sample_cdf(pts, 400_000, 11), dtype=float)
    mean = quantile_mean(pts)
    tol = 0.02 if name == "websearch" else 0.05  # data mining's tail is far heavier
    assert abs(sizes.mean() / mean - 1) < tol


def test_websearch_cdf_mean_by_hand():
    # Mean of the piecewise-linear CDF in 1460-byte packets, segment by segment:
    # 0.15*6 + 0.05*9.5 + 0.1*16 + 0.1*26 + 0.13*43 + 0.07*93 + 0.1*400
    # + 0.1*1000 + 0.1*2333 + 0.07*5000 + 0.03*13333.5 = 1140.98 packets.
    by_hand = (0.9 + 0.475 + 1.6 + 2.6 + 5.59 + 6.51 + 40 + 100 + 233.3 + 350 + 400.005) * 1460
    assert abs(quantile_mean(load_cdf("websearch")) / by_hand - 1) < 1e-4
    assert abs(core.cdf_mean(load_cdf("websearch")) / by_hand - 1) < 1e-9


def test_offered_load_matches_target_over_a_long_run():
    hosts, rate, load, dur_s = 8, 10_000_000_000, 0.5, 40
    s = star_scenario(
        hosts=hosts, rate=rate, backend="flow",
        traffic=[{"load": load, "cdf": "websearch", "duration_ps": f"{dur_s}s"}],
    )
    f = simulate(s).flows
    offered = f["size_bytes"].sum() * 8 / (dur_s * hosts * rate)
    assert abs(offered / load - 1) < 0.03, offered
    # Poisson arrivals: inter-arrival times' coefficient of variation is 1.
    gaps = np.diff(np.sort(f["start_ps"].to_numpy().astype(float)))
    assert abs(gaps.std() / gaps.mean() - 1) < 0.03
    # Uniform distinct endpoints.
    assert (f["src"] != f["dst"]).all()
    counts = np.bincount(f["src"], minlength=hosts)
    assert counts.min() > 0.9 * len(f) / hosts


def test_traffic_restricted_to_a_host_subset():
    s = star_scenario(hosts=6, backend="flow", traffic=[{"load": 0.3, "hosts": [1, 4], "duration_ps": "200ms"}])
    f = simulate(s).flows
    assert set(f["src"]) | set(f["dst"]) == {1, 4}

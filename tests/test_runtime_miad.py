"""The MIAD chunk controller (runtime/miad.py) on synthetic throughput
curves whose maximum is known by construction (calculus, not the
controller): it must end within 10 % (here: 5 %) of the best throughput."""

from __future__ import annotations

import math
import random

import pytest

from fabriclab.runtime.errors import RuntimeInputError
from fabriclab.runtime.miad import ChunkMIAD

MiB = 1 << 20


def pipeline_curve(S=64 * MiB, alpha=50e-6, B=1e9, hops=4):
    """A chain of ``hops`` links pipelining S bytes in chunks c: time
    (S/c + hops - 1)(alpha + c/B); throughput S/time. d/dc = 0 at
    c* = sqrt(S alpha B / (hops - 1))."""
    def thr(c):
        return S / ((S / c + hops - 1) * (alpha + c / B))
    cstar = math.sqrt(S * alpha * B / (hops - 1))
    return thr, cstar


def log_quadratic(cstar=3 * MiB, top=10.0):
    """Concave in log2(c), maximum ``top`` at c = cstar."""
    return (lambda c: max(0.0, top - (math.log2(c) - math.log2(cstar)) ** 2)), cstar


def lorentzian(cstar=3 * MiB + 12345, top=5.0):
    """Positive everywhere, unimodal, maximum ``top`` at c = cstar."""
    return (lambda c: top / (1 + (math.log2(c) - math.log2(cstar)) ** 2)), cstar


def drive(ctl, thr, iters, noise=0.0, rng=None):
    for _ in range(iters):
        t = thr(ctl.chunk)
        if noise:
            t *= 1 + rng.uniform(-noise, noise)
        ctl.update(t)
    return ctl


@pytest.mark.parametrize("curve", [pipeline_curve, lorentzian])
def test_converges_near_the_known_maximum(curve):
    thr, cstar = curve()
    assert thr(64 << 10) < 0.7 * thr(cstar)  # the start is far from the best: the test can fail
    ctl = drive(ChunkMIAD(64 << 10), thr, 25)
    assert ctl.converged
    assert thr(ctl.chunk) >= 0.95 * thr(cstar)
    assert cstar / 2 <= ctl.chunk <= 2 * cstar
    assert len(ctl.history) <= 20


def test_pipeline_curve_argmax_is_what_calculus_says():
    thr, cstar = pipeline_curve()
    assert thr(cstar) > thr(cstar * 1.05) and thr(cstar) > thr(cstar / 1.05)


def test_noisy_measurements_with_median_of_three():
    thr, cstar = pipeline_curve()
    rng = random.Random(7)
    for _ in range(20):
        ctl = drive(ChunkMIAD(64 << 10, samples=3, tolerance=0.03), thr, 80, noise=0.03, rng=rng)
        assert ctl.converged
        assert thr(ctl.chunk) >= 0.90 * thr(cstar)


def test_increase_is_multiplicative_and_decrease_additive():
    thr, _ = log_quadratic(cstar=3 * MiB)
    ctl = drive(ChunkMIAD(256 << 10), thr, 25)
    chunks = [c for c, _ in ctl.history]
    # by hand: T(256K) = 0, T(512K) = 3.32, T(1M) = 7.49, T(2M) = 9.66, T(4M) = 9.83 < 9.66 x 1.02:
    # 4M is the overshoot; then steps of best/4 = 512K: 3.5M (9.95), 3M (10), 2.5M (9.93), 2M (9.66, a fall)
    assert chunks[:5] == [256 << 10, 512 << 10, 1 * MiB, 2 * MiB, 4 * MiB]
    steps = [a - b for a, b in zip(chunks[4:], chunks[5:])]
    assert steps and all(s == 512 << 10 for s in steps)
    assert ctl.chunk == 3 * MiB  # the argmax, visited on the way down


def test_stops_at_max_chunk_when_throughput_keeps_growing():
    ctl = drive(ChunkMIAD(64 << 10, max_chunk=1 * MiB), lambda c: float(c), 10)
    assert ctl.converged and ctl.chunk == 1 * MiB


def test_chunks_are_aligned_to_the_element():
    thr, _ = log_quadratic(cstar=3 * MiB + 5)
    ctl = drive(ChunkMIAD(6000, align=12, min_chunk=12), thr, 30)
    assert all(c % 12 == 0 for c, _ in ctl.history) and ctl.chunk % 12 == 0


def test_retunes_when_the_network_changes():
    thr_a, _ = log_quadratic(cstar=1 * MiB, top=10.0)
    ctl = drive(ChunkMIAD(64 << 10), thr_a, 25)
    assert ctl.converged and ctl.chunk == 1 * MiB
    thr_b, cstar_b = log_quadratic(cstar=16 * MiB, top=10.0)  # at 1M: 10 - 16 = 0 -> a 100 % drop
    drive(ctl, thr_b, 40)
    assert ctl.converged and thr_b(ctl.chunk) >= 0.95 * thr_b(cstar_b)


@pytest.mark.parametrize("kwargs, field", [({"initial": 0}, "initial"), ({"factor": 1.0}, "factor"),
                                           ({"samples": 0}, "samples"), ({"initial": 1 << 30}, "initial"),
                                           ({"tolerance": -0.1}, "tolerance")])
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(RuntimeInputError, match=f"^{field}:"):
        ChunkMIAD(**kwargs)


def test_bad_throughput_is_refused():
    ctl = ChunkMIAD()
    for bad in (-1.0, float("nan"), float("inf"), "1"):
        with pytest.raises(RuntimeInputError, match="^throughput:"):
            ctl.update(bad)

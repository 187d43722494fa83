"""Seeded probe records from known clocks, for tests and benchmarks
(docs/clockwork.md, "Synthetic probes"). No topology: each pair of hosts has a
base one-way delay, probes may queue, and stamps carry noise. The simulator's
probe mesh replaces it for real fabrics.

Clock model: host h reads ``local_h(t) = t + offset_h + drift_h * t + walk_h(t)``
at true time t (ns), with ``drift_h`` in ppm (1e-6) and ``walk_h`` the integral
of a random walk of the drift (``drift_walk_ppm`` per square root of a second).

Probe mesh: host i probes K peers, (i + 1) mod N and K - 1 others drawn at
random, so the probe graph is connected. Each peer gets a coded pair every
1 / ``rate_hz`` seconds (random phase), two probes ``spacing_ns`` apart, and
the peer echoes each pair ``turnaround_ns`` after receiving its second probe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
import pyarrow as pa

from ...errors import InputError
from .probes import SCHEMA

MAX_DRIFT_PPM = 1000.0
STAMPS = ("none", "nic", "software")
# The log-normal's shape (sigma of its log) for software stamps: the simulator's default (scenario/clocks.py,
# software_shape), fitted to SO_TIMESTAMPING over veth (scripts/fit_software_stamps.py).
SOFTWARE_SHAPE = 1.09
MAX_RECORDS = 200_000_000  # about 16 GB while generating


class SyntheticInputError(InputError):
    """A parameter of the synthetic probe generator out of range."""


@dataclass
class Clocks:
    """The hosts' true clocks: ``offset_ns`` and ``drift_ppm`` at t = 0, plus the drift walk's
    integral on a grid (``walk_t_ns``, ``walk_ns`` per host; empty without a walk)."""

    hosts: list[str]
    offset_ns: np.ndarray
    drift_ppm: np.ndarray
    walk_t_ns: np.ndarray = field(default_factory=lambda: np.zeros(0))
    walk_ns: Optional[np.ndarray] = None

    def read(self, h: np.ndarray, t_ns: np.ndarray) -> np.ndarray:
        """Host ``h``'s clock reading (ns, float) at true time ``t_ns``."""
        v = t_ns + self.offset_ns[h] + self.drift_ppm[h] * 1e-6 * t_ns
        if self.walk_ns is not None:
            for k in np.unique(h):
                m = h == k
                v[m] += np.interp(t_ns[m], self.walk_t_ns, self.walk_ns[k])
        return v


def _check(name: str, ok: bool, msg: str) -> None:
    if not ok:
        raise SyntheticInputError(f"{name}: {msg}")


def generate(hosts: int = 16, peers: int = 5, duration_s: float = 10.0, rate_hz: float = 50.0,
             spacing_ns: int = 10_000, seed: int = 0,
             offset_ns: Optional[Sequence[float]] = None, offset_spread_ns: float = 100_000.0,
             drift_ppm: Optional[Sequence[float]] = None, drift_spread_ppm: float = 30.0,
             drift_walk_ppm: float = 0.0,
             base_delay_ns: tuple[int, int] = (2_000, 10_000), queue_prob: float = 0.2,
             queue_mean_ns: float = 5_000.0, stamps: str = "nic", stamp_noise_ns: float = 20.0,
             turnaround_ns: int = 5_000, start_ns: int = 1_000_000) -> tuple[pa.Table, Clocks]:
    """Probe records (an Arrow table in probes.parquet's schema, true times included) and the
    clocks that made them.

    Offsets and drifts are given per host or drawn uniformly within ±``offset_spread_ns`` and
    ±``drift_spread_ppm`` (default 30 ppm: Huygens' "up to 30 µs/s"). ``stamps``: ``none``
    (exact stamps), ``nic`` (Gaussian noise of ``stamp_noise_ns``, default 20 ns: "tens of ns"),
    or ``software`` (tx stamps early and rx stamps late by a log-normal amount of median
    ``stamp_noise_ns`` and shape ``SOFTWARE_SHAPE``, the simulator's software-stamp model, fitted to
    SO_TIMESTAMPING on the cluster-in-a-box's veths: median 335 ns there). Base delays are per unordered pair of hosts, drawn
    uniformly in ``base_delay_ns`` (whole ns) and equal both ways; a probe queues with
    probability ``queue_prob`` for an exponential time of mean ``queue_mean_ns``.
    """
    _check("--hosts", hosts >= 2, f"needs at least 2 hosts, got {hosts}")
    _check("--peers", 1 <= peers, f"must be at least 1, got {peers}")
    _check("--peers", peers <= hosts - 1, f"{peers} is more than the {hosts - 1} other hosts a host can probe "
           f"(K must be at most hosts - 1)")
    _check("--duration-s", duration_s > 0, f"must be positive, got {duration_s}")
    _check("--rate-hz", rate_hz > 0, f"must be positive, got {rate_hz}")
    _check("--spacing-ns", 0 < spacing_ns < 1e9 / rate_hz, f"must be positive and below the probe period, "
           f"got {spacing_ns}")
    _check("--stamps", stamps in STAMPS, f"must be one of {', '.join(STAMPS)}, got {stamps!r}")
    _check("--drift-spread-ppm", 0 <= drift_spread_ppm <= MAX_DRIFT_PPM,
           f"must be within 0 and {MAX_DRIFT_PPM:g} ppm (quartz drifts tens of ppm), got {drift_spread_ppm}")
    for name, value in (("--stamp-noise-ns", stamp_noise_ns), ("--offset-spread-ns", offset_spread_ns),
                        ("--drift-walk-ppm", drift_walk_ppm), ("queue_mean_ns", queue_mean_ns)):
        _check(name, value >= 0 and np.isfinite(value), f"must be a finite number, zero or more, got {value}")
    _check("--queue-prob", 0 <= queue_prob <= 1, f"must be a probability within 0 and 1, got {queue_prob}")
    per_peer = int(np.floor(duration_s * rate_hz))
    _check("--duration-s", per_peer >= 1, f"{duration_s:g} s at {rate_hz:g} pairs/s gives no coded pair; "
           f"make duration x rate at least 1")
    records = 4 * hosts * peers * per_peer
    _check("--duration-s", records <= MAX_RECORDS, f"{hosts} hosts x {peers} peers x {per_peer} pairs would be "
           f"{records:,} probe records; at most {MAX_RECORDS:,} (lower --hosts, --peers, --rate-hz or --duration-s)")
    lo, hi = base_delay_ns
    _check("base_delay_ns", 0 < lo <= hi, f"must be 0 < low <= high, got {base_delay_ns}")
    rng = np.random.default_rng(seed)
    names = [f"h{i:0{len(str(hosts - 1))}d}" for i in range(hosts)]
    off = (rng.uniform(-offset_spread_ns, offset_spread_ns, hosts) if offset_ns is None
           else np.asarray(offset_ns, dtype=np.float64))
    dr = (rng.uniform(-drift_spread_ppm, drift_spread_ppm, hosts) if drift_ppm is None
          else np.asarray(drift_ppm, dtype=np.float64))
    _check("offset_ns", off.shape == (hosts,), f"needs one offset per host ({hosts}), got {off.shape}")
    _check("drift_ppm", dr.shape == (hosts,), f"needs one drift per host ({hosts}), got {dr.shape}")
    bad = np.flatnonzero(np.abs(dr) > MAX_DRIFT_PPM)
    _check("drift_ppm", bad.size == 0, f"host {names[bad[0]] if bad.size else ''} drifts "
           f"{dr[bad[0]] if bad.size else 0:g} ppm; allowed: within ±{MAX_DRIFT_PPM:g} ppm")
    end_ns = start_ns + duration_s * 1e9
    clocks = Clocks(names, off, dr)
    if drift_walk_ppm > 0:
        step_ns = 10_000_000.0
        grid = np.arange(0.0, end_ns + 2 * step_ns, step_ns)
        steps = rng.normal(0.0, drift_walk_ppm * np.sqrt(step_ns / 1e9), (hosts, len(grid)))
        steps[:, 0] = 0.0
        walk_drift = np.cumsum(steps, axis=1) * 1e-6          # drift change, a fraction
        clocks.walk_t_ns = grid
        clocks.walk_ns = np.concatenate([np.zeros((hosts, 1)), np.cumsum(walk_drift[:, :-1] * step_ns, axis=1)],
                                        axis=1)

    # The probe graph: i -> i+1 and K-1 other random peers.
    src_l, dst_l = [], []
    for i in range(hosts):
        others = np.array([j for j in range(hosts) if j != i and j != (i + 1) % hosts])
        pick = rng.choice(others, size=peers - 1, replace=False) if peers > 1 else np.zeros(0, dtype=int)
        for j in [(i + 1) % hosts, *sorted(int(x) for x in pick)]:
            src_l.append(i)
            dst_l.append(j)
    e_src, e_dst = np.array(src_l), np.array(dst_l)
    key = np.minimum(e_src, e_dst) * hosts + np.maximum(e_src, e_dst)
    ukeys, e_pair = np.unique(key, return_inverse=True)
    pair_delay = rng.integers(lo, hi + 1, len(ukeys)).astype(np.float64)

    period_ns = 1e9 / rate_hz
    phase = rng.integers(0, int(period_ns), len(e_src)).astype(np.float64)
    k = np.arange(per_peer, dtype=np.float64)
    t0 = (start_ns + phase[:, None] + k[None, :] * period_ns).ravel()     # initiator's seq-0 send, true ns
    s = np.repeat(e_src, per_peer)
    d = np.repeat(e_dst, per_peer)
    base = np.repeat(pair_delay[e_pair], per_peer)

    def queue(n):
        if queue_prob <= 0:
            return np.zeros(n)
        return np.where(rng.random(n) < queue_prob, rng.exponential(queue_mean_ns, n), 0.0)

    def noise(n, sign):
        if stamps == "none":
            return np.zeros(n)
        if stamps == "nic":
            return rng.normal(0.0, stamp_noise_ns, n)
        return sign * stamp_noise_ns * np.exp(SOFTWARE_SHAPE * rng.standard_normal(n))

    n = len(t0)
    # Pair ids: the initiators' pairs 0..n-1, their echoes n..2n-1, then renumbered per sender.
    # Initiator's pair, then the echo: sent turnaround_ns after the second probe arrives.
    tx_a0, tx_a1 = t0, t0 + spacing_ns
    rx_a0, rx_a1 = tx_a0 + base + queue(n), tx_a1 + base + queue(n)
    rx_a1 = np.maximum(rx_a1, rx_a0)
    tx_b0 = rx_a1 + turnaround_ns
    tx_b1 = tx_b0 + spacing_ns
    rx_b0, rx_b1 = tx_b0 + base + queue(n), tx_b1 + base + queue(n)
    rx_b1 = np.maximum(rx_b1, rx_b0)
    keep = rx_b1 < end_ns
    srcs = np.concatenate([s, s, d, d])
    dsts = np.concatenate([d, d, s, s])
    true_tx = np.concatenate([tx_a0, tx_a1, tx_b0, tx_b1])
    true_rx = np.concatenate([rx_a0, rx_a1, rx_b0, rx_b1])
    seq = np.concatenate([np.zeros(n), np.ones(n), np.zeros(n), np.ones(n)]).astype(np.uint8)
    keep4 = np.tile(keep, 4)
    pair = np.concatenate([np.arange(n), np.arange(n), n + np.arange(n), n + np.arange(n)]).astype(np.uint64)
    order = np.lexsort((seq, true_tx, srcs))
    order = order[keep4[order]]
    srcs, dsts, true_tx, true_rx, seq, pair = (a[order] for a in (srcs, dsts, true_tx, true_rx, seq, pair))
    m = len(srcs)
    # Renumber each sender's pairs 0, 1, ... in the order of their seq-0 sends.
    first = seq == 0
    per_src = np.cumsum(first) - 1
    src_start = np.searchsorted(srcs, np.arange(hosts))
    count_before = np.concatenate([[0], np.cumsum(first)])[src_start]
    renum = np.empty(2 * n, dtype=np.uint64)
    renum[pair[first].astype(np.int64)] = (per_src[first] - count_before[srcs[first]]).astype(np.uint64)
    pair = renum[pair.astype(np.int64)]
    # Rows in (src, pair, seq) order: the reader's fast path.
    order = np.lexsort((seq, pair, srcs))
    srcs, dsts, true_tx, true_rx, seq, pair = (a[order] for a in (srcs, dsts, true_tx, true_rx, seq, pair))
    # Stamp noise moves the instant a clock is read away from the probe's departure or arrival; the
    # true times are those instants (the schema's meaning), so each stamp is its clock there exactly.
    true_tx = np.maximum(true_tx + noise(m, -1.0), 0.0)
    true_rx = true_rx + noise(m, 1.0)
    tx_ns = np.rint(clocks.read(srcs, true_tx)).astype(np.int64)
    rx_ns = np.rint(clocks.read(dsts, true_rx)).astype(np.int64)
    dictionary = pa.array(names, pa.string())
    cols = [pa.DictionaryArray.from_arrays(pa.array(srcs.astype(np.int32)), dictionary),
            pa.DictionaryArray.from_arrays(pa.array(dsts.astype(np.int32)), dictionary),
            pa.array(pair), pa.array(seq), pa.array(tx_ns), pa.array(rx_ns),
            pa.array(np.rint(true_tx * 1000).astype(np.uint64)), pa.array(np.rint(true_rx * 1000).astype(np.uint64))]
    fields = [pa.field(f.name, c.type, nullable=f.nullable) for f, c in zip(SCHEMA, cols)]
    return pa.Table.from_arrays(cols, schema=pa.schema(fields)), clocks

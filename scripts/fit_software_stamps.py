"""Fit the simulator's software-stamp model to kernel stamps measured in the cluster-in-a-box.

    python scripts/fit_software_stamps.py PROBES.parquet [PROBES.parquet ...] [--q 50,99]

The model (`[clocks] stamping = "software"`, docs/clockwork.md "The clock model"): a send stamp is early and
a receive stamp late by independent log-normal amounts of median m and shape s (the sigma of the log). On
an idle path of constant delay, rx - tx above its floor is then X1 + X2 - min, X1, X2 ~ LogNormal(ln m, s);
the floor's share (the least of many sums) is a few per cent of m and is subtracted alike from the model.

The measured counterpart is what `fabriclab clock mesh` records on veth (the agent's true times are the
kernel stamps): true rx - true tx per direction of each edge, above that direction's least value
(`agent.stamp_noise`). On veth there is no wire, so everything between the two stamps (the softirq that
takes the packet into the other namespace, the switch namespace's forwarding and htb) counts as stamp
noise here: the fit is of the whole spread, as the simulator's idle fabric has none of its own.

It solves for (m, s) so that the model's quantiles (by default p50 and p99, from 400,000 seeded draws)
equal the measured ones, and prints both with the model's p90 and p99.9 beside the measured as a check.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from scipy.optimize import fsolve

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))


def above_floor(paths: list[str]) -> np.ndarray:
    out = []
    for p in paths:
        df = pq.read_table(p, columns=["src", "dst", "true_tx_ps", "true_rx_ps"]).to_pandas()
        d = (df.true_rx_ps.astype(np.int64) - df.true_tx_ps.astype(np.int64)) / 1000.0
        out.append((d - d.groupby([df.src, df.dst]).transform("min")).to_numpy())
    return np.concatenate(out)


def model(m_ns: float, s: float, z: np.ndarray, qs: list[float], groups: int) -> np.ndarray:
    x = m_ns * np.exp(s * z)
    tot = x[0] + x[1]
    # above the floor of each group of draws, as the measurement takes each direction's least value
    per = tot.reshape(groups, -1)
    return np.percentile((per - per.min(axis=1, keepdims=True)).ravel(), qs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("probes", nargs="+")
    ap.add_argument("--q", default="50,99", help="the two percentiles to match")
    a = ap.parse_args()
    meas = above_floor(a.probes)
    qs = [float(v) for v in a.q.split(",")]
    target = np.percentile(meas, qs)
    z = np.random.default_rng(0).standard_normal((2, 400_000))
    groups = 400   # 1,000 draws per group: about one direction's probes in a few seconds

    def f(v):
        m, s = np.exp(v[0]), v[1]
        return np.log(model(m, s, z, qs, groups)) - np.log(target)

    v = fsolve(f, [np.log(target[0] / 2), 0.8])
    m, s = float(np.exp(v[0])), float(v[1])
    check = [50, 90, 99, 99.9]
    print(f"measured: {meas.size} probes from {len(a.probes)} file(s); above the floor, ns: "
          + ", ".join(f"p{q:g} {x:.0f}" for q, x in zip(check, np.percentile(meas, check))))
    print(f"fit: software_median_ps = {m * 1000:.0f} ({m:.0f} ns), software_shape = {s:.3f}")
    print("model: " + ", ".join(f"p{q:g} {x:.0f}" for q, x in zip(check, model(m, s, z, check, groups))))
    print(f"one stamp's error: p50 {m:.0f} ns, p99 {m * np.exp(s * 2.3263):.0f} ns")


if __name__ == "__main__":
    main()

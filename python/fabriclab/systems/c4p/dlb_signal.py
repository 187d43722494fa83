"""What dynamic load balancing's completion-time signal does after a link
fails (figure 11's gap to the ideal): figure 11's 8 jobs at 16 MiB, 8
allreduces, leaf0-spine0 down at 0.4 ms, static and DLB. For the sends of
the connections through leaf0 after the failure it prints how far apart
their parts finish (a slow QP holding up its send), how the QPs' completion
times per KiB compare (the signal), and each QP's share of the bytes.

    python -m fabriclab.systems.c4p.dlb_signal
"""

from __future__ import annotations

import numpy as np

from .bench import Job, RunConfig, run_jobs
from .testbed import testbed

SIZE = 16 << 20
DOWN_PS = 400_000_000


def analyse(balance: str) -> dict:
    t = testbed(16)
    jobs = [Job(f"job{i}", [i, 8 + i]) for i in range(8)]
    events = [{"at_ps": DOWN_PS, "link": ["leaf0", "spine0"], "action": "down"}]
    res = run_jobs(t, jobs, RunConfig(mode="c4p", balance=balance, qps=4, qp_depth=4, size_bytes=SIZE, iterations=8,
                                      link_events=events, keep_messages=True))
    after_bw = []
    for j in res.jobs:
        start = 0
        for tp, bw in zip(j.iteration_ps, j.busbw_bps(SIZE)):
            if start > DOWN_PS:
                after_bw.append(bw / 8e9)
            start += tp
    m = res.messages
    x = m[m.app.str.startswith("job") & m.path.str.contains("spine")].copy()  # the QP parts between servers
    x["rank"] = (x.tag.to_numpy(dtype=np.uint64) >> np.uint64(32)).astype(int)
    x["after"] = x.start_ps > DOWN_PS
    x["ps_per_kib"] = (x.end_ps - x.start_ps) / x.size_bytes * 1024
    x["conn"] = x.app + ":" + x["rank"].astype(str) + ">" + x.dst.astype(str)
    conns = x[x.after & x.path.str.contains("leaf0")].conn.unique()
    y = x[x.conn.isin(conns) & x.after]
    sends = y.groupby(["app", "tag"]).agg(first=("end_ps", "min"), last=("end_ps", "max"), start=("start_ps", "min"))
    holdup = ((sends["last"] - sends["first"]) / (sends["last"] - sends["start"])).mean()
    q = y.groupby(["conn", "path"]).agg(bytes=("size_bytes", "sum"), ps_per_kib=("ps_per_kib", "median")).reset_index()
    q["share"] = q.bytes / q.groupby("conn").bytes.transform("sum")
    shares = np.mean([sorted(v, reverse=True) + [0.0] * (4 - len(v)) for v in q.groupby("conn").share.apply(list)],
                     axis=0)
    return {"after_busbw_mean_GBps": round(float(np.mean(after_bw)), 1),
            "after_busbw_min_GBps": round(float(min(after_bw)), 1),
            "connections_through_leaf0": int(len(conns)),
            "send_holdup_fraction": round(float(holdup), 3),
            "qp_ps_per_kib_slowest_over_fastest": round(float(q.groupby("conn").ps_per_kib.agg(
                lambda s: s.max() / s.min()).mean()), 2),
            "qp_byte_shares_sorted": [round(float(s), 3) for s in shares],
            "median_ps_per_kib_after": int(x[x.after].ps_per_kib.median())}


def main() -> None:
    for balance in ("split", "dlb"):
        print(balance, analyse(balance))


if __name__ == "__main__":
    main()

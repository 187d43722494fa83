"""Runs fabriclab and ns-3 on the same flow list and compares them.

Draws the flows with flows.py (same options), then runs, alternately and
``--repeat`` times each, the ns-3 program (benches/ns3/build/dc, from
install.sh) and ``fabriclab run`` as whole processes. Prints, per size bucket
(fabriclab's: small < 100 KB, medium 100 KB-10 MB, large > 10 MB), FCT p50/p99/mean of each and their ratios
(fabriclab / ns-3), the mean slowdown of each, ECN marks and drops at switches
and hosts, and the wall times with their ratio. Writes compare.json
(compare-handshake.json with ``--handshake``) beside the flows. Exits 1 when a run fails, a flow is left unfinished or the two flow
tables disagree on a flow; 2 on bad options.

Without ``--handshake`` fabriclab starts each flow's data at once and is
compared with ns-3's FCT from the moment its connection succeeded
(``fct_data``); ns-3's FCT from the flow's start is printed too. With
``--handshake`` fabriclab opens each flow with SYN / SYN-ACK as ns-3 does, and
both are compared from the flow's start. Slowdowns of both use fabriclab's
ideal FCT of the flow (same path, same sizes, no handshake).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import flows as gen  # noqa: E402  (benches/ns3/flows.py)
from fabriclab.sim.results import BUCKETS  # noqa: E402


class CompareError(RuntimeError):
    pass


def run_ns3(binary: Path, case: Path) -> dict:
    out = case / "ns3"
    out.mkdir(exist_ok=True)
    cmd = [str(binary), f"--case={case / 'case.txt'}", f"--out={out / 'flows.csv'}", f"--links={out / 'links.csv'}"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise CompareError(f"ns-3 run failed (exit {p.returncode}): {p.stderr.strip()[-2000:]}")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise CompareError(f"ns-3 run printed no result line: {p.stdout[-2000:]}")
    info = json.loads(lines[-1])
    info["process_wall_s"] = wall
    # Recorded with its inputs, for --reuse-ns3.
    (out / "case.txt").write_text((case / "case.txt").read_text())
    (out / "flows-in.csv").write_text((case / "flows.csv").read_text())
    (out / "run.json").write_text(json.dumps(info) + "\n")
    return info


def fl_dir(case: Path, handshake: bool) -> Path:
    """fabriclab's results: one folder per mode, so both modes can share one ns-3 run."""
    return case / ("fabriclab-handshake" if handshake else "fabriclab")


def reused_ns3(case: Path) -> dict | None:
    """The recorded ns-3 run of this very case (same case.txt, same flows), if any."""
    ns3 = case / "ns3"
    try:
        same = ((ns3 / "case.txt").read_text() == (case / "case.txt").read_text()
                and (ns3 / "flows-in.csv").read_text() == (case / "flows.csv").read_text())
        return json.loads((ns3 / "run.json").read_text()) if same else None
    except FileNotFoundError:
        return None


def run_fabriclab(case: Path, handshake: bool) -> dict:
    out = fl_dir(case, handshake)
    cmd = [sys.executable, "-m", "fabriclab.cli", "run", str(case / "scenario.toml"), "--out", str(out), "--force"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise CompareError(f"fabriclab run failed (exit {p.returncode}): {p.stderr.strip()[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {"process_wall_s": wall, "wall_s": summary["performance"]["wall_time_s"], "events": summary["events"],
            "sim_end_ps": summary["sim_time_ps"]}


def percentile(x: np.ndarray, q: float) -> float:
    # numpy's linear interpolation between order statistics, as fabriclab's summary.
    return float(np.percentile(x, q)) if len(x) else float("nan")


def stats(fct_ps: np.ndarray, ideal_ps: np.ndarray) -> dict:
    return {"flows": int(len(fct_ps)), "p50_us": percentile(fct_ps, 50) / 1e6, "p99_us": percentile(fct_ps, 99) / 1e6,
            "mean_us": float(fct_ps.mean()) / 1e6 if len(fct_ps) else float("nan"),
            "slowdown_mean": float((fct_ps / ideal_ps).mean()) if len(fct_ps) else float("nan")}


def joined_flows(case: Path, handshake: bool) -> pd.DataFrame:
    """One row per flow with both simulators' FCTs; checks they ran the same flows."""
    listed = pd.read_csv(case / "flows.csv")
    ns3 = pd.read_csv(case / "ns3" / "flows.csv")
    fl = pd.read_parquet(fl_dir(case, handshake) / "flows.parquet")
    if len(ns3) != len(listed) or len(fl) != len(listed):
        raise CompareError(f"flow counts differ: list {len(listed)}, ns-3 {len(ns3)}, fabriclab {len(fl)}")
    fl = fl.sort_values("flow_id").reset_index(drop=True)
    ns3 = ns3.sort_values("flow_id").reset_index(drop=True)
    for col in ("src", "dst", "size_bytes", "start_ps"):
        if not (fl[col].to_numpy() == listed[col].to_numpy()).all():
            raise CompareError(f"fabriclab's flows.parquet differs from flows.csv in column {col}")
    if not (ns3["size_bytes"].to_numpy() == listed["size_bytes"].to_numpy()).all():
        raise CompareError("ns-3's flow table differs from flows.csv in size_bytes")
    if fl["fct_ps"].isna().any() or ns3["fct_data_ps"].isna().any():
        raise CompareError(f"unfinished flows: fabriclab {int(fl['fct_ps'].isna().sum())}, "
                           f"ns-3 {int(ns3['fct_data_ps'].isna().sum())}")
    return pd.DataFrame({"flow_id": listed["flow_id"], "size_bytes": listed["size_bytes"],
                         "ideal_ps": fl["ideal_fct_ps"].astype(float), "fl_ps": fl["fct_ps"].astype(float),
                         "ns3_data_ps": ns3["fct_data_ps"].astype(float), "ns3_hs_ps": ns3["fct_ps"].astype(float)})


def port_counters(cases: list[Path], handshake: bool) -> dict:
    """ECN marks and drops at switch and host egress ports, for both, summed over the cases."""
    ns3 = pd.concat([pd.read_csv(c / "ns3" / "links.csv").assign(case=i) for i, c in enumerate(cases)])
    fl = pd.concat([pd.read_parquet(fl_dir(c, handshake) / "links.parquet").assign(case=i) for i, c in enumerate(cases)])
    out = {}
    for name, t in (("ns3", ns3), ("fabriclab", fl)):
        host = t["src_node"].str.match(r"^h\d+$")
        out[name] = {"switch_marks": int(t.loc[~host, "ecn_marks"].sum()), "host_marks": int(t.loc[host, "ecn_marks"].sum()),
                     "switch_drops": int(t.loc[~host, "drops"].sum()), "host_drops": int(t.loc[host, "drops"].sum())}
    both = ns3.merge(fl[["case", "src_node", "dst_node", "packets"]], on=["case", "src_node", "dst_node"],
                     suffixes=("_ns3", "_fl"))
    if len(both) != len(fl):
        raise CompareError("the two simulators' port lists differ")
    # Same paths put the same packets on every port (ns-3 adds SYN, SYN-ACK and FIN segments).
    out["port_packets_rel_diff"] = float((both["packets_ns3"] - both["packets_fl"]).abs().sum() / max(both["packets_fl"].sum(), 1))
    return out


def compare(cases: list[Path], ns3_runs: list[dict], fl_runs: list[dict], handshake: bool = False) -> dict:
    """Per bucket, the flows of every case (one per seed) pooled: fabriclab, ns-3
    on the compared basis ("ns3": from the flow's start with the handshake, else
    from connection set-up) and ns-3 on both bases."""
    j = pd.concat([joined_flows(c, handshake) for c in cases], ignore_index=True)
    buckets = {}
    for name, member in BUCKETS:  # fabriclab's own size buckets
        sel = member(j["size_bytes"])
        d = j[sel]
        data = stats(d["ns3_data_ps"].to_numpy(), d["ideal_ps"].to_numpy())
        hs = stats(d["ns3_hs_ps"].to_numpy(), d["ideal_ps"].to_numpy())
        buckets[name] = {"fabriclab": stats(d["fl_ps"].to_numpy(), d["ideal_ps"].to_numpy()),
                         "ns3": hs if handshake else data, "ns3_data": data, "ns3_handshake": hs}
    def best(runs: list[dict], key: str) -> float:
        # Per case the best of its repeats, summed over the cases.
        return sum(min(r[key] for r in runs if r["case"] == str(c)) for c in cases)

    return {"case": ", ".join(str(c) for c in cases), "flows": int(len(j)), "handshake": handshake,
            "buckets": buckets, "ports": port_counters(cases, handshake), "ns3_runs": ns3_runs, "fabriclab_runs": fl_runs,
            "wall": {"ns3_process_s": best(ns3_runs, "process_wall_s"), "ns3_run_s": best(ns3_runs, "wall_s"),
                     "fabriclab_process_s": best(fl_runs, "process_wall_s"), "fabriclab_core_s": best(fl_runs, "wall_s"),
                     "ns3_events": int(best(ns3_runs, "events")), "fabriclab_events": int(best(fl_runs, "events"))}}


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def render(res: dict) -> str:
    basis = ("both with the handshake, from the flow's start" if res["handshake"]
             else "no handshake in fabriclab; ns-3 from connection set-up")
    lines = [f"{res['case']}: {res['flows']} flows; FCT in us; ratio = fabriclab / ns-3 ({basis})",
             "| bucket | flows | p50 fabriclab | p50 ns-3 | ratio | p99 fabriclab | p99 ns-3 | ratio "
             "| mean fabriclab | mean ns-3 | ratio | slowdown fabriclab | slowdown ns-3 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, b in res["buckets"].items():
        f, n = b["fabriclab"], b["ns3"]
        if not f["flows"]:
            lines.append(f"| {name} | 0 |" + " - |" * 11)
            continue
        lines.append(f"| {name} | {f['flows']} | {f['p50_us']:,.1f} | {n['p50_us']:,.1f} | {ratio(f['p50_us'], n['p50_us'])} "
                     f"| {f['p99_us']:,.1f} | {n['p99_us']:,.1f} | {ratio(f['p99_us'], n['p99_us'])} "
                     f"| {f['mean_us']:,.1f} | {n['mean_us']:,.1f} | {ratio(f['mean_us'], n['mean_us'])} "
                     f"| {f['slowdown_mean']:.2f} | {n['slowdown_mean']:.2f} |")
    other, label = (("ns3_data", "ns-3 from connection set-up") if res["handshake"]
                    else ("ns3_handshake", "ns-3 with its handshake (from the flow's start)"))
    lines.append(f"{label}: " + "; ".join(
        f"{name} p50 {b[other]['p50_us']:,.1f} p99 {b[other]['p99_us']:,.1f} "
        f"mean {b[other]['mean_us']:,.1f} (fabriclab / ns-3 p50 "
        f"{ratio(b['fabriclab']['p50_us'], b[other]['p50_us'])})"
        for name, b in res["buckets"].items() if b["fabriclab"]["flows"]))
    p = res["ports"]
    lines.append("ECN marks switch/host: fabriclab {}/{}, ns-3 {}/{}; drops switch/host: fabriclab {}/{}, ns-3 {}/{}; "
                 "packets per port: sum |ns-3 - fabriclab| / sum fabriclab = {:.2%}".format(
                     p["fabriclab"]["switch_marks"], p["fabriclab"]["host_marks"], p["ns3"]["switch_marks"],
                     p["ns3"]["host_marks"], p["fabriclab"]["switch_drops"], p["fabriclab"]["host_drops"],
                     p["ns3"]["switch_drops"], p["ns3"]["host_drops"], p["port_packets_rel_diff"]))
    w = res["wall"]
    lines.append(f"wall (best of the repeats, summed over the seeds): ns-3 {w['ns3_process_s']:.2f} s (Simulator::Run {w['ns3_run_s']:.2f} s, "
                 f"{w['ns3_events']:,} events); fabriclab run {w['fabriclab_process_s']:.2f} s (core {w['fabriclab_core_s']:.2f} s, "
                 f"{w['fabriclab_events']:,} events); ns-3 / fabriclab: process {ratio(w['ns3_process_s'], w['fabriclab_process_s'])}, "
                 f"core {ratio(w['ns3_run_s'], w['fabriclab_core_s'])}")
    return "\n".join(lines)


def parse_seeds(text: str | None, default: int) -> list[int]:
    if text is None:
        return [default]
    try:
        seeds = [int(x) for x in text.split(",")]
    except ValueError:
        raise gen.SetupError(f"--seeds: must be comma-separated integers, got {text!r}") from None
    if len(set(seeds)) != len(seeds) or any(x < 0 for x in seeds):
        raise gen.SetupError(f"--seeds: must be distinct non-negative integers, got {text!r}")
    return seeds


def main(argv: list[str] | None = None) -> int:
    p = gen.build_parser()
    p.description = __doc__.split("\n\n")[0]
    p.add_argument("--repeat", type=int, default=1, help="runs of each simulator, alternating (best wall time kept)")
    p.add_argument("--ns3", type=Path, default=HERE / "build" / "dc", help="the ns-3 program (install.sh builds it)")
    p.add_argument("--reuse-ns3", action="store_true",
                   help="skip ns-3 where OUT already holds its run of the same case (e.g. to compare both modes)")
    p.add_argument("--seeds", default=None,
                   help="comma-separated seeds, e.g. 2,3: one flow list per seed (in OUT/seed-N), flows pooled "
                        "per bucket (overrides --seed)")
    a = p.parse_args(argv)
    try:
        if a.repeat < 1:
            raise gen.SetupError(f"--repeat: must be at least 1, got {a.repeat}")
        if not os.access(a.ns3, os.X_OK):
            raise gen.SetupError(f"--ns3: {a.ns3} is not an executable; build it with benches/ns3/install.sh")
        cases = []
        for seed in parse_seeds(a.seeds, a.seed):
            a.seed = seed
            case = a.out if a.seeds is None else a.out / f"seed-{seed}"
            gen.write_case(gen.setup_from_args(a), case)
            cases.append(case)
    except gen.SetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    ns3_runs: list[dict] = []
    fl_runs: list[dict] = []
    try:
        for case in cases:
            for r in range(a.repeat):
                # Alternate which simulator goes first, so neither always meets a warm or busy machine.
                order = ("ns3", "fabriclab") if r % 2 == 0 else ("fabriclab", "ns3")
                for name in order:
                    if name == "ns3" and a.reuse_ns3 and (old := reused_ns3(case)) is not None:
                        if r == 0:
                            ns3_runs.append({"case": str(case), **old})
                        continue
                    run = run_ns3(a.ns3, case) if name == "ns3" else run_fabriclab(case, a.handshake)
                    (ns3_runs if name == "ns3" else fl_runs).append({"case": str(case), **run})
        res = compare(cases, ns3_runs, fl_runs, handshake=a.handshake)
    except CompareError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    res["setup"] = [json.loads((c / "setup.json").read_text()) for c in cases]
    (a.out / ("compare-handshake.json" if a.handshake else "compare.json")).write_text(json.dumps(res, indent=1) + "\n")
    print(render(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Flow-list generator of the ns-3 comparison harness (benches/ns3/README.md).

Draws one list of flows (Poisson arrivals at a target load, sizes from a
fabriclab CDF, source and destination uniform among distinct hosts, seeded)
and writes it for both simulators:

- ``flows.csv`` and ``case.txt`` for the ns-3 program (benches/ns3/dc.cc);
- ``scenario.toml`` and ``flows_fabriclab.csv`` for ``fabriclab run``: the
  same flows, read through the scenario's ``flows_csv`` (a flow list is a
  CSV for both simulators; as ``[[flows]]`` entries, parsing and rewriting
  the TOML took 0.025 s of a 0.5 s run), each with its ``path`` pinned on
  the leaf-spine, so both simulators put every flow on the same spine (a
  deterministic hash of the seed and the flow, in place of each simulator's
  own ECMP).

The load follows fabriclab's ``[[traffic]]`` definition (docs/scenario.md):
payload bytes offered per second as a fraction of the summed host link rate,
arrival rate ``load * sum(host rates) / (8 * mean size)``. Sizes come from the
core's own sampler (``fabriclab._core.sample_cdf``) and mean
(``fabriclab._core.cdf_mean``), so the distribution is the one fabriclab's
traffic generator draws from.

Settings of the two simulators, and where they cannot be made equal, are
listed in benches/ns3/README.md ("What differs").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

# A full segment is 1500 IP bytes: 1538 bytes on fabriclab's Ethernet wire
# (docs/architecture.md) and 1502 on ns-3's point-to-point link (2-byte PPP
# header). With wire = "match" the ns-3 link rate is scaled by 1502/1538 so a
# full segment takes the same time on the wire in both simulators.
FABRICLAB_FRAME_BYTES = 1538
NS3_FRAME_BYTES = 1502

# ns-3's RED marks when its queue disc holds >= K packets on arrival; the
# device queue holds one more packet waiting behind the one on the wire. In
# fabriclab a band marks when it holds > K packets (the serializing packet not
# counted), so under congestion the same K marks at the same occupancy, and the
# drop-tail limit is one packet larger in fabriclab (ns-3: queue disc full at
# L, plus 1 in the device queue).
NS3_DEVICE_QUEUE_PACKETS = 1

@dataclass
class Setup:
    topology: str = "star"  # star | leaf_spine
    hosts: int = 8  # star
    leaves: int = 4
    hosts_per_leaf: int = 8
    spines: int = 4
    link_rate_bps: int = 10_000_000_000
    spine_link_rate_bps: int | None = None  # leaf-spine: default hosts_per_leaf * rate / spines (1:1)
    link_delay_ps: int | None = None  # default 10 us (star), 1 us (leaf-spine): fabriclab's defaults
    cc: str = "dctcp"  # dctcp (RED step marking) | newreno (drop-tail)
    limit_packets: int = 250  # ns-3 queue disc limit (fabriclab gets + NS3_DEVICE_QUEUE_PACKETS)
    ecn_threshold_packets: int = 65  # K
    min_rto_ps: int = 5_000_000_000
    mss_bytes: int = 1460
    init_cwnd_packets: int = 10
    load: float = 0.4
    duration_ps: int = 200_000_000_000
    cdf: str = "websearch"
    seed: int = 1
    prio_below_bytes: int | None = None  # strict priority: flows below this size in class 0, others class 1
    wire: str = "match"  # match | raw
    handshake: bool = False  # fabriclab opens each flow with SYN / SYN-ACK, as ns-3 does
    extra: dict = field(default_factory=dict)

    def delay_ps(self) -> int:
        if self.link_delay_ps is not None:
            return self.link_delay_ps
        return 10_000_000 if self.topology == "star" else 1_000_000

    def host_count(self) -> int:
        return self.hosts if self.topology == "star" else self.leaves * self.hosts_per_leaf

    def uplink_bps(self) -> int:
        if self.spine_link_rate_bps is not None:
            return self.spine_link_rate_bps
        return self.hosts_per_leaf * self.link_rate_bps // self.spines

    def leaf_of(self, host: int) -> int:
        return 0 if self.topology == "star" else host // self.hosts_per_leaf


class SetupError(ValueError):
    pass


def check(s: Setup) -> None:
    def need(ok: bool, fld: str, what: str) -> None:
        if not ok:
            raise SetupError(f"{fld}: {what}")

    need(s.topology in ("star", "leaf_spine"), "--topology", f"must be star or leaf_spine, got {s.topology!r}")
    need(s.cc in ("dctcp", "newreno"), "--cc", f"must be dctcp or newreno, got {s.cc!r}")
    need(s.wire in ("match", "raw"), "--wire", f"must be match or raw, got {s.wire!r}")
    need(0 < s.load <= 1, "--load", f"must be within (0, 1], got {s.load}")
    need(s.duration_ps > 0, "--duration", "must be > 0")
    need(2 <= s.hosts <= 250, "--hosts", "must be within 2..250")
    need(1 <= s.leaves <= 250 and 1 <= s.hosts_per_leaf <= 250, "--leaves/--hosts-per-leaf", "must be within 1..250")
    need(1 <= s.spines <= 250, "--spines", "must be within 1..250")
    need(s.limit_packets >= 1, "--limit-packets", "must be at least 1")
    need(s.ecn_threshold_packets >= 1, "--ecn-threshold-packets", "must be at least 1")
    need(s.prio_below_bytes is None or s.prio_below_bytes > 0, "--prio-below-bytes", "must be > 0")
    need(s.host_count() >= 2, "--hosts-per-leaf", "the fabric needs at least 2 hosts")


def cdf_points(name: str) -> list[tuple[float, float]]:
    from fabriclab.scenario.cdfs import load_cdf

    return load_cdf(name)


def draw_flows(s: Setup) -> list[dict]:
    """The flows: Poisson arrivals in [0, duration_ps), sizes from the CDF,
    uniform distinct endpoints, a spine per inter-leaf flow."""
    from fabriclab import _core

    points = cdf_points(s.cdf)
    mean_bytes = _core.cdf_mean(points)
    hosts = s.host_count()
    rate_per_s = s.load * hosts * s.link_rate_bps / (8 * mean_bytes)
    rng = np.random.default_rng(s.seed)
    starts: list[int] = []
    t_s = 0.0
    while True:
        t_s += rng.exponential(1.0 / rate_per_s)
        t_ps = round(t_s * 1e12)
        if t_ps >= s.duration_ps:
            break
        starts.append(t_ps)
    sizes = _core.sample_cdf(points, len(starts), s.seed)
    flows = []
    for i, (start, size) in enumerate(zip(starts, sizes)):
        src = int(rng.integers(hosts))
        dst = int((src + rng.integers(1, hosts)) % hosts)
        cls = 0 if s.prio_below_bytes is None or size < s.prio_below_bytes else 1
        flows.append({"flow_id": i, "src": src, "dst": dst, "size_bytes": int(size), "start_ps": start,
                      "class": cls, "spine": spine_of(s, i, src, dst)})
    return flows


def spine_of(s: Setup, flow_id: int, src: int, dst: int) -> int:
    """-1 within a leaf (or a star); else a hash of (seed, flow, src, dst) over the spines."""
    if s.topology == "star" or s.leaf_of(src) == s.leaf_of(dst):
        return -1
    h = hashlib.blake2b(f"{s.seed}:{flow_id}:{src}:{dst}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") % s.spines


def path_of(s: Setup, f: dict) -> list[str]:
    """Node names from source host to destination host (fabriclab's names)."""
    src, dst = f"h{f['src']}", f"h{f['dst']}"
    if s.topology == "star":
        return [src, "s0", dst]
    ls, ld = s.leaf_of(f["src"]), s.leaf_of(f["dst"])
    if ls == ld:
        return [src, f"leaf{ls}", dst]
    return [src, f"leaf{ls}", f"spine{f['spine']}", f"leaf{ld}", dst]


def ns3_rate(s: Setup, rate_bps: int) -> int:
    if s.wire == "raw":
        return rate_bps
    return round(rate_bps * NS3_FRAME_BYTES / FABRICLAB_FRAME_BYTES)


def priomap(s: Setup) -> list[int]:
    """fabriclab's class -> band: class 0 to band 0, every other class to band 1."""
    return [0] + [1] * 7


def case_text(s: Setup, flows_csv: str, stop_ps: int) -> str:
    bands = 1 if s.prio_below_bytes is None else 2
    lines = [
        "# ns-3 case written by benches/ns3/flows.py; read by benches/ns3/dc.cc",
        f"topology {s.topology}",
    ]
    if s.topology == "star":
        lines.append(f"hosts {s.hosts}")
    else:
        lines += [f"leaves {s.leaves}", f"hosts_per_leaf {s.hosts_per_leaf}", f"spines {s.spines}",
                  f"spine_link_rate_bps {ns3_rate(s, s.uplink_bps())}"]
    lines += [
        f"# link rates: {s.wire} (match: x {NS3_FRAME_BYTES}/{FABRICLAB_FRAME_BYTES}, equal full-segment time)",
        f"host_link_rate_bps {ns3_rate(s, s.link_rate_bps)}",
        f"link_delay_ps {s.delay_ps()}",
        f"cc {s.cc}",
        f"queue {'red' if s.cc == 'dctcp' else 'fifo'}",
        f"limit_packets {s.limit_packets}",
        f"ecn_threshold_packets {s.ecn_threshold_packets}",
        f"bands {bands}",
        "priomap " + " ".join(str(b) for b in priomap(s)),  # class -> band, as fabriclab's
        f"min_rto_ps {s.min_rto_ps}",
        f"initial_rto_ps {s.min_rto_ps}",
        f"mss_bytes {s.mss_bytes}",
        f"init_cwnd_packets {s.init_cwnd_packets}",
        f"stop_ps {stop_ps}",
        f"flows_csv {flows_csv}",
    ]
    return "\n".join(lines) + "\n"


def _toml_value(v) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


FABRICLAB_FLOWS = "flows_fabriclab.csv"


def scenario_text(s: Setup) -> str:
    out = [
        "# fabriclab side of the ns-3 comparison, written by benches/ns3/flows.py",
        f"name = {_toml_value(f'ns3-compare {s.topology} {s.cc} load {s.load} seed {s.seed}')}",
        f"seed = {s.seed}",
        'backend = "packet"',
        f"flows_csv = {_toml_value(FABRICLAB_FLOWS)}",
        "",
        "[topology]",
        f'kind = "{s.topology}"',
    ]
    if s.topology == "star":
        out.append(f"hosts = {s.hosts}")
    else:
        out += [f"leaves = {s.leaves}", f"hosts_per_leaf = {s.hosts_per_leaf}", f"spines = {s.spines}",
                f"spine_link_rate_bps = {s.uplink_bps()}"]
    out += [f"link_rate_bps = {s.link_rate_bps}", f"link_delay_ps = {s.delay_ps()}", ""]
    queue = [
        f'discipline = "{"fifo" if s.prio_below_bytes is None else "prio"}"',
        f"limit_packets = {s.limit_packets + NS3_DEVICE_QUEUE_PACKETS}",
        "ecn_threshold_packets = " + (str(s.ecn_threshold_packets) if s.cc == "dctcp" else '"off"'),
    ]
    if s.prio_below_bytes is not None:
        queue += ["bands = 2", f"priomap = {_toml_value(priomap(s))}"]
    # Hosts' NIC queues mark and drop like the switches' (ns-3 puts the same queue disc on them).
    out += ["[queue]", *queue, "", "[host_queue]", *queue, ""]
    out += [
        "[transport]",
        f'cc = "{s.cc}"',
        f"mss_bytes = {s.mss_bytes}",
        f"init_cwnd_packets = {s.init_cwnd_packets}",
        f"min_rto_ps = {s.min_rto_ps}",
        f"initial_rto_ps = {s.min_rto_ps}",
        # ns-3 has no TCP Small Queues: a limit no flow reaches switches it off.
        "tsq_limit_bytes = 1_000_000_000_000",
        # ns-3 always opens with SYN / SYN-ACK; with --handshake fabriclab does too.
        f"handshake = {_toml_value(s.handshake)}",
        "",
        "[outputs]",
        "messages = false",
        "",
    ]
    return "\n".join(out)


def fabriclab_flows_text(s: Setup, flows: list[dict]) -> str:
    """The flows as fabriclab's ``flows_csv`` reads them (docs/scenario.md):
    its columns, the path as node names separated by spaces."""
    rows = ["src,dst,size_bytes,start_ps,class,path"]
    rows += [f"{f['src']},{f['dst']},{f['size_bytes']},{f['start_ps']},{f['class']},{' '.join(path_of(s, f))}"
             for f in flows]
    return "\n".join(rows) + "\n"


def flows_csv_text(flows: list[dict]) -> str:
    rows = ["flow_id,src,dst,size_bytes,start_ps,class,spine"]
    rows += [f"{f['flow_id']},{f['src']},{f['dst']},{f['size_bytes']},{f['start_ps']},{f['class']},{f['spine']}"
             for f in flows]
    return "\n".join(rows) + "\n"


def write_case(s: Setup, out: Path, stop_ps: int | None = None) -> list[dict]:
    """Draws the flows and writes flows.csv, case.txt, scenario.toml, flows_fabriclab.csv and
    setup.json into ``out``."""
    check(s)
    flows = draw_flows(s)
    if not flows:
        raise SetupError("--duration: no flow arrives in so short a time at this load")
    if len(flows) > 64000:
        raise SetupError("--duration: more than 64000 flows (the ns-3 program gives each its own source port)")
    out.mkdir(parents=True, exist_ok=True)
    stop = stop_ps if stop_ps is not None else s.duration_ps + 10_000_000_000_000  # 10 s of drain
    (out / "flows.csv").write_text(flows_csv_text(flows))
    (out / "case.txt").write_text(case_text(s, str((out / "flows.csv").resolve()), stop))
    (out / FABRICLAB_FLOWS).write_text(fabriclab_flows_text(s, flows))
    (out / "scenario.toml").write_text(scenario_text(s))
    (out / "setup.json").write_text(json.dumps(asdict(s), indent=1) + "\n")
    return flows


def parse_time_ps(text: str, fld: str) -> int:
    """A time with its unit ("200ms"), read as fabriclab reads scenario times."""
    from pydantic import TypeAdapter, ValidationError

    from fabriclab.scenario.units import TimePs

    try:
        return TypeAdapter(TimePs).validate_python(text)
    except ValidationError as e:
        raise SetupError(f"{fld}: {e.errors()[0]['msg']}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path, help="folder for flows.csv, case.txt, scenario.toml, flows_fabriclab.csv")
    p.add_argument("--topology", default="star", help="star | leaf_spine")
    p.add_argument("--hosts", type=int, default=8, help="star: hosts")
    p.add_argument("--leaves", type=int, default=4)
    p.add_argument("--hosts-per-leaf", type=int, default=8)
    p.add_argument("--spines", type=int, default=4)
    p.add_argument("--cc", default="dctcp", help="dctcp (RED step marking) | newreno (drop-tail)")
    p.add_argument("--load", type=float, default=0.4)
    p.add_argument("--duration", default="200ms", help="arrivals within [0, duration), e.g. 200ms")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--link-delay", default=None, help="default 10us (star), 1us (leaf-spine)")
    p.add_argument("--limit-packets", type=int, default=250, help="ns-3 queue disc limit (fabriclab: +1)")
    p.add_argument("--ecn-threshold-packets", type=int, default=65)
    p.add_argument("--min-rto", default="5ms")
    p.add_argument("--prio-below-bytes", type=int, default=None,
                   help="two strict-priority bands: flows below this size in class 0, the rest class 1")
    p.add_argument("--wire", default="match", help="match (ns-3 rate x 1502/1538) | raw")
    p.add_argument("--handshake", action="store_true",
                   help="fabriclab opens every flow with SYN / SYN-ACK and is compared with ns-3's FCT from the "
                        "flow's start (default: no handshake, compared from ns-3's connection set-up)")
    return p


def setup_from_args(a: argparse.Namespace) -> Setup:
    delay = None if a.link_delay is None else parse_time_ps(a.link_delay, "--link-delay")
    duration = parse_time_ps(a.duration, "--duration")
    min_rto = parse_time_ps(a.min_rto, "--min-rto")
    return Setup(topology=a.topology, hosts=a.hosts, leaves=a.leaves, hosts_per_leaf=a.hosts_per_leaf,
                 spines=a.spines, cc=a.cc, load=a.load, duration_ps=duration, seed=a.seed, link_delay_ps=delay,
                 limit_packets=a.limit_packets, ecn_threshold_packets=a.ecn_threshold_packets,
                 min_rto_ps=min_rto, prio_below_bytes=a.prio_below_bytes, wire=a.wire, handshake=a.handshake)


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    try:
        s = setup_from_args(a)
        flows = write_case(s, a.out)
    except SetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{len(flows)} flows -> {a.out}/flows.csv, case.txt, scenario.toml, flows_fabriclab.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())

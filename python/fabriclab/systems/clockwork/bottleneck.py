"""Naming the bottleneck from one-way delays (issue 26, "Bottleneck
identification"; docs/clockwork.md, "Bottleneck identification").

Input: ``owd.parquet``'s table (``observe.owd``) and a route per message,
as node names from the sender's host to the receiver's (the simulator's
``messages.parquet`` paths, as C4D's network monitor reads them, or a
fabric's static routes). Output: a :class:`Verdict`: a fabric link, a
sending host, a receiving host, or none, with its evidence.

The method:

1. **Expected delay.** Per message size, the median over connections of
   each connection's least delay at that size: what an unqueued message of
   that size takes on a typical connection of the job. A ring's messages
   are the same size on every connection, so a connection that is slow for
   the whole run (a link degraded from the start) stands out against the
   others even though its own least delay is slow too.
2. **Elevated messages:** delay above ``RATIO`` x expected and at least
   ``FLOOR_NS`` above it.
3. **Route tomography** over *directed* hops (``a>b``), and links between
   switches without direction (``a-b``: a degraded link slows both ways):
   C4D's (``c4.tomography``): the hop that elevated messages cross most and the
   others least; on a tie, the hop more elevated messages cross, then hops
   between switches before a host's hops.
4. **Accepted** when the hop carries ``MIN_ELEVATED`` elevated messages at
   least, ``PURITY`` of the messages through it are elevated, and that
   share is ``LIFT`` x the share among messages not through it; else none.
5. **Named:** a host's egress hop (host > switch) is a *sending host*
   (queueing in or at the host before its first link: a co-located VM's
   traffic); a host's ingress hop (switch > host) a *receiving host*; a
   hop between switches a *link*, named without direction as C4D names
   links (``leaf0-spine1``).

Confidence = purity x coverage (the share of all elevated messages the hop
explains): 1 when exactly the messages through it are elevated."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import InputError
from ..c4.detector import path_nodes
from ..c4.tomography import scores, tomography

RATIO = 2.0
FLOOR_NS = 20_000.0
MIN_ELEVATED = 5
PURITY = 0.4
LIFT = 1.5
KINDS = ("link", "sending_host", "receiving_host", "none")
OWD_COLUMNS = ("op_id", "src_rank", "dst_rank", "src", "dst", "seq", "bytes", "owd_ns", "excess_ns",
               "sender_delay_ns")


class BottleneckError(InputError):
    """Bad input to the bottleneck naming: exit 2, naming what is wrong."""


@dataclass
class Verdict:
    kind: str  # one of KINDS
    component: str | None  # a link "a-b" or a host name
    hop: str | None  # the directed hop the tomography picked, "a>b"
    confidence: float
    purity: float  # elevated share of the messages through the hop
    coverage: float  # share of all elevated messages that cross the hop
    lift: float  # purity / the elevated share of the messages not through it
    elevated: int  # elevated messages in all
    messages: int
    excess_ns: float  # median delay above expected of the elevated messages through the hop
    connections: list = field(default_factory=list)  # [src, dst, elevated, messages] through the hop
    reason: str = ""
    # A sending host's: the median sender-side delay (post to send start) of its messages and of the others'.
    sender_delay_ns: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        if self.kind == "none":
            return f"bottleneck: none ({self.reason})"
        return (f"bottleneck: {self.kind.replace('_', ' ')} {self.component} (hop {self.hop}); confidence "
                f"{self.confidence:.2f}: {self.purity:.0%} of its messages elevated, it explains "
                f"{self.coverage:.0%} of the {self.elevated} elevated messages (lift {self.lift:.1f}), their "
                f"median delay {self.excess_ns / 1000:.0f} us above expected"
                + (f"; its sender-side delay p50 {self.sender_delay_ns[0] / 1000:.1f} us, the others' "
                   f"{self.sender_delay_ns[1] / 1000:.1f} us" if self.sender_delay_ns else ""))


def elevate(t: pd.DataFrame) -> pd.DataFrame:
    """``t`` with ``expected_ns`` (per size, the median over connections of their least delay), ``above_ns``
    (delay minus it) and ``elevated``."""
    t = t.copy()
    least = t.groupby(["src", "dst", "bytes"])["owd_ns"].min()
    expected = least.groupby(level="bytes").median()
    t["expected_ns"] = t["bytes"].map(expected).astype(float)
    t["above_ns"] = t["owd_ns"] - t["expected_ns"]
    t["elevated"] = (t["owd_ns"] > RATIO * t["expected_ns"]) & (t["above_ns"] > FLOOR_NS)
    return t


def _units(hs: list[str], ends: set[str]) -> list[str]:
    """What the tomography weighs for a route: its directed hops, and each link between switches without
    direction too (``a-b``: a degraded link slows both directions, so both directions' messages count).
    ``ends``: the hosts and the physical machines, whose links count by direction only."""
    fabric = ["-".join(sorted(h.split(">"))) for h in hs if not set(h.split(">")) & ends]
    return hs + fabric


def _name(hop: str, hosts: set[str], machines: set[str]) -> tuple[str, str]:
    if ">" not in hop:
        return "link", hop
    a, b = hop.split(">")
    for ends in (hosts, machines):  # a VM's own link before its machine's
        if a in ends:
            return "sending_host", a
        if b in ends:
            return "receiving_host", b
    return "link", "-".join(sorted((a, b)))


def identify(t: pd.DataFrame, routes: list, machines=frozenset()) -> tuple[Verdict, pd.DataFrame]:
    """The verdict for OWD table ``t`` whose i-th row took route ``routes[i]`` (node names, sender's host
    first; a position may hold ECMP alternatives ``a|b``, :func:`static_routes`), and the evidence per
    directed hop. ``machines``: route nodes that are physical machines holding VMs (a ``[cloud]``'s
    hypervisor switches, ``pm<j>``): a machine's egress is a sending host, its ingress a receiving host."""
    missing = [c for c in OWD_COLUMNS if c not in t.columns]
    if missing:
        raise BottleneckError(f"bottleneck: the one-way delays lack the column(s) {', '.join(missing)} "
                              f"(owd.parquet's schema: docs/telemetry.md)")
    if len(routes) != len(t):
        raise AssertionError("one route per message")
    t = elevate(t.reset_index(drop=True))
    hosts = {r[0] for r in routes if r} | {r[-1] for r in routes if r}
    machines = set(machines)
    paths = {i: _units(route_hops(r), hosts | machines) for i, r in enumerate(routes)}
    slow = set(np.flatnonzero(t["elevated"].to_numpy()).tolist())
    healthy = set(range(len(t))) - slow
    score = scores(slow, healthy, paths)
    rows = []
    through: dict = {}
    for i, hs in paths.items():
        for h in set(hs):
            through.setdefault(h, []).append(i)
    el = t["elevated"].to_numpy()
    for h, idx in through.items():
        k = int(el[idx].sum())
        rows.append({"hop": h, "messages": len(idx), "elevated": k, "score": score.get(h, -len(idx)),
                     "purity": k / len(idx), "above_p50_ns": float(np.median(t["above_ns"].to_numpy()[idx]))})
    ev = pd.DataFrame(rows, columns=["hop", "messages", "elevated", "score", "purity", "above_p50_ns"])
    ev = ev.sort_values(["score", "elevated", "hop"], ascending=[False, False, True]).reset_index(drop=True)
    n, ne = len(t), len(slow)

    def none(reason: str, **kw) -> Verdict:
        return Verdict("none", None, kw.pop("hop", None), 0.0, kw.pop("purity", 0.0), kw.pop("coverage", 0.0),
                       kw.pop("lift", 0.0), ne, n, 0.0, [], reason)

    if ne < MIN_ELEVATED:
        return none(f"{ne} of {n} messages elevated (above {RATIO:g}x the expected delay), fewer than "
                    f"{MIN_ELEVATED}"), ev
    # Ties: the hop more elevated messages cross, then C4D's rule (fabric hops before a host's own).
    access = {h for h in through if ">" in h and set(h.split(">")) & (hosts | machines)}
    best = tomography(slow, healthy, paths, access, most_slow=True)
    idx = np.array(through[best])
    k = int(el[idx].sum())
    purity, coverage = k / len(idx), k / ne
    rest = n - len(idx)
    other = (ne - k) / rest if rest else 0.0
    lift = purity / other if other > 0 else float("inf")
    kw = dict(hop=best, purity=purity, coverage=coverage, lift=min(lift, 1e9))
    if k < MIN_ELEVATED:
        return none(f"the best hop {best} has {k} elevated messages, fewer than {MIN_ELEVATED}", **kw), ev
    if purity < PURITY:
        return none(f"the best hop {best} has {purity:.0%} of its messages elevated, under {PURITY:.0%}", **kw), ev
    if lift < LIFT:
        return none(f"the best hop {best}: {purity:.0%} elevated against {other:.0%} elsewhere (lift "
                    f"{lift:.1f} < {LIFT:g})", **kw), ev
    kind, comp = _name(best, hosts, machines)
    sel = t.iloc[idx]
    conns = (sel.groupby(["src", "dst"])["elevated"].agg(["sum", "size"]).reset_index()
             .sort_values(["sum", "src", "dst"], ascending=[False, True, True]))
    conns = [[str(a), str(b), int(s), int(z)] for a, b, s, z in conns.itertuples(index=False)]
    excess = float(sel.loc[sel["elevated"], "above_ns"].median())
    sender = []
    if kind == "sending_host":
        mine = t["src"].isin({c[0] for c in conns}) if comp in machines else t["src"] == comp
        sd = t["sender_delay_ns"].astype(float)
        sender = [float(sd[mine].median()), float(sd[~mine].median()) if (~mine).any() else float("nan")]
    return Verdict(kind, comp, best, purity * coverage, purity, coverage, min(lift, 1e9), ne, n, excess, conns,
                   "tomography over the routes' hops", sender), ev


# ------------------------------------------------------------------ routes

def sim_routes(run_dir: Path, t: pd.DataFrame) -> list:
    """Each message's route in a simulated run: its ``messages.parquet`` path (app = the collective's name,
    tag = sender rank << 32 | step; docs/telemetry.md), the step from ``ccl.parquet``'s send row."""
    from ...scenario import Scenario

    run_dir = Path(run_dir)
    scen, mpath = run_dir / "scenario.resolved.toml", run_dir / "messages.parquet"
    for p, what in ((scen, "the resolved scenario"), (mpath, "the messages' routes ([outputs] messages)")):
        if not p.is_file():
            raise BottleneckError(f"bottleneck: {run_dir} has no {p.name} ({what}); give --scenario for a "
                                  f"fabric's static routes")
    names = [c.name for c in Scenario.load(scen).collectives]
    ccl = pd.read_parquet(run_dir / "ccl.parquet", columns=["op_id", "rank", "peer", "kind", "seq", "step"])
    return message_routes(names, ccl, pd.read_parquet(mpath, columns=["app", "tag", "path"]), t, str(mpath))


def message_routes(names: list[str], ccl: pd.DataFrame, messages: pd.DataFrame, t: pd.DataFrame,
                   where: str = "messages.parquet") -> list:
    """:func:`sim_routes` on tables: ``names`` the collectives' names (op i is ``names[i]``)."""
    send = ccl[ccl["kind"] == "send"]
    path = dict(zip(zip(messages["app"], messages["tag"].astype(np.uint64)), messages["path"]))
    step = {(int(o), int(a), int(b), int(q)): int(s) for o, a, b, q, s in
            zip(send["op_id"], send["rank"], send["peer"], send["seq"], send["step"])}
    out = []
    for o, a, b, q, src, dst in zip(t["op_id"], t["src_rank"], t["dst_rank"], t["seq"], t["src"], t["dst"]):
        o, a = int(o), int(a)
        s = step.get((o, a, int(b), int(q)))
        p = None
        if s is not None and o < len(names):
            p = path.get((names[o], np.uint64((a << 32) | s)))
        if p is None:
            raise BottleneckError(f"bottleneck: no route for the message of op {o} from {src} to {dst} (seq {q}) "
                                  f"in {where}; only [[collectives]] messages are routed from it")
        out.append(path_nodes(p))
    return out


def static_routes(scenario_path: Path, t: pd.DataFrame) -> list:
    """Each message's route from a scenario's topology (the cluster-in-a-box's static routes are its shortest
    paths): where several shortest paths join two hosts (ECMP), their hops together, as C4D does for a route
    it did not see."""
    import networkx as nx

    from ...scenario import Scenario

    s = Scenario.load(Path(scenario_path))
    topo = s.build_topology()
    g = nx.Graph()
    name = [n["name"] for n in topo.nodes]
    for lk in topo.links:
        g.add_edge(name[lk["a"]], name[lk["b"]])
    cache: dict = {}
    out = []
    for a, b in zip(t["src"], t["dst"]):
        if (a, b) not in cache:
            if a not in g or b not in g:
                bad = a if a not in g else b
                raise BottleneckError(f"bottleneck: no route for the connection {a} -> {b}: {scenario_path}'s "
                                      f"topology has no host {bad} (hosts: {', '.join(name[h] for h in topo.hosts)}"
                                      f"; name them with --hosts)")
            ps = list(nx.all_shortest_paths(g, a, b))
            cache[(a, b)] = ps[0] if len(ps) == 1 else _union(ps)
        out.append(cache[(a, b)])
    return out


def _union(ps: list) -> list:
    """Routes of equal length as one route whose positions list every node found there (a leaf-spine's
    spines: ``h0 leaf0 spine0|spine1 leaf1 h5``), read by :func:`route_hops`."""
    return ["|".join(sorted({p[i] for p in ps})) for i in range(len(ps[0]))]


def route_hops(route: list) -> list[str]:
    """Directed hops of a route whose positions may hold ``a|b`` alternatives (ECMP): every pair."""
    out = []
    for x, y in zip(route, route[1:]):
        out += [f"{a}>{b}" for a in x.split("|") for b in y.split("|")]
    return out


def cloud_machines(run_dir: Path) -> set[str]:
    """A ``[cloud]`` run's physical machines (``cloud.parquet``'s ``machine`` names: the topology's
    hypervisor switches), else none."""
    p = Path(run_dir) / "cloud.parquet"
    if not p.is_file():
        return set()
    try:
        return set(map(str, pd.read_parquet(p, columns=["machine"])["machine"]))
    except Exception as e:  # pyarrow raises many kinds
        raise BottleneckError(f"bottleneck: {p} cannot be read as the cloud's placement ({type(e).__name__}; "
                              f"docs/telemetry.md)") from None


# ------------------------------------------------------------------ the command

def run(run_dir: Path, owd_path: Path | None = None, clocks: Path | None = None, method: str | None = None,
        hosts: list[str] | None = None, scenario: Path | None = None, out: Path | None = None):
    """``fabriclab bottleneck``: the one-way delays (``owd_path``, else computed from RUN_DIR/ccl.parquet as
    ``fabriclab owd`` does), the routes (``scenario``'s static routes, else the run's messages.parquet), the
    verdict; writes bottleneck.json and bottleneck_hops.csv to ``out`` (default RUN_DIR)."""
    from ...observe import owd as ow

    run_dir = Path(run_dir)
    notes: list[str] = []
    if owd_path is not None:
        if not Path(owd_path).is_file():
            raise BottleneckError(f"bottleneck: --owd: {owd_path} does not exist")
        try:
            t = pd.read_parquet(owd_path)
        except Exception as e:
            raise BottleneckError(f"bottleneck: --owd: {owd_path} cannot be read ({type(e).__name__})") from None
        corrected = None
    else:
        ccl, source = ow.read_ccl(run_dir)
        rank_map, notes = ow.rank_hosts(run_dir, ccl, hosts)
        o = ow.compute(ccl, rank_map, ow.read_clocks(clocks) if clocks is not None else None, method, source)
        t, corrected = o.table, o.corrected
        notes += o.notes
    missing = [c for c in OWD_COLUMNS if c not in t.columns]
    if missing:
        raise BottleneckError(f"bottleneck: the one-way delays lack the column(s) {', '.join(missing)} "
                              f"(owd.parquet's schema: docs/telemetry.md)")
    routes = static_routes(scenario, t) if scenario is not None else sim_routes(run_dir, t)
    v, ev = identify(t, routes, cloud_machines(run_dir))
    out = Path(out) if out is not None else run_dir
    if out.exists() and not out.is_dir():
        raise BottleneckError(f"bottleneck: --out: {out} is a file; give a folder")
    out.mkdir(parents=True, exist_ok=True)
    doc = {"verdict": v.to_dict(), "clocks": {None: "from --owd", True: "corrected", False: "uncorrected"}[corrected],
           "routes": "static (" + str(scenario) + ")" if scenario is not None else "messages.parquet",
           "thresholds": {"ratio": RATIO, "floor_ns": FLOOR_NS, "min_elevated": MIN_ELEVATED, "purity": PURITY,
                          "lift": LIFT}, "notes": notes}
    written = [out / "bottleneck.json", out / "bottleneck_hops.csv"]
    written[0].write_text(json.dumps(doc, indent=2) + "\n")
    ev.to_csv(written[1], index=False)
    return v, ev, notes, written

"""What a simulated probe mesh costs each link (``fabriclab clock overhead
RUN_DIR``; docs/clockwork.md, "The probe mesh").

A run's ``messages.parquet`` holds every probe (``app`` = ``probes``) with
its route (``path``). Each probe is cut into segments of at most the
transport's MSS, each a frame of ``segment + 58`` bytes (IP, TCP, Ethernet,
FCS; 64 at least) plus 20 of preamble and gap on the wire, and every
segment is acknowledged by a 84-byte frame (the packet backend's TCP acks
every segment). The data frames are placed on the links of the probe's
route exactly. An ack takes the ECMP route of the reverse five-tuple,
which messages.parquet does not record: it is placed on the reversed
route, exact wherever the reverse route is unique (a star, one spine) and
otherwise right in total per tier of the fabric but not per link.

A link's share is its probe bytes over what it carries in the mesh's
duration (``rate_bps / 8 x seconds``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...errors import InputError
from ...sim.apps.probes import wire_bytes

__all__ = ["OverheadError", "Overhead", "link_shares", "run"]

ACK_WIRE_BYTES = wire_bytes(0)  # a pure ACK: headers only, padded to the minimum frame


class OverheadError(InputError):
    pass


@dataclass
class Overhead:
    links: pd.DataFrame   # src_node, dst_node, rate_bps, data_bytes, ack_bytes, bytes_per_s, share
    seconds: float        # the mesh's duration over which shares are taken
    probes: int           # probe messages counted


def _frame_bytes(size_bytes: int, mss_bytes: int) -> tuple[int, int]:
    """(wire bytes of the data frames, number of segments) of one message."""
    full, rest = divmod(size_bytes, mss_bytes)
    seg = [mss_bytes] * full + ([rest] if rest else [])
    return sum(wire_bytes(s) for s in seg), len(seg)


def link_shares(messages: pd.DataFrame, links: pd.DataFrame, mss_bytes: int, seconds: float) -> Overhead:
    """Probe bytes per link direction and their share of it. ``messages`` and
    ``links``: the run's messages.parquet and links.parquet as tables."""
    p = messages[messages["app"] == "probes"]
    data: dict[tuple[str, str], int] = {}
    acks: dict[tuple[str, str], int] = {}
    sizes = {s: _frame_bytes(int(s), mss_bytes) for s in pd.unique(p["size_bytes"])}
    for path, size in zip(p["path"], p["size_bytes"]):
        if not path:
            continue
        nodes = path.split(" > ")
        wire, segments = sizes[size]
        for a, b in zip(nodes, nodes[1:]):
            data[(a, b)] = data.get((a, b), 0) + wire
            acks[(b, a)] = acks.get((b, a), 0) + segments * ACK_WIRE_BYTES
    t = links[["src_node", "dst_node", "rate_bps"]].copy()
    key = list(zip(t["src_node"], t["dst_node"]))
    t["data_bytes"] = [data.get(k, 0) for k in key]
    t["ack_bytes"] = [acks.get(k, 0) for k in key]
    t["bytes_per_s"] = (t["data_bytes"] + t["ack_bytes"]) / seconds
    t["share"] = t["bytes_per_s"] * 8 / t["rate_bps"].astype(float)
    return Overhead(t.reset_index(drop=True), seconds, len(p))


def run(run_dir: Path, out: Path | None = None) -> Overhead:
    """Reads a simulated run's folder, writes ``probe_links.csv`` (to ``out``,
    default the run folder) and returns the table."""
    import pyarrow.parquet as pq

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise OverheadError(f"clock overhead: {run_dir} is not a folder (give a simulated run's folder)")
    for name in ("messages.parquet", "links.parquet", "scenario.resolved.toml"):
        if not (run_dir / name).is_file():
            why = (" (the scenario's [outputs] messages = false?)" if name == "messages.parquet" else "")
            raise OverheadError(f"clock overhead: {run_dir} has no {name}{why}; a run of `fabriclab run` with "
                                f"[probes] writes it")
    from ...scenario import Scenario

    s = Scenario.load(run_dir / "scenario.resolved.toml")
    if s.probes is None:
        raise OverheadError(f"clock overhead: {run_dir}'s scenario has no [probes] section: no probe mesh ran")
    p = s.probes
    end = p.start_ps + p.duration_ps if s.stop_ps is None else min(p.start_ps + p.duration_ps, s.stop_ps)
    seconds = max(end - p.start_ps, 1) / 1e12
    messages = pq.read_table(run_dir / "messages.parquet", columns=["app", "size_bytes", "path"]).to_pandas()
    links = pq.read_table(run_dir / "links.parquet", columns=["src_node", "dst_node", "rate_bps"]).to_pandas()
    o = link_shares(messages, links, s.transport.mss_bytes, seconds)
    out = run_dir if out is None else Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / ".probe_links.csv.tmp"
    o.links.to_csv(tmp, index=False)
    tmp.replace(out / "probe_links.csv")
    return o

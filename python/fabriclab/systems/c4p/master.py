"""The C4P master (C4 paper, section 3.2): probes the fabric for healthy
leaf-spine-leaf paths, then gives every queue pair (QP) of a connection a
path, expressed as RoCE does, by the UDP source port that the switches'
ECMP hash maps onto that path.

- Probing: from one randomly chosen (seeded) NIC per leaf to one per other
  leaf, probes with many source ports record which spines carry each leaf
  pair; links the master knows to be faulty are left out of its view of the
  network, so no path crosses them.
- Allocation: QP k of a connection uses the sender's left port for even k
  and the right port for odd k, and arrives on the receiver's port of the
  same side (no left-to-right paths). Among the spines that join the two
  leaves, the one whose links carry the fewest QPs the master has placed so
  far is chosen (the busiest link of the path first, then the QPs through
  the spine, then the sum over the path's links, then the lowest spine),
  over every job the master has served. The source port
  is the first one, probing upwards from a per-connection start, that the
  hash maps onto the chosen path.

- Re-pathing after a failure (``fail``): the master takes the failed link
  out of its view, probes again (the switches now hash the failed link's
  flows over the surviving links, resiliently), and gives every QP it had
  placed over that link a new source port, by the same rule as above, with
  the QP's old path taken off the load. The paper's master "isolates and
  discards malfunctioning links" and allocates paths by source port; doing
  so for the QPs a failure cut, while the job runs, is our reading of how a
  failed QP gets a healthy path again (docs/c4p.md).

Without C4P (``ecmp_src_ports``) the QPs draw random source ports; the bond
still puts QP k on the port of side k mod 2 (RoCE LAG's QP-to-port
affinity), and everything after the first hop is the hash's.
"""

from __future__ import annotations

import random
from collections import Counter

from .testbed import Router, Testbed, without_links

SRC_PORT_BASE = 49152  # RoCE v2 source ports: the ephemeral range
SRC_PORT_SPAN = 16384
PROBES = 512  # source ports tried per probed leaf pair, and per path search


class AllocationError(RuntimeError):
    pass


def side_of(topo: Testbed, path: list[int]) -> tuple[int, int]:
    """(sender side, receiver side) of a GPU-to-GPU path: 0 left, 1 right."""
    src_nic, dst_nic = path[1], path[-2]
    return topo.ports[src_nic].index(path[2]), topo.ports[dst_nic].index(path[-3])


class Master:
    def __init__(self, topo: Testbed, faulty: list[tuple[str, str]] = (), seed: int = 0, ecmp_hash_seed: int = 0):
        self.topo = topo
        self.faulty = [tuple(x) for x in faulty]
        self.ecmp_hash_seed = ecmp_hash_seed
        self.router = Router(without_links(topo, self.faulty), ecmp_hash_seed)
        self.rng = random.Random(seed)
        self.load: Counter = Counter()  # directed link (a, b) -> QPs placed on it
        self.spine_load: Counter = Counter()  # spine node -> QPs placed through it
        self.catalog: dict[tuple[int, int], list[int]] = {}  # (leaf a, leaf b) -> spines with a healthy path
        # Every QP placed: (src host, dst host, qp index) -> [source port, node path].
        self.placed: dict[tuple[int, int, int], list] = {}
        self.probe()

    def _port(self, start: int, k: int) -> int:
        return SRC_PORT_BASE + (start + k) % SRC_PORT_SPAN

    def probe(self) -> None:
        """Full-mesh probing between one random NIC per leaf (its GPU sends)."""
        t = self.topo
        nic_of_leaf = {}
        for lf in t.leaves:
            nics = [n for n, p in t.ports.items() if lf in p]
            if nics:
                nic_of_leaf[lf] = self.rng.choice(sorted(nics))
        gpu_of = {nic: next(lk["a"] if lk["b"] == nic else lk["b"] for lk in t.links
                            if nic in (lk["a"], lk["b"]) and t.nodes[lk["a"] if lk["b"] == nic else lk["b"]]["kind"] == "host")
                  for nic in nic_of_leaf.values()}
        host = {node: i for i, node in enumerate(t.hosts)}
        self.catalog = {}
        for la, na in nic_of_leaf.items():
            for lb, nb in nic_of_leaf.items():
                if la == lb or na == nb:
                    continue
                seen = set()
                for k in range(PROBES):
                    p = self.router.path(host[gpu_of[na]], host[gpu_of[nb]], self._port(0, k))
                    if p is not None and len(p) == 7 and p[2] == la and p[4] == lb:
                        seen.add(p[3])
                if seen:
                    self.catalog[(la, lb)] = sorted(seen)

    def _links(self, path: list[int]) -> list[tuple[int, int]]:
        return list(zip(path[1:-2], path[2:-1]))  # NIC .. NIC: the fabric's links

    def allocate(self, src_host: int, dst_host: int, qps: int) -> list[int]:
        """Source ports of ``qps`` QPs from GPU host ``src_host`` to ``dst_host``."""
        start = self.rng.randrange(SRC_PORT_SPAN)
        return [self._place(src_host, dst_host, k, start) for k in range(qps)]

    def _place(self, src_host: int, dst_host: int, k: int, start: int) -> int:
        """Places QP ``k`` on the least-loaded healthy path of its side; its source port."""
        t = self.topo
        gs, gd = t.hosts[src_host], t.hosts[dst_host]
        src_nic = next(n for n in t.ports if any({lk["a"], lk["b"]} == {gs, n} for lk in t.links))
        dst_nic = next(n for n in t.ports if any({lk["a"], lk["b"]} == {gd, n} for lk in t.links))
        side = k % 2
        la, lb = t.ports[src_nic][side], t.ports[dst_nic][side]
        if la == lb:
            wanted = [[gs, src_nic, la, dst_nic, gd]]
        else:
            wanted = [[gs, src_nic, la, sp, lb, dst_nic, gd] for sp in self.catalog.get((la, lb), [])]
        if not wanted:
            raise AllocationError(f"no healthy path from {t.name(la)} to {t.name(lb)}")
        wanted.sort(key=lambda p: (max(self.load[e] for e in self._links(p)), self.spine_load[p[3]],
                                   sum(self.load[e] for e in self._links(p)), p[3]))
        for path in wanted:
            port = self._search(src_host, dst_host, path, start)
            if port is not None:
                break
        else:
            raise AllocationError(f"no source port maps {t.name(gs)} -> {t.name(gd)} onto a wanted path")
        self._count(path, +1)
        self.placed[(src_host, dst_host, k)] = [port, path]
        return port

    def _count(self, path: list[int], n: int) -> None:
        for e in self._links(path):
            self.load[e] += n
        if len(path) == 7:
            self.spine_load[path[3]] += n

    def fail(self, links: list[tuple[str, str]]) -> dict[tuple[int, int, int], int]:
        """The named links have failed while the jobs run (the switches hash
        resiliently): re-probes, then gives every placed QP whose path
        crossed one of them a new source port. {(src host, dst host, qp): port}."""
        self.faulty += [tuple(x) for x in links]
        self.router = Router(self.topo, self.ecmp_hash_seed, down=self.faulty, resilient_hash=True)
        self.probe()
        dead = {frozenset((self.topo.index(a), self.topo.index(b))) for a, b in self.faulty}
        cut = sorted(key for key, (_, path) in self.placed.items()
                     if any(frozenset(e) in dead for e in self._links(path)))
        for key in cut:
            self._count(self.placed[key][1], -1)
        start = self.rng.randrange(SRC_PORT_SPAN)
        return {key: self._place(*key, start) for key in cut}

    def _search(self, src_host: int, dst_host: int, path: list[int], start: int) -> int | None:
        for k in range(PROBES):
            port = self._port(start, k)
            if self.router.path(src_host, dst_host, port) == path:
                return port
        return None


def ecmp_src_ports(topo: Testbed, router: Router, src_host: int, dst_host: int, qps: int,
                   rng: random.Random) -> list[int]:
    """Without C4P: random source ports, QP k leaving by the port of side k mod 2."""
    ports = []
    for k in range(qps):
        for _ in range(PROBES):
            port = SRC_PORT_BASE + rng.randrange(SRC_PORT_SPAN)
            p = router.path(src_host, dst_host, port)
            if p is not None and side_of(topo, p)[0] == k % 2:
                ports.append(port)
                break
        else:
            raise AllocationError(f"no source port leaves host {src_host} by side {k % 2}")
    return ports

"""A NIC-aware capacity model for hosts behind a switch, from a matrix of
pair bandwidths each measured alone (the runtime's probe).

Measured one pair at a time, bw(i, j) says what i -> j carries when nothing
else runs; it does not say that i's pairs share i's one NIC. In a tree,
host i with two children sends two copies through its uplink, and a host
receiving in several trees at once shares its downlink. The model:

- uplink of i (egress NIC): U_i = max_j bw(i, j); downlink of j (ingress
  NIC): D_j = max_i bw(i, j), the best each NIC was seen to do;
- a tree edge i -> j consumes its rate on ``up i`` and ``down j``;
- a pair measured clearly below both of its NICs, bw(i, j) < (1 -
  path_slack) min(U_i, D_j), is limited by its path (e.g. an oversubscribed
  switch uplink), not by a NIC: it keeps its own resource ``pair i->j`` of
  capacity bw(i, j) too. Within the slack the difference is taken for
  measurement noise and the NICs explain the pair.

The graph is TreeGen's (collectives/treegen.py): an edge per measured pair
with ``capacity`` = bw(i, j) and ``uses`` = its resources, and
``graph["resources"]`` = resource -> capacity. With ``both`` (allreduce:
reduce up and broadcast down the same tree) only pairs measured both ways
get edges, and TreeGen charges a tree edge the resources of both of its
directions: i's up and j's down for the broadcast half, j's up and i's
down for the reduce half (``capacity`` is then the smaller direction).
"""

from __future__ import annotations

import networkx as nx

PATH_SLACK = 0.1


def nic_estimates(bw: list[list[float]]) -> tuple[list[float], list[float]]:
    """(uplink, downlink) per host: the row and column maxima off the diagonal."""
    n = len(bw)
    up = [max((bw[i][j] for j in range(n) if j != i), default=0.0) for i in range(n)]
    down = [max((bw[i][j] for i in range(n) if i != j), default=0.0) for j in range(n)]
    return up, down


def nic_graph(bw: list[list[float]], both: bool = False, path_slack: float = PATH_SLACK) -> nx.DiGraph:
    """TreeGen's graph of the NIC model for the measured matrix ``bw`` (bit/s, sender row)."""
    if not 0 <= path_slack < 1:
        raise ValueError(f"path_slack: must be within [0, 1), got {path_slack!r}")
    n = len(bw)
    up, down = nic_estimates(bw)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    res: dict[str, float] = {}
    for i in range(n):
        for j in range(n):
            if i == j or not bw[i][j] > 0 or (both and not bw[j][i] > 0):
                continue
            uses = [f"up {i}", f"down {j}"]
            res[uses[0]], res[uses[1]] = up[i], down[j]
            if bw[i][j] < (1 - path_slack) * min(up[i], down[j]):
                uses.append(f"pair {i}->{j}")
                res[uses[2]] = bw[i][j]
            g.add_edge(i, j, capacity=min(bw[i][j], bw[j][i]) if both else bw[i][j], uses=tuple(uses))
    g.graph["resources"] = res
    return g

"""Drawing topologies with matplotlib: nodes in layers (hosts at the bottom)."""

from __future__ import annotations

from pathlib import Path

from ..scenario.topology import TopologyData


def draw_topology(t: TopologyData, png: Path, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers: dict[int, list[int]] = {}
    for i, layer in enumerate(t.layers):
        layers.setdefault(layer, []).append(i)
    width = max(len(v) for v in layers.values())
    pos = {}
    for layer, nodes in layers.items():
        for j, v in enumerate(nodes):
            pos[v] = ((j + 0.5) * width / len(nodes), layer)
    fig, ax = plt.subplots(figsize=(min(4 + width * 0.35, 40), 2 + 1.5 * len(layers)))
    rates = sorted({lk["rate_bps"] for lk in t.links})
    for lk in t.links:
        (x0, y0), (x1, y1) = pos[lk["a"]], pos[lk["b"]]
        w = 0.5 + 2.0 * rates.index(lk["rate_bps"]) / max(len(rates) - 1, 1)
        ax.plot([x0, x1], [y0, y1], color="0.6", lw=w, zorder=1)
    for v, (x, y) in pos.items():
        host = t.nodes[v]["kind"] == "host"
        ax.scatter([x], [y], s=60 if host else 160, marker="o" if host else "s",
                   color="tab:blue" if host else "tab:orange", zorder=2)
        if width <= 40:
            ax.annotate(t.nodes[v]["name"], (x, y), textcoords="offset points", xytext=(0, -14 if host else 10),
                        ha="center", fontsize=7)
    label = ", ".join(f"{r / 1e9:g} Gbit/s" for r in rates)
    ax.set_title(f"{title}\n{len(t.hosts)} hosts, {len(t.nodes) - len(t.hosts)} switches; link rates: {label}", fontsize=9)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def draw_gpu_plan(topo, gpus: list[int], plan, png: Path, title: str = "") -> None:
    """GPUs of an allocation on a circle with their NVLinks (grey, width by
    rate), and the plan's rings or trees on top (one colour each)."""
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(gpus)
    pos = {r: (math.cos(2 * math.pi * r / n + math.pi / 2), math.sin(2 * math.pi * r / n + math.pi / 2)) for r in range(n)}
    fig, ax = plt.subplots(figsize=(6.5, 6.5))
    rates = sorted({topo.nvlink[(a, b)] for a in gpus for b in gpus if (a, b) in topo.nvlink})
    for i, a in enumerate(gpus):
        for j, b in enumerate(gpus):
            if i < j and (a, b) in topo.nvlink:
                w = 2 + 4 * rates.index(topo.nvlink[(a, b)])
                ax.plot(*zip(pos[i], pos[j]), color="0.85", lw=w, zorder=1)
    structures = []
    if plan is not None:
        if "rings" in plan.meta:
            structures = [list(zip(r, r[1:] + r[:1])) for r in plan.meta["rings"]]
        elif "trees" in plan.meta:
            structures = [[(int(p), int(v)) for v, p in ((int(k), p) for k, p in t.items()) if p is not None]
                          for t in plan.meta["trees"]]
    cmap = plt.get_cmap("tab10")
    for k, edges in enumerate(structures):
        off = (k - (len(structures) - 1) / 2) * 0.03
        for a, b in edges:
            (x0, y0), (x1, y1) = pos[a], pos[b]
            dx, dy = y1 - y0, x0 - x1
            norm = math.hypot(dx, dy) or 1
            ax.annotate("", xy=(x1 + off * dx / norm, y1 + off * dy / norm), xytext=(x0 + off * dx / norm, y0 + off * dy / norm),
                        arrowprops=dict(arrowstyle="-|>", color=cmap(k % 10), lw=1.6, shrinkA=14, shrinkB=14), zorder=2)
    for r, (x, y) in pos.items():
        ax.scatter([x], [y], s=700, color="tab:green", zorder=3)
        ax.text(x, y, f"GPU{gpus[r]}\nr{r}", ha="center", va="center", fontsize=8, color="white", zorder=4)
    label = f"{len(structures)} {'rings' if plan is not None and 'rings' in plan.meta else 'trees'}" if structures else "NVLink"
    ax.set_title(f"{title}\n{label}; grey: NVLink (wider = more links)", fontsize=9)
    ax.set_xlim(-1.3, 1.3)
    ax.set_ylim(-1.3, 1.3)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)

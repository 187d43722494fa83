"""Drawing topologies with matplotlib: nodes in layers (hosts at the bottom)."""

from __future__ import annotations

from pathlib import Path

from .topology import TopologyData


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

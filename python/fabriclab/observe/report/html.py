"""HTML building blocks of the report: tables, figures, the nested summary."""

from __future__ import annotations

import base64
import html
import numbers

from ..fmt import MISSING, format_value

STYLE = (
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
    "h2{border-bottom:1px solid #ddd;padding-bottom:2px;margin-top:1.6em}"
    "table{border-collapse:collapse;font-size:12px;margin:6px 0}"
    "td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}"
    "th{background:#f4f4f4;text-align:left}td.n{text-align:right;white-space:nowrap}"
    "td.k{font-family:monospace;color:#444}table.nest td{border-color:#e4e4e4}"
    "pre{background:#f8f8f8;border:1px solid #ddd;padding:8px;font-size:12px;overflow-x:auto}"
    "img{max-width:100%}figcaption{font-size:12px;color:#555}p.note{font-size:12px;color:#555}"
    "nav{font-size:13px}nav a{margin-right:1em}"
)

esc = html.escape


def table(headers: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    """A table of already formatted cells; columns from ``numeric_from`` on
    are right-aligned."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td{' class=n' if i >= numeric_from else ''}>{esc(str(c))}</td>" for i, c in enumerate(r))
        + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def figure(png: bytes, caption: str) -> str:
    return (f'<figure><img alt="{esc(caption)}" src="data:image/png;base64,{base64.b64encode(png).decode()}"/>'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def section(anchor: str, title: str, body: str) -> tuple[str, str, str]:
    return anchor, title, f'<h2 id="{esc(anchor)}">{esc(title)}</h2>{body}'


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def page(title: str, sections: list[tuple[str, str, str]]) -> str:
    nav = "".join(f'<a href="#{esc(a)}">{esc(t)}</a>' for a, t, _ in sections)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{esc(title)}</h1><nav>{nav}</nav>"
            f"{''.join(s for _, _, s in sections)}</body></html>")


# ------------------------------------------------------------------ summary.json

_LIST_MAX = 12


def nested(d: dict, path: str = "") -> str:
    """``d`` (a summary) as nested two-column tables, each leaf formatted by
    its dotted key; a list of up to 12 objects becomes a table of its own."""
    rows = []
    for k, v in d.items():
        key = f"{path}.{k}" if path else str(k)
        if isinstance(v, dict) and v:
            cell = nested(v, key)
        elif isinstance(v, list) and 0 < len(v) <= _LIST_MAX and all(isinstance(x, dict) for x in v):
            cols = list(dict.fromkeys(c for x in v for c in x))
            cell = table(cols, [[format_value(f"{key}.{c}", x.get(c)) if c in x else MISSING for c in cols] for x in v],
                         numeric_from=0)
        else:
            text = format_value(key, v)
            cls = " class=n" if isinstance(v, numbers.Real) and not isinstance(v, bool) else ""
            cell = None
            rows.append(f"<tr><td class=k>{esc(str(k))}</td><td{cls}>{esc(text)}</td></tr>")
        if cell is not None:
            rows.append(f"<tr><td class=k>{esc(str(k))}</td><td>{cell}</td></tr>")
    return f"<table class=nest>{''.join(rows)}</table>"

"""One self-contained HTML page: charts embedded as base64 PNG data URIs, each with the table of
the numbers behind it beside it, then configs and commands. No scripts, no external files."""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from typing import Sequence


def fmt(value, digits: int = 4) -> str:
    """Numbers as the tables show them: floats to ``digits`` decimals (tiny ones, like learning
    rates, in scientific notation), ints as they are, missing as an en dash."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:  # NaN
            return "–"
        if value != 0 and abs(value) < 10 ** -digits * 5:
            return f"{value:.{digits - 1}e}"
        return f"{value:.{digits}f}"
    return str(value)


def fmt_metric(value) -> str:
    """An evaluation metric exactly as ``dpr-xrisk evaluate`` prints it: 4 decimals."""
    return f"{float(value):.4f}"


@dataclass
class Cell:
    text: str
    cls: str | None = None  # CSS class, e.g. "computed"


@dataclass
class Table:
    id: str
    caption: str
    headers: list[str]
    rows: list[list]  # str | Cell
    note: str | None = None


@dataclass
class Chart:
    id: str
    title: str
    filename: str
    png: bytes
    tables: list[Table] = field(default_factory=list)
    note: str | None = None


@dataclass
class Section:
    id: str
    title: str
    charts: list[Chart] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)  # tables without a chart
    blocks: list[tuple[str, str]] = field(default_factory=list)  # (heading, preformatted text)
    notes: list[str] = field(default_factory=list)


CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 1.5em auto; max-width: 1500px;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
h3 { margin-bottom: .4em; }
.figure { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; margin-bottom: 2em; }
.figure img { max-width: 100%; border: 1px solid #ddd; }
.tables { flex: 1 1 420px; min-width: 320px; overflow-x: auto; }
table { border-collapse: collapse; font-size: .85em; margin-bottom: 1em; }
caption { text-align: left; font-weight: 600; padding-bottom: .3em; }
th, td { border: 1px solid #ccc; padding: .25em .5em; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.computed { font-style: italic; color: #555; }
td.text { max-width: 28em; font-size: .95em; }
.note { color: #555; font-size: .85em; }
.warn { background: #fff4e0; border-left: 4px solid #f0a020; padding: .4em .8em; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; font-size: .8em; max-height: 30em; }
details > summary { cursor: pointer; color: #245; }
nav ul { columns: 2; }
"""


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def render_table(t: Table) -> str:
    e = html.escape
    out = [f'<table id="{e(t.id)}">', f"<caption>{e(t.caption)}</caption>", "<thead><tr>"]
    out += [f"<th>{e(h)}</th>" for h in t.headers]
    out.append("</tr></thead><tbody>")
    for row in t.rows:
        out.append("<tr>")
        for c in row:
            cell = c if isinstance(c, Cell) else Cell(str(c))
            classes = [x for x in (("num" if _is_number(cell.text) else None), cell.cls) if x]
            if cell.cls is None and len(cell.text) > 60:
                classes.append("text")
            attr = f' class="{" ".join(classes)}"' if classes else ""
            out.append(f"<td{attr}>{e(cell.text, quote=False)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    if t.note:
        out.append(f'<p class="note">{e(t.note)}</p>')
    return "".join(out)


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def render_chart(c: Chart) -> str:
    e = html.escape
    parts = [f'<h3 id="{e(c.id)}">{e(c.title)}</h3>', '<div class="figure">',
             f'<img id="img-{e(c.id)}" src="{data_uri(c.png)}" alt="{e(c.title)}" title="{e(c.filename)}">',
             '<div class="tables">']
    parts += [render_table(t) for t in c.tables]
    if c.note:
        parts.append(f'<p class="note">{e(c.note)}</p>')
    parts.append("</div></div>")
    return "\n".join(parts)


def render_page(title: str, sections: Sequence[Section], header: Sequence[tuple[str, str]] = (),
                warnings: Sequence[str] = ()) -> str:
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{e(title)}</title><style>{CSS}</style></head><body>", f"<h1>{e(title)}</h1>"]
    if header:
        out.append("<table class=\"meta\"><tbody>")
        out += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in header]
        out.append("</tbody></table>")
    for w in warnings:
        out.append(f'<p class="warn">{e(w)}</p>')
    out.append("<nav><ul>")
    for s in sections:
        out.append(f'<li><a href="#{e(s.id)}">{e(s.title)}</a></li>')
    out.append("</ul></nav>")
    for s in sections:
        out.append(f'<h2 id="{e(s.id)}">{e(s.title)}</h2>')
        out += [f'<p class="note">{e(n)}</p>' for n in s.notes]
        out += [render_chart(c) for c in s.charts]
        out += [render_table(t) for t in s.tables]
        for heading, text in s.blocks:
            out.append(f"<details open><summary>{e(heading)}</summary><pre>{e(text, quote=False)}</pre></details>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def pretty_json(obj) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False)

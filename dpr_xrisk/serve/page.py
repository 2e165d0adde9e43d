"""The search page at ``/``: a question box and the ranked passages, answer spans highlighted.

Rendered on the server (no script): the form is a GET of ``/`` with ``q``, ``k``, ``mode`` and
``answers`` (several separated by ``|``), so a result page is a plain link, and a headless browser
screenshot needs no waiting for scripts. Every text from the corpus or the request is escaped.
"""

from __future__ import annotations

from html import escape

CSS = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2430}
header{background:#1f3b5c;color:#fff;padding:14px 28px}header h1{margin:0;font-size:20px}
header span{opacity:.75;font-size:13px}main{max-width:960px;margin:0 auto;padding:18px 28px}
form{display:grid;grid-template-columns:1fr 90px 120px;gap:8px;margin-bottom:6px}
form input,form select,form button{font:inherit;padding:7px 9px;border:1px solid #b9c2cf;border-radius:5px}
form .wide{grid-column:1/3}form button{background:#1f3b5c;color:#fff;border:0;cursor:pointer}
.meta{color:#5b6575;font-size:13px;margin:6px 0 14px}.err{color:#a4161a;font-weight:600}
ol{padding:0;list-style:none}li{background:#fff;border:1px solid #dde2ea;border-radius:7px;padding:10px 14px;margin:8px 0}
li.hit{border-left:5px solid #2b9348}.rank{font-weight:700;color:#1f3b5c;margin-right:8px}
.title{font-weight:600}.score{float:right;color:#5b6575;font-size:13px;font-variant-numeric:tabular-nums}
.id{color:#8a93a3;font-size:12px;margin-left:6px}p{margin:6px 0 0}
mark{background:#ffe066;padding:0 2px;border-radius:3px}.badge{color:#2b9348;font-size:12px;font-weight:700;margin-left:8px}
"""


def marked(text: str, spans) -> str:
    """``text`` escaped, with ``<mark>`` around each (start, end) span (overlaps merged)."""
    out, at = [], 0
    for start, end in sorted(spans):
        start = max(start, at)
        if end <= start:
            continue
        out += [escape(text[at:start]), "<mark>", escape(text[start:end]), "</mark>"]
        at = end
    out.append(escape(text[at:]))
    return "".join(out)


def render(form: dict, modes, result: dict | None = None, error: str | None = None, status: dict | None = None) -> str:
    """The whole page: the form filled with ``form`` (q, k, mode, answers), then ``error`` or the
    hits of ``result`` (one question's result, as ``/search`` returns it)."""
    q, k, mode, answers = (form.get(x, "") for x in ("q", "k", "mode", "answers"))
    options = "".join(f'<option value="{m}"{" selected" if m == mode else ""}>{m}</option>' for m in modes)
    about = ""
    if status:
        ix = status.get("index", {})
        about = f"{escape(str(status.get('model')))} · {escape(str(ix.get('factory')))} index of {ix.get('size', 0):,} passages"
    parts = [f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>dpr-xrisk search</title>
<meta name="viewport" content="width=device-width,initial-scale=1"><style>{CSS}</style></head><body>
<header><h1>dpr-xrisk search</h1><span>{about}</span></header><main>
<form method="get" action="/">
<input class="wide" name="q" value="{escape(q)}" placeholder="Ask a question" aria-label="question" autofocus>
<input name="k" type="number" min="1" value="{escape(str(k or 10))}" aria-label="passages">
<input class="wide" name="answers" value="{escape(answers)}" placeholder="Answers to highlight, separated by |" aria-label="answers">
<select name="mode" aria-label="mode">{options}</select>
<button type="submit" style="grid-column:3">Search</button>
</form>"""]
    if error:
        parts.append(f'<div class="meta err">{escape(error)}</div>')
    elif result is not None:
        hits = result["hits"]
        found = sum(1 for h in hits if h.get("has_answer"))
        meta = f"{len(hits)} passages, {mode}"
        if "has_answer" in (hits[0] if hits else {}):
            meta += f"; {found} contain{'s' if found == 1 else ''} an answer"
        if result.get("truncated"):
            meta += f"; {escape(result['note'])}"
        parts.append(f'<div class="meta">{meta}</div><ol>')
        for h in hits:
            badge = '<span class="badge">answer</span>' if h.get("has_answer") else ""
            parts.append(f'<li class="{"hit" if h.get("has_answer") else ""}"><span class="score">{h["score"]:.4f}</span>'
                         f'<span class="rank">{h["rank"]}.</span><span class="title">{escape(h["title"])}</span>'
                         f'<span class="id">{escape(h["id"])}</span>{badge}'
                         f'<p>{marked(h["text"], h.get("answer_spans", []))}</p></li>')
        parts.append("</ol>")
    parts.append("</main></body></html>")
    return "\n".join(parts)

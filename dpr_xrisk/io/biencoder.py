"""DPR's biencoder training format (JSON list or JSONL), validated record by record.

A record: ``{"question", "answers", "positive_ctxs": [{"title","text","passage_id",...}],
"negative_ctxs": [...], "hard_negative_ctxs": [...]}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from dpr_xrisk.errors import InputError
from dpr_xrisk.io.common import atomic_write, json_lines, load_json, require

CTX_LISTS = ("positive_ctxs", "negative_ctxs", "hard_negative_ctxs")


def read_biencoder(path: str | Path) -> list[dict]:
    """Read and validate a DPR biencoder file; positives may be empty (the trainer decides)."""
    from dpr_xrisk.io import arrow

    p = Path(path)
    if arrow.is_table(p):
        names = arrow.column_names(p)
        arrow.require_columns(p, names, ["question"])
        cols = [c for c in ("question", "answers", *CTX_LISTS, "dataset", "id") if c in names]
        items = list(arrow.iter_rows(p, cols))
    elif p.suffix.lower() == ".jsonl":
        items = list(json_lines(p))
    else:
        data = load_json(p)
        if not isinstance(data, list):
            raise InputError("expected a JSON list of DPR biencoder records", p)
        items = [(None, r) for r in data]
    out = []
    for i, (lineno, rec) in enumerate(items):
        where = lineno if lineno is not None else None
        if not isinstance(rec, dict):
            raise InputError(f"record {i} is not an object", p, where)
        try:
            question = require(rec, "question", p, where)
        except InputError as e:
            raise InputError(f"record {i}: {e.message}", p, where) from None
        answers = rec.get("answers", [])
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise InputError(f"record {i}: 'answers' must be a list of strings", p, where)
        if any(not a.strip() for a in answers):
            raise InputError(f"record {i}: empty answer string (it would count every passage as answer-bearing)",
                             p, where)
        clean = {"question": question.strip(), "answers": answers}
        for key in CTX_LISTS:
            ctxs = rec.get(key, [])
            if not isinstance(ctxs, list):
                raise InputError(f"record {i}: {key!r} must be a list", p, where)
            clean[key] = [_ctx(c, i, key, p, where) for c in ctxs]
        for key in ("dataset", "id"):
            if key in rec:
                clean[key] = rec[key]
        out.append(clean)
    return out


def _ctx(c, i, key, p, where) -> dict:
    if not isinstance(c, dict):
        raise InputError(f"record {i}: an entry of {key!r} is not an object", p, where)
    text = c.get("text")
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"record {i}: an entry of {key!r} has missing or empty 'text'", p, where)
    pid = c.get("passage_id", c.get("psg_id", c.get("id")))
    return {"title": str(c.get("title") or ""), "text": text,
            "passage_id": None if pid in (None, "") else str(pid),
            **({"score": c["score"]} if "score" in c else {})}


def write_biencoder(path: str | Path, records: Iterable[dict], jsonl: bool = False) -> int:
    records = list(records)
    with atomic_write(path) as f:
        if jsonl:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        else:
            json.dump(records, f, indent=2, ensure_ascii=False)
            f.write("\n")
    return len(records)

"""DPR retrieval JSON, the input of pyserini's ``evaluate_dpr_retrieval``:
``{qid: {"question", "answers", "contexts": [{"docid", "score", "text", "has_answer"}]}}``
with ``text`` = title + newline + passage text, as pyserini writes it."""

from __future__ import annotations

import json
from pathlib import Path

from dpr_xrisk.errors import InputError
from dpr_xrisk.io.common import atomic_write, load_json


def write_retrieval_json(path: str | Path, records: dict) -> None:
    with atomic_write(path) as f:
        json.dump(records, f, indent=2, ensure_ascii=False)
        f.write("\n")


def read_retrieval_json(path: str | Path) -> dict:
    data = load_json(path)
    if not isinstance(data, dict):
        raise InputError("expected a DPR retrieval JSON object {qid: {question, answers, contexts}}", path)
    for qid, rec in data.items():
        if not isinstance(rec, dict) or "contexts" not in rec or "answers" not in rec:
            raise InputError(f"question {qid!r}: missing 'answers' or 'contexts' (not a DPR retrieval file?)", path)
        if not isinstance(rec["contexts"], list) or not all(isinstance(c, dict) for c in rec["contexts"]):
            raise InputError(f"question {qid!r}: 'contexts' must be a list of objects", path)
        if not isinstance(rec["answers"], list) or not all(isinstance(a, str) for a in rec["answers"]):
            raise InputError(f"question {qid!r}: 'answers' must be a list of strings", path)
        for c in rec["contexts"]:
            if "docid" not in c:
                raise InputError(f"question {qid!r}: a context has no 'docid'", path)
            if "has_answer" in c and not isinstance(c["has_answer"], bool):  # "false" would count as a hit
                raise InputError(f"question {qid!r}: 'has_answer' must be true or false, got {c['has_answer']!r}", path)
    return data

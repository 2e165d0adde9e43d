"""Questions with answers: DPR QA TSV/CSV, JSONL, BEIR ``queries.jsonl``, DPR biencoder JSON.

A DPR QA file has no ids: as in pyserini, a question's id is its 0-based line number.
"""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path
from typing import Iterable, NamedTuple

from dpr_xrisk.errors import InputError
from dpr_xrisk.io.common import atomic_write, json_lines, numbered_lines
from dpr_xrisk.io.passages import unquote


class Question(NamedTuple):
    qid: str
    text: str
    answers: tuple[str, ...] = ()


def read_questions(path: str | Path) -> list[Question]:
    """Read questions from QA TSV/CSV, JSONL (``id``/``_id`` + ``question``/``text``), a BEIR
    folder, or a DPR biencoder JSON (ids = record index)."""
    from dpr_xrisk.io import arrow

    p = Path(path)
    if arrow.is_table(p):
        out = _read_table(p)
        if not out:
            raise InputError("no questions in table", p)
        return out
    if p.is_dir():
        if not (p / "queries.jsonl").exists():
            raise InputError("folder has no queries.jsonl (expected a BEIR folder)", p)
        p = p / "queries.jsonl"
    suffix = p.suffix.lower()
    if suffix in (".tsv", ".csv", ".txt"):
        out = _read_qa_tsv(p)
    elif suffix == ".jsonl":
        out = _read_jsonl(p)
    elif suffix == ".json":
        from dpr_xrisk.io.biencoder import read_biencoder

        out = [Question(str(i), r["question"], tuple(r["answers"])) for i, r in enumerate(read_biencoder(p))]
    else:
        raise InputError("unknown questions format; valid: .tsv/.csv (DPR QA), .jsonl, .json (DPR biencoder)", p)
    if not out:
        raise InputError("no questions in file", p)
    return out


def check_unique_ids(questions: list[Question], p) -> list[Question]:
    """``questions``, whose ids must be unique: two questions with one id would be merged in
    silence by a run (one list per id) and by every metric. Checked where questions are searched
    or scored (``search``, ``bm25 search``, ``fuse``, ``evaluate``), not by the reader, which
    returns what a file holds."""
    seen: dict[str, int] = {}
    for i, q in enumerate(questions):
        if q.qid in seen:
            raise InputError(f"question id {q.qid!r} appears twice (questions {seen[q.qid] + 1} and {i + 1} of the file)", p)
        seen[q.qid] = i
    return questions


def parse_answers(cell: str, path, lineno) -> tuple[str, ...]:
    """DPR writes answer lists as JSON or as a Python list literal (single quotes)."""
    try:
        value = json.loads(cell)
    except json.JSONDecodeError:
        try:
            value = ast.literal_eval(cell)
        except (ValueError, SyntaxError):
            raise InputError(f"answers must be a list like [\"a\", \"b\"], got {cell[:40]!r}", path, lineno) from None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise InputError("answers must be a list of strings", path, lineno)
    return check_answers(value, path, lineno)


def check_answers(answers, path, lineno) -> tuple[str, ...]:
    """An empty or whitespace-only answer would match every passage (DPR's has_answer finds the
    empty token list at position 0): an error, never a silent 100 % accuracy."""
    for a in answers:
        if not a.strip():
            raise InputError(f"empty answer string {a!r} (it would count every passage as a hit)", path, lineno)
    return tuple(answers)


def _read_qa_tsv(p: Path) -> list[Question]:
    out = []
    for lineno, line in numbered_lines(p):
        if not line.strip():
            raise InputError("blank line (qids are line numbers, so blank lines are not allowed)", p, lineno)
        fields = line.split("\t")
        if len(fields) == 1 and p.suffix.lower() == ".csv":
            fields = next(csv.reader([line]))
        else:  # DPR reads these files with csv.reader(delimiter="\t"): a csv-quoted field is unquoted
            fields = [unquote(f) for f in fields]
        if len(fields) > 2:
            raise InputError(f"expected 'question<TAB>answers', got {len(fields)} fields", p, lineno)
        question = fields[0].strip()
        if not question:
            raise InputError("empty question text", p, lineno)
        answers = parse_answers(fields[1], p, lineno) if len(fields) > 1 and fields[1].strip() else ()
        out.append(Question(str(lineno - 1), question, answers))
    return out


def _read_table(p: Path) -> list[Question]:
    """Columns ``question`` (or ``text``), ``answers`` (optional list of strings), ``id`` (optional;
    else the 0-based row, as for a DPR QA file)."""
    from dpr_xrisk.io import arrow

    names = arrow.column_names(p)
    cols = arrow.require_columns(p, names, [("question", "text")])
    qid_col = next((c for c in ("id", "_id", "qid") if c in names), None)
    arrow.check_column_types(p, {cols["question"]: ("string",), "answers": ("list of strings",),
                                 **({qid_col: ("string", "integer")} if qid_col else {})})
    wanted = [cols["question"]] + (["answers"] if "answers" in names else []) + ([qid_col] if qid_col else [])
    out = []
    for row, rec in arrow.iter_rows(p, wanted):
        text = rec[cols["question"]]
        if not isinstance(text, str) or not text.strip():
            raise InputError("missing or empty question", p, row)
        answers = rec.get("answers") or []
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise InputError("'answers' must be a list of strings", p, row)
        check_answers(answers, p, row)
        qid = str(rec[qid_col]) if qid_col else str(row - 1)
        out.append(Question(qid, text.strip(), tuple(answers)))
    return out


def _read_jsonl(p: Path) -> list[Question]:
    out = []
    for lineno, obj in json_lines(p):
        qid = obj.get("id", obj.get("_id", obj.get("qid")))
        if qid is None:
            raise InputError("missing required field 'id' (or '_id'/'qid')", p, lineno)
        text = obj.get("question", obj.get("text"))
        if not isinstance(text, str) or not text.strip():
            raise InputError("missing or empty field 'question' (or 'text')", p, lineno)
        answers = obj.get("answers", [])
        if isinstance(answers, str):
            if answers.lstrip().startswith("["):  # a list serialised into a string: never one answer "[...]"
                raise InputError(f"field 'answers' is a string holding a list ({answers[:40]!r}); write the list itself",
                                 p, lineno)
            answers = [answers]
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise InputError("field 'answers' must be a list of strings", p, lineno)
        check_answers(answers, p, lineno)
        out.append(Question(str(qid), text.strip(), tuple(answers)))
    return out


def write_qa_tsv(path: str | Path, questions: Iterable[Question]) -> int:
    """Write DPR's QA TSV (``question<TAB>["a", ...]``); ids become line numbers."""
    n = 0
    with atomic_write(path) as f:
        for q in questions:
            text = " ".join(q.text.split())
            if text.startswith('"'):  # csv-quoted, so that DPR's csv.reader and ours read it back as it is
                text = '"' + text.replace('"', '""') + '"'
            f.write(f"{text}\t{json.dumps(list(q.answers), ensure_ascii=False)}\n")
            n += 1
    return n


def write_queries_jsonl(path: str | Path, questions: Iterable[Question]) -> int:
    n = 0
    with atomic_write(path) as f:
        for q in questions:
            f.write(json.dumps({"id": q.qid, "question": q.text, "answers": list(q.answers)}, ensure_ascii=False) + "\n")
            n += 1
    return n


def questions_fingerprint(questions: Iterable[Question]) -> str:
    """A hash of the questions' ids and texts (not of the file's bytes, so one question set written
    as TSV or JSONL has one fingerprint): what a run's ``.meta.json`` records, to refuse scoring it
    against the answers or qrels of another question set."""
    import hashlib

    h = hashlib.sha256()
    for q in questions:
        h.update(f"{q.qid}\t{' '.join(q.text.split())}\n".encode())
    return h.hexdigest()[:16]


SPLITS = {"train": "train", "dev": "dev", "validation": "dev", "val": "dev", "test": "test"}


def split_name(path: str | Path) -> str | None:
    """The split (train, dev or test) a file of our naming conventions belongs to, or None:
    ``<name>.qa.tsv``, ``<name>.qrels.tsv``, ``biencoder-<name>.json`` and BEIR's
    ``qrels/<name>.tsv``, where the last word of ``<name>`` (split on ``-``, ``_``, ``.``) is a
    split word (``nq-test``, ``dev``, ``validation``). Other names tell nothing."""
    import re

    p = Path(path)
    name = p.name.lower()
    stem = None
    for mark in (".qa.", ".qrels."):
        if mark in name:
            stem = name.split(mark)[0]
    if stem is None and name.startswith("biencoder-") and name.endswith((".json", ".jsonl")):
        stem = name[len("biencoder-"):].rsplit(".", 1)[0]
    if stem is None and p.parent.name.lower() == "qrels" and name.endswith(".tsv"):
        stem = name[:-4]
    if not stem:
        return None
    return SPLITS.get(re.split(r"[-_.]", stem)[-1])

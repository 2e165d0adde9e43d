"""TREC qrels (``qid 0 docid rel``; BEIR ``query-id corpus-id score`` TSV) and runs
(``qid Q0 docid rank score tag``)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from dpr_xrisk.errors import InputError
from dpr_xrisk.io.common import atomic_write, numbered_lines

Qrels = dict[str, dict[str, int]]
Run = dict[str, list[tuple[str, float]]]  # qid -> [(docid, score)] in rank order


def read_qrels(path: str | Path) -> Qrels:
    """Read TREC qrels, or a BEIR qrels TSV (with its ``query-id`` header)."""
    p = Path(path)
    if p.is_dir():
        cand = p / "qrels" / "test.tsv"
        if not cand.exists():
            raise InputError("folder has no qrels/test.tsv (expected a BEIR folder)", p)
        p = cand
    qrels: Qrels = {}
    for lineno, line in numbered_lines(p):
        if not line.strip():
            continue
        fields = line.split()
        if lineno == 1 and len(fields) == 3 and fields[0].lower() in ("query-id", "qid", "query_id") \
                and not fields[2].lstrip("-").isdigit():
            continue  # BEIR's header line (its score column is a name, not a number)
        if len(fields) == 4:
            qid, _, docid, rel = fields
        elif len(fields) == 3:  # BEIR: query-id corpus-id score
            qid, docid, rel = fields
        else:
            raise InputError(f"expected 'qid 0 docid rel' (or BEIR 'qid docid rel'), got {len(fields)} fields", p, lineno)
        try:
            value = float(rel)
        except ValueError:
            raise InputError(f"relevance {rel!r} is not a number", p, lineno) from None
        if not value.is_integer():  # int() would make 0.5 a silent 0 (not relevant)
            raise InputError(f"relevance {rel!r} is not an integer grade", p, lineno)
        judged = qrels.setdefault(qid, {})
        if docid in judged and judged[docid] != int(value):
            raise InputError(f"document {docid!r} of question {qid!r} is judged twice with different grades "
                             f"({judged[docid]} and {int(value)})", p, lineno)
        judged[docid] = int(value)
    if not qrels:
        raise InputError("no judgements in qrels file", p)
    return qrels


def write_qrels(path: str | Path, qrels: Mapping[str, Mapping[str, int]]) -> None:
    with atomic_write(path) as f:
        for qid, docs in qrels.items():
            for docid, rel in docs.items():
                f.write(f"{qid} 0 {docid} {rel}\n")


def read_run_lines(path: str | Path) -> dict[str, list[tuple[int, str, float, int]]]:
    """A TREC run as ``{qid: [(rank, docid, score, line), ...]}`` in file order, with each row's
    1-based line, for checks that name the line (:func:`dpr_xrisk.evaluation.evaluate.read_any_run`)."""
    p = Path(path)
    rows: dict[str, list[tuple[int, str, float, int]]] = {}
    for lineno, line in numbered_lines(p):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 6:
            raise InputError(f"expected 'qid Q0 docid rank score tag', got {len(fields)} fields", p, lineno)
        qid, _, docid, rank, score, _tag = fields
        try:
            rows.setdefault(qid, []).append((int(rank), docid, float(score), lineno))
        except ValueError:
            raise InputError("rank must be an integer and score a number", p, lineno) from None
    if not rows:
        raise InputError("no lines in run file", p)
    return rows


def read_run(path: str | Path) -> Run:
    """Read a TREC run; each question's list is ordered by the rank column."""
    return {q: [(d, s) for _, d, s, _ in sorted(r, key=lambda x: x[0])] for q, r in read_run_lines(path).items()}


def write_run(path: str | Path, run: Mapping[str, Sequence[tuple[str, float]]], tag: str = "dpr_xrisk") -> None:
    """Write hits in the given order, ranks 1, 2, ... Scores are written exactly (shortest
    round-trip decimal): rounding two different scores to one value would create a tie that
    trec_eval re-orders by docid, so the file's ranks and its scores would disagree."""
    with atomic_write(path) as f:
        for qid, hits in run.items():
            for rank, (docid, score) in enumerate(hits, start=1):
                f.write(f"{qid} Q0 {docid} {rank} {float(score)!r} {tag}\n")

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
            qrels.setdefault(qid, {})[docid] = int(float(rel))
        except ValueError:
            raise InputError(f"relevance {rel!r} is not a number", p, lineno) from None
    if not qrels:
        raise InputError("no judgements in qrels file", p)
    return qrels


def write_qrels(path: str | Path, qrels: Mapping[str, Mapping[str, int]]) -> None:
    with atomic_write(path) as f:
        for qid, docs in qrels.items():
            for docid, rel in docs.items():
                f.write(f"{qid} 0 {docid} {rel}\n")


def read_run(path: str | Path) -> Run:
    """Read a TREC run; each question's list is ordered by the rank column."""
    p = Path(path)
    rows: dict[str, list[tuple[int, str, float]]] = {}
    for lineno, line in numbered_lines(p):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 6:
            raise InputError(f"expected 'qid Q0 docid rank score tag', got {len(fields)} fields", p, lineno)
        qid, _, docid, rank, score, _tag = fields
        try:
            rows.setdefault(qid, []).append((int(rank), docid, float(score)))
        except ValueError:
            raise InputError("rank must be an integer and score a number", p, lineno) from None
    if not rows:
        raise InputError("no lines in run file", p)
    return {q: [(d, s) for _, d, s in sorted(r, key=lambda x: x[0])] for q, r in rows.items()}


def write_run(path: str | Path, run: Mapping[str, Sequence[tuple[str, float]]], tag: str = "dpr_xrisk") -> None:
    with atomic_write(path) as f:
        for qid, hits in run.items():
            for rank, (docid, score) in enumerate(hits, start=1):
                f.write(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n")

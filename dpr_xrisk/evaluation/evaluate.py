"""Score runs: DPR top-k answer accuracy (runs + answers + passage texts) and recall/MRR/nDCG
(runs + qrels). Reads the files, calls :mod:`dpr_xrisk.evaluation.metrics`, returns plain dicts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from dpr_xrisk.evaluation.answers import has_answer
from dpr_xrisk.errors import InputError
from dpr_xrisk.evaluation.metrics import dpr_first_hit_ranks, dpr_topk_accuracy, qrels_metrics

DEFAULT_KS = (1, 5, 20, 100)
DEFAULT_QRELS_KS = (10, 100)


def read_any_run(path: str | Path) -> tuple[dict, dict | None]:
    """Return (run, dpr_records or None) from a TREC run or a DPR retrieval JSON."""
    from dpr_xrisk.io.retrieval_json import read_retrieval_json
    from dpr_xrisk.io.trec import read_run

    p = Path(path)
    if p.suffix.lower() == ".json":
        records = read_retrieval_json(p)
        run = {q: [(c["docid"], float(c.get("score", 0.0))) for c in r["contexts"]] for q, r in records.items()}
        return run, records
    if p.suffix.lower() in (".trec", ".txt", ".run", ".tsv"):
        return read_run(p), None
    raise InputError("unknown run format; valid: .json (DPR retrieval), .trec/.txt/.run (TREC run)", p)


def answer_hits(run, records, questions=None, passages=None, regex: bool = False, depth: int | None = None,
                cache: dict | None = None) -> dict[str, list[bool]]:
    """Per-question has_answer flags in rank order.

    From DPR records: the stored ``has_answer`` when present, else the answer match on the
    context text after its title line (exactly pyserini's rule). From a TREC run: answers from
    ``questions`` and passage texts from ``passages`` (docid -> (title, text)), the first
    ``depth`` ranks only if given; ``cache`` ((answers, docid) -> flag, one corpus), shared
    between calls, matches each pair once.
    """
    hits = {}
    if records is not None:
        for qid, rec in records.items():
            flags = []
            for c in rec["contexts"]:
                if "has_answer" in c:
                    flags.append(bool(c["has_answer"]))
                else:
                    parts = c.get("text", "").split("\n")
                    flags.append(has_answer(parts[1] if len(parts) > 1 else parts[0], rec["answers"], regex))
            hits[qid] = flags
        return hits
    if questions is None or passages is None:
        raise InputError("DPR accuracy from a TREC run needs --answers (questions with answers) and --corpus")
    cache = {} if cache is None else cache
    for q in questions:
        flags = []
        for docid, _ in list(run.get(q.qid, ()))[:depth]:
            key = (tuple(q.answers), regex, docid)  # the flag depends on the answers, not on the id
            if key not in cache:
                if docid not in passages:
                    raise InputError(f"run names passage {docid!r}, which is not in the corpus")
                cache[key] = has_answer(passages[docid][1], q.answers, regex)
            flags.append(cache[key])
        hits[q.qid] = flags
    return hits


def judged_questions(qrels, path=None) -> list[str]:
    """The qrels' questions with at least one relevant judgement (relevance >= 1): the questions
    the qrels metrics average over; none is an error."""
    judged = [q for q, docs in qrels.items() if any(r >= 1 for r in docs.values())]
    if not judged:
        raise InputError("the qrels hold no relevant judgement (relevance >= 1)", path)
    return judged


def _missing(kind: str, missing: list[str], path, strict: bool) -> None:
    if missing and strict:
        raise InputError(f"{len(missing)} question(s) of the {kind} are not in the run, e.g. {missing[0]!r} "
                         "(--no-strict scores them as misses)", path)


def check_ks(ks: Sequence[int], flag: str = "--k") -> None:
    bad = [k for k in ks if not isinstance(k, int) or k < 1]
    if bad:
        raise InputError(f"{flag} must be a positive integer, got {bad[0]!r}")
    if not ks:
        raise InputError(f"{flag}: give at least one cut-off")


def evaluate_run(path, questions=None, passages=None, qrels=None, ks: Sequence[int] = DEFAULT_KS,
                 qrels_ks: Sequence[int] = DEFAULT_QRELS_KS, regex: bool = False, per_question: bool = False,
                 strict: bool = True) -> dict:
    """Score one run. Denominators are never changed in silence: a question of ``questions`` or
    ``qrels`` that the run lacks is an error (``strict``) or a miss counted in ``n`` and reported as
    ``missing_in_run``; a run question unknown to them is always an error."""
    check_ks(ks)
    check_ks(qrels_ks, "--qrels-k")
    run, records = read_any_run(path)
    if not run:
        raise InputError("the run holds no questions", path)
    result: dict = {"run": str(path), "num_questions": len(run), "metrics": {}}
    known = {q.qid for q in questions} if questions is not None else None
    if known is not None and records is None:
        unknown = sorted(set(run) - known)
        if unknown:
            raise InputError(f"run names {len(unknown)} question id(s) not in the questions file, e.g. {unknown[0]!r}", path)
    if records is not None or (questions is not None and passages is not None):
        if records is None:
            missing = sorted(known - set(run))
            _missing("questions file", missing, path, strict)
            if missing:
                result["missing_in_run"] = len(missing)
        hits = answer_hits(run, records, questions, passages, regex)
        acc = dpr_topk_accuracy(hits, ks)
        result["metrics"].update({f"top{k}": v for k, v in acc.items()})
        result["num_questions"] = len(hits)
        if per_question:
            result["per_question"] = {q: {"first_hit_rank": r} for q, r in dpr_first_hit_ranks(hits).items()}
    if qrels is not None:
        unknown = sorted(set(run) - set(qrels))
        if unknown:
            raise InputError(f"run names {len(unknown)} question id(s) absent from the qrels, e.g. {unknown[0]!r}", path)
        judged = judged_questions(qrels)
        missing = sorted(set(judged) - set(run))
        _missing("qrels", missing, path, strict)
        if missing:
            result["missing_in_run"] = max(result.get("missing_in_run", 0), len(missing))
        has_accuracy = bool(result["metrics"])
        # trec_eval ranks by score (ties by docid), not by the file's rank column; so do we
        scored = {q: dict(hits_) for q, hits_ in run.items()}
        result["metrics"].update(qrels_metrics(qrels, scored, qrels_ks))
        if not has_accuracy:
            result["num_questions"] = len(judged)
        elif len(judged) != result["num_questions"]:
            result["num_qrels_questions"] = len(judged)  # the qrels metrics' own denominator
    if not result["metrics"]:
        raise InputError("nothing to compute: give --answers and --corpus (DPR accuracy), or --qrels, or a DPR JSON run")
    return result


def check_qrels_docs(qrels, found, corpus) -> None:
    """Every judged document must be in the corpus (``found``: the judged ids the corpus holds,
    e.g. the keys of ``load_passage_texts(corpus, judged ids)``): a qrels file for another corpus
    would score zeros."""
    missing = {d for docs in qrels.values() for d in docs} - set(found)
    if missing:
        raise InputError(f"the qrels judge {len(missing)} document id(s) not in the corpus, e.g. {sorted(missing)[0]!r}",
                         corpus)

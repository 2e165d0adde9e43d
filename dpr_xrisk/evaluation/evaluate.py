"""Score runs: DPR top-k answer accuracy (runs + answers + passage texts) and recall/MRR/nDCG
(runs + qrels). Reads the files, calls :mod:`dpr_xrisk.evaluation.metrics`, returns plain dicts.

It also owns the refusals that keep a table honest: a run that every metric would not rank the
same way (:func:`read_any_run`), and a run scored against the answers, qrels or corpus of other
questions or another corpus (:func:`check_run_inputs`, from the ``<run>.meta.json`` that
``search``, ``bm25 search`` and ``fuse`` write beside every run).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Sequence

from dpr_xrisk.evaluation.answers import has_answer
from dpr_xrisk.errors import InputError
from dpr_xrisk.evaluation.metrics import dpr_first_hit_ranks, dpr_topk_accuracy, qrels_metrics

DEFAULT_KS = (1, 5, 20, 100)
DEFAULT_QRELS_KS = (10, 100)


def read_any_run(path: str | Path) -> tuple[dict, dict | None]:
    """Return (run, dpr_records or None) from a TREC run or a DPR retrieval JSON, checked so that
    every metric of one table sees one ranking:

    - a passage listed twice for one question is an error (pytrec_eval keeps one of the two,
      DPR accuracy counts both: the numbers would silently disagree), naming the file and line;
    - scores must not increase with rank (a TREC run's rank column, a DPR JSON's context order):
      DPR accuracy reads the ranks, recall/MRR/nDCG re-rank by score as trec_eval does, so such a
      run would be scored by two rankings. Equal scores are allowed: DPR accuracy keeps their
      file order (as pyserini's ``evaluate_dpr_retrieval``), the qrels metrics order them by
      passage id descending (as trec_eval); every run dpr_xrisk writes puts ties in that order,
      so the two coincide;
    - a TREC rank repeated for one question is an error; a DPR JSON without any ``score`` is
      ranked by its context order (scores -1, -2, ...), one with only some scores is an error.
    """
    from dpr_xrisk.io.retrieval_json import read_retrieval_json
    from dpr_xrisk.io.trec import read_run_lines

    p = Path(path)
    if p.suffix.lower() == ".json":
        records = read_retrieval_json(p)
        return _json_run(records, p), records
    if p.suffix.lower() in (".trec", ".txt", ".run", ".tsv"):
        return _trec_run(read_run_lines(p), p), None
    raise InputError("unknown run format; valid: .json (DPR retrieval), .trec/.txt/.run (TREC run)", p)


def _disagree(qid, rank_a, doc_a, score_a, rank_b, doc_b, score_b) -> str:
    return (f"question {qid!r}: rank {rank_b} ({doc_b}) scores {score_b:g}, above rank {rank_a} ({doc_a}, {score_a:g}): "
            "ranks and scores disagree (DPR accuracy reads ranks, recall/MRR/nDCG scores); re-rank the run by score")


def _trec_run(rows: dict, p: Path) -> dict:
    run = {}
    for qid, hits in rows.items():
        hits = sorted(hits, key=lambda x: (x[0], x[3]))  # by rank
        seen_doc: dict[str, int] = {}
        for i, (rank, docid, score, line) in enumerate(hits):
            if not math.isfinite(score):
                raise InputError(f"score {score} of passage {docid!r} is not a finite number", p, line)
            if docid in seen_doc:  # located at the later of the two lines, naming the earlier one
                first, second = sorted((line, seen_doc[docid]))
                raise InputError(f"passage {docid!r} is listed twice for question {qid!r} (also line {first})", p, second)
            seen_doc[docid] = line
            if i and hits[i - 1][0] == rank:
                raise InputError(f"rank {rank} appears twice for question {qid!r} (also line {hits[i - 1][3]})", p, line)
            if i and score > hits[i - 1][2]:
                r0, d0, s0, _ = hits[i - 1]
                raise InputError(_disagree(qid, r0, d0, s0, rank, docid, score), p, line)
        run[qid] = [(d, s) for _, d, s, _ in hits]
    return run


def _json_line(p: Path, qid: str, index: int) -> int | None:
    """Best-effort 1-based line of context ``index`` of question ``qid`` in a DPR JSON file (as
    DPR, pyserini and dpr_xrisk indent them: one key per line); None if it cannot be found."""
    import json
    import re

    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    # a key opens a member (after { or ,): question b's key is also the tail of question x"b's ("x\"b")
    m = re.search(r"[{,]\s*" + re.escape(json.dumps(qid, ensure_ascii=False)) + r"\s*:\s*\{", text)
    if m is None:
        return None
    docs = list(itertools.islice(re.finditer(r'"docid"\s*:', text[m.end():]), index + 1))
    if len(docs) <= index:
        return None
    return text.count("\n", 0, m.end() + docs[index].start()) + 1


def _json_run(records: dict, p: Path) -> dict:
    scored = [("score" in c) for rec in records.values() for c in rec["contexts"]]
    if any(scored) and not all(scored):
        qid, i = next((q, i) for q, rec in records.items() for i, c in enumerate(rec["contexts"]) if "score" not in c)
        raise InputError(f"question {qid!r}: context {i + 1} has no 'score' while others have one", p, _json_line(p, qid, i))
    run = {}
    for qid, rec in records.items():
        hits, seen = [], {}
        for i, c in enumerate(rec["contexts"]):
            docid = str(c["docid"])
            if docid in seen:
                raise InputError(f"passage {docid!r} is listed twice for question {qid!r} (contexts {seen[docid] + 1} "
                                 f"and {i + 1})", p, _json_line(p, qid, i))
            seen[docid] = i
            if "score" in c:
                try:
                    score = float(c["score"])
                except (TypeError, ValueError):
                    raise InputError(f"question {qid!r}: context {i + 1} has a score that is not a number: {c['score']!r}",
                                     p, _json_line(p, qid, i)) from None
                if not math.isfinite(score):
                    raise InputError(f"question {qid!r}: context {i + 1} has a score that is not finite: {score}",
                                     p, _json_line(p, qid, i))
            else:
                score = -float(i + 1)  # no scores at all: the file order is the ranking
            if hits and score > hits[-1][1]:
                raise InputError(_disagree(qid, i, hits[-1][0], hits[-1][1], i + 1, docid, score), p, _json_line(p, qid, i))
            hits.append((docid, score))
        run[qid] = hits
    return run


def answer_hits(run, records, questions=None, passages=None, regex: bool = False, depth: int | None = None,
                cache: dict | None = None, path=None) -> dict[str, list[bool]]:
    """Per-question has_answer flags in rank order.

    From DPR records: the stored ``has_answer`` when present, else the answer match on the
    context text after its title line (exactly pyserini's rule). From a TREC run: answers from
    ``questions`` and passage texts from ``passages`` (docid -> (title, text)), the first
    ``depth`` ranks only if given; ``cache`` ((answers, docid) -> flag, one corpus), shared
    between calls, matches each pair once. ``path``: the TREC file of ``run``, named (with the
    line) by the error for a passage the corpus lacks.
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
                    raise InputError(f"run names passage {docid!r}, which is not in the corpus", path,
                                     _trec_line(path, q.qid, docid) if path is not None else None)
                cache[key] = has_answer(passages[docid][1], q.answers, regex)
            flags.append(cache[key])
        hits[q.qid] = flags
    return hits


def _trec_line(p, qid: str, docid: str) -> int | None:
    """The line of a TREC run that lists ``docid`` for ``qid`` (for an error message), or None."""
    from dpr_xrisk.io.common import numbered_lines

    for n, line in numbered_lines(p):
        fields = line.split()
        if len(fields) == 6 and fields[0] == qid and fields[2] == docid:
            return n
    return None


def run_meta(path: str | Path) -> dict | None:
    """The ``<run>.meta.json`` written beside a run by ``search``, ``bm25 search`` and ``fuse``
    (what made it: questions, corpus, index, settings), or None when there is none."""
    from dpr_xrisk.io.common import load_json

    from dpr_xrisk.io.fingerprint import file_fingerprint

    m = Path(f"{path}.meta.json")
    if not m.is_file():
        return None
    meta = load_json(m)
    if not isinstance(meta, dict):
        raise InputError("not a run meta (expected a JSON object)", m)
    if meta.get("run_fingerprint") and Path(path).is_file() and meta["run_fingerprint"] != file_fingerprint(path):
        return None  # the meta of an earlier run at this path (the run was replaced by another tool)
    return meta


def check_run_inputs(path, records=None, questions=None, answers=None, qrels=None, corpus=None) -> None:
    """Refuse to score a run against the answers, qrels or corpus of another question set or
    corpus. Query ids of DPR QA files are line numbers, so ids alone cannot tell two splits apart:

    - the run's meta records its questions' fingerprint (ids and texts); it must equal that of
      ``questions`` (read from ``answers``);
    - a DPR JSON run holds its question texts: each must be the text of that id in ``questions``;
    - split names (``<split>.qa.tsv``, ``<split>.qrels.tsv``, BEIR ``qrels/<split>.tsv``) of the
      run's questions, of ``answers`` and of ``qrels`` must agree where known;
    - the corpus fingerprint in the run's meta must match ``corpus``.
    """
    from dpr_xrisk.io.questions import questions_fingerprint, split_name
    from dpr_xrisk.io.fingerprint import corpus_fingerprint, same_corpus

    meta = run_meta(path) or {}
    asked = meta.get("questions") if isinstance(meta.get("questions"), dict) else {}
    asked_path = asked.get("path") or (meta.get("inputs", {}).get("queries") or {}).get("path")
    if questions is not None and asked.get("fingerprint") and asked["fingerprint"] != questions_fingerprint(questions):
        raise InputError(f"was retrieved for other questions ({asked.get('count')} from {asked_path}) than --answers "
                         f"{answers} ({len(questions)}): score a run with the answers of its own questions", path)
    if records is not None and questions is not None:
        texts = {q.qid: " ".join(q.text.split()) for q in questions}
        for qid, rec in records.items():
            if qid in texts and " ".join(str(rec.get("question", "")).split()) != texts[qid]:
                raise InputError(f"question {qid!r} of the run is {str(rec.get('question'))[:60]!r}, of --answers {answers} "
                                 f"{texts[qid][:60]!r}: a run of other questions (another split?)", path)
    splits = {name: split_name(f) for name, f in (("the run's questions", asked_path), ("--answers", answers),
                                                  ("--qrels", qrels)) if f is not None}
    known = {k: v for k, v in splits.items() if v is not None}
    if len(set(known.values())) > 1:
        raise InputError("split names disagree: " + ", ".join(f"{k} {v!r}" for k, v in known.items())
                         + f" ({asked_path or answers} vs {qrels or answers}): score a run with its own split's files", path)
    if corpus is not None and meta.get("corpus_fingerprint") and Path(corpus).exists() \
            and not same_corpus(meta["corpus_fingerprint"], corpus_fingerprint(corpus)):
        raise InputError(f"was retrieved from another corpus than --corpus {corpus} (fingerprints differ)", path)


def _use_answers(records: dict, questions) -> dict:
    """DPR records whose answers are those of ``questions`` (by id): a record whose stored answers
    differ loses its stored ``has_answer`` flags, so they are matched again with the given ones."""
    given = {q.qid: list(q.answers) for q in questions}
    out = {}
    for qid, rec in records.items():
        if qid in given and list(rec.get("answers", [])) != given[qid]:
            rec = {**rec, "answers": given[qid],
                   "contexts": [{k: v for k, v in c.items() if k != "has_answer"} for c in rec["contexts"]]}
        out[qid] = rec
    return out


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
                 strict: bool = True, answers_path=None, qrels_path=None, corpus_path=None) -> dict:
    """Score one run. Denominators are never changed in silence: a question of ``questions`` or
    ``qrels`` that the run lacks is an error (``strict``) or a miss counted in ``n`` and reported as
    ``missing_in_run``; a run question unknown to them is always an error. ``questions`` given with
    a DPR JSON run are used (their answers, not the ones stored in the run), after
    :func:`check_run_inputs` has checked that they are the run's questions; the ``*_path``
    arguments name the files for those checks and their messages."""
    check_ks(ks)
    check_ks(qrels_ks, "--qrels-k")
    run, records = read_any_run(path)
    if not run:
        raise InputError("the run holds no questions", path)
    check_run_inputs(path, records, questions, answers_path, qrels_path, corpus_path)
    if records is not None and questions is not None:
        records = _use_answers(records, questions)
    result: dict = {"run": str(path), "num_questions": len(run), "metrics": {}}
    known = {q.qid for q in questions} if questions is not None else None
    if known is not None:
        unknown = sorted(set(run) - known)
        if unknown:
            raise InputError(f"run names {len(unknown)} question id(s) not in the questions file, e.g. {unknown[0]!r}", path)
    if records is not None or (questions is not None and passages is not None):
        if known is not None:
            missing = sorted(known - set(run))
            _missing("questions file", missing, path, strict)
            if missing:
                result["missing_in_run"] = len(missing)
        try:
            hits = answer_hits(run, records, questions, passages, regex, path=None if records is not None else path)
        except InputError as e:
            if e.path is not None:
                raise
            raise InputError(e.message, path) from None  # e.g. a passage id the corpus lacks: name the run
        for qid in result.get("missing_in_run") and missing or ():
            hits.setdefault(qid, [])  # --no-strict: a question the JSON run lacks is a miss counted in n
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

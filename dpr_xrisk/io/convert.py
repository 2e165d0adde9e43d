"""Converters from other layouts into DPR's formats: SQuAD JSON and BEIR folders.

Outputs in ``out_dir``: ``passages.tsv``, ``<split>.qa.tsv``, ``<split>.qrels.tsv`` (qids =
line numbers of the QA file) and ``biencoder-<split>.json``. SQuAD can be split by article
(``test_fraction``) so that test questions' paragraphs never appear in training.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from dpr_xrisk.errors import InputError
from dpr_xrisk.io.biencoder import write_biencoder
from dpr_xrisk.io.common import check_apart, check_output, load_json, user_paths, write_json
from dpr_xrisk.io.passages import Passage, read_passages, write_passages_tsv
from dpr_xrisk.io.questions import Question, read_questions, write_qa_tsv
from dpr_xrisk.io.trec import read_qrels, write_qrels


@contextlib.contextmanager
def staged(out_dir, overwrite: bool = False) -> Iterator[Path]:
    """Write a conversion's files into a temp folder beside ``out_dir`` and move them in only when
    all are written: a failed conversion leaves nothing behind (and creates no ``out_dir``). A
    conversion is one artifact: an ``out_dir`` holding files is an error, or (``overwrite``)
    replaced as a whole -- never merged, which would leave another conversion's splits beside
    this one's."""
    out = check_output(out_dir, folder=True)
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise InputError("output folder is not empty (use --overwrite to replace it)", out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        try:
            yield tmp
        except BaseException as e:
            user_paths(e, tmp, out)  # messages name the user's folder, never the temp one
            raise
        if out.is_dir():
            shutil.rmtree(out)
        out.mkdir()
        for f in sorted(tmp.iterdir()):
            os.replace(f, out / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _squad_text(obj, key: str, path, where: str) -> str:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: missing or empty {key!r}", path)
    return _norm(value)


def _squad_list(obj, key: str, path, where: str) -> list:
    value = obj.get(key, []) if isinstance(obj, dict) else None
    if not isinstance(value, list):
        raise InputError(f"{where}: {key!r} must be a list", path)
    return value


def _norm(s: str) -> str:
    return " ".join(s.split())


def _ctx(p: Passage) -> dict:
    return {"title": p.title, "text": p.text, "score": 1000, "title_score": 1, "passage_id": p.id}


def _write_split(out: Path, split: str, items: list[tuple[Question, list[Passage]]]) -> None:
    write_qa_tsv(out / f"{split}.qa.tsv", [q for q, _ in items])
    write_qrels(out / f"{split}.qrels.tsv", {str(i): {p.id: 1 for p in pos} for i, (_, pos) in enumerate(items)})
    write_biencoder(out / f"biencoder-{split}.json", [
        {"dataset": split, "question": q.text, "answers": list(q.answers), "positive_ctxs": [_ctx(p) for p in pos],
         "negative_ctxs": [], "hard_negative_ctxs": []} for q, pos in items])


def squad_to_dpr(squad_json, out_dir, test_fraction: float = 0.0, seed: int = 0, id_prefix: str = "squad",
                 overwrite: bool = False) -> dict:
    """Paragraphs become passages (``<prefix>-<article>-<paragraph>``), questions keep their
    distinct answer strings; articles are split train/test by ``test_fraction``.

    The paragraph is each question's positive, so an answer string must occur in it (as text,
    after whitespace normalisation; SQuAD's own answers always do): an answer that does not is
    dropped, and a question left without answers is dropped, both counted in the returned
    counts and ``convert-meta.json`` (``dropped_answers``, ``dropped_questions``). What was
    written is read back and checked before it is moved into ``out_dir``."""
    check_apart(squad_json, out_dir, "input")  # --overwrite must never remove what it converts
    data = load_json(squad_json)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise InputError("not a SQuAD file (expected {'data': [{'title', 'paragraphs'}]})", squad_json)
    if not 0.0 <= test_fraction < 1.0:
        raise InputError("--test-fraction must be in [0, 1)")
    articles = list(range(len(data["data"])))
    random.Random(seed).shuffle(articles)
    n_test = round(len(articles) * test_fraction)
    test_articles = set(articles[:n_test])
    passages, splits = [], {"train": [], "test": []}
    dropped = {"dropped_answers": 0, "dropped_questions": 0}
    for a, article in enumerate(data["data"]):
        if not isinstance(article, dict):
            raise InputError(f"data[{a}] is not an article object", squad_json)
        title = _norm(str(article.get("title") or "").replace("_", " "))
        for j, para in enumerate(_squad_list(article, "paragraphs", squad_json, f"data[{a}]")):
            where = f"data[{a}].paragraphs[{j}]"
            psg = Passage(f"{id_prefix}-{a}-{j}", _squad_text(para, "context", squad_json, where), title)
            passages.append(psg)
            for n, qa in enumerate(_squad_list(para, "qas", squad_json, where)):
                at = f"{where}.qas[{n}]"
                question = _squad_text(qa, "question", squad_json, at)
                texts = [_squad_text(x, "text", squad_json, f"{at}.answers[{m}]")
                         for m, x in enumerate(_squad_list(qa, "answers", squad_json, at))]
                texts = list(dict.fromkeys(texts))
                kept = [t for t in texts if t in psg.text]  # both whitespace-normalised by _squad_text
                dropped["dropped_answers"] += len(texts) - len(kept)
                if texts and not kept:
                    dropped["dropped_questions"] += 1
                    continue  # its paragraph holds none of its answers: not a positive for it
                q = Question("", question, tuple(kept))
                splits["test" if a in test_articles else "train"].append((q, [psg]))
    with staged(out_dir, overwrite) as out:
        write_passages_tsv(out / "passages.tsv", passages)
        counts = {"passages": len(passages)}
        for split, items in splits.items():
            if items:
                _write_split(out, split, items)
                counts[split] = len(items)
        counts.update(dropped)
        write_json(out / "convert-meta.json", {"source": str(squad_json), "test_fraction": test_fraction, "seed": seed,
                                               "test_articles": sorted(test_articles), **counts})
        _check_written(out, passages, splits)
    return counts


def _check_written(out: Path, passages: list[Passage], splits: dict) -> None:
    """Read the converted files back: the passages as given, and per split the questions and
    answers as given, each positive a written passage that holds every answer of its question."""
    from dpr_xrisk.io.biencoder import read_biencoder

    back = {p.id: p for p in read_passages(out / "passages.tsv")}
    if [p.id for p in passages] != list(back) or any(back[p.id].text != p.text for p in passages):
        raise RuntimeError("convert: passages.tsv does not read back as written")
    for split, items in splits.items():
        if not items:
            continue
        qs, recs = read_questions(out / f"{split}.qa.tsv"), read_biencoder(out / f"biencoder-{split}.json")
        if len(qs) != len(items) or len(recs) != len(items):
            raise RuntimeError(f"convert: {split} files do not read back with {len(items)} questions")
        for (q, pos), got, rec in zip(items, qs, recs):
            if got.answers != q.answers or tuple(rec["answers"]) != q.answers:
                raise RuntimeError(f"convert: answers of {q.text!r} do not read back as written")
            for c in rec["positive_ctxs"]:
                if c["passage_id"] not in back or not all(a in back[c["passage_id"]].text for a in q.answers):
                    raise RuntimeError(f"convert: a positive of {q.text!r} does not hold its answers")


def beir_to_dpr(beir_dir, out_dir, split: str = "test", overwrite: bool = False) -> dict:
    """A BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) -> DPR files.
    BEIR has no answer strings, so the QA file's answer lists are empty (use qrels metrics);
    ``qid-map.tsv`` maps QA line numbers back to BEIR query ids."""
    beir = Path(beir_dir)
    check_apart(beir, out_dir, "input")
    qrels_file = beir / "qrels" / f"{split}.tsv"
    if not qrels_file.exists():
        raise InputError(f"no qrels/{split}.tsv", beir)
    qrels = read_qrels(qrels_file)
    queries = {q.qid: q for q in read_questions(beir / "queries.jsonl")}
    with staged(out_dir, overwrite) as out:
        wanted = {d for docs in qrels.values() for d, r in docs.items() if r >= 1}
        by_id = {}

        def stream():
            for p in read_passages(beir):
                if p.id in wanted:
                    by_id[p.id] = p
                yield p

        n = write_passages_tsv(out / "passages.tsv", stream())
        items, qids = [], []
        for qid, docs in qrels.items():
            if qid not in queries:
                raise InputError(f"qrels name query {qid!r}, which is not in queries.jsonl", qrels_file)
            pos = [by_id[d] for d, r in docs.items() if r >= 1 and d in by_id]
            missing = [d for d, r in docs.items() if r >= 1 and d not in by_id]
            if missing:
                raise InputError(f"qrels name passage {missing[0]!r}, which is not in corpus.jsonl", qrels_file)
            items.append((queries[qid], pos))
            qids.append(qid)
        _write_split(out, split, items)
        (out / "qid-map.tsv").write_text("".join(f"{i}\t{q}\n" for i, q in enumerate(qids)), encoding="utf-8")
    return {"passages": n, split: len(items)}

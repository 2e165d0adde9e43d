"""Training data: questions with their positives from DPR biencoder files, the passage store
(texts by key), and the pluggable sources of hard-negative pools (docs/method.md §3).

A passage's *key* is its ``passage_id`` when it has one, else ``t:<hash of its text>``; its
*text key* (hash of the normalised title + text) finds duplicates that carry different ids.
A negative source fills ``pools[i]`` with question i's candidate negatives as (key, score)
pairs, positives and answer-bearing passages already removed; ``refresh.sample_negatives``
draws h of them with known q.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from dpr_xrisk.evaluation.answers import has_answer
from dpr_xrisk.errors import InputError


def text_key(title: str, text: str) -> str:
    norm = " ".join(f"{title} {text}".lower().split())
    return hashlib.sha1(norm.encode("utf-8")).hexdigest()[:16]


@dataclass
class PassageStore:
    """key -> (title, text) and key -> text key, for every passage training may put in a batch."""

    texts: dict[str, tuple[str, str]] = field(default_factory=dict)
    tkeys: dict[str, str] = field(default_factory=dict)

    def add(self, ctx: dict) -> str:
        key = ctx["passage_id"] or "t:" + text_key(ctx["title"], ctx["text"])
        if key not in self.texts:
            self.texts[key] = (ctx["title"], ctx["text"])
            self.tkeys[key] = text_key(ctx["title"], ctx["text"])
        return key

    def add_text(self, key: str, title: str, text: str) -> None:
        if key not in self.texts:
            self.texts[key] = (title, text)
            self.tkeys[key] = text_key(title, text)

    def __len__(self) -> int:
        return len(self.texts)


@dataclass
class TrainQuestion:
    idx: int  # stable index in its training file (the estimator state and negatives files use it)
    text: str
    answers: tuple[str, ...]
    positives: list[str]  # passage keys
    file_negatives: list[str]  # keys of the record's hard_negative_ctxs


@dataclass
class TrainingSet:
    name: str
    path: str
    questions: list[TrainQuestion]
    skipped_no_positive: int = 0
    pools: list[list[tuple[str, float]]] = field(default_factory=list)  # per question: [(key, score)]
    pool_source: str = "none"

    def __len__(self) -> int:
        return len(self.questions)


def load_training_set(path: str | Path, store: PassageStore, no_positive: str = "skip") -> TrainingSet:
    from dpr_xrisk.io.biencoder import read_biencoder

    records = read_biencoder(path)
    if not records:
        raise InputError("training file has no records", path)
    questions, skipped = [], 0
    for i, rec in enumerate(records):
        if not rec["positive_ctxs"]:
            if no_positive == "fail":
                raise InputError(f"record {i} ({rec['question'][:50]!r}) has no positive_ctxs "
                                 "(set no_positive = 'skip' to skip such questions)", path)
            skipped += 1
            continue
        pos = list(dict.fromkeys(store.add(c) for c in rec["positive_ctxs"]))
        hard = list(dict.fromkeys(store.add(c) for c in rec["hard_negative_ctxs"]))
        questions.append(TrainQuestion(i, rec["question"], tuple(rec["answers"]), pos, hard))
    if not questions:
        raise InputError(f"no usable questions: all {len(records)} records lack positives", path)
    return TrainingSet(Path(path).stem, str(path), questions, skipped)


def check_positives_in_corpus(sets: list[TrainingSet], corpus_ids: set[str]) -> None:
    for s in sets:
        for q in s.questions:
            for key in q.positives:
                if not key.startswith("t:") and key not in corpus_ids:
                    raise InputError(f"question {q.idx} ({q.text[:50]!r}): positive passage {key!r} is not in the corpus", s.path)


def is_false_negative(store: PassageStore, q: TrainQuestion, key: str, filter_answers: bool) -> bool:
    """A positive of q (same key or same text) or, optionally, a passage containing q's answer."""
    if key in q.positives:
        return True
    tk = store.tkeys[key]
    if any(store.tkeys[p] == tk for p in q.positives):
        return True
    return filter_answers and bool(q.answers) and has_answer(store.texts[key][1], q.answers)


def filter_pool(store: PassageStore, q: TrainQuestion, scored, filter_answers: bool) -> list[tuple[str, float]]:
    """Keep (key, score) pairs that are not false negatives of q, first occurrence of each key."""
    seen, out = set(), []
    for key, score in scored:
        if key not in seen and not is_false_negative(store, q, key, filter_answers):
            out.append((key, float(score)))
        seen.add(key)
    return out


def pools_from_file_negatives(s: TrainingSet, store: PassageStore, filter_answers: bool) -> None:
    s.pools = [filter_pool(store, q, [(k, 0.0) for k in q.file_negatives], filter_answers) for q in s.questions]
    s.pool_source = "file"


def pools_from_bm25(s: TrainingSet, store: PassageStore, index_dir, corpus, depth: int, filter_answers: bool) -> None:
    from dpr_xrisk.retrieval.bm25 import bm25_search
    from dpr_xrisk.io.questions import Question
    from dpr_xrisk.retrieval.search import load_passage_texts

    qs = [Question(str(i), q.text, q.answers) for i, q in enumerate(s.questions)]
    run = bm25_search(index_dir, qs, k=depth, progress=False)
    wanted = {d for hits in run.values() for d, _ in hits}
    for key, (title, text) in load_passage_texts(corpus, wanted).items():
        store.add_text(key, title, text)
    s.pools = [filter_pool(store, q, run.get(str(i), []), filter_answers) for i, q in enumerate(s.questions)]
    s.pool_source = "bm25"


def pools_from_negatives_file(s: TrainingSet, store: PassageStore, path, corpus, filter_answers: bool) -> None:
    """JSONL lines ``{"question": <record index>, "negatives": ["id", ...] or [{"passage_id": ...}]}``
    (optionally ``"dataset": <training file stem>`` to address one of several files)."""
    from dpr_xrisk.io.common import json_lines
    from dpr_xrisk.retrieval.search import load_passage_texts

    by_idx = {q.idx: i for i, q in enumerate(s.questions)}
    raw: dict[int, list[str]] = {}
    for lineno, obj in json_lines(path):
        if obj.get("dataset", s.name) != s.name:
            continue
        if not isinstance(obj.get("question"), int) or not isinstance(obj.get("negatives"), list):
            raise InputError("expected {\"question\": <int>, \"negatives\": [...]}", path, lineno)
        raw[obj["question"]] = [(n["passage_id"], float(n.get("score", 0.0))) if isinstance(n, dict) else (str(n), 0.0)
                                for n in obj["negatives"]]
    wanted = {d for scored in raw.values() for d, _ in scored}
    found = load_passage_texts(corpus, wanted) if corpus else {}
    missing = wanted - found.keys() - store.texts.keys()
    if missing:
        raise InputError(f"negatives name {len(missing)} passage(s) not in the corpus, e.g. {sorted(missing)[0]!r}", path)
    for key, (title, text) in found.items():
        store.add_text(key, title, text)
    s.pools = [[] for _ in s.questions]
    for qidx, scored in raw.items():
        if qidx in by_idx:
            i = by_idx[qidx]
            s.pools[i] = filter_pool(store, s.questions[i], scored, filter_answers)
    s.pool_source = "negatives-file"

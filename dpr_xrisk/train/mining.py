"""Hard negatives mined from the model's own index (ANCE-style refresh, docs/method.md §3 and §5),
and how a step draws its negatives from the mined pools.

This module owns one mining pass and the pool sampler; it does not own when a refresh happens
or which encoder copy mines (``train/refresh.py``), nor the training loop.

One mining pass: encode the corpus with the current passage tower through the same fast path as
``dpr-xrisk encode`` (streamed to disk), build a FAISS index (exact ``Flat`` by default), take
the top-K passages of every training question, filter them, and return the new pools with their
retrieval scores. Filters, in order, each counted:

- ``positive``: a positive of the question, by id or by normalised text;
- ``answer``: a passage containing one of the question's answers (DPR's ``has_answer``, through
  :class:`dpr_xrisk.train.answer_index.AnswerIndex`: each passage tokenised once per run);
- ``rank``: the first ``skip_ranks`` ranks (often unlabelled positives);
- ``margin``: candidates scoring above ``(1 - margin) * s(positive)``.

The pools feed :func:`sample_negatives`, which draws h negatives either uniformly (q = h/L) or
from a softmax over retrieval scores at a temperature T (q_j = 1 - (1 - p_j)^h, the inclusion
probability of h draws with replacement; q_j = p_j for h = 1).
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dpr_xrisk.errors import InputError
from dpr_xrisk.train.answer_index import AnswerIndex

SAMPLERS = ("uniform", "softmax")
RULES = ("positive", "answer", "rank", "margin")


@dataclass
class RefreshResult:
    pools: list[list[list[tuple[str, float]]]]  # per set, per question: [(key, score)] in rank order
    stats: dict = field(default_factory=dict)
    texts: dict = field(default_factory=dict)  # key -> (title, text) of every pooled passage


def validate_refresh(encoder, corpus, k: int, factory: str) -> int:
    """Checks that must fail before training starts; returns the corpus size."""
    from dpr_xrisk.retrieval.index import make_index
    from dpr_xrisk.io.passages import count_passages

    if not corpus:
        raise InputError("index refresh needs a corpus (set corpus)")
    n = count_passages(corpus)
    if k < 1 or k > n:
        raise InputError(f"refresh_k = {k} must be between 1 and the corpus size ({n} passages)")
    make_index(encoder.dim, factory)  # a factory string FAISS rejects fails here, not after an hour
    return n


def with_passage_length(encoder, max_length: int):
    """A view of ``encoder`` that tokenises passages to ``max_length`` word pieces (``refresh_max_length``,
    ``mine --max-length``): the same towers, other settings."""
    import copy
    import dataclasses

    view = copy.copy(encoder)  # shares the towers and tokenizer; settings are the view's own
    view.settings = dataclasses.replace(encoder.settings, passage_max_length=max_length)  # a plain attribute
    return view


def partial_reencode(encoder, corpus, cache_root: Path, step: int, prev_step: int | None, cursor: int,
                     fraction: float, batch_size: int = 128, bf16: bool = False,
                     progress: bool = False, tokens=None) -> tuple[Path, int, dict]:
    """``--refresh-fraction``: re-encode only ``ceil(fraction * N)`` passages, the oldest first.

    The corpus embeddings live in versioned folders ``cache_root/step-S/emb`` (an ordinary
    embeddings folder, so the index is built from it as from ``dpr-xrisk encode``) next to
    ``age.npy``, the step at which each row was last encoded. A refresh at step S copies the
    version in use (``prev_step``), re-encodes the rows ``[cursor, cursor + m)`` (wrapping around:
    oldest first, as the rows were encoded in that order) with the current passage tower and
    writes version S. The first refresh (no ``prev_step``) encodes everything. Returns the new
    version's embeddings folder, the new cursor and the staleness statistics. ``tokens``: the
    corpus tokenised once (:class:`dpr_xrisk.retrieval.tokens.CorpusTokens`)."""
    import itertools
    import json
    import shutil

    from dpr_xrisk.retrieval.encode import CHUNK, encode_corpus, load_shards, release_free_memory, shard_name
    from dpr_xrisk.io.passages import read_passages

    new = cache_root / f"step-{step}"
    shutil.rmtree(new, ignore_errors=True)  # a version left by a run killed after this step
    prev = cache_root / f"step-{prev_step}" if prev_step is not None else None
    if prev is None or not (prev / "age.npy").exists():
        emb = new / "emb"
        encode_corpus(encoder, corpus, emb, batch_size=batch_size, bf16=bf16, progress=progress, desc="refresh: encode",
                      tokens=tokens)
        n = load_shards(emb)[0]["count"]
        np.save(new / "age.npy", np.full(n, step, dtype=np.int64))
        return emb, 0, {"reencoded": n, "stale_share": 0.0, "mean_staleness_steps": 0.0, "max_staleness_steps": 0}
    shutil.copytree(prev / "emb", new / "emb")
    meta_path = new / "emb" / shard_name("meta", 0, 1, "json")
    meta = json.loads(meta_path.read_text())
    n = meta["count"]
    m = min(n, math.ceil(fraction * n))
    rows = (cursor + np.arange(m)) % n  # the m oldest rows
    age = np.load(prev / "age.npy")
    vecs = np.lib.format.open_memmap(new / "emb" / shard_name("embeddings", 0, 1, "npy"), mode="r+")
    wanted = np.zeros(n, dtype=bool)
    wanted[rows] = True
    was_training = encoder.training
    encoder.eval()
    if tokens is not None:
        picked_rows = np.flatnonzero(wanted)  # corpus order, chunked as the text path below
        for a in range(0, m, CHUNK):
            idx = picked_rows[a : a + CHUNK]
            vecs[idx] = encoder.encode_passage_tokens(tokens.rows(idx), batch_size=batch_size,
                                                      bf16=bf16).astype(vecs.dtype)
            release_free_memory()
    else:
        picked = (r_p for r_p in enumerate(read_passages(corpus, check_duplicates=False)) if wanted[r_p[0]])
        while chunk := list(itertools.islice(picked, CHUNK)):
            idx = [r for r, _ in chunk]
            vecs[idx] = encoder.encode_passages([p.title for _, p in chunk], [p.text for _, p in chunk],
                                                batch_size=batch_size, bf16=bf16).astype(vecs.dtype)
            release_free_memory()
    encoder.train(was_training)
    vecs.flush()
    del vecs
    age[rows] = step
    np.save(new / "age.npy", age)
    meta["fingerprint"] = encoder.fingerprint()  # mixed versions; the index records the newest tower
    meta_path.write_text(json.dumps(meta))
    stale = step - age
    return new / "emb", int((cursor + m) % n), {
        "reencoded": int(m), "stale_share": round(float((stale > 0).mean()), 4),
        "mean_staleness_steps": round(float(stale.mean()), 3), "max_staleness_steps": int(stale.max())}


def prune_cache(cache_root: Path, keep: set[int]) -> None:
    """Delete cached embedding versions no checkpoint (and not the current one) refers to."""
    import shutil

    for d in cache_root.glob("step-*"):
        if int(d.name.split("-", 1)[1]) not in keep:
            shutil.rmtree(d, ignore_errors=True)


def _positive_score(vecs, row: int | None, qvec: np.ndarray, normalize: bool) -> float | None:
    """The question's score for its first positive, from the index's own vectors (the margin
    rule's reference); None where the positive is not in the corpus."""
    if row is None:
        return None
    pv = np.asarray(vecs[row], dtype=np.float32)  # (H,)
    if normalize:
        pv = pv / np.linalg.norm(pv)
    return float(pv @ qvec)


def refresh_pools(encoder, sets, store, corpus, *, k: int = 100, factory: str = "Flat", skip_ranks: int = 0,
                  margin: float | None = None, filter_answers: bool = True, batch_size: int = 128,
                  bf16: bool = False, work_dir: str | Path | None = None,
                  embeddings: Path | None = None, progress: bool = False, tokens=None,
                  only: list[list[int]] | None = None, answers: AnswerIndex | None = None) -> RefreshResult:
    """Mine new pools for every question of every training set with the current encoder
    (``embeddings``: an embeddings folder already up to date, e.g. from :func:`partial_reencode`;
    ``tokens``: the corpus tokenised once, :class:`dpr_xrisk.retrieval.tokens.CorpusTokens`).
    ``only``: per set, the question rows to mine (``refresh_questions = "upcoming"``); the others'
    entries in the returned pools are None (the caller keeps their old pools), and the statistics
    (recall, removals, pool size) cover the mined questions, counted in ``mined_questions``.
    ``answers``: the run's answer index (:meth:`AnswerIndex.of_sets`, made once and passed to every
    refresh, so a passage is tokenised once per run); None = one for this call."""
    from dpr_xrisk.retrieval.encode import encode_corpus, load_shards, shard_arrays
    from dpr_xrisk.retrieval.index import build_index, load_index
    from dpr_xrisk.retrieval.search import load_passage_texts
    from dpr_xrisk.train.data import text_key

    was_training = encoder.training
    encoder.eval()
    stats: dict = {"removed": dict.fromkeys(RULES, 0)}
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        t0 = time.perf_counter()
        emb = embeddings if embeddings is not None else Path(tmp) / "emb"
        if embeddings is None:
            encode_corpus(encoder, corpus, emb, batch_size=batch_size, bf16=bf16, progress=progress, desc="refresh: encode",
                          tokens=tokens)
        t1 = time.perf_counter()
        build_index(emb, Path(tmp) / "index", factory=factory)
        index, ids, meta = load_index(Path(tmp) / "index")
        vecs, _ = shard_arrays(load_shards(emb)[0])  # (n, H) memory-mapped, corpus order = ids
        row_of = {pid: r for r, pid in enumerate(ids)}
        t2 = time.perf_counter()
        picked = [sorted(set(o)) for o in only] if only is not None else [range(len(s.questions)) for s in sets]
        all_q = [s.questions[r] for s, rr in zip(sets, picked) for r in rr]
        if filter_answers and answers is None:
            answers = AnswerIndex(q.answers for q in all_q if q.answers)
        qv = encoder.encode_queries([q.text for q in all_q], batch_size=batch_size, bf16=bf16)  # (nq, H)
        if meta.get("normalize_queries"):
            qv /= np.linalg.norm(qv, axis=1, keepdims=True)
        scores, rows = index.search(qv, k)  # (nq, k)
        # the score of each question's first positive, for the margin rule
        pos_rows = [row_of.get(q.positives[0]) for q in all_q]
        t3 = time.perf_counter()
        wanted = {ids[r] for rr in rows for r in rr if r >= 0}
        texts = load_passage_texts(corpus, wanted)
        for key, (title, text) in texts.items():
            store.add_text(key, title, text)
        # each candidate's text key once per refresh, not once per (question, candidate) pair
        # (~100 pairs per question share a few thousand passages): the store's key where it holds
        # the corpus's text, else from the corpus's text (the store may hold a training file's
        # other text under the same passage id)
        tkey = {d: store.tkeys[d] if store.texts[d] == tt else text_key(*tt) for d, tt in texts.items()}
        recall = {1: 0, 10: 0, k: 0}
        pools, n = [], 0
        for s, rr in zip(sets, picked):
            set_pools: list = [None] * len(s.questions)
            for row in rr:
                q = s.questions[row]
                pos_tk = {store.tkeys[p] for p in q.positives}
                hits = [(ids[r], float(sc)) for r, sc in zip(rows[n], scores[n]) if r >= 0]
                first_pos = next((i for i, (d, _) in enumerate(hits) if d in q.positives), None)
                for cut in recall:
                    recall[cut] += first_pos is not None and first_pos < cut
                s_pos = _positive_score(vecs, pos_rows[n], qv[n], meta.get("normalize_queries")) if margin is not None else None
                set_pools[row] = _filtered(hits, q, pos_tk, tkey, texts, stats["removed"],
                                           answers=answers if filter_answers else None,
                                           skip_ranks=skip_ranks, s_pos=s_pos, margin=margin)
                n += 1
            pools.append(set_pools)
        t4 = time.perf_counter()
        del vecs, index
    encoder.train(was_training)
    sizes = [len(p) for sp in pools for p in sp if p is not None]
    stats.update({"mined_questions": n, "encode_s": round(t1 - t0, 3), "index_s": round(t2 - t1, 3), "search_s": round(t3 - t2, 3),
                  "filter_s": round(t4 - t3, 3), "seconds": round(t4 - t0, 3), "mean_pool_size": float(np.mean(sizes)) if sizes else 0.0,
                  "corpus_size": len(ids), **{f"train_recall@{c}": v / max(1, n) for c, v in recall.items()}})
    return RefreshResult(pools, stats, texts)


def _filtered(hits, q, pos_tk: set, tkey: dict, texts: dict, removed: dict, *, answers: AnswerIndex | None,
              skip_ranks: int, s_pos: float | None, margin: float | None) -> list[tuple[str, float]]:
    """A question's pool: its ranked ``hits`` less those a rule removes (the module docstring's
    rules, in order; each removal counted in ``removed``). ``answers``: the answer index (None:
    no answer filter); ``s_pos``: the score of its first positive, for the margin rule (None: no
    margin)."""
    pool = []
    answer_ids = answers.ids(q.answers) if answers is not None and q.answers else frozenset()
    for rank, (d, sc) in enumerate(hits):
        if d in q.positives or tkey[d] in pos_tk:
            removed["positive"] += 1
        elif answer_ids and answers.has_answer(d, texts[d][1], answer_ids):
            removed["answer"] += 1
        elif rank < skip_ranks:
            removed["rank"] += 1
        elif s_pos is not None and sc > (1 - margin) * s_pos:
            removed["margin"] += 1
        else:
            pool.append((d, sc))
    return pool


def pool_log_q(pool: list[tuple[str, float]], h: int, sampler: str = "uniform", temperature: float = 1.0) -> np.ndarray:
    """log q_h of EVERY member of a scored pool: its probability of being among the h negatives
    :func:`sample_negatives` draws (docs/method.md §3), whether or not this step drew it. Uniform without
    replacement: h/L (1 when L <= h); softmax over scores/T, h draws with replacement:
    1 - (1 - p_j)^h, computed as log(-expm1(h·log1p(-p_j))) so that small p_j keep their digits."""
    if h == 0 or not pool:
        return np.full(len(pool), -np.inf)
    if sampler == "uniform":
        return np.full(len(pool), 0.0 if len(pool) <= h else math.log(h / len(pool)))
    if sampler != "softmax":
        raise InputError(f"unknown sampler {sampler!r}; valid: {', '.join(SAMPLERS)}")
    p = _softmax(pool, temperature)
    return np.log(-np.expm1(h * np.log1p(-np.minimum(p, 1 - 1e-16))))


def _softmax(pool: list[tuple[str, float]], temperature: float) -> np.ndarray:
    logits = np.array([sc for _, sc in pool], dtype=np.float64) / temperature
    p = np.exp(logits - logits.max())
    return p / p.sum()


def sample_negatives(pool: list[tuple[str, float]], h: int, rng: np.random.Generator, sampler: str = "uniform",
                     temperature: float = 1.0) -> list[tuple[str, float]]:
    """h negatives from a scored pool with their log inclusion probabilities (docs/method.md §3, :func:`pool_log_q`)."""
    if h == 0 or not pool:
        return []
    log_q = pool_log_q(pool, h, sampler, temperature)
    if sampler == "uniform":
        if len(pool) <= h:
            return [(key, 0.0) for key, _ in pool]
        picks = rng.choice(len(pool), size=h, replace=False)
        return [(pool[int(j)][0], float(log_q[int(j)])) for j in picks]
    picks = sorted(set(rng.choice(len(pool), size=h, replace=True, p=_softmax(pool, temperature)).tolist()))
    return [(pool[j][0], float(log_q[j])) for j in picks]

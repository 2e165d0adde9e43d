"""What the server searches with: the query tower, FAISS index(es), passage store and BM25
searcher, loaded once, and one batch of validated queries -> ranked hits.

It reuses the functions behind ``dpr-xrisk search`` (:func:`~dpr_xrisk.retrieval.search.dense_search`,
:func:`~dpr_xrisk.retrieval.search.fuse`, :func:`~dpr_xrisk.retrieval.search.retrieval_records`, the
encoder loaded with the settings the index recorded), so a served answer is the one ``search``
writes for the same question, k, mode, fusion and weight. A batch of several requests is encoded
together and searched with one FAISS call at the deepest k any of them needs; each request then
keeps its own top k, which is its own search's top k for exact (``Flat``) indexes. Approximate
indexes (HNSW, IVF) search a little deeper for everyone in a batch, which can only add candidates.

It owns request validation shared by the REST and MCP fronts (:func:`make_query`, :class:`BadRequest`)
and knows nothing of HTTP.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from dpr_xrisk.errors import InputError

MODES = ("dense", "bm25", "hybrid")
BLAS_FROM = 4  # questions in a batch from which FAISS's exact scan multiplies matrices (docs/serving.md)


@dataclass(frozen=True)
class Limits:
    """What one request may ask for; every default is an option of ``dpr-xrisk serve``."""

    max_k: int = 100  # `search`'s default k; deeper lists are a batch job (`search`), not a request
    max_questions: int = 64  # one request is one job of the batcher; bigger ones starve the others
    max_body_bytes: int = 1 << 20  # 1 MiB holds 64 questions of any sane length


class BadRequest(Exception):
    """A request the server refuses: ``status`` (4xx) and a one-line ``message``."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.message, self.status = message.splitlines()[0] if message else "bad request", status


@dataclass(frozen=True)
class Query:
    """One validated search request: what a batch job carries."""

    questions: tuple[str, ...]
    answers: tuple[tuple[str, ...], ...] | None
    k: int
    mode: str = "dense"
    fusion: str = "rrf"
    alpha: float = 0.5


def make_query(questions, k: int = 10, mode: str = "dense", fusion: str = "rrf", alpha: float = 0.5,
               answers=None, limits: Limits = Limits(), has_bm25: bool = False) -> Query:
    """Check a request's values (types are the caller's schema's job) -> a :class:`Query`, or
    :class:`BadRequest` saying what is wrong. ``questions``: one string or a list; ``answers``:
    a list of strings for one question, a list of such lists for several."""
    import math

    from dpr_xrisk.retrieval.search import FUSIONS

    single = isinstance(questions, str)
    qs = [questions] if single else list(questions)
    if not qs:
        raise BadRequest("questions: give at least one question")
    if len(qs) > limits.max_questions:
        raise BadRequest(f"questions: {len(qs)} in one request, the limit is {limits.max_questions}")
    for i, q in enumerate(qs):
        if not isinstance(q, str) or not q.strip():
            raise BadRequest("questions: empty question" if single else f"questions[{i}]: empty question")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= limits.max_k:
        raise BadRequest(f"k: must be an integer from 1 to {limits.max_k}, got {k!r}")
    if mode not in MODES:
        raise BadRequest(f"mode: unknown mode {mode!r}; valid: {', '.join(MODES)}")
    if mode != "dense" and not has_bm25:
        raise BadRequest(f"mode: {mode} needs a BM25 index; this server was started without --bm25-index")
    if fusion not in FUSIONS:
        raise BadRequest(f"fusion: unknown fusion {fusion!r}; valid: {', '.join(FUSIONS)}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (math.isfinite(alpha) and alpha >= 0):
        raise BadRequest(f"alpha: must be a finite number >= 0, got {alpha!r}")
    ans = None
    if answers is not None:
        per = [answers] if single else list(answers)
        if len(per) != len(qs) or any(isinstance(a, str) or not all(isinstance(x, str) for x in a) for a in per):
            shape = "a list of strings" if single else f"one list of strings per question ({len(qs)})"
            raise BadRequest(f"answers: give {shape}")
        ans = tuple(tuple(a) for a in per)
    return Query(tuple(qs), ans, k, mode, fusion, float(alpha))


def answer_spans(text: str, answers: Sequence[str]) -> list[tuple[int, int]]:
    """Character spans of ``text`` where an answer matches under DPR's rule (the tokens of
    :mod:`dpr_xrisk.evaluation.answers`, lower-cased and NFD-normalised): what the search page
    highlights. Non-empty exactly when ``has_answer(text, answers)`` is true (tested)."""
    from dpr_xrisk.evaluation.answers import token_spans, tokenize  # the one definition of a DPR token

    found = token_spans(text)
    words = [w for _, _, w in found]
    spans = set()
    for answer in answers:
        ans = tokenize(answer)
        n = len(ans)
        if n == 0:
            continue  # matches "at position 0" in DPR: nothing to highlight
        for i in range(len(words) - n + 1):
            if words[i : i + n] == ans:
                spans.add((found[i][0], found[i + n - 1][1]))
    return sorted(spans)


class Retriever:
    """The loaded pieces (see :func:`load_retriever`) and :meth:`run_batch`, the batcher's work."""

    def __init__(self, encoder, tokenizer, settings, loaded, passages: dict, searcher=None, depth: int = 1000,
                 batch_size: int = 16, bf16: bool = False, threads: int | None = None, info: dict | None = None):
        self.encoder, self.tokenizer, self.settings = encoder, tokenizer, settings
        self.loaded, self.passages, self.searcher = loaded, passages, searcher
        self.depth, self.batch_size, self.bf16, self.threads = depth, batch_size, bf16, threads
        self.info = info or {}

    @property
    def has_bm25(self) -> bool:
        return self.searcher is not None

    @property
    def size(self) -> int:
        return sum(i.ntotal for i, _, _ in self.loaded)

    def document(self, doc_id: str) -> dict | None:
        got = self.passages.get(doc_id)
        return None if got is None else {"id": doc_id, "title": got[0], "text": got[1]}

    # ---- a batch --------------------------------------------------------------------------
    def run_batch(self, queries: Sequence[Query]) -> list:
        """Results of each query (a list of per-question results), or the exception that query
        alone raises: a failing batch is retried one query at a time, so one bad query never
        fails the others."""
        try:
            return self._run(queries)
        except Exception as e:  # noqa: BLE001
            if len(queries) == 1:
                return [_as_request_error(e)]
        out = []
        for q in queries:
            try:
                out.append(self._run([q])[0])
            except Exception as e:  # noqa: BLE001
                out.append(_as_request_error(e))
        return out

    def _run(self, queries: Sequence[Query]) -> list:
        from dpr_xrisk.io.questions import Question
        from dpr_xrisk.retrieval.search import dense_search, fuse, retrieval_records

        def own_depth(q: Query, kind: str) -> int:  # how deep `search` would go for this query
            if kind == "dense":
                return q.k if q.mode == "dense" else max(q.k, self.depth)
            return q.k if q.mode == "bm25" else self.depth

        asked = {kind: [(f"{j}:{i}", text, own_depth(q, kind)) for j, q in enumerate(queries)
                        if q.mode in ("hybrid", kind) for i, text in enumerate(q.questions)]
                 for kind in ("dense", "bm25")}
        dense, sparse = {}, {}
        if asked["dense"]:  # one encoder pass, one FAISS search at the deepest k of the batch
            index, ids, meta = self.loaded[0]
            with blas_from(len(asked["dense"]), index.d):
                dense = dense_search(self.encoder, index, ids, meta, [Question(qid, t) for qid, t, _ in asked["dense"]],
                                     k=max(d for _, _, d in asked["dense"]), batch_size=self.batch_size,
                                     bf16=self.bf16, progress=False, more=self.loaded[1:])
        if asked["bm25"]:
            sparse = self._bm25(asked["bm25"])
        depth_of = {kind: {qid: d for qid, _, d in asked[kind]} for kind in asked}
        out = []
        for j, q in enumerate(queries):
            results = []
            for i, text in enumerate(q.questions):
                qid = f"{j}:{i}"
                d = {qid: dense[qid][: depth_of["dense"][qid]]} if qid in depth_of["dense"] else {}
                s = {qid: sparse[qid][: depth_of["bm25"][qid]]} if qid in depth_of["bm25"] else {}
                run = d if q.mode == "dense" else s if q.mode == "bm25" else fuse(d, s, method=q.fusion, alpha=q.alpha, k=q.k)
                answers = q.answers[i] if q.answers is not None else ()
                record = retrieval_records(run, [Question(qid, text, answers)], self.passages)[qid]
                results.append(self._result(text, q, record, answers))
            out.append(results)
        return out

    def _bm25(self, asked) -> dict:
        """BM25 of ``asked`` (qid, text, depth) at the deepest depth, on the searcher opened once at
        start-up: :func:`~dpr_xrisk.retrieval.bm25.bm25_search`, ties and all."""
        from dpr_xrisk.io.questions import Question
        from dpr_xrisk.retrieval.bm25 import bm25_search

        return bm25_search(None, [Question(qid, text) for qid, text, _ in asked], k=max(d for _, _, d in asked),
                           threads=self.threads or 1, progress=False, searcher=self.searcher)

    def _result(self, text: str, q: Query, record: dict, answers) -> dict:
        hits = []
        for rank, ctx in enumerate(record["contexts"], start=1):
            title, body = self.passages[ctx["docid"]]
            hit = {"rank": rank, "id": ctx["docid"], "score": ctx["score"], "title": title, "text": body}
            if "has_answer" in ctx:
                hit["has_answer"] = ctx["has_answer"]
                hit["answer_spans"] = [list(s) for s in answer_spans(body, answers)] if ctx["has_answer"] else []
            hits.append(hit)
        out = {"question": text, "hits": hits}
        if q.mode != "bm25":  # the query tower reads at most query_max_length tokens; BM25 reads all
            tokens = len(self.tokenizer(self.settings.query_prefix + text, truncation=False, verbose=False)["input_ids"])
            out["tokens"] = tokens
            out["truncated"] = tokens > self.settings.query_max_length
            if out["truncated"]:
                out["note"] = (f"the question has {tokens} tokens; the query encoder read the first "
                               f"{self.settings.query_max_length}")
        return out

    @staticmethod
    def batchable(query: Query) -> bool:
        """Whether a query gains from sharing a batch: dense and hybrid ones (one encoder pass, one
        FAISS scan); BM25 alone does not (Lucene takes one question at a time: 540.7 q/s batched vs
        721.1 alone at 16 clients, docs/serving.md)."""
        return query.mode != "bm25"

    def on_worker_start(self) -> None:
        """Run on the thread that will run every batch: OpenMP's thread count is per thread, so
        ``faiss.omp_set_num_threads`` at load time leaves a new thread's FAISS on every core, not
        the ``--threads`` asked for (the in-process ceilings' count). torch's count is global."""
        if self.threads:
            import faiss

            faiss.omp_set_num_threads(self.threads)

    def batcher(self, max_batch: int = 64, max_wait_ms: float = 2.0):
        """The :class:`~dpr_xrisk.serve.batcher.Batcher` of this retriever (HTTP and MCP stdio alike):
        its batches run :meth:`run_batch` on a worker set up by :meth:`on_worker_start`."""
        from dpr_xrisk.serve.batcher import Batcher

        return Batcher(self.run_batch, max_batch=max_batch, max_wait_ms=max_wait_ms,
                       on_thread_start=self.on_worker_start, batchable=self.batchable)

    def status(self) -> dict:
        return {**self.info, "index": {**self.info.get("index", {}), "size": self.size}}


@contextmanager
def blas_from(questions: int, dim: int):
    """FAISS's exact scan (Flat indexes, IVF's coarse step) for a batch of ``questions``: as one
    matrix product (BLAS) from :data:`BLAS_FROM` questions, one pass per question below. FAISS
    1.15 multiplies only from ``distance_compute_blas_threshold`` / dim questions (334 at dim 384),
    and its per-question pass costs the same per question at any batch size: on 100k x 384
    passages, 1 thread, 9-10 ms a question at 1 to 128 questions, 2.3 ms at 16 multiplied, 6.4 at
    4, 8.9 at 3 either way (docs/serving.md). The product rounds differently (~1e-6), so a batched
    score may differ from ``search``'s in its last digits. Restored after: the setting is global."""
    import faiss

    before = faiss.cvar.distance_compute_blas_threshold
    if questions >= BLAS_FROM:
        faiss.cvar.distance_compute_blas_threshold = min(before, BLAS_FROM * dim)
    try:
        yield
    finally:
        faiss.cvar.distance_compute_blas_threshold = before


def _as_request_error(e: Exception) -> Exception:
    """Lucene refusing a question becomes a 422 for its request alone. Anything else is the
    server's problem (requests are validated before they are queued: an InputError here is about
    the loaded data) and stays an exception: a 500 whose details go to the log only."""
    if type(e).__name__ == "JavaException":
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return BadRequest(f"BM25 (Lucene) could not search the question (Lucene refuses queries of over 1,024 "
                          f"distinct terms): {first[:160]}")
    return e


def load_retriever(index: Sequence[str | Path], bm25_index=None, corpus=None, model: str | None = None,
                   device: str = "auto", backend: str = "torch", quantize: str = "none", bf16: bool | None = None,
                   threads: int | None = None, ef_search: int | None = None, nprobe: int | None = None,
                   depth: int = 1000, batch_size: int | None = None, allow_corpus_mismatch: bool = False) -> Retriever:
    """Load what ``dpr-xrisk search`` loads, the same way and with the same checks: the index
    folder(s), the query tower with the settings the index recorded (its fingerprint must match),
    the passage texts (the indexed corpus, by fingerprint) and, optionally, a BM25 index.
    ``threads``: torch, FAISS and Lucene threads (default: theirs); ``bf16`` None: auto, as
    ``search`` resolves it (:func:`dpr_xrisk.runtime.device.resolve_bf16`)."""
    import faiss
    import torch

    from dpr_xrisk.retrieval.inference import check_inference
    from dpr_xrisk.retrieval.index import load_indexes, set_search_params
    from dpr_xrisk.retrieval.search import corpus_for_json, load_passage_texts, load_query_encoder
    from dpr_xrisk.runtime.device import encode_batch_size, resolve_bf16, resolve_device

    t0 = time.perf_counter()
    dev = resolve_device(device)
    check_inference(backend, quantize, dev, bf16)
    bf16 = resolve_bf16(bf16, dev, backend, quantize)  # unset: auto, printed
    if threads:
        torch.set_num_threads(threads)
        faiss.omp_set_num_threads(threads)
    loaded = load_indexes(list(index))
    for faiss_index, _, _ in loaded:
        set_search_params(faiss_index, ef_search, nprobe)
    meta = loaded[0][2]
    texts_from = corpus_for_json(meta, corpus, allow_corpus_mismatch)
    encoder = load_query_encoder(meta, model, dev, backend, quantize, bf16)  # as `search` loads it
    passages = load_passage_texts(texts_from)
    missing = next((i for _, ids, _ in loaded for i in ids if i not in passages), None)
    if missing is not None:
        raise InputError(f"the index names passage {missing!r}, which is not in the corpus", texts_from)
    searcher = None
    if bm25_index is not None:
        from dpr_xrisk.retrieval.bm25 import check_same_corpus, open_searcher

        check_same_corpus(bm25_index, meta, [i for _, ids, _ in loaded for i in ids])  # as `search` checks it
        searcher = open_searcher(bm25_index)
    info = {
        "model": meta["model"], "fingerprint": meta["fingerprint"],
        "index": {"paths": [str(Path(i).resolve()) for i in index], "factory": meta.get("factory"),
                  "metric": meta.get("metric"), "dim": meta.get("dim"), "shards": len(loaded)},
        "corpus": {"path": str(Path(texts_from).resolve()), "fingerprint": meta.get("corpus_fingerprint"),
                   "passages": len(passages)},
        "bm25_index": str(Path(bm25_index).resolve()) if bm25_index is not None else None,
        "settings": {"encoder": asdict(encoder.settings), "device": str(dev), "backend": backend, "quantize": quantize,
                     "bf16": bf16, "threads": threads or torch.get_num_threads(), "depth": depth,
                     "ef_search": ef_search, "nprobe": nprobe},
        "load_seconds": round(time.perf_counter() - t0, 2),
    }
    return Retriever(encoder, encoder.tokenizer, encoder.settings, loaded, passages, searcher, depth=depth,
                     batch_size=batch_size or encode_batch_size(dev, bf16), bf16=bf16, threads=threads, info=info)


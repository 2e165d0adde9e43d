"""Dense search over a FAISS index folder, hybrid dense+BM25 fusion, and DPR retrieval records.

Runs are ``{qid: [(docid, score), ...]}`` in rank order (see :mod:`dpr_xrisk.io.trec`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from dpr_xrisk.evaluation.answers import has_answer
from dpr_xrisk.errors import InputError, unknown_name

FUSIONS = ("rrf", "interpolation")
RRF_K = 60  # Cormack et al. (2009); the constant pyserini and most papers use


def check_compatible(encoder, meta: dict) -> None:
    """An index is only searched with the encoder that built it."""
    if encoder.dim != meta["dim"]:
        raise InputError(f"index dimension {meta['dim']} does not match the encoder's {encoder.dim}")
    if encoder.fingerprint() != meta["fingerprint"]:
        raise InputError(f"index was built with another model ({meta.get('model')!r}, fingerprint {meta['fingerprint']}); "
                         f"this encoder's fingerprint is {encoder.fingerprint()}")


def load_query_encoder(meta: dict, model=None, device=None, backend: str = "torch", quantize: str = "none",
                       bf16: bool = False, allow_backend_mismatch: bool = False):
    """The encoder to search an index with, from the index's ``meta.json``: ``model`` (default: the
    one the index records) loaded with the encoder settings the index recorded (pooling,
    normalisation, lengths, prefixes), moved to ``device`` (default: the CPU), run by ``backend`` /
    ``quantize`` / ``bf16`` (see ``dpr-xrisk search``), and checked against the index's dimension
    and fingerprint. Queries must be encoded as the passages were (an int8 index was built from
    another backend's vectors than fp32): another mode is refused unless ``allow_backend_mismatch``.
    What ``search``, ``ask`` and ``serve`` all load."""
    import torch

    from dpr_xrisk.retrieval.inference import inference_encoder
    from dpr_xrisk.retrieval.encoder import DualEncoder
    from dpr_xrisk.runtime.onnx_backend import vector_mode

    device = torch.device("cpu") if device is None else device
    indexed_b, indexed_q = meta.get("backend", "torch"), meta.get("quantize", "none")
    if vector_mode(indexed_b, indexed_q) != vector_mode(backend, quantize) and not allow_backend_mismatch:
        raise InputError(f"the index was encoded with --backend {indexed_b} --quantize {indexed_q}, the queries would be "
                         f"--backend {backend} --quantize {quantize}; give those of the index, or --allow-backend-mismatch")
    recorded = {k: v for k, v in meta.get("settings", {}).items() if k not in ("base_model", "shared")}
    name = model or meta["model"]
    encoder = inference_encoder(DualEncoder.load(name, **recorded).to(device), backend, quantize, device, bf16, name)
    check_compatible(encoder, meta)
    return encoder


def corpus_for_json(meta: dict, corpus=None, allow_mismatch: bool = False) -> Path:
    """The passage texts behind an index's ids: ``corpus`` if given (it must be the indexed one:
    its fingerprint is in the index), else the corpus path the index records. Checked before any
    search runs, so a wrong corpus never costs a search nor scores has_answer against other texts."""
    from dpr_xrisk.retrieval.encode import corpus_fingerprint, same_corpus

    if corpus is None:
        corpus = Path(meta["corpus"])
        if not corpus.exists():
            raise InputError(f"the corpus recorded in the index ({corpus}) is not there; give --corpus")
    elif not Path(corpus).exists():
        raise InputError("file not found", corpus)
    if not same_corpus(meta.get("corpus_fingerprint"), corpus_fingerprint(corpus)) and not allow_mismatch:
        raise InputError("is not the corpus this index was encoded from (fingerprints differ); "
                         "--allow-corpus-mismatch to use it anyway", corpus)
    return Path(corpus)


def open_indexes(paths: Sequence, ef_search: int | None = None, nprobe: int | None = None,
                 faiss_gpu: bool = False) -> list:
    """The (index, ids, meta) triples of the index folders ``paths`` (per-shard indexes searched
    together), each with its search parameters set (HNSW efSearch, IVF nprobe) and, with
    ``faiss_gpu``, moved to the GPU -- whose faiss is checked before anything loads."""
    from dpr_xrisk.retrieval.index import load_indexes, set_search_params

    if faiss_gpu:
        from dpr_xrisk.retrieval.index import check_faiss_gpu, index_to_gpu

        check_faiss_gpu()  # before anything loads
    loaded = load_indexes(paths)
    for faiss_index, _, _ in loaded:
        set_search_params(faiss_index, ef_search, nprobe)
    if faiss_gpu:
        loaded = [(index_to_gpu(i), ids_, m) for i, ids_, m in loaded]
    return loaded


def dense_search(encoder, index, ids: Sequence[str], meta: dict, questions, k: int = 100,
                 batch_size: int = 128, bf16: bool = False, progress: bool = True, more=()) -> dict:
    """Encode questions and take the top ``k`` passages of each from the index (and from the
    ``more`` indexes -- (index, ids, meta) triples of other shards -- merged by score)."""
    import faiss
    from tqdm import tqdm

    from dpr_xrisk.retrieval.index import search_many

    if k < 1:
        raise InputError("k must be >= 1")
    loaded = [(index, ids, meta), *more]
    k = min(k, sum(i.ntotal for i, _, _ in loaded))
    bar = tqdm(total=len(questions), unit="q", desc="search", disable=not progress)
    run = {}
    for lo in range(0, len(questions), 4096):
        chunk = questions[lo : lo + 4096]
        q = encoder.encode_queries([x.text for x in chunk], batch_size=batch_size, bf16=bf16)  # (n, H)
        if meta.get("normalize_queries"):
            faiss.normalize_L2(q)
        scores, found = search_many(loaded, q, k)  # (n, k), (n, k) passage ids
        for qi, question in enumerate(chunk):
            run[question.qid] = [(d, float(s)) for d, s in zip(found[qi], scores[qi]) if d]
        bar.update(len(chunk))
    bar.close()
    return run


def fuse(dense: Mapping[str, Sequence[tuple[str, float]]], sparse: Mapping[str, Sequence[tuple[str, float]]],
         method: str = "rrf", alpha: float = 0.5, k: int = 100, normalize: bool = True) -> dict:
    """Hybrid fusion of two runs, per question.

    ``rrf``: score = sum over runs of 1 / (60 + rank).
    ``interpolation`` (pyserini's hybrid): score = dense + alpha * sparse, a document missing
    from one list taking that list's minimum score; with ``normalize`` each list is first
    min-max centred as pyserini does, ``(s - (min + max) / 2) / (max - min)``.
    Ties: equal fused scores (common under RRF: ranks 1 and 2 score as ranks 2 and 1) are ordered
    by passage id descending -- trec_eval's rule, and so the order in which ``evaluate`` (like
    pytrec_eval) re-ranks the fused run from its scores: the file order DPR accuracy reads and the
    ranking recall/MRR/nDCG compute are one. Any other tie rule in the file would be undone by
    trec_eval. The input lists are deterministic too (FAISS and BM25 order ties the same way).
    """
    if method not in FUSIONS:
        raise unknown_name("fusion", method, FUSIONS)
    out = {}
    for qid in dict.fromkeys([*dense, *sparse]):  # the questions in input order (a set's order varies by process)
        d, s = dict(dense.get(qid, ())), dict(sparse.get(qid, ()))
        if method == "rrf":
            scores: dict[str, float] = {}
            for hits in (dense.get(qid, ()), sparse.get(qid, ())):
                for rank, (doc, _) in enumerate(hits, start=1):
                    scores[doc] = scores.get(doc, 0.0) + 1.0 / (RRF_K + rank)
        else:
            if normalize:
                d, s = _centre(d), _centre(s)
            dmin = min(d.values(), default=0.0)
            smin = min(s.values(), default=0.0)
            scores = {doc: d.get(doc, dmin) + alpha * s.get(doc, smin) for doc in d.keys() | s.keys()}
        # ties by docid descending, as trec_eval (and dpr_xrisk.evaluation.metrics) rank: the file order that
        # DPR accuracy reads is then the ranking the qrels metrics recompute from the scores
        ranked = sorted(scores.items(), key=lambda x: (x[1], x[0]), reverse=True)[:k]
        out[qid] = ranked
    return out


# the interpolation weights `tune-fusion` tries by default: BM25 from a tenth of the dense weight
# to five times it (scores min-max centred first, so 1.0 weighs the two lists equally)
ALPHA_GRID = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0)


def per_question_metrics(run, qids: Sequence[str], qrels=None, questions=None, passages=None,
                         ks: Sequence[int] = (1, 5, 20), qrels_ks: Sequence[int] = (10,),
                         answer_cache: dict | None = None) -> dict[str, dict[str, float]]:
    """metric -> qid -> value over the labelled questions ``qids``: DPR top-k answer flags (0/1,
    from ``questions`` with answers and ``passages``: docid -> (title, text)) and, with ``qrels``,
    recall/MRR/nDCG@k by the judgements. A question absent from the run scores 0 (trec_eval -c).
    ``answer_cache``: :func:`~dpr_xrisk.evaluation.evaluate.answer_hits`' cache, shared between calls over
    one corpus, so each (answers, passage) pair is matched once."""
    from dpr_xrisk.evaluation.evaluate import answer_hits
    from dpr_xrisk.evaluation.metrics import dpr_first_hit_ranks, per_query

    out: dict[str, dict[str, float]] = {}
    if questions is not None:
        wanted = set(qids)
        # the flags below the deepest cut-off change nothing
        hits = answer_hits(run, None, [q for q in questions if q.qid in wanted], passages, depth=max(ks),
                           cache=answer_cache)
        first = dpr_first_hit_ranks(hits)  # 1-based, None if no hit
        for k in ks:
            out[f"top{k}"] = {q: float(first.get(q) is not None and first[q] <= k) for q in qids}
    if qrels is not None:
        scored = {q: dict(run.get(q, ())) for q in qids}
        judged = {q: qrels[q] for q in qids}
        for metric in ("mrr", "recall", "ndcg"):
            for k in qrels_ks:
                vals = per_query(judged, scored, metric, k)
                out[f"{metric}@{k}"] = {q: vals.get(q, 0.0) for q in qids}
    return out


def tune_alpha(dense, sparse, score, metric: str, grid: Sequence[float] = ALPHA_GRID, k: int = 100) -> dict:
    """Fuse ``dense`` and ``sparse`` by RRF and by interpolation at every alpha of ``grid``, score
    each with ``score(run) -> {metric: {qid: value}}`` (e.g. :func:`per_question_metrics`) and
    pick the interpolation weight with the highest mean ``metric`` (ties: the alpha nearest 1.0,
    equal weights). Returns ``{"metric", "best_alpha", "rows": [{"fusion", "alpha", "means",
    "per_question"}]}``; RRF is scored beside the grid, never chosen."""
    bad = [a for a in grid if not (a >= 0.0 and np.isfinite(a))]
    if bad or not grid:
        raise InputError(f"--alpha values must be finite and >= 0, got {bad[0] if bad else 'none'}")
    rows = []
    for fusion, alpha in [("rrf", None)] + [("interpolation", float(a)) for a in sorted(set(grid))]:
        pq = score(fuse(dense, sparse, method=fusion, alpha=alpha or 0.0, k=k))
        if metric not in pq:
            raise unknown_name("metric", metric, tuple(pq))
        rows.append({"fusion": fusion, "alpha": alpha, "per_question": pq,
                     "means": {m: sum(v.values()) / len(v) for m, v in pq.items()}})
    return {"metric": metric, "best_alpha": best_alpha(rows, metric), "rows": rows}


def best_alpha(rows: Sequence[dict], metric: str, qids: Sequence[str] | None = None) -> float:
    """The interpolation weight of ``rows`` (as :func:`tune_alpha` returns them) with the highest
    mean ``metric`` over ``qids`` (default: every scored question); ties go to the alpha nearest
    1.0. With ``qids`` a subset, this is the choice a held-out fold gets (cross-validation)."""
    def mean(r):
        v = r["per_question"][metric]
        return sum(v[q] for q in qids) / len(qids) if qids is not None else sum(v.values()) / len(v)

    interp = [r for r in rows if r["fusion"] == "interpolation"]
    best = max(interp, key=lambda r: (mean(r), -abs(math.log(r["alpha"])) if r["alpha"] > 0 else -math.inf))
    return best["alpha"]


def _centre(scores: dict) -> dict:
    if not scores:
        return scores
    lo, hi = min(scores.values()), max(scores.values())
    span = hi - lo
    return {d: ((v - (lo + hi) / 2) / span if span > 0 else 0.0) for d, v in scores.items()}


def retrieval_records(run, questions, passages: Mapping[str, tuple[str, str]], regex: bool = False) -> dict:
    """DPR retrieval JSON records with ``has_answer`` filled from the questions' answers.

    ``passages`` maps docid -> (title, text); ``text`` is written as ``title\\ntext`` (pyserini)
    and ``has_answer`` is computed on the passage text, as DPR does.
    """
    out = {}
    for q in questions:
        contexts = []
        for docid, score in run.get(q.qid, ()):
            if docid not in passages:
                raise InputError(f"run names passage {docid!r}, which is not in the corpus")
            title, text = passages[docid]
            ctx = {"docid": docid, "score": score, "text": f"{title}\n{text}"}
            if q.answers:
                ctx["has_answer"] = has_answer(text, q.answers, regex=regex)
            contexts.append(ctx)
        out[q.qid] = {"question": q.text, "answers": list(q.answers), "contexts": contexts}
    return out


def load_passage_texts(corpus, wanted: set[str] | None = None) -> dict[str, tuple[str, str]]:
    """docid -> (title, text), keeping only ``wanted`` ids (streams the corpus once)."""
    from dpr_xrisk.io.passages import read_passages

    out = {}
    for p in read_passages(corpus, check_duplicates=False):
        if wanted is None or p.id in wanted:
            out[p.id] = (p.title, p.text)
    return out


def topk_matrix_search(q: np.ndarray, p: np.ndarray, k: int):
    """Exact top-k by brute force (numpy), for tests and recall-vs-exact measurements."""
    scores = q @ p.T  # (nq, np)
    k = min(k, p.shape[0])
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.take_along_axis(scores, part, 1).argsort(axis=1)[:, ::-1]
    rows = np.take_along_axis(part, order, 1)
    return np.take_along_axis(scores, rows, 1), rows


def run_meta(tag: str, questions, queries_path, **made_from) -> dict:
    """What made a run (written beside it as ``<run>.meta.json``): the tag, the questions (path,
    count, :func:`~dpr_xrisk.io.questions.questions_fingerprint`) and ``made_from`` (index, model,
    corpus fingerprint, settings). ``evaluate`` compares it with --answers/--qrels/--corpus."""
    from dpr_xrisk.io.questions import questions_fingerprint

    return {"tag": tag, "questions": {"path": str(Path(queries_path).resolve()), "count": len(questions),
                                      "fingerprint": questions_fingerprint(questions)}, **made_from}


def check_run_outputs(out_run, out_json) -> None:
    """At least one run output, each a path a file can be written to (checked before any work)."""
    from dpr_xrisk.io.common import check_output

    if out_run is None and out_json is None:
        raise InputError("give --out-run and/or --out-json")
    for p in (out_run, out_json):
        if p is not None:
            check_output(p)
    if out_run is not None and out_json is not None and Path(out_run).absolute() == Path(out_json).absolute():
        raise InputError("--out-run and --out-json are the same file", out_run)


def write_run_outputs(run, questions, corpus, out_run, out_json, tag: str, meta: dict | None = None) -> list[Path]:
    """Write the run as a TREC run and/or a DPR retrieval JSON (which needs the passage texts of
    ``corpus``), each with ``meta`` beside it as ``<path>.meta.json``. Every path is checked and
    every record built before anything is written, and all files are staged and moved in together:
    a failure leaves no output behind. Returns the run paths written."""
    from dpr_xrisk.io.common import staged_files
    from dpr_xrisk.io.retrieval_json import write_retrieval_json
    from dpr_xrisk.io.trec import write_run

    check_run_outputs(out_run, out_json)
    outs = [p for p in (out_run, out_json) if p is not None]
    records = None
    if out_json is not None:
        wanted = {d for hits in run.values() for d, _ in hits}
        try:
            records = retrieval_records(run, questions, load_passage_texts(corpus, wanted))
        except InputError as e:
            raise InputError(e.message, e.path or corpus, e.line) from None
    from dpr_xrisk.io.common import write_json
    from dpr_xrisk.retrieval.encode import file_fingerprint

    files = outs + ([Path(f"{p}.meta.json") for p in outs] if meta is not None else [])
    with staged_files(files) as tmps:
        for p, tmp in zip(outs, tmps):
            if out_run is not None and p == out_run:
                write_run(tmp, run, tag=tag)
            else:
                write_retrieval_json(tmp, records)
        for p, tmp, meta_tmp in zip(outs, tmps, tmps[len(outs):]):
            # the run it describes, so that a meta left beside a run replaced by another tool is not believed
            write_json(meta_tmp, {**meta, "run_fingerprint": file_fingerprint(tmp)})
    return [Path(p) for p in outs]

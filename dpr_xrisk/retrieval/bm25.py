"""BM25 through pyserini/Lucene: index a corpus, search questions, return runs.

Documents are indexed as pyserini's JsonCollection with ``contents`` = title + newline + text
(the layout of pyserini's ``wikipedia-dpr`` index). k1 = 0.9, b = 0.4 are the DPR/pyserini
defaults.

Ties: Lucene orders equal scores by its internal document number, which depends on how the
index was built (threads), so :func:`bm25_search` orders each list by score descending, then
passage id descending (trec_eval's order), fetching past the k-th hit while it ties, so the
same index and questions give the same run on every machine.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from dpr_xrisk.errors import InputError
from dpr_xrisk.io.common import atomic_dir
from dpr_xrisk.io.passages import read_passages, write_jsonl_collection

K1, B = 0.9, 0.4


def build_bm25_index(corpus, out_dir, threads: int = 2, overwrite: bool = False, store_raw: bool = False) -> Path:
    """A Lucene BM25 index of ``corpus`` (contents = title + newline + text). ``store_raw`` keeps each
    document's JSON in the index, for pyserini's ``searcher.doc(id).raw()``; dpr-xrisk never reads
    it (texts come from the corpus) and Lucene loads it with every hit: without it a 1,000-deep
    search takes 22.6 instead of 46.7 ms a question on wikipedia-100k, the same hits (docs/serving.md)."""
    from dpr_xrisk._pyserini import start_jvm

    from dpr_xrisk.io.common import check_apart

    check_apart(corpus, out_dir, "corpus")
    start_jvm()
    import jnius

    n = 0
    with atomic_dir(out_dir, overwrite=overwrite) as tmp, tempfile.TemporaryDirectory() as coll:
        n = write_jsonl_collection(Path(coll) / "docs.jsonl", read_passages(corpus))
        if n == 0:
            raise InputError("corpus has no passages", corpus)
        lucene_dir = tmp / "lucene"
        jnius.autoclass("io.anserini.index.IndexCollection").main([
            "-collection", "JsonCollection", "-input", coll, "-index", str(lucene_dir),
            "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads), "-quiet",
            *(["-storeRaw"] if store_raw else [])])
        from dpr_xrisk.retrieval.encode import corpus_fingerprint

        (tmp / "meta.json").write_text(json.dumps({"kind": "bm25", "corpus": str(Path(corpus).resolve()), "count": n,
                                                   "corpus_fingerprint": corpus_fingerprint(corpus), "store_raw": store_raw,
                                                   "collection": "JsonCollection(contents=title\\ntext)"}, indent=2) + "\n")
    return Path(out_dir)


def open_searcher(index_dir, k1: float = K1, b: float = B):
    """A pyserini ``LuceneSearcher`` over a ``bm25 index`` folder, scoring with BM25 ``k1``, ``b``:
    open it once and give it to :func:`bm25_search` as ``searcher`` to search it many times (a
    server, a question loop) without reopening the index."""
    from dpr_xrisk._pyserini import start_jvm

    start_jvm()
    from pyserini.search.lucene import LuceneSearcher

    lucene_dir = Path(index_dir) / "lucene"
    if not lucene_dir.is_dir():
        raise InputError("not a BM25 index folder (no lucene/; build it with `dpr-xrisk bm25 index`)", index_dir)
    searcher = LuceneSearcher(str(lucene_dir))
    searcher.set_bm25(k1, b)
    return searcher


def bm25_search(index_dir, questions, k: int = 100, k1: float = K1, b: float = B, threads: int = 2,
                batch: int = 1024, progress: bool = True, searcher=None) -> dict:
    """Top-k BM25 run ``{qid: [(docid, score)]}`` for ``questions``, ties by passage id descending.

    ``searcher``: an open :func:`open_searcher` to search instead of opening ``index_dir`` (then
    ``index_dir``, ``k1`` and ``b`` are not read). ``threads``: Lucene's threads for a batch of
    questions; with one thread each question is searched alone, which costs less than
    ``batch_search``'s thread pool (the hits are the same either way)."""
    from tqdm import tqdm

    if k < 1:
        raise InputError(f"k must be >= 1, got {k}")
    if searcher is None:
        searcher = open_searcher(index_dir, k1, b)
    run = {}
    for lo in tqdm(range(0, len(questions), batch), desc="bm25", unit="batch", disable=not progress):
        chunk = questions[lo : lo + batch]
        if threads > 1 and len(chunk) > 1:
            hits = searcher.batch_search([q.text for q in chunk], [q.qid for q in chunk], k=k + 1, threads=threads)
        else:
            hits = {q.qid: searcher.search(q.text, k=k + 1) for q in chunk}
        for q in chunk:
            found = [(h.docid, float(h.score)) for h in hits.get(q.qid, [])]
            depth = k + 1
            while len(found) == depth and found[k][1] == found[k - 1][1]:  # a tie across the cut: fetch it all
                depth *= 2
                found = [(h.docid, float(h.score)) for h in searcher.search(q.text, k=depth)]
            run[q.qid] = ranked(found)[:k]
    return run


def ranked(hits) -> list[tuple[str, float]]:
    """``(docid, score)`` pairs by score descending, ties by docid descending: trec_eval's order,
    the one tie rule of every ranked list dpr_xrisk writes."""
    return sorted(hits, key=lambda h: (h[1], h[0]), reverse=True)


def bm25_meta(index_dir) -> dict:
    """The ``meta.json`` of a ``bm25 index`` folder (a located error if it is not one)."""
    from dpr_xrisk.io.common import load_json

    m = Path(index_dir) / "meta.json"
    meta = load_json(m) if m.is_file() else None
    if not isinstance(meta, dict) or meta.get("kind") != "bm25" or not (Path(index_dir) / "lucene").is_dir():
        raise InputError("not a BM25 index folder (build it with `dpr-xrisk bm25 index`)", index_dir)
    return meta


def check_same_corpus(index_dir, dense_meta: dict, dense_ids=None, sparse_run=None) -> None:
    """A BM25 index fused with a dense index must hold the same corpus: compared by corpus
    fingerprint when both record one, else by passage count, and (``sparse_run``) every passage
    id BM25 returns must be in the dense index's ``dense_ids``."""
    from dpr_xrisk.retrieval.encode import same_corpus

    meta = bm25_meta(index_dir)
    a, b = meta.get("corpus_fingerprint"), dense_meta.get("corpus_fingerprint")
    if a and b and not same_corpus(a, b):
        raise InputError(f"holds another corpus ({meta.get('corpus')}) than the dense index "
                         f"({dense_meta.get('corpus')}): fuse indexes of one corpus", index_dir)
    if dense_ids is not None and meta.get("count") is not None and meta["count"] != len(dense_ids) \
            and dense_meta.get("num_shards", 1) == dense_meta.get("of_shards", 1):
        raise InputError(f"holds {meta['count']} passages, the dense index {len(dense_ids)}: "
                         "fuse indexes of one corpus", index_dir)
    if sparse_run is not None and dense_ids is not None:
        known = dense_ids if isinstance(dense_ids, (set, frozenset)) else set(dense_ids)
        foreign = sorted({d for hits in sparse_run.values() for d, _ in hits} - known)
        if foreign:
            raise InputError(f"returns passage id(s) the dense index lacks, e.g. {foreign[0]!r}: "
                             "fuse indexes of one corpus", index_dir)

"""BM25 through pyserini/Lucene: index a corpus, search questions, return runs.

Documents are indexed as pyserini's JsonCollection with ``contents`` = title + newline + text
(the layout of pyserini's ``wikipedia-dpr`` index). k1 = 0.9, b = 0.4 are the DPR/pyserini
defaults.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from dpr_xrisk.errors import InputError
from dpr_xrisk.io.common import atomic_dir
from dpr_xrisk.io.passages import read_passages, write_jsonl_collection

K1, B = 0.9, 0.4


def build_bm25_index(corpus, out_dir, threads: int = 2, overwrite: bool = False) -> Path:
    from dpr_xrisk._pyserini import start_jvm

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
            "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads), "-storeRaw", "-quiet"])
        (tmp / "meta.json").write_text(json.dumps({"kind": "bm25", "corpus": str(Path(corpus).resolve()), "count": n,
                                                   "collection": "JsonCollection(contents=title\\ntext)"}, indent=2) + "\n")
    return Path(out_dir)


def bm25_search(index_dir, questions, k: int = 100, k1: float = K1, b: float = B, threads: int = 2,
                batch: int = 1024, progress: bool = True) -> dict:
    """Top-k BM25 run ``{qid: [(docid, score)]}`` for ``questions``."""
    from tqdm import tqdm

    from dpr_xrisk._pyserini import start_jvm

    start_jvm()
    from pyserini.search.lucene import LuceneSearcher

    lucene_dir = Path(index_dir) / "lucene"
    if not lucene_dir.is_dir():
        raise InputError("not a BM25 index folder (no lucene/; build it with `dpr-xrisk bm25 index`)", index_dir)
    searcher = LuceneSearcher(str(lucene_dir))
    searcher.set_bm25(k1, b)
    run = {}
    for lo in tqdm(range(0, len(questions), batch), desc="bm25", unit="batch", disable=not progress):
        chunk = questions[lo : lo + batch]
        hits = searcher.batch_search([q.text for q in chunk], [q.qid for q in chunk], k=k, threads=threads)
        for q in chunk:
            run[q.qid] = [(h.docid, float(h.score)) for h in hits.get(q.qid, [])]
    return run

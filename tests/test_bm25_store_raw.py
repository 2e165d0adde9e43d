"""`bm25 index` stores no raw JSON unless asked (Lucene loads it with every hit, halving deep-search
speed); the hits are the same either way."""

import json

from conftest import SAMPLE, cli


def test_store_raw_changes_nothing_but_the_stored_json(tmp_path):
    from dpr_xrisk.io.questions import read_questions
    from dpr_xrisk.retrieval.bm25 import bm25_search, open_searcher

    cli("bm25", "index", "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / "plain")
    cli("bm25", "index", "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / "raw", "--store-raw")
    assert json.loads((tmp_path / "plain" / "meta.json").read_text())["store_raw"] is False
    assert json.loads((tmp_path / "raw" / "meta.json").read_text())["store_raw"] is True
    questions = read_questions(SAMPLE / "test.qa.tsv")
    plain, raw = (open_searcher(tmp_path / name) for name in ("plain", "raw"))
    assert bm25_search(None, questions, k=50, threads=1, progress=False, searcher=plain) == \
        bm25_search(None, questions, k=50, threads=1, progress=False, searcher=raw)
    some = bm25_search(None, questions[:1], k=1, threads=1, progress=False, searcher=raw)
    docid = next(iter(some.values()))[0][0]
    assert raw.doc(docid).raw() is not None and plain.doc(docid).raw() is None

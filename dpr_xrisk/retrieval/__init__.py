"""The retrieval pipeline: the encoder towers, corpus encoding, FAISS indexes, dense/BM25/hybrid search, export.

One tie rule for every ranked list this package writes: score descending, then passage id
descending -- trec_eval's order, in which ``evaluate`` (like pytrec_eval) re-ranks a run from its
scores, so the file order that DPR top-k accuracy reads and the ranking recall/MRR/nDCG compute
are one. FAISS results (:func:`~dpr_xrisk.retrieval.index.search_many`, searched past the k-th
hit while it ties), BM25 (:func:`~dpr_xrisk.retrieval.bm25.bm25_search`, Lucene's own tie order
depends on how the index was built) and fusion (:func:`~dpr_xrisk.retrieval.search.fuse`: equal
RRF scores are common) all follow it: the same inputs give the same run on every machine.
"""

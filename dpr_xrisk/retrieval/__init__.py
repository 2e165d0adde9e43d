"""The retrieval pipeline: the encoder towers, corpus encoding, FAISS indexes, dense/BM25/hybrid search, export."""

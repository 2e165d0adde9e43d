"""dpr_xrisk: dense passage retrieval with X-risk losses.

The package is split by stage (Tevatron-style): ``io`` (formats), ``answers``/``metrics``
(evaluation), ``encoder`` (the dual encoder), ``encode``/``index``/``search`` (the dense
pipeline), ``bm25`` (pyserini), ``losses`` (training objectives) and ``cli`` (the Typer app).
Heavy libraries (torch, faiss, transformers) are imported inside functions so that
``dpr-xrisk --help`` stays instant.
"""

__version__ = "0.1.0"

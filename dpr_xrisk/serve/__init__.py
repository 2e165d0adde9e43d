"""Serving a retriever: ``dpr-xrisk serve`` (REST + MCP + a search page) over the retrieval package.

- :mod:`~dpr_xrisk.serve.engine` loads what ``search`` loads and runs a batch of queries with the
  same functions (its answers equal ``search``'s); it also validates requests;
- :mod:`~dpr_xrisk.serve.batcher` gathers concurrent requests into batches on one worker thread;
- :mod:`~dpr_xrisk.serve.app` is the HTTP front (FastAPI), :mod:`~dpr_xrisk.serve.mcp` the MCP
  tools, :mod:`~dpr_xrisk.serve.page` the search page.

It owns no retrieval logic: ranking, fusion and answer matching stay in
:mod:`dpr_xrisk.retrieval` and :mod:`dpr_xrisk.evaluation`. See docs/serving.md.
"""

"""The MCP front: ``search`` and ``get_document`` as tools of a FastMCP server, over the same
:class:`~dpr_xrisk.serve.engine.Retriever` and batcher as the HTTP routes (answers equal
``POST /search``'s). Served over streamable HTTP under ``/mcp/`` by ``dpr-xrisk serve``, or over
stdio by ``dpr-xrisk serve --mcp-stdio`` (for clients that start the server themselves).

A refused request is a tool error with the same one-line message as the HTTP 4xx; an internal
error's details stay in the server's log.
"""

from __future__ import annotations

import asyncio
from typing import Literal, Optional, Union

from dpr_xrisk.serve.engine import BadRequest, Limits, Retriever, make_query


def build_mcp(retriever: Retriever, batcher, limits: Limits = Limits()):
    from fastmcp import FastMCP
    from fastmcp.exceptions import ToolError

    status = retriever.status()
    server = FastMCP("dpr-xrisk", mask_error_details=True, instructions=(
        f"Passage retrieval over {status['index']['size']:,} passages ({status['model']}). "
        "Use `search` to find passages answering a question and `get_document` to read one by id."))

    @server.tool
    async def search(questions: Union[str, list[str]], k: int = 10,
                     mode: Literal["dense", "bm25", "hybrid"] = "dense",
                     fusion: Literal["rrf", "interpolation"] = "rrf", alpha: float = 0.5,
                     answers: Optional[Union[list[str], list[list[str]]]] = None) -> dict:
        """Top-k passages (id, score, rank, title, text) for one question or a list of them.

        mode: dense (the bi-encoder), bm25, or hybrid (both fused; fusion rrf or interpolation
        with BM25 weight alpha). answers, if given, mark the passages that contain one
        (has_answer, answer_spans)."""
        try:
            query = make_query(questions, k, mode, fusion, alpha, answers, limits, retriever.has_bm25)
            results = await asyncio.wrap_future(batcher.submit(query, len(query.questions)))
        except BadRequest as e:
            raise ToolError(e.message) from None
        return {"mode": query.mode, "k": query.k, "results": results}

    @server.tool
    def get_document(id: str) -> dict:
        """A passage (id, title, text) by its id, e.g. one that `search` returned."""
        got = retriever.document(id)
        if got is None:
            raise ToolError(f"unknown passage id {id[:200]!r}")
        return got

    return server

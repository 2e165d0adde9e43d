"""``dpr-xrisk serve``: search one loaded index over HTTP (REST, MCP, a search page) or MCP stdio."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from dpr_xrisk.cli._options import Backend, Bf16, Device, Quantize

Limits_ = "Request limits"
Batching = "Batching and threads"


def serve(
    index: Annotated[list[Path], typer.Option("--index", "-i", help="Index folder written by `index`; repeat for per-shard indexes.")],
    bm25_index: Annotated[Optional[Path], typer.Option(help="A `bm25 index` folder: enables mode bm25 and hybrid.")] = None,
    corpus: Annotated[Optional[Path], typer.Option("--corpus", "-c", help="Passage texts; default: the corpus recorded in the index (checked by fingerprint).")] = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Encoder; default: the one recorded in the index (it must match).")] = None,
    host: Annotated[str, typer.Option(help="Address to bind; the default answers this machine only.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free one, printed).")] = 8000,
    token: Annotated[Optional[str], typer.Option(envvar="DPR_XRISK_TOKEN", show_envvar=True, help="Require 'Authorization: Bearer TOKEN' on every route but /health.")] = None,
    mcp_stdio: Annotated[bool, typer.Option("--mcp-stdio", help="Serve the MCP tools over stdin/stdout instead of HTTP (for MCP clients that start the server).")] = False,
    depth: Annotated[int, typer.Option(min=1, help="Hybrid: candidates taken from each run before fusion (as `search --depth`).")] = 1000,
    ef_search: Annotated[Optional[int], typer.Option(min=1, help="HNSW efSearch.", rich_help_panel="Index parameters")] = None,
    nprobe: Annotated[Optional[int], typer.Option(min=1, help="IVF lists probed per query.", rich_help_panel="Index parameters")] = None,
    max_batch: Annotated[int, typer.Option(min=1, help="Questions encoded and searched together at most (1: no batching).", rich_help_panel=Batching)] = 64,
    max_wait_ms: Annotated[float, typer.Option(min=0, help="Under load, wait this long for more questions to fill a batch; an idle server never waits.", rich_help_panel=Batching)] = 2.0,
    threads: Annotated[Optional[int], typer.Option(min=1, help="torch, FAISS and Lucene threads (default: theirs).", rich_help_panel=Batching)] = None,
    device: Device = "auto",
    bf16: Bf16 = None,
    quantize: Quantize = "none",
    backend: Backend = "torch",
    max_k: Annotated[int, typer.Option(min=1, help="Largest k a request may ask for.", rich_help_panel=Limits_)] = 100,
    max_questions: Annotated[int, typer.Option(min=1, help="Questions per request at most.", rich_help_panel=Limits_)] = 64,
    max_body_bytes: Annotated[int, typer.Option(min=256, help="Request bodies over this are refused (413).", rich_help_panel=Limits_)] = 1 << 20,
):
    """Serve search over one index: POST /search, GET /documents/{id}, /status, /health, a search
    page at /, OpenAPI docs at /docs and MCP tools at /mcp/ (docs/serving.md)."""
    import logging
    import signal
    import sys

    from dpr_xrisk.serve.engine import Limits, load_retriever

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    limits = Limits(max_k=max_k, max_questions=max_questions, max_body_bytes=max_body_bytes)
    retriever = load_retriever(index, bm25_index=bm25_index, corpus=corpus, model=model, device=device, backend=backend,
                               quantize=quantize, bf16=bf16, threads=threads, ef_search=ef_search, nprobe=nprobe, depth=depth)
    size = retriever.status()["index"]["size"]
    typer.echo(f"loaded {size:,} passages in {retriever.info['load_seconds']} s", err=True)
    if mcp_stdio:
        from dpr_xrisk.serve.mcp import build_mcp

        batcher = retriever.batcher(max_batch, max_wait_ms)
        build_mcp(retriever, batcher, limits).run(transport="stdio", show_banner=False)
        batcher.close()
        return
    import uvicorn

    from dpr_xrisk.serve.app import create_app

    if host not in ("127.0.0.1", "localhost", "::1") and not token:
        typer.echo(f"warning: serving on {host} without --token: anyone who can reach it can search", err=True)
    app = create_app(retriever, limits, max_batch=max_batch, max_wait_ms=max_wait_ms, token=token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            h11_max_incomplete_event_size=16384)
    server = uvicorn.Server(config)
    _announce(server)
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then raises the signal again: a stopped
    # server is a normal end (exit 0), not an interruption
    signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    typer.echo("stopped", err=True)


def _announce(server) -> None:
    """Print the address once the socket is bound (with --port 0 the OS chooses it)."""
    startup = server.startup

    async def announced(sockets=None):
        await startup(sockets=sockets)
        for s in server.servers:
            for sock in s.sockets:
                host, port = sock.getsockname()[:2]
                typer.echo(f"serving on http://{host}:{port} (search page /, docs /docs, MCP /mcp/)", err=True)

    server.startup = announced


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Dense pipeline")(serve)

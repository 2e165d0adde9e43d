from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def index(
    embeddings: Annotated[Path, typer.Option("--embeddings", "-e", help="Embeddings folder written by `encode` (all shards are merged).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Index folder to create (conventionally under indexes/).")],
    factory: Annotated[str, typer.Option(help="FAISS factory string: Flat (exact), HNSW32, IVF4096,PQ64, ...")] = "Flat",
    metric: Annotated[Optional[str], typer.Option(help="ip | cosine; default: what the encoder says.")] = None,
    train_size: Annotated[int, typer.Option(min=1, help="Vectors sampled to train IVF/PQ indexes.")] = 262144,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing index folder.")] = False,
    threads: Annotated[Optional[int], typer.Option(min=1, help="FAISS threads (>= 1; default: FAISS's own).")] = None,
    shard: Annotated[Optional[list[int]], typer.Option("--shard", min=0, help="Index only these shard ids (repeat); search per-shard indexes together with several --index.")] = None,
):
    """Build a FAISS index folder (index.faiss, ids.txt, meta.json) from an embeddings folder."""
    from dpr_xrisk.retrieval.index import build_index

    out = build_index(embeddings, out, factory=factory, metric=metric, train_size=train_size,
                      overwrite=overwrite, threads=threads or None, shards=shard or None)
    typer.echo(f"wrote {out}")


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Dense pipeline")(index)

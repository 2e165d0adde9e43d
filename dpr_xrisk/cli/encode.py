from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from dpr_xrisk.cli._options import Backend, BatchSize, Bf16, Corpus, Device, Model, Normalize, Pooling, Quantize, check_inference, default_batch_size, inference_encoder, load_encoder


def encode(
    corpus: Corpus,
    out: Annotated[Path, typer.Option("--out", "-o", help="Embeddings folder (created; shards and resumes live here).")],
    model: Model = "minilm",
    batch_size: BatchSize = None,
    dtype: Annotated[str, typer.Option(help="Stored vector type: float32 | float16 (half the disk).")] = "float32",
    bf16: Bf16 = None,
    device: Device = "auto",
    quantize: Quantize = "none",
    backend: Backend = "torch",
    shard_id: Annotated[Optional[int], typer.Option(min=0, help="This process's shard (0-based); under torchrun: its RANK.", rich_help_panel="Sharding")] = None,
    num_shards: Annotated[Optional[int], typer.Option(min=1, help="Total shards the corpus is split into; under torchrun: WORLD_SIZE (one shard per process, and per GPU with --device auto).", rich_help_panel="Sharding")] = None,
    threads: Annotated[Optional[int], typer.Option(min=1, help="torch CPU threads (>= 1; default: torch's own).")] = None,
    pooling: Pooling = None,
    normalize: Normalize = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace a finished or unfinished encoding of another model or corpus in --out (otherwise an error).")] = False,
):
    """Encode a corpus into an embeddings folder (.npy + ids + meta.json).

    Streams the corpus in chunks (memory does not grow with it), sorts each chunk by length for
    dynamic padding, and resumes an interrupted run at its first unfinished chunk; a finished
    shard is never redone. Split a large corpus with --shard-id/--num-shards.
    """
    import torch

    from dpr_xrisk.retrieval.encode import encode_corpus

    if threads:
        torch.set_num_threads(threads)
    import os

    from dpr_xrisk.runtime.device import resolve_bf16, resolve_device

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if num_shards is None:
        num_shards = world if world > 1 else 1
    if shard_id is None:
        shard_id = int(os.environ.get("RANK", "0")) if world > 1 and num_shards == world else 0

    dev = resolve_device(device)  # checked before the model loads
    check_inference(backend, quantize, dev, bf16)
    bf16 = resolve_bf16(bf16, dev, backend, quantize)  # unset: auto, printed
    encoder = inference_encoder(load_encoder(model, pooling, normalize).to(dev), backend, quantize, dev, bf16, model)
    meta = encode_corpus(encoder, corpus, out, batch_size=default_batch_size(batch_size, dev, bf16), dtype=dtype, bf16=bf16,
                         shard_id=shard_id, num_shards=num_shards, model_name=model,
                         overwrite=overwrite, bound_heap=True)
    typer.echo(f"wrote {meta}")


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Dense pipeline")(encode)

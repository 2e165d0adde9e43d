from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from dpr_xrisk.cli._options import Backend, Corpus, Device, Model, Quantize


def mine(
    train: Annotated[Path, typer.Option("--train", help="DPR biencoder file whose questions get negatives.")],
    corpus: Corpus,
    out: Annotated[Path, typer.Option("--out", "-o", help="Negatives JSONL: {question, negatives: [{passage_id, score, rank, q}]}.")],
    model: Model = "minilm",
    k: Annotated[int, typer.Option("--k", "-k", min=1, help="Passages retrieved per question before filtering.")] = 100,
    factory: Annotated[str, typer.Option(help="FAISS factory string of the mining index.")] = "Flat",
    skip_ranks: Annotated[int, typer.Option(min=0, help="Skip the first r ranks.")] = 0,
    margin: Annotated[Optional[float], typer.Option(help="Drop candidates scoring above (1 - m) * s(positive).")] = None,
    hard_negatives: Annotated[int, typer.Option(min=1, help="h the trainer will draw per step; sets q = min(1, h / pool size).")] = 1,
    keep_answers: Annotated[bool, typer.Option(help="Keep passages that contain an answer (no false-negative filter).")] = False,
    device: Device = "auto",
    quantize: Quantize = "none",
    backend: Backend = "torch",
    check_against: Annotated[Optional[str], typer.Option("--check-against", help="fp32: also mine with the fp32 towers and report how far the --quantize pools differ (256 questions).")] = None,
    max_length: Annotated[Optional[int], typer.Option("--max-length", min=2, help="Word pieces per passage when encoding the corpus for mining (shorter = faster; recorded in the .meta.json). Default: the model's passage length.")] = None,
):
    """Mine hard negatives offline with a model's own index (the same code as the training refresh).

    The output is usable as `train --negatives negatives-file --negatives-file <out>` and by other tools.
    """
    from dpr_xrisk.cli._options import check_inference, inference_encoder, load_encoder
    from dpr_xrisk.errors import InputError
    from dpr_xrisk.io.common import write_json
    from dpr_xrisk.io.passages import read_passages
    from dpr_xrisk.runtime.device import encode_batch_size, resolve_device
    from dpr_xrisk.train.data import PassageStore, check_positives_in_corpus, load_training_set
    from dpr_xrisk.train.mining import refresh_pools, validate_refresh

    if check_against not in (None, "fp32"):
        raise InputError(f"--check-against {check_against!r}: valid: fp32")
    if check_against and quantize == "none" and backend == "torch":
        raise InputError("--check-against fp32 compares a --quantize int8 or --backend onnx mining with torch fp32; "
                         "give one of them")
    dev = resolve_device(device)
    check_inference(backend, quantize, dev)
    fp32 = load_encoder(model).to(dev)
    if max_length is not None:
        from dpr_xrisk.train.mining import with_passage_length

        fp32 = with_passage_length(fp32, max_length)
    encoder = inference_encoder(fp32, backend, quantize, dev, model=model)
    validate_refresh(encoder, corpus, k, factory)
    store = PassageStore()
    s = load_training_set(train, store)
    check_positives_in_corpus([s], {p.id for p in read_passages(corpus)})
    bs = encode_batch_size(dev)  # the measured default of the path (CPU 16, GPU 128)
    mining = dict(k=k, factory=factory, skip_ranks=skip_ranks, margin=margin, filter_answers=not keep_answers,
                  batch_size=bs)
    result = refresh_pools(encoder, [s], store, corpus, **mining)
    check = {}
    if check_against:
        # the fp32 mining covers only the questions compared (the corpus is encoded in full either way)
        check = _check_against_fp32(fp32, result, quantize,
                                    lambda enc, only: refresh_pools(enc, [s], store, corpus, **mining, only=only))
    _write_negatives(out, s.questions, result.pools[0], hard_negatives)
    write_json(Path(f"{out}.meta.json"), {"model": model, "fingerprint": encoder.fingerprint(), "corpus": str(corpus),
                                          "train": str(train), "k": k, "factory": factory, "skip_ranks": skip_ranks,
                                          "margin": margin, "quantize": quantize, "backend": backend,
                                          "max_length": fp32.settings.passage_max_length, **result.stats, **check})
    typer.echo(f"wrote {out} ({result.stats['mean_pool_size']:.1f} negatives per question on average; "
               f"removed {result.stats['removed']})")


def _check_against_fp32(fp32, result, quantize: str, mine_with) -> dict:
    """``--check-against fp32``: mine the compared questions again with the fp32 towers
    (``mine_with(encoder, only)``) and report how far the pools differ."""
    import numpy as np

    from dpr_xrisk.runtime.quantize import check_rows, pool_overlap

    ref = mine_with(fp32, check_rows(result.pools, np.random.default_rng(0)))
    n, overlap = pool_overlap(ref.pools, result.pools)
    typer.echo(f"{quantize} vs fp32 on {n} questions: pool overlap {overlap:.3f} "
               f"({1 - overlap:.1%} of the mined negatives differ)", err=True)
    return {"check_questions": n, "pool_overlap_vs_fp32": round(overlap, 4),
            "negatives_differing_share": round(1 - overlap, 4)}


def _write_negatives(out: Path, questions, pools, hard_negatives: int) -> None:
    """The negatives JSONL: per question, its pool in rank order with q = min(1, h / pool size)."""
    import json

    from dpr_xrisk.io.common import atomic_write

    with atomic_write(out) as f:
        for q, pool in zip(questions, pools):
            q_in = min(1.0, hard_negatives / len(pool)) if pool else 1.0
            negs = [{"passage_id": d, "score": sc, "rank": r + 1, "q": q_in} for r, (d, sc) in enumerate(pool)]
            f.write(json.dumps({"question": q.idx, "negatives": negs}) + "\n")


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Training")(mine)

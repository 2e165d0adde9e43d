"""Option types shared by several commands: same names everywhere (--model --corpus --queries
--index --run --qrels --out)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from dpr_xrisk.retrieval.inference import check_inference, inference_encoder  # noqa: F401 (the commands import them from here)

Model = Annotated[str, typer.Option("--model", "-m", help="'minilm' (packaged all-MiniLM-L6-v2), a dpr_xrisk model folder, or a local HF/sentence-transformers folder.")]
Corpus = Annotated[Path, typer.Option("--corpus", "-c", help="Passages: DPR .tsv (id, text, title), pyserini/BEIR .jsonl, or a BEIR folder.")]
Queries = Annotated[Path, typer.Option("--queries", "-q", help="Questions: DPR QA .tsv/.csv, .jsonl, DPR biencoder .json, or a BEIR folder.")]
K = Annotated[int, typer.Option("--k", "-k", min=1, help="Passages retrieved per question.")]
BatchSize = Annotated[Optional[int], typer.Option("--batch-size", min=1, help="Texts per forward pass; default: measured per path (docs/results.md): on a CPU 16, 64 with --bf16; 128 on a GPU.")]


def default_batch_size(batch_size, device, bf16: bool = False) -> int:
    """--batch-size, or the measured default of the path (:func:`dpr_xrisk.runtime.device.encode_batch_size`)."""
    from dpr_xrisk.runtime.device import encode_batch_size

    return batch_size if batch_size is not None else encode_batch_size(device, bf16)


Bf16 = Annotated[Optional[bool], typer.Option("--bf16/--fp32", show_default="auto", help="bfloat16 autocast or float32. Unset: auto, bf16 where the device has native bfloat16 (AMX, AVX512-BF16, CUDA sm_80+: encoding ~2x faster, same top-k within noise, docs/results.md), fp32 elsewhere (bf16 is ~10x slower on other CPUs); the choice is printed. DPR_XRISK_PRECISION=fp32|bf16|auto sets the unset value.")]
OutRun = Annotated[Optional[Path], typer.Option("--out-run", help="Write a TREC run here.", rich_help_panel="Output")]
OutJson = Annotated[Optional[Path], typer.Option("--out-json", help="Write a DPR retrieval JSON here (pyserini's evaluate_dpr_retrieval input).", rich_help_panel="Output")]
Device = Annotated[str, typer.Option("--device", help="auto (CUDA when present, else CPU) | cpu | cuda | cuda:N.")]
Quantize = Annotated[str, typer.Option("--quantize", help="none | int8 (dynamic int8 Linear layers on the CPU: ~2x faster than fp32 where the CPU has AVX-512 VNNI, no faster without it; same model fingerprint).")]
Backend = Annotated[str, typer.Option("--backend", help="torch | onnx: the towers exported to ONNX (cached next to the model, else in ~/.cache/dpr_xrisk/onnx) and run by ONNX Runtime on the CPU; needs the 'fast' extra. With --quantize int8: ONNX Runtime's dynamic int8.")]
Pooling = Annotated[Optional[str], typer.Option(help="Override pooling for a plain HF folder: cls | mean.", rich_help_panel="Encoder overrides")]
Normalize = Annotated[Optional[bool], typer.Option("--normalize/--no-normalize", help="Override L2 normalisation.", rich_help_panel="Encoder overrides")]


def load_encoder(model: str, pooling=None, normalize=None, title=None):
    from dpr_xrisk.retrieval.encoder import DualEncoder

    return DualEncoder.load(model, pooling=pooling, normalize=normalize, title=title)


def write_outputs(run, questions, corpus, out_run, out_json, tag: str) -> None:
    """Write the run as TREC and/or DPR retrieval JSON (the latter needs passage texts)."""
    from dpr_xrisk.io.retrieval_json import write_retrieval_json
    from dpr_xrisk.io.trec import write_run
    from dpr_xrisk.retrieval.search import load_passage_texts, retrieval_records

    if out_run is None and out_json is None:
        raise typer.BadParameter("give --out-run and/or --out-json")
    if out_run is not None:
        write_run(out_run, run, tag=tag)
        typer.echo(f"wrote {out_run}", err=True)
    if out_json is not None:
        wanted = {d for hits in run.values() for d, _ in hits}
        texts = load_passage_texts(corpus, wanted)
        write_retrieval_json(out_json, retrieval_records(run, questions, texts))
        typer.echo(f"wrote {out_json}", err=True)

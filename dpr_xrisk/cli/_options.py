"""Option types shared by several commands: same names everywhere (--model --corpus --queries
--index --run --qrels --out)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

Model = Annotated[str, typer.Option("--model", "-m", help="'minilm' (packaged all-MiniLM-L6-v2), a dpr_xrisk model folder, or a local HF/sentence-transformers folder.")]
Corpus = Annotated[Path, typer.Option("--corpus", "-c", help="Passages: DPR .tsv (id, text, title), pyserini/BEIR .jsonl, or a BEIR folder.")]
Queries = Annotated[Path, typer.Option("--queries", "-q", help="Questions: DPR QA .tsv/.csv, .jsonl, DPR biencoder .json, or a BEIR folder.")]
K = Annotated[int, typer.Option("--k", "-k", min=1, help="Passages retrieved per question.")]
BatchSize = Annotated[int, typer.Option("--batch-size", min=1, help="Texts per forward pass.")]
Bf16 = Annotated[bool, typer.Option("--bf16/--fp32", help="bfloat16 autocast: faster only on CPUs/GPUs with native bfloat16 (AMX, AVX512-BF16); several times slower on other CPUs (eval/RESULTS.md).")]
OutRun = Annotated[Optional[Path], typer.Option("--out-run", help="Write a TREC run here.", rich_help_panel="Output")]
OutJson = Annotated[Optional[Path], typer.Option("--out-json", help="Write a DPR retrieval JSON here (pyserini's evaluate_dpr_retrieval input).", rich_help_panel="Output")]
Device = Annotated[str, typer.Option("--device", help="auto (CUDA when present, else CPU) | cpu | cuda | cuda:N.")]
Quantize = Annotated[str, typer.Option("--quantize", help="none | int8 (dynamic int8 Linear layers on the CPU: faster where bfloat16 is slow; same model fingerprint).")]
Pooling = Annotated[Optional[str], typer.Option(help="Override pooling for a plain HF folder: cls | mean.", rich_help_panel="Encoder overrides")]
Normalize = Annotated[Optional[bool], typer.Option("--normalize/--no-normalize", help="Override L2 normalisation.", rich_help_panel="Encoder overrides")]


def load_encoder(model: str, pooling=None, normalize=None, title=None):
    from dpr_xrisk.encoder import DualEncoder

    return DualEncoder.load(model, pooling=pooling, normalize=normalize, title=title)


def write_outputs(run, questions, corpus, out_run, out_json, tag: str) -> None:
    """Write the run as TREC and/or DPR retrieval JSON (the latter needs passage texts)."""
    from dpr_xrisk.io.retrieval_json import write_retrieval_json
    from dpr_xrisk.io.trec import write_run
    from dpr_xrisk.search import load_passage_texts, retrieval_records

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

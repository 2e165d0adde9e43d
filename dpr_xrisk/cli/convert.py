from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(no_args_is_help=True, help="Convert SQuAD JSON or BEIR folders into DPR's formats.")
Out = Annotated[Path, typer.Option("--out", "-o", help="Output folder (passages.tsv, <split>.qa.tsv, <split>.qrels.tsv, biencoder-<split>.json).")]


@app.command("squad")
def squad(
    input: Annotated[Path, typer.Option("--input", help="SQuAD-format JSON (e.g. dev-v1.1.json).")],
    out: Out,
    test_fraction: Annotated[float, typer.Option(help="Share of articles held out as the test split (split by article, so test paragraphs never leak into training).")] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed of the article split.")] = 0,
):
    """SQuAD JSON -> DPR passages (one per paragraph), QA, qrels and biencoder files."""
    from dpr_xrisk.convert import squad_to_dpr

    typer.echo(squad_to_dpr(input, out, test_fraction=test_fraction, seed=seed))


@app.command("beir")
def beir(
    input: Annotated[Path, typer.Option("--input", help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv).")],
    out: Out,
    split: Annotated[str, typer.Option(help="Which qrels split to convert.")] = "test",
):
    """BEIR folder -> DPR passages, QA (empty answers), qrels and biencoder files."""
    from dpr_xrisk.convert import beir_to_dpr

    typer.echo(beir_to_dpr(input, out, split=split))

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(no_args_is_help=True, help="Convert SQuAD JSON or BEIR folders into DPR's formats, or any input into a 🤗 datasets folder.")
Out = Annotated[Path, typer.Option("--out", "-o", help="Output folder (passages.tsv, <split>.qa.tsv, <split>.qrels.tsv, biencoder-<split>.json).")]


@app.command("squad")
def squad(
    input: Annotated[Path, typer.Option("--input", help="SQuAD-format JSON (e.g. dev-v1.1.json).")],
    out: Out,
    test_fraction: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of articles held out as the test split (split by article, so test paragraphs never leak into training).")] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed of the article split.")] = 0,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace a non-empty --out (as a whole: never merged).")] = False,
):
    """SQuAD JSON -> DPR passages (one per paragraph), QA, qrels and biencoder files."""
    from dpr_xrisk.io.convert import squad_to_dpr

    typer.echo(squad_to_dpr(input, out, test_fraction=test_fraction, seed=seed, overwrite=overwrite))


@app.command("beir")
def beir(
    input: Annotated[Path, typer.Option("--input", help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv).")],
    out: Out,
    split: Annotated[str, typer.Option(help="Which qrels split to convert.")] = "test",
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace a non-empty --out (as a whole: never merged).")] = False,
):
    """BEIR folder -> DPR passages, QA (empty answers), qrels and biencoder files."""
    from dpr_xrisk.io.convert import beir_to_dpr

    typer.echo(beir_to_dpr(input, out, split=split, overwrite=overwrite))


@app.command("dataset")
def dataset(
    input: Annotated[Path, typer.Option("--input", help="Passages (.tsv/.jsonl/BEIR folder), questions (QA .tsv/.jsonl) or a DPR biencoder file, or any table.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder: a 🤗 datasets save_to_disk folder (memory-mapped Arrow), readable wherever a file of that kind is.")],
    kind: Annotated[str, typer.Option(help="passages (id, text, title) | questions (id, question, answers) | biencoder (question, answers, positive/negative/hard_negative_ctxs).")] = "passages",
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing --out.")] = False,
):
    """Any supported file -> a 🤗 datasets folder (Dataset.save_to_disk) with DPR's columns."""
    from dpr_xrisk.errors import unknown_name
    from dpr_xrisk.io.arrow import write_dataset
    from dpr_xrisk.io.common import check_apart

    check_apart(input, out, "input")

    if kind == "passages":
        from dpr_xrisk.io.passages import read_passages

        rows = ({"id": p.id, "text": p.text, "title": p.title} for p in read_passages(input))
    elif kind == "questions":
        from dpr_xrisk.io.questions import read_questions

        rows = ({"id": q.qid, "question": q.text, "answers": list(q.answers)} for q in read_questions(input))
    elif kind == "biencoder":
        from dpr_xrisk.io.biencoder import CTX_LISTS, read_biencoder

        def ctx(c):  # one schema for every context, whatever the source file carried
            return {"title": c["title"], "text": c["text"], "passage_id": c["passage_id"]}

        rows = ({"question": r["question"], "answers": list(r["answers"]),
                 **{k: [ctx(c) for c in r.get(k, [])] for k in CTX_LISTS}} for r in read_biencoder(input))
    else:
        raise unknown_name("kind", kind, ("passages", "questions", "biencoder"))
    n = write_dataset(out, rows, overwrite=overwrite)
    typer.echo(f"wrote {n:,} {kind} rows to {out}")

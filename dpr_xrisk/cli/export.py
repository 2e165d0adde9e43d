from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def export(
    format: Annotated[str, typer.Option("--format", "-f", help="sentence-transformers (a model: one folder per tower) | pyserini (an index: the files FaissSearcher reads).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (created).")],
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Model folder to export (--format sentence-transformers).")] = None,
    index: Annotated[Optional[Path], typer.Option("--index", "-i", help="Index folder to export (--format pyserini).")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing --out.")] = False,
):
    """Export a model for sentence-transformers or an index for pyserini's FaissSearcher.

    dpr-xrisk export --format sentence-transformers --model runs/m --out exported/m
    dpr-xrisk export --format pyserini --index indexes/x --out exported/x-pyserini
    """
    from dpr_xrisk.errors import InputError, unknown_name
    from dpr_xrisk.retrieval.export import FORMATS, export_pyserini, export_sentence_transformers

    if format not in FORMATS:
        raise unknown_name("export format", format, FORMATS)
    if format == "sentence-transformers":
        if model is None:
            raise InputError("--format sentence-transformers exports a model: give --model")
        for folder in export_sentence_transformers(model, out, overwrite=overwrite):
            typer.echo(f"wrote {folder}")
    else:
        if index is None:
            raise InputError("--format pyserini exports an index: give --index")
        typer.echo(f"wrote {export_pyserini(index, out, overwrite=overwrite)}")


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Dense pipeline")(export)

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def report(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the PNG charts and report.html (created; files in it are replaced, nothing else is removed).")],
    eval_: Annotated[Optional[list[Path]], typer.Option("--eval", "-e", help="Evaluation JSON written by `dpr-xrisk evaluate --out`; repeatable.")] = None,
    run: Annotated[Optional[list[str]], typer.Option("--run", "-r", help="DPR retrieval JSON run (`search --out-json`), as PATH or LABEL=PATH; repeatable.")] = None,
    train: Annotated[Optional[list[str]], typer.Option("--train", "-t", help="Training folder (`train --out`), as PATH or LABEL=PATH; repeatable.")] = None,
    compare: Annotated[Optional[tuple[str, str]], typer.Option("--compare", help="Per-question comparison of two --run runs, by label or file name: --compare A B.")] = None,
    allow_different_questions: Annotated[bool, typer.Option("--allow-different-questions", help="Report runs over different question sets side by side instead of refusing.")] = False,
    title: Annotated[str, typer.Option(help="Title of the HTML page.")] = "dpr_xrisk report",
):
    """Charts (top-k vs k, recall/MRR/nDCG, training curves, refresh and FCCO diagnostics, per-question
    comparison) as PNGs and one self-contained report.html with the numbers behind each chart."""
    import shlex
    import sys

    from dpr_xrisk.report.build import build_report

    if compare is not None and any(c is None for c in compare):
        compare = None
    command = shlex.join(["dpr-xrisk", *sys.argv[1:]]) if sys.argv and "dpr" in Path(sys.argv[0]).name else None
    rep = build_report(out, evals=eval_ or [], runs=run or [], trains=train or [], compare=compare,
                       allow_different_questions=allow_different_questions, command=command, title=title)
    for w in rep.warnings:
        typer.echo(f"warning: {w}", err=True)
    for p in rep.charts:
        typer.echo(f"wrote {p}")
    typer.echo(f"wrote {rep.html}")


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Evaluation")(report)

"""The ``dpr-xrisk`` command line: one Typer app, one module per command.

Commands stay thin (parse, call the library, print); heavy imports happen inside them so that
``--help`` is instant. Bad input raises :class:`~dpr_xrisk.errors.InputError`, which this app
prints as one line (``error: <file>:<line>: <problem>``) with exit code 2, never a traceback.
"""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from dpr_xrisk.errors import InputError


class _Group(TyperGroup):
    """Turns InputError into a one-line message and exit code 2, for every sub-command
    (usage errors keep Typer's own exit code 2)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except InputError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None


app = typer.Typer(cls=_Group, no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  help="Dense passage retrieval with X-risk losses: encode, index, search, BM25, evaluate.")

from dpr_xrisk.cli import bm25, convert, encode, evaluate, index, mine, report, search, train  # noqa: E402

encode.register(app)
index.register(app)
search.register(app)
evaluate.register(app)
report.register(app)
train.register(app)
mine.register(app)
app.add_typer(bm25.app, name="bm25")
app.add_typer(convert.app, name="convert")


def main() -> None:
    app()

"""The ``dpr-xrisk`` command line: one Typer app, one module per command.

Commands stay thin (parse, call the library, print); heavy imports happen inside them so that
``--help`` is instant. One error boundary (:class:`_Group`) turns every failure into one line on
stderr, never a traceback:

- exit 2, something the user must fix: bad input (:class:`~dpr_xrisk.errors.InputError`,
  ``error: <file>:<line>: <problem>``), an unreadable or unwritable path (``OSError``), a
  parameter Java/Lucene rejects, and Typer's own usage errors (an option out of its range, a
  missing option, an unknown command: ``error: dpr-xrisk ask: Invalid value for '--k' ...``,
  one line, not Typer's usage box);
- exit 1, an internal error (a bug): the line names it and says how to see the traceback
  (``DPR_XRISK_DEBUG=1``, which re-raises every error);
- exit 130 on Ctrl-C.
"""

from __future__ import annotations

import os

import typer
from typer.core import TyperGroup

from dpr_xrisk.errors import InputError


def _fail(message: str, code: int):
    try:  # end any progress bar first, so the error starts its own line
        from tqdm import tqdm

        for bar in list(getattr(tqdm, "_instances", ())):
            bar.leave = False
            bar.close()
    except Exception:  # noqa: BLE001 - the error line matters more than the bar
        pass
    typer.echo(f"error: {' '.join(str(message).split(chr(10)))}", err=True)  # one line, whatever the message holds
    raise typer.Exit(code)


class _Group(TyperGroup):
    """The error boundary of every sub-command (see the module docstring)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except Exception as e:
            # Typer's own exits and errors (it vendors click: match by class name); a usage error
            # becomes one line like every other error
            names = {c.__name__ for c in type(e).__mro__}
            if "UsageError" in names and not os.environ.get("DPR_XRISK_DEBUG"):
                where = getattr(getattr(e, "ctx", None), "command_path", None) or ctx.command_path
                _fail(f"{where}: {' '.join(e.format_message().split())} (see {where} --help)", 2)
            if names & {"Exit", "Abort", "ClickException"}:
                raise
            if os.environ.get("DPR_XRISK_DEBUG"):
                raise
            if isinstance(e, InputError):
                _fail(str(e), 2)
            if isinstance(e, OSError):
                where = f"{e.filename}: " if e.filename else ""
                _fail(f"{where}{e.strerror or e}", 2)
            if type(e).__name__ == "JavaException":  # pyserini/Lucene refusing a parameter or file
                _fail(f"Lucene: {str(e).splitlines()[0] if str(e) else type(e).__name__}", 2)
            _fail(f"internal error: {type(e).__name__}: {e} -- a bug; DPR_XRISK_DEBUG=1 shows the traceback", 1)
        except KeyboardInterrupt:
            _fail("interrupted", 130)


app = typer.Typer(cls=_Group, no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  help="Dense passage retrieval with X-risk losses: encode, index, search, BM25, evaluate.")

from dpr_xrisk.cli import ask, bm25, convert, encode, evaluate, export, index, mine, report, search, serve, train  # noqa: E402

encode.register(app)
index.register(app)
search.register(app)
serve.register(app)
ask.register(app)
export.register(app)
evaluate.register(app)
report.register(app)
train.register(app)
mine.register(app)
app.add_typer(bm25.app, name="bm25")
app.add_typer(convert.app, name="convert")


def main() -> None:
    app()

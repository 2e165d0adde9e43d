from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

Run = "Run"

# flag spellings that differ from the key (kept for compatibility) and short aliases
FLAGS = {"train": ["--train"], "train_weights": ["--train-weight", "--train-weights"], "corpus": ["--corpus", "-c"],
         "model": ["--model", "-m"], "bf16": ["--bf16/--fp32"]}


def _shown(value) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return " ".join(map(str, value)) or "none"
    return str(value)


def _number_or_none(kind: type):
    """The flag parser of an optional number: the number, or the string "none" (the config's
    spelling of unset, turned into None where the config is resolved)."""
    from dpr_xrisk.train.config import UNSET, is_unset

    def parse(value):
        if is_unset(value):
            return UNSET
        try:
            return kind(value)
        except (TypeError, ValueError):
            raise typer.BadParameter(f"{value!r} is not {'an integer' if kind is int else 'a number'} or 'none'")
    return parse


def _config_parameters() -> list:
    """One keyword parameter per TrainConfig key: type, default (shown in --help, applied only
    when neither the recipe nor --config sets the key), help and panel from the key's field
    metadata in config.py."""
    import dataclasses
    import inspect
    import typing

    from dpr_xrisk.train.config import TrainConfig, key_docs

    hints, docs = typing.get_type_hints(TrainConfig), key_docs()
    params = []
    for f in dataclasses.fields(TrainConfig):
        hint = hints[f.name]
        args = typing.get_args(hint)
        if type(None) in args:
            hint = next(a for a in args if a is not type(None))
        if typing.get_origin(hint) is tuple:
            hint = list[typing.get_args(hint)[0]]
        dash = f.name.replace("_", "-")
        decls = FLAGS.get(f.name, [f"--{dash}/--no-{dash}" if hint is bool else f"--{dash}"])
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        text, panel = docs.get(f.name, ("", "Options"))
        text = (text or f.name.replace("_", " ")).replace("[", "\\[")  # not rich markup
        extra = {}
        if type(None) in args and hint in (int, float):  # "none" unsets what a recipe or --config sets
            text += ' ("none" unsets it)'
            extra = {"parser": _number_or_none(hint), "metavar": f"{hint.__name__.upper()}|none"}
        option = typer.Option(*decls, help=text, rich_help_panel=panel,
                              show_default=_shown(default), **extra)
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                        annotation=Annotated[Optional[hint], option]))
    return params


def _train(
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Output folder: final model, checkpoints/, best/, train_log.jsonl.", rich_help_panel=Run)] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="TOML/YAML file with any of the keys below (names with _); flags override it.", rich_help_panel=Run)] = None,
    recipe: Annotated[Optional[str], typer.Option("--recipe", help="A shipped recipe (dpr_xrisk/recipes/NAME.toml, e.g. 'recommended'); --config and flags override it.", rich_help_panel=Run)] = None,
    resume: Annotated[bool, typer.Option(help="Continue from the latest checkpoint in --out.", rich_help_panel=Run)] = False,
    print_config: Annotated[bool, typer.Option("--print-config", help="Print the resolved config (recipe, --config, flags) as TOML and exit.", rich_help_panel=Run)] = False,
    **values,
):
    """Train a dual encoder with the DPM, listwise or InfoNCE loss (see README's loss table).

    Every option below is a key of dpr_xrisk/train/config.py (the defaults shown apply where
    neither --recipe nor --config sets the key).
    """
    import os
    import shlex
    import sys

    from dpr_xrisk.train.config import TrainConfig
    from dpr_xrisk.train.trainer import train as run

    overrides = {k: (list(v) or None) if isinstance(v, (list, tuple)) else v for k, v in values.items()}
    if values.get("bf16"):
        typer.echo("note: --bf16 is the old spelling of --precision bf16", err=True)
    elif values.get("bf16") is False and values.get("precision") is None:
        overrides["precision"] = "fp32"  # --fp32 said so: it wins over precision = "auto" (the default, or a file's)
    cfg = TrainConfig.load(config, overrides, recipe=recipe)
    if print_config:
        typer.echo(cfg.to_toml(), nl=False)
        return
    if out is None:
        from dpr_xrisk.errors import InputError

        raise InputError("train needs --out (the output folder)")
    created = not out.exists()
    if os.environ.get("RANK", "0") == "0":  # provenance for reports: the command that made this run
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "command.txt", "a", encoding="utf-8") as f:
            f.write(shlex.join(["dpr-xrisk", *sys.argv[1:]]) + "\n")
    try:
        summary = run(cfg, out, resume=resume)
    except BaseException:
        # a run that failed before its first checkpoint leaves nothing behind; one with a
        # checkpoint stays, to be resumed
        if created and os.environ.get("RANK", "0") == "0" and not (out / "checkpoints").is_dir():
            import shutil

            shutil.rmtree(out, ignore_errors=True)
        raise
    best = ""
    if summary["best"] is not None:
        best = f"; best dev {cfg.select_metric} {summary['best']:.4f} at step {summary['best_step']} in {out / 'best'}"
        if summary["best_step"] == 0:
            best += " (the starting model: no trained step beat it on the dev set)"
    typer.echo(f"trained {summary['steps']} steps in {summary['seconds']:.1f}s; model in {out}{best}")


def _build():
    """The ``train`` command: _train's own options plus one generated per config key, so a new
    TrainConfig key is a new flag with nothing else to write."""
    import functools
    import inspect

    @functools.wraps(_train)
    def train(**kwargs):
        return _train(**kwargs)

    own = [p for p in inspect.signature(_train).parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    import typing

    hints = typing.get_type_hints(_train, include_extras=True)
    own = [p.replace(annotation=hints[p.name]) for p in own]
    params = own + _config_parameters()
    train.__signature__ = inspect.Signature(params)
    train.__annotations__ = {p.name: p.annotation for p in params}
    del train.__wrapped__
    train.__name__ = train.__qualname__ = "train"
    return train


train = _build()


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Training")(train)

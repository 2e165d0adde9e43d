"""Shipped training recipes: TOML files of :class:`~dpr_xrisk.train.config.TrainConfig` keys,
used with ``dpr-xrisk train --recipe NAME`` (a ``--config`` file and flags override them).

This module owns the recipe files and their lookup; it does not own what a key means (that is
``dpr_xrisk/train/config.py``) nor why a recipe's values were chosen (each file says, with the
benchmark that measured it)."""

from __future__ import annotations

from pathlib import Path

from dpr_xrisk.errors import unknown_name

HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.toml"))


def path(name: str) -> Path:
    """The TOML file of recipe ``name``; an unknown name is an error listing the shipped ones."""
    p = HERE / f"{name}.toml"
    if not p.is_file():
        raise unknown_name("recipe", name, names())
    return p


def load(name: str) -> dict:
    import tomllib

    return tomllib.loads(path(name).read_text(encoding="utf-8"))

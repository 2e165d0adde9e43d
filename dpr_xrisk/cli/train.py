from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

Loss = "Loss"
Data = "Data and negatives"
Opt = "Optimisation"


def train(
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Output folder: final model, checkpoints/, best/, train_log.jsonl.")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="TOML/YAML file with any TrainConfig key (see dpr_xrisk/train/config.py); flags override it.")] = None,
    recipe: Annotated[Optional[str], typer.Option("--recipe", help="A shipped recipe (dpr_xrisk/recipes/NAME.toml, e.g. 'recommended'); --config and flags override it.")] = None,
    train_files: Annotated[Optional[list[Path]], typer.Option("--train", help="DPR biencoder training file; repeat for multi-dataset training.", rich_help_panel=Data)] = None,
    train_weights: Annotated[Optional[list[float]], typer.Option("--train-weight", help="λ_t of each --train file (batch drawn from file t with probability ∝ λ_t).", rich_help_panel=Data)] = None,
    dev: Annotated[Optional[Path], typer.Option(help="Dev questions with answers, for periodic DPR accuracy and best-checkpoint selection.", rich_help_panel=Data)] = None,
    corpus: Annotated[Optional[Path], typer.Option("--corpus", "-c", help="Passages: dev retrieval corpus, BM25 negative texts.", rich_help_panel=Data)] = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Starting encoder ('minilm' or a local folder).")] = None,
    loss: Annotated[Optional[str], typer.Option(help="dpm | listwise | infonce.", rich_help_panel=Loss)] = None,
    tau: Annotated[Optional[float], typer.Option(help="Temperature (default 0.05 for cosine encoders, 1.0 for dot product).", rich_help_panel=Loss)] = None,
    zeta_scale: Annotated[Optional[float], typer.Option(help="0 = unweighted, 1 = importance-weighted negatives.", rich_help_panel=Loss)] = None,
    pairwise_loss: Annotated[Optional[str], typer.Option(help="listwise ℓ: linear | squared_hinge | logistic.", rich_help_panel=Loss)] = None,
    symmetric: Annotated[Optional[bool], typer.Option("--symmetric/--no-symmetric", help="Add the passage->question direction (dpm, infonce).", rich_help_panel=Loss)] = None,
    estimator: Annotated[Optional[str], typer.Option(help="minibatch | fcco (moving-average partition-function estimator, dpm/listwise).", rich_help_panel=Loss)] = None,
    gamma: Annotated[Optional[float], typer.Option(help="FCCO moving-average rate γ in (0, 1].", rich_help_panel=Loss)] = None,
    batch_size: Annotated[Optional[int], typer.Option(help="Questions per optimiser step.", rich_help_panel=Opt)] = None,
    hard_negatives: Annotated[Optional[int], typer.Option(help="Hard negatives per question.", rich_help_panel=Data)] = None,
    negatives: Annotated[Optional[str], typer.Option(help="Initial hard-negative pools: file | bm25 | negatives-file | model (mined with the initial encoder) | none.", rich_help_panel=Data)] = None,
    refresh_every: Annotated[Optional[int], typer.Option(help="Re-mine negatives from the current encoder's FAISS index every N steps (needs --corpus).", rich_help_panel=Data)] = None,
    refresh_k: Annotated[Optional[int], typer.Option(help="Top-K retrieved per question at each refresh.", rich_help_panel=Data)] = None,
    refresh_fraction: Annotated[Optional[float], typer.Option(help="Re-encode only this share of the corpus per refresh, oldest first (staleness is logged).", rich_help_panel=Data)] = None,
    pool_sampler: Annotated[Optional[str], typer.Option(help="uniform | softmax (over retrieval scores, q = inclusion probability).", rich_help_panel=Data)] = None,
    bm25_index: Annotated[Optional[Path], typer.Option(help="BM25 index folder for --negatives bm25.", rich_help_panel=Data)] = None,
    negatives_file: Annotated[Optional[Path], typer.Option(help="Negatives JSONL for --negatives negatives-file.", rich_help_panel=Data)] = None,
    shared: Annotated[Optional[bool], typer.Option("--shared/--no-shared", help="One tower for questions and passages.")] = None,
    max_steps: Annotated[Optional[int], typer.Option(help="Optimiser steps (0 = from --epochs).", rich_help_panel=Opt)] = None,
    epochs: Annotated[Optional[float], typer.Option(help="Passes over the training questions.", rich_help_panel=Opt)] = None,
    lr: Annotated[Optional[float], typer.Option(help="Peak learning rate (linear warm-up and decay).", rich_help_panel=Opt)] = None,
    grad_accum: Annotated[Optional[int], typer.Option(help="Micro-batches per step.", rich_help_panel=Opt)] = None,
    bf16: Annotated[Optional[bool], typer.Option("--bf16/--fp32", help="bfloat16 autocast.", rich_help_panel=Opt)] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed of everything random.", rich_help_panel=Opt)] = None,
    eval_every: Annotated[Optional[int], typer.Option(help="Dev evaluation every N steps (and at the end).")] = None,
    save_every: Annotated[Optional[int], typer.Option(help="Checkpoint every N steps (and at the end).")] = None,
    threads: Annotated[Optional[int], typer.Option(help="torch CPU threads.")] = None,
    resume: Annotated[bool, typer.Option(help="Continue from the latest checkpoint in --out.")] = False,
    print_config: Annotated[bool, typer.Option("--print-config", help="Print the resolved config (recipe, --config, flags) as TOML and exit.")] = False,
):
    """Train a dual encoder with the DPM, listwise or InfoNCE loss (see README's loss table)."""
    from dpr_xrisk.train.config import TrainConfig
    from dpr_xrisk.train.trainer import train as run

    overrides = dict(
        train=[str(p) for p in train_files] if train_files else None, train_weights=train_weights or None,
        dev=str(dev) if dev else None, corpus=str(corpus) if corpus else None, model=model, loss=loss, tau=tau,
        zeta_scale=zeta_scale, pairwise_loss=pairwise_loss, estimator=estimator, gamma=gamma, symmetric=symmetric, batch_size=batch_size,
        hard_negatives=hard_negatives, negatives=negatives, refresh_every=refresh_every, refresh_k=refresh_k,
        refresh_fraction=refresh_fraction,
        pool_sampler=pool_sampler, bm25_index=str(bm25_index) if bm25_index else None,
        negatives_file=str(negatives_file) if negatives_file else None, shared=shared, max_steps=max_steps,
        epochs=epochs, lr=lr, grad_accum=grad_accum, bf16=bf16, seed=seed, eval_every=eval_every,
        save_every=save_every, threads=threads)
    import os
    import shlex
    import sys

    cfg = TrainConfig.load(config, overrides, recipe=recipe)
    if print_config:
        typer.echo(cfg.to_toml(), nl=False)
        return
    if out is None:
        from dpr_xrisk.errors import InputError

        raise InputError("train needs --out (the output folder)")
    if os.environ.get("RANK", "0") == "0":  # provenance for reports: the command that made this run
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "command.txt", "a", encoding="utf-8") as f:
            f.write(shlex.join(["dpr-xrisk", *sys.argv[1:]]) + "\n")
    summary = run(cfg, out, resume=resume)
    typer.echo(f"trained {summary['steps']} steps in {summary['seconds']:.1f}s; model in {out}"
               + (f"; best {cfg.select_metric} {summary['best']:.4f} at step {summary['best_step']} in {out / 'best'}" if summary["best"] is not None else ""))


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Training")(train)

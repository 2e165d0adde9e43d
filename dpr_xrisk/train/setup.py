"""Everything a training run sets up before its first step: the encoder at its training and
inference lengths, the data and initial pools (:func:`prepare`), the loss, the learning-rate
schedule, and the run's resolved precision and refresh path.

This module owns construction only; the loop that uses these is ``train/trainer.py``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import NamedTuple

import torch

from dpr_xrisk.errors import InputError
from dpr_xrisk.train.config import TrainConfig


def build_loss(cfg: TrainConfig, tau: float, sets=None, steps_per_epoch: int = 1, total_steps: int = 1):
    """The loss module; with ``estimator = 'fcco'`` wrapped in the moving-average estimator,
    whose state has one row per training question of all sets (a set's rows start at its offset)."""
    from dpr_xrisk.losses import FCCOLoss, make_loss

    if cfg.loss == "dpm":
        base = make_loss("dpm", tau=tau, zeta_scale=cfg.zeta_scale, symmetric=cfg.symmetric,
                         zeta_normalize=cfg.zeta_normalize)
    elif cfg.loss == "listwise":
        if cfg.symmetric:
            raise InputError("symmetric applies to dpm and infonce only")
        base = make_loss("listwise", tau=tau, zeta_scale=cfg.zeta_scale, pairwise=cfg.pairwise_loss, margin=cfg.margin,
                         zeta_normalize=cfg.zeta_normalize)
    else:
        base = make_loss("infonce", tau=tau, symmetric=cfg.symmetric)
    if cfg.estimator == "minibatch":
        return base
    warmup = steps_per_epoch if cfg.gamma_warmup_steps < 0 else cfg.gamma_warmup_steps
    decay = cfg.gamma_decay_steps or max(1, total_steps - warmup)
    return FCCOLoss(base, num_questions=sum(len(s) for s in sets),
                    max_positives=max(len(q.positives) for s in sets for q in s.questions), gamma=cfg.gamma,
                    gamma_schedule=cfg.gamma_schedule, gamma_warmup_steps=warmup,
                    gamma_decay_steps=decay if cfg.gamma_schedule == "cosine" else 0)


def set_dropout(encoder, p: float) -> int:
    """Every dropout of the towers (hidden states and attention probabilities) at probability
    ``p`` during training (the model's saved config keeps its own value; inference has none).
    Returns the number of dropout modules set."""
    n = 0
    for tower in dict.fromkeys((encoder.query_model, encoder.passage_model)):
        for m in tower.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = float(p)
                n += 1
    return n


def linear_schedule(optimizer, warmup: int, total: int):
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class Prepared(NamedTuple):
    encoder: object  # DualEncoder at the training lengths
    store: object  # PassageStore: the texts of every passage a pool or a positive names
    sets: list  # TrainingSet per training file, with their initial pools
    saved_settings: object  # EncoderSettings written with the trained model (inference lengths)


def load_encoder(cfg: TrainConfig):
    """The starting encoder at the training lengths, and the settings a trained model is saved
    with: the same, but at the inference lengths (``inference_*_max_length``, else the lengths
    the starting model declares: training may use shorter ones, inference keeps the model's)."""
    from dpr_xrisk.retrieval.encoder import DualEncoder

    encoder = DualEncoder.load(cfg.model, shared=cfg.shared or None, pooling=cfg.pooling, normalize=cfg.normalize)
    declared = encoder.settings  # the model's own lengths, before the training ones replace them
    saved = dataclasses.replace(declared, query_max_length=cfg.inference_query_max_length or declared.query_max_length,
                                passage_max_length=cfg.inference_passage_max_length or declared.passage_max_length)
    encoder.settings = dataclasses.replace(declared, query_max_length=cfg.query_max_length,
                                           passage_max_length=cfg.passage_max_length)
    return encoder, saved


def prepare(cfg: TrainConfig) -> Prepared:
    """Load model, data and negative pools; every bad input fails here, before step 1."""
    from dpr_xrisk.train import data as D

    if not cfg.train:
        raise InputError("no training file (set `train` in the config or --train)")
    encoder, saved = load_encoder(cfg)
    if cfg.dropout is not None:
        set_dropout(encoder, cfg.dropout)
    store = D.PassageStore()
    sets = [D.load_training_set(p, store, cfg.no_positive) for p in cfg.train]
    for s in sets:
        if len(s) < cfg.batch_size:
            raise InputError(f"batch_size {cfg.batch_size} is larger than the {len(s)} usable questions", s.path)
    if cfg.corpus:
        from dpr_xrisk.io.passages import read_passages

        corpus_ids = {p.id for p in read_passages(cfg.corpus)}
        D.check_positives_in_corpus(sets, corpus_ids)
    if cfg.refreshing:
        from dpr_xrisk.train.mining import validate_refresh

        validate_refresh(encoder, cfg.corpus, cfg.refresh_k, cfg.refresh_factory)
        if cfg.refresh_backend == "onnx":
            from dpr_xrisk.runtime.onnx_backend import require_onnxruntime

            require_onnxruntime()
    for s in sets:
        if cfg.negatives == "file":
            D.pools_from_file_negatives(s, store, cfg.filter_answers)
        elif cfg.negatives == "bm25":
            D.pools_from_bm25(s, store, cfg.bm25_index, cfg.corpus, cfg.bm25_depth, cfg.filter_answers)
        elif cfg.negatives == "negatives-file":
            D.pools_from_negatives_file(s, store, cfg.negatives_file, cfg.corpus, cfg.filter_answers)
    return Prepared(encoder, store, sets, saved)


def weight_margin(cfg: TrainConfig, tau: float, corpus_size: int | None, normalize: bool) -> float | None:
    """α·τ·ln(N/n_b): the cosine margin by which a positive must beat in-batch negatives weighted
    1/q = N/n_b before the DPM/listwise loss saturates (n_b = batch_size - 1). None where it does
    not apply (no weights, self-normalised weights, unknown N, dot-product scores)."""
    if (cfg.loss == "infonce" or cfg.zeta_scale == 0 or cfg.zeta_normalize or cfg.in_batch_q == "one"
            or not corpus_size or not normalize):
        return None
    n_b = max(1, cfg.batch_size // cfg.grad_accum - 1)
    return cfg.zeta_scale * tau * math.log(max(1.0, corpus_size / n_b))



def resolve_run_config(cfg: TrainConfig, device, ddp, resumed: Path | None, out: Path) -> tuple[TrainConfig, str]:
    """The config this session runs, and its precision: the precision resolved on ``device``
    (``auto`` to bf16 or fp32, silently: :func:`say_precision` prints it once the inputs are
    checked; ``bf16`` following it), ``refresh_quantize = "auto"``
    resolved; the returned config holds the resolved values (config.json records them, never
    ``auto``). Resuming from the checkpoint folder ``resumed``: a structurally different config is
    refused, and an ``auto`` precision or refresh path stays what the first session resolved."""
    from dpr_xrisk.runtime.device import AUTO, resolve_precision
    from dpr_xrisk.train.config import incompatible_keys
    from dpr_xrisk.train.refresh import refresh_quantize_on

    saved = json.loads((resumed / "config.json").read_text()) if resumed is not None else None
    asked = cfg.precision
    if saved is not None and asked == AUTO and not cfg.bf16:
        # a resumed run keeps the precision its first session resolved, whatever this machine would pick
        asked = saved_precision(saved)
    precision = resolve_precision(asked, device, cfg.bf16, warn=ddp.main and asked != AUTO)
    # the encoders of refresh and dev evaluation follow the training precision's bfloat16 switch
    cfg = dataclasses.replace(cfg, precision=precision, bf16=precision == "bf16")
    asked_quantize = cfg.refresh_quantize
    cfg = dataclasses.replace(cfg, refresh_quantize=refresh_quantize_on(cfg, device))
    if saved is None:
        return cfg, precision
    # a config.json written before precision was recorded resolved may say fp32 with the bf16 switch on
    saved = dict(saved, precision=saved_precision(saved), bf16=saved_precision(saved) == "bf16")
    bad = incompatible_keys(saved, cfg)
    if bad:
        raise InputError(f"checkpoint {resumed.name} was made with another config (differs in {', '.join(bad)})", out)
    first = saved.get("refresh_quantize", "auto")
    if asked_quantize == "auto" and first not in ("auto", cfg.refresh_quantize):
        # a resumed run keeps the refresh path its first session resolved, whatever this machine
        # would pick (another CPU kind, or a later default): one run, one refresh path
        if ddp.main:
            print(f"note: refresh_quantize = 'auto' resolved to {first!r} when this run started; the resumed run "
                  f"keeps it (this machine would pick {cfg.refresh_quantize!r})", file=sys.stderr)
        cfg = dataclasses.replace(cfg, refresh_quantize=refresh_quantize_on(
            dataclasses.replace(cfg, refresh_quantize=first), device))
    return cfg, precision


def say_precision(asked: TrainConfig, precision: str, device, resumed: bool) -> None:
    """The one line naming what precision ``auto`` resolved to (stderr), for a run whose config
    ``asked`` left it to auto (no --precision, --bf16 or --fp32)."""
    from dpr_xrisk.runtime.device import AUTO, auto_precision

    if asked.precision == AUTO and not asked.bf16:
        why = "as when this run started" if resumed else auto_precision(device)[1]
        print(f"precision auto → {precision} ({why})", file=sys.stderr)


def saved_precision(saved: dict) -> str:
    """The precision a checkpoint's config.json was trained at (the old bf16 switch included)."""
    p = saved.get("precision", "fp32")
    return "bf16" if saved.get("bf16") and p in ("fp32", "auto") else p

"""Dev evaluation during training: DPR top-k accuracy of the current encoder on held-out
questions (exact search over a small corpus), and keeping the best model so far in ``OUT/best``.

This module owns the in-training evaluation and the best-model copy; it does not own the metrics
(``dpr_xrisk.evaluation``) nor when evaluations happen (``train/trainer.py``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np

from dpr_xrisk.errors import InputError
from dpr_xrisk.train.config import TrainConfig


@dataclass
class DevSet:
    """The dev questions (with answers) and the passages they are searched in (id -> (title, text))."""

    questions: list
    corpus: dict


def load_dev(cfg: TrainConfig, store) -> DevSet | None:
    """``cfg.dev`` and its corpus (``dev_corpus``, else ``corpus``, else the training files' own
    passages), or None without ``dev``."""
    if not cfg.dev:
        return None
    from dpr_xrisk.io.questions import read_questions
    from dpr_xrisk.retrieval.search import load_passage_texts

    questions = read_questions(cfg.dev)
    src = cfg.dev_corpus or cfg.corpus
    return DevSet(questions, load_passage_texts(src) if src else dict(store.texts))


def evaluate_dev(encoder, cfg: TrainConfig, dev_questions, dev_corpus) -> dict:
    """DPR top-k accuracy of the current encoder on the dev questions (exact search)."""
    from dpr_xrisk.evaluation.answers import has_answer
    from dpr_xrisk.evaluation.metrics import dpr_topk_accuracy

    was_training = encoder.training
    encoder.eval()
    ids = list(dev_corpus)
    p = encoder.encode_passages([dev_corpus[i][0] for i in ids], [dev_corpus[i][1] for i in ids], bf16=cfg.bf16)
    q = encoder.encode_queries([x.text for x in dev_questions], bf16=cfg.bf16)
    k = min(max(cfg.eval_ks), len(ids))
    top = np.argsort(-(q @ p.T), axis=1)[:, :k]  # (nq, k)
    hits = {x.qid: [has_answer(dev_corpus[ids[j]][1], x.answers) for j in top[n]] for n, x in enumerate(dev_questions)}
    encoder.train(was_training)
    return {f"top{k_}": v for k_, v in dpr_topk_accuracy(hits, cfg.eval_ks).items()}


def run_eval(encoder, cfg: TrainConfig, dev: DevSet, state: dict, step: int, log, out, settings, ddp=None,
             say=None) -> None:
    """Evaluate at ``step``, log it, and save the encoder (with the inference ``settings``) to
    ``out/best`` when ``cfg.select_metric`` improves; ``state`` keeps the best so far. Under
    torchrun rank 0 evaluates and tells the others the best so far."""
    if ddp is not None and not ddp.main:
        state.update(ddp.broadcast(None))  # rank 0 evaluates; the others learn the best so far
        return
    t0 = time.perf_counter()
    metrics = evaluate_dev(encoder, cfg, dev.questions, dev.corpus)
    value = metrics.get(cfg.select_metric)
    if value is None:
        raise InputError(f"select_metric {cfg.select_metric!r} is not computed; valid: {', '.join(metrics)}")
    improved = state["best"] is None or value > state["best"]
    if improved:
        state["best"], state["best_step"] = value, step
        was_training = encoder.training
        encoder.eval()
        encoder.save(out / "best", settings)
        # back to the mode training was in: left in eval mode, every step after the first improving
        # in-loop evaluation trained without dropout (and a resumed run with it)
        encoder.train(was_training)
        (out / "best" / "dev_metrics.json").write_text(json.dumps({"step": step, **metrics}, indent=2))
    log.write({"event": "eval", "step": step, **metrics, "best": state["best"], "best_step": state["best_step"]})
    if say is not None:
        say(f"dev at step {step}: " + " ".join(f"{k} {v:.4f}" for k, v in metrics.items())
            + f" ({time.perf_counter() - t0:.0f} s)" + (" -- best so far, saved to best/" if improved else ""))
    if ddp is not None and ddp.active:
        ddp.broadcast({"best": state["best"], "best_step": state["best_step"]})

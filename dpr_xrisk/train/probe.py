"""The moving-average estimator's diagnostic (docs/method.md §4): on a fixed probe set of training
questions, the estimator's τ·v against the exact DPM loss over the whole corpus.

This module owns the probe set and its measurement; it does not own the estimator
(``dpr_xrisk.losses``) nor when probes run (``train/trainer.py``).
"""

from __future__ import annotations

import numpy as np

from dpr_xrisk.train.config import TrainConfig


def probe_set(cfg: TrainConfig, sets, store) -> tuple[list[tuple[int, int]], dict] | tuple[None, None]:
    """The probe questions, as (set, row), and the passages they are scored against; (None, None)
    unless probes are on (``probe_every`` with the FCCO estimator and the DPM loss)."""
    if not (cfg.probe_every and cfg.estimator == "fcco" and cfg.loss == "dpm"):
        return None, None
    from dpr_xrisk.retrieval.search import load_passage_texts

    total_q = sum(len(s) for s in sets)
    pick = np.random.default_rng([cfg.seed, 7]).permutation(total_q)[: cfg.probe_size]
    flat = [(t, r) for t, s in enumerate(sets) for r in range(len(s))]
    return [flat[i] for i in sorted(pick)], (load_passage_texts(cfg.corpus) if cfg.corpus else dict(store.texts))


def probe_estimator(encoder, loss_fn, cfg: TrainConfig, sets, store, offsets, probe, passages) -> dict:
    """docs/method.md §4 diagnostic on a fixed probe set of training questions: the estimator's τ·v of
    (question, first positive) against the exact DPM loss over the whole corpus, by brute force:
    τ·log Σ_{j ∈ {k} ∪ negatives} exp((s_ij − s_ik)/τ) (no sampling, q ≡ 1), where the negatives
    are what training may sample: the corpus minus the question's positives (by id and by
    normalised text) and, with ``filter_answers``, minus the passages containing an answer."""
    import torch as T

    from dpr_xrisk.evaluation.answers import has_answer
    from dpr_xrisk.train.data import text_key

    was_training = encoder.training
    encoder.eval()
    keys = list(passages)
    col = {k: j for j, k in enumerate(keys)}
    p = encoder.encode_passages([passages[k][0] for k in keys], [passages[k][1] for k in keys], bf16=cfg.bf16)
    qs = [(t, r, sets[t].questions[r]) for t, r in probe]
    qv = encoder.encode_queries([q.text for _, _, q in qs], bf16=cfg.bf16)
    encoder.train(was_training)
    scores = T.from_numpy(qv @ p.T).double()  # (P, Nc)
    tkeys = [text_key(*passages[x]) for x in keys]
    tau = loss_fn.tau
    exact, est = [], []
    for n, (t, r, q) in enumerate(qs):
        k = q.positives[0]
        if k not in col:
            continue
        pos_tk = {text_key(*passages[x]) for x in q.positives if x in passages}
        neg = T.tensor([not (x in q.positives or tk in pos_tk
                             or (cfg.filter_answers and q.answers and has_answer(passages[x][1], q.answers)))
                        for x, tk in zip(keys, tkeys)], dtype=T.bool)
        d = (scores[n] - scores[n, col[k]]) / tau  # (Nc,)
        exact.append(float(tau * T.logsumexp(T.cat([d[neg], T.zeros(1, dtype=d.dtype)]), 0)))
        g = offsets[t] + r
        if bool(loss_fn.seen[g, 0]):
            est.append((len(exact) - 1, float(tau * loss_fn.v[g, 0])))
    out = {"probe_exact_loss": float(np.mean(exact)) if exact else None, "probe_seen": len(est)}
    if est:
        out["probe_tau_v"] = float(np.mean([v for _, v in est]))
        out["probe_gap"] = float(np.mean([v - exact[i] for i, v in est]))
        out["probe_abs_gap"] = float(np.mean([abs(v - exact[i]) for i, v in est]))
    return out

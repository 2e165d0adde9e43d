"""The collator: question indices -> a tokenised batch in the one layout the losses read
(:class:`dpr_xrisk.losses.CandidateBatch`, documented in ``losses/layout.py``).

Columns are the batch's distinct passages: every question's chosen positives first, then the
sampled hard negatives. For question i:
- ``pos_mask[i, j]``: j is one of i's chosen positives (one drawn per step for dpm/infonce, up to
  ``max_positives`` for listwise);
- ``neg_mask[i, j]``: j is neither a positive of i (by key or by text) nor, with
  ``filter_answers``, a passage containing one of i's answers;
- ``log_q[i, j]``: log q_ij, by ``q_rule``:
  - ``joint`` (default, docs/method.md §3): the inclusion probability of j in i's sample under the joint
    in-batch + pool sampler, q_ij = 1 - (1 - q_b)(1 - q_h·[j ∈ Π_i]), whichever route brought j
    into the batch (i's own draw, another question's positive or hard negative); q_b = n_b / N
    with n_b = i's negatives that i did not draw itself and N the corpus size, q_h = j's
    probability of being among i's h pool draws (:func:`pool_log_q`);
  - ``separate`` (the rule before docs/method.md §3's update, kept to measure against): i's own draws get
    the pool q, every other unmasked column the in-batch q = n_b / N, even when it is in Π_i.
  q_b = 1 (every candidate certain under ``joint``) with ``in_batch_q = 'one'`` or when N is
  unknown (``corpus_size`` None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from dpr_xrisk.train.data import PassageStore, TrainingSet, is_false_negative
from dpr_xrisk.train.mining import pool_log_q, sample_negatives


@dataclass
class Batch:
    q_inputs: dict  # tokenised questions, (B, Tq)
    p_inputs: dict  # tokenised passages, (N, Tp)
    pos_mask: torch.Tensor  # (B, N) bool
    neg_mask: torch.Tensor  # (B, N) bool
    log_q: torch.Tensor  # (B, N) float32
    rows: torch.Tensor  # (B,) positions of the questions in their TrainingSet (stable across runs)
    slot_ids: torch.Tensor  # (B, K) index in q.positives of each row's k-th positive column (PairTerms order), -1 = pad
    num_hard: int  # hard negatives actually sampled


def collate(encoder, s: TrainingSet, store: PassageStore, rows: list[int], rng: np.random.Generator, *,
            loss: str, hard_negatives: int, max_positives: int, in_batch_q: str, corpus_size: int | None,
            filter_answers: bool, sampler: str = "uniform", temperature: float = 1.0, q_rule: str = "joint") -> Batch:
    questions = [s.questions[r] for r in rows]
    chosen_pos: list[list[str]] = []
    for q in questions:
        if loss == "listwise":
            k = min(max_positives, len(q.positives))
            picks = sorted(rng.choice(len(q.positives), size=k, replace=False)) if len(q.positives) > k else range(k)
            chosen_pos.append([q.positives[int(p)] for p in picks])
        else:
            chosen_pos.append([q.positives[int(rng.integers(len(q.positives)))]])
    hard = [sample_negatives(s.pools[r] if s.pools else [], hard_negatives, rng, sampler, temperature) for r in rows]

    keys = list(dict.fromkeys([k for ps in chosen_pos for k in ps] + [k for hs in hard for k, _ in hs]))
    col = {k: j for j, k in enumerate(keys)}
    B, N = len(rows), len(keys)
    # masks are built in numpy (element-wise torch indexing costs ~30x more) and converted once
    pos_mask = np.zeros((B, N), dtype=bool)  # (B, N)
    neg_mask = np.zeros((B, N), dtype=bool)  # (B, N)
    log_q = np.zeros((B, N), dtype=np.float32)  # (B, N)
    certain = in_batch_q == "one" or not corpus_size
    for i, q in enumerate(questions):
        pos_mask[i, [col[k] for k in chosen_pos[i]]] = True
        own = dict(hard[i])
        negs, in_batch = [], []
        for j, k in enumerate(keys):
            if pos_mask[i, j] or is_false_negative(store, q, k, filter_answers):
                continue
            neg_mask[i, j] = True
            negs.append(j)
            if k not in own:
                in_batch.append(j)
        log_qb = 0.0 if certain or not in_batch else min(0.0, math.log(len(in_batch) / corpus_size))
        if q_rule == "separate":
            for j in negs:
                log_q[i, j] = own[keys[j]] if keys[j] in own else (0.0 if certain else log_qb)
        elif not certain and negs:
            pool = s.pools[rows[i]] if s.pools else []
            log_qh = dict(zip((k for k, _ in pool), pool_log_q(pool, hard_negatives, sampler, temperature).tolist()))
            q_b = math.exp(log_qb) if in_batch else 0.0  # no in-batch candidate: the pool route alone
            for j in negs:
                q_h = math.exp(log_qh.get(keys[j], -math.inf))
                log_q[i, j] = min(0.0, math.log(q_b + q_h * (1.0 - q_b)))  # 1 - (1 - q_b)(1 - q_h)
    pos_mask, neg_mask, log_q = torch.from_numpy(pos_mask), torch.from_numpy(neg_mask), torch.from_numpy(log_q)
    k_max = max(len(c) for c in chosen_pos)
    slot_ids = torch.full((B, k_max), -1, dtype=torch.long)  # (B, K)
    for i, q in enumerate(questions):
        by_col = sorted(chosen_pos[i], key=lambda k: col[k])  # PairTerms order: increasing column
        slot_ids[i, : len(by_col)] = torch.tensor([q.positives.index(k) for k in by_col])
    q_inputs = encoder.tokenize_queries([q.text for q in questions])
    p_inputs = encoder.tokenize_passages([store.texts[k][0] for k in keys], [store.texts[k][1] for k in keys])
    return Batch(dict(q_inputs), dict(p_inputs), pos_mask, neg_mask, log_q,
                 torch.tensor(rows, dtype=torch.long), slot_ids, sum(len(h) for h in hard))

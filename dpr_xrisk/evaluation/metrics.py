"""Retrieval metrics as pure functions. Given answers-hits or qrels and a run, they score --
nothing more (no I/O, no retrieval).

Conventions (those of trec_eval / pytrec_eval, so numbers agree to the last digit):
- a run maps qid -> {docid: score}; documents are ranked by score descending, ties broken by
  docid descending (trec_eval's order);
- relevant means qrels relevance >= 1; queries are those of the qrels with >= 1 relevant doc;
  a query absent from the run scores 0 (trec_eval ``-c``); pytrec_eval itself skips such
  queries, so compare per query;
- recall@k = |relevant in top k| / |relevant|;
- MRR@k = 1 / rank of the first relevant document within the top k, 0 if none
  (trec_eval ``recip_rank`` on the run cut at k);
- nDCG@k = DCG@k / IDCG@k with DCG = sum_i rel_i / log2(i + 1) (trec_eval ``ndcg_cut``:
  linear gain, ideal ranking from the qrels' graded judgements).

DPR top-k accuracy (docs/method.md §6): the fraction of questions with an answer-bearing passage among
their top k, computed from per-rank ``has_answer`` flags in rank order.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

Qrels = Mapping[str, Mapping[str, int]]
ScoredRun = Mapping[str, Mapping[str, float]]


def rank_docs(scores: Mapping[str, float]) -> list[str]:
    """trec_eval's order: score descending, then docid descending."""
    return [d for d, _ in sorted(scores.items(), key=lambda x: (x[1], x[0]), reverse=True)]


def dpr_topk_accuracy(hits: Mapping[str, Sequence[bool]], ks: Sequence[int]) -> dict[int, float]:
    """hits: qid -> has_answer flags in rank order. Returns {k: accuracy}."""
    if not hits:
        return {k: 0.0 for k in ks}
    first = {}
    for qid, flags in hits.items():
        first[qid] = next((i for i, f in enumerate(flags) if f), math.inf)
    return {k: sum(1 for r in first.values() if r < k) / len(first) for k in ks}


def dpr_first_hit_ranks(hits: Mapping[str, Sequence[bool]]) -> dict[str, int | None]:
    """1-based rank of the first answer-bearing passage per question (None if none)."""
    return {q: next((i + 1 for i, f in enumerate(fl) if f), None) for q, fl in hits.items()}


def per_query(qrels: Qrels, run: ScoredRun, metric: str, k: int) -> dict[str, float]:
    """Per-query values of ``recall``, ``mrr`` or ``ndcg`` at cutoff k."""
    fn = {"recall": _recall, "mrr": _mrr, "ndcg": _ndcg}[metric]
    out = {}
    for qid, judged in qrels.items():
        relevant = {d: r for d, r in judged.items() if r >= 1}
        if not relevant:
            continue
        ranked = rank_docs(run.get(qid, {}))[:k]
        out[qid] = fn(ranked, relevant, k)
    return out


def _recall(ranked, relevant, k):
    return sum(1 for d in ranked if d in relevant) / len(relevant)


def _mrr(ranked, relevant, k):
    return next((1.0 / (i + 1) for i, d in enumerate(ranked) if d in relevant), 0.0)


def _ndcg(ranked, relevant, k):
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def qrels_metrics(qrels: Qrels, run: ScoredRun, ks: Sequence[int]) -> dict[str, float]:
    """Mean recall@k, MRR@k and nDCG@k over the qrels' queries, keyed like ``recall@10``."""
    out = {}
    for metric in ("recall", "mrr", "ndcg"):
        for k in ks:
            values = per_query(qrels, run, metric, k)
            out[f"{metric}@{k}"] = sum(values.values()) / len(values) if values else 0.0
    return out

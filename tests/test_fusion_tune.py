"""Choosing the hybrid's interpolation weight on labelled questions (`tune-fusion`): the sweep
against a naive re-implementation, its per-question scores against `dpr-xrisk evaluate` of the
fused run written to disk, and the clear errors of bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from conftest import SAMPLE, cli
from dpr_xrisk.errors import InputError
from dpr_xrisk.evaluation.evaluate import evaluate_run
from dpr_xrisk.io.questions import read_questions
from dpr_xrisk.io.trec import read_qrels, write_run
from dpr_xrisk.retrieval.search import fuse, load_passage_texts, per_question_metrics, tune_alpha


def random_runs(qids, docs, seed=0, depth=30):
    """A dense run (cosines) and a BM25-like run (scores ~ 5..30) over the same documents, each
    question with its own random lists, partly overlapping."""
    rng = np.random.default_rng(seed)
    dense, sparse = {}, {}
    for q in qids:
        d = rng.choice(docs, size=depth, replace=False)
        s = rng.choice(docs, size=depth, replace=False)
        dense[q] = sorted(((str(x), float(v)) for x, v in zip(d, rng.uniform(0.2, 0.9, depth))), key=lambda t: -t[1])
        sparse[q] = sorted(((str(x), float(v)) for x, v in zip(s, rng.uniform(5, 30, depth))), key=lambda t: -t[1])
    return dense, sparse


def naive_mrr10(dense, sparse, qrels, alpha):
    """Interpolation written out by hand: min-max centre each list, a missing document takes the
    list's minimum, rank by score (ties: docid descending, trec_eval), MRR@10 by the qrels."""
    total = 0.0
    for q, judged in qrels.items():
        def centre(hits):
            vals = [v for _, v in hits]
            lo, hi = min(vals), max(vals)
            return {d: (v - (lo + hi) / 2) / (hi - lo) for d, v in hits}
        d, s = centre(dense[q]), centre(sparse[q])
        dmin, smin = min(d.values()), min(s.values())
        scores = {doc: d.get(doc, dmin) + alpha * s.get(doc, smin) for doc in set(d) | set(s)}
        ranked = [doc for doc, _ in sorted(scores.items(), key=lambda x: (x[1], x[0]), reverse=True)][:10]
        total += next((1 / (i + 1) for i, doc in enumerate(ranked) if judged.get(doc, 0) >= 1), 0.0)
    return total / len(qrels)


def test_sweep_and_choice_equal_a_naive_reimplementation():
    docs = [f"d{i}" for i in range(60)]
    qids = [str(i) for i in range(40)]
    dense, sparse = random_runs(qids, docs)
    rng = np.random.default_rng(1)
    qrels = {q: {str(rng.choice(docs)): 1} for q in qids}
    grid = (0.1, 0.5, 1.0, 2.0, 4.0)

    def score(run):
        return per_question_metrics(run, qids, qrels=qrels)

    res = tune_alpha(dense, sparse, score, "mrr@10", grid=grid, k=100)
    naive = {a: naive_mrr10(dense, sparse, qrels, a) for a in grid}
    got = {r["alpha"]: r["means"]["mrr@10"] for r in res["rows"] if r["fusion"] == "interpolation"}
    assert got == pytest.approx(naive, abs=1e-12)
    best = max(naive.values())
    assert res["best_alpha"] in [a for a, v in naive.items() if v == best]
    assert [r["fusion"] for r in res["rows"]][0] == "rrf"  # scored beside the grid, never chosen


def test_ties_go_to_the_weight_nearest_equal():
    dense = {"q": [("a", 0.9), ("b", 0.1)]}
    sparse = {"q": [("a", 9.0), ("b", 1.0)]}  # every alpha ranks a first: all tie
    res = tune_alpha(dense, sparse, lambda run: per_question_metrics(run, ["q"], qrels={"q": {"a": 1}}),
                     "mrr@10", grid=(0.1, 0.7, 3.0, 1.2))
    assert res["best_alpha"] == 1.2  # |ln 1.2| < |ln 0.7|


def test_per_question_scores_equal_dpr_xrisk_evaluate_of_the_written_run(tmp_path):
    questions = read_questions(SAMPLE / "test.qa.tsv")
    qrels = read_qrels(SAMPLE / "test.qrels.tsv")
    passages = load_passage_texts(SAMPLE / "passages.tsv")
    qids = [q.qid for q in questions]
    dense, sparse = random_runs(qids, sorted(passages), seed=3, depth=40)
    for q, judged in qrels.items():  # put the right passage somewhere in one of the lists
        pos = next(iter(judged))
        if all(d != pos for d, _ in sparse[q]):
            sparse[q][int(q) % 7] = (pos, sparse[q][int(q) % 7][1])
    for fusion, alpha in (("rrf", 0.0), ("interpolation", 0.7)):
        run = fuse(dense, sparse, method=fusion, alpha=alpha, k=100)
        pq = per_question_metrics(run, qids, qrels=qrels, questions=questions, passages=passages,
                                  ks=(1, 5, 20), qrels_ks=(10,))
        write_run(tmp_path / f"{fusion}.trec", run, tag=fusion)
        ref = evaluate_run(tmp_path / f"{fusion}.trec", questions, passages, qrels, ks=(1, 5, 20), qrels_ks=(10,))
        for m in ("top1", "top5", "top20", "mrr@10", "recall@10", "ndcg@10"):
            assert sum(pq[m].values()) / len(qids) == pytest.approx(ref["metrics"][m], abs=1e-12), (fusion, m)


@pytest.fixture
def sample_runs(tmp_path):
    questions = read_questions(SAMPLE / "test.qa.tsv")
    passages = load_passage_texts(SAMPLE / "passages.tsv")
    dense, sparse = random_runs([q.qid for q in questions], sorted(passages), seed=5, depth=25)
    write_run(tmp_path / "dense.trec", dense, tag="dense")
    write_run(tmp_path / "bm25.trec", sparse, tag="bm25")
    return tmp_path / "dense.trec", tmp_path / "bm25.trec"


def test_cli_prints_the_sweep_and_writes_json_and_chart(sample_runs, tmp_path):
    dense, sparse = sample_runs
    out = cli("tune-fusion", "--dense", dense, "--sparse", sparse, "--qrels", SAMPLE / "test.qrels.tsv",
              "--answers", SAMPLE / "test.qa.tsv", "--corpus", SAMPLE / "passages.tsv",
              "--alpha", 0.5, "--alpha", 1, "--alpha", 2, "--out", tmp_path / "t.json", "--plot", tmp_path / "t.png")
    rec = json.loads((tmp_path / "t.json").read_text())
    assert rec["metric"] == "mrr@10" and rec["questions"] == 20
    assert [r["alpha"] for r in rec["rows"]] == [None, 0.5, 1.0, 2.0]
    best = max(r["means"]["mrr@10"] for r in rec["rows"][1:])
    assert rec["rows"][[r["alpha"] for r in rec["rows"]].index(rec["best_alpha"])]["means"]["mrr@10"] == best
    assert f"--alpha {rec['best_alpha']:g}" in out and "<- best mrr@10" in out
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    only_answers = cli("tune-fusion", "--dense", dense, "--sparse", sparse, "--answers", SAMPLE / "test.qa.tsv",
                       "--corpus", SAMPLE / "passages.tsv")
    assert "best top5" in only_answers and "mrr@10" not in only_answers


def other_qrels(tmp_path):
    (tmp_path / "other.qrels").write_text("99 0 s10 1\n")
    return ["--qrels", tmp_path / "other.qrels"]


def fewer_answers(tmp_path):
    lines = (SAMPLE / "test.qa.tsv").read_text(encoding="utf-8").splitlines()[:5]
    (tmp_path / "five.qa.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ["--qrels", SAMPLE / "test.qrels.tsv", "--answers", tmp_path / "five.qa.tsv", "--corpus", SAMPLE / "passages.tsv"]


@pytest.mark.parametrize("extra, message", [
    (lambda t: [], "nothing to tune on"),
    (lambda t: ["--answers", SAMPLE / "test.qa.tsv"], "--answers needs --corpus"),
    (lambda t: ["--qrels", SAMPLE / "test.qrels.tsv", "--alpha", -1], "Invalid value for '--alpha'"),
    (lambda t: ["--qrels", SAMPLE / "test.qrels.tsv", "--metric", "top5"], "unknown metric 'top5'; valid: mrr@10"),
    (lambda t: ["--qrels", SAMPLE / "test.qrels.tsv", "--plot", t / "x.svg"], "PNG"),
    (lambda t: ["--qrels", SAMPLE / "test.qrels.tsv", "--metric", "mrr@0"], "--metric's cut-off must be a positive integer, got 0"),
    (lambda t: ["--answers", SAMPLE / "test.qa.tsv", "--corpus", SAMPLE / "passages.tsv", "--metric", "top0"],
     "--metric's cut-off must be a positive integer, got 0"),
    (other_qrels, "1 of 1 labelled question(s) are in neither run"),
    (fewer_answers, "label different questions (5 vs 20)"),
])
def test_bad_input_is_one_clear_line(sample_runs, tmp_path, extra, message):
    dense, sparse = sample_runs
    out = cli("tune-fusion", "--dense", dense, "--sparse", sparse, *extra(tmp_path), code=2)
    assert message in out


def test_a_run_naming_passages_outside_the_corpus_is_refused(sample_runs, tmp_path):
    dense, sparse = sample_runs
    lines = dense.read_text().splitlines()
    first = lines[0].split()
    first[2] = "not-a-passage"
    dense.write_text("\n".join([" ".join(first)] + lines[1:]) + "\n")
    out = cli("tune-fusion", "--dense", dense, "--sparse", sparse, "--answers", SAMPLE / "test.qa.tsv",
              "--corpus", SAMPLE / "passages.tsv", code=2)
    assert "not in the corpus" in out


def test_empty_grid_is_refused():
    with pytest.raises(InputError, match=">= 0"):
        tune_alpha({"q": [("a", 1.0)]}, {"q": [("a", 1.0)]}, lambda run: {"mrr@10": {"q": 1.0}}, "mrr@10", grid=())
    with pytest.raises(InputError, match=">= 0"):
        tune_alpha({"q": [("a", 1.0)]}, {"q": [("a", 1.0)]}, lambda run: {"mrr@10": {"q": 1.0}}, "mrr@10",
                   grid=(math.nan,))


def test_best_alpha_on_a_subset_is_the_subsets_argmax():
    rows = [{"fusion": "rrf", "alpha": None, "per_question": {"m": {"a": 1.0, "b": 1.0}}},
            {"fusion": "interpolation", "alpha": 0.5, "per_question": {"m": {"a": 1.0, "b": 0.0}}},
            {"fusion": "interpolation", "alpha": 2.0, "per_question": {"m": {"a": 0.0, "b": 0.9}}}]
    from dpr_xrisk.retrieval.search import best_alpha

    assert best_alpha(rows, "m") == 0.5  # RRF is never chosen, however good
    assert best_alpha(rows, "m", ["b"]) == 2.0
    assert best_alpha(rows, "m", ["a"]) == 0.5


def test_the_answer_cache_is_keyed_by_the_answers_not_the_question_id():
    from dpr_xrisk.io.questions import Question

    run = {"q": [("p", 1.0)]}
    passages = {"p": ("", "the alpha particle")}
    cache: dict = {}
    first = per_question_metrics(run, ["q"], questions=[Question("q", "?", ("alpha",))], passages=passages,
                                 ks=(1,), answer_cache=cache)
    again = per_question_metrics(run, ["q"], questions=[Question("q", "?", ("beta",))], passages=passages,
                                 ks=(1,), answer_cache=cache)
    assert first["top1"]["q"] == 1.0 and again["top1"]["q"] == 0.0


@pytest.mark.parametrize("lines, message", [
    (['{"id": "0", "question": "a?", "answers": ["x"]}', '{"id": "0", "question": "b?", "answers": ["y"]}'],
     "question id '0' appears twice"),
    (['{"id": "0", "question": "a?", "answers": []}', '{"id": "1", "question": "b?", "answers": ["y"]}'],
     "1 question(s) of --answers have no answer"),
])
def test_answers_that_cannot_score_are_refused(sample_runs, tmp_path, lines, message):
    dense, sparse = sample_runs
    (tmp_path / "q.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = cli("tune-fusion", "--dense", dense, "--sparse", sparse, "--answers", tmp_path / "q.jsonl",
              "--corpus", SAMPLE / "passages.tsv", code=2)
    assert message in out

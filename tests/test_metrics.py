"""Answer matching and metrics against the references: pyserini's evaluate_dpr_retrieval (DPR
top-k accuracy) and pytrec_eval (recall, MRR, nDCG) -- on synthetic runs with ties and graded
judgements, and on a real BM25 run over SQuAD."""

from __future__ import annotations

import contextlib
import io
import json
import random

import pytest

from dpr_xrisk.evaluation.answers import has_answer, tokenize
from dpr_xrisk.evaluation.evaluate import evaluate_run
from dpr_xrisk.io.retrieval_json import write_retrieval_json
from dpr_xrisk.io.trec import write_run
from dpr_xrisk.evaluation.metrics import dpr_topk_accuracy, per_query, qrels_metrics
from dpr_xrisk.retrieval.search import retrieval_records

pyserini_eval = pytest.importorskip("pyserini.eval.evaluate_dpr_retrieval")
pytrec_eval = pytest.importorskip("pytrec_eval")

CASES = [
    ("The Eiffel Tower is in Paris, France.", ["paris"], True),
    ("The Eiffel Tower is in Parisian France.", ["paris"], False),
    ("Born in 1879 (aged 76).", ["1879"], True),
    ("Café au lait", ["cafe"], False),  # NFD splits the accent into a combining mark kept in the token
    ("Café au lait", ["Café"], True),
    ("U.S. president", ["U.S."], True),
    ("e=mc^2 is famous", ["mc ^ 2"], True),
    ("Beyoncé Knowles", ["Beyonce"], False),
    ("", ["x"], False),
    ("anything", [""], True),
    # an answer whose first word the passage lacks is skipped, the next one still matched
    ("one two one three", ["zzz", "one three"], True),
    ("one two one three", ["zzz one", "one four", "three one"], False),
]


@pytest.mark.parametrize("text,answers,expected", CASES)
def test_has_answer_matches_pyserini(text, answers, expected):
    tok = pyserini_eval.SimpleTokenizer()
    assert has_answer(text, answers) == pyserini_eval.has_answers(text, answers, tok, False) == expected


def test_has_answer_regex_mode_matches_pyserini():
    tok = pyserini_eval.SimpleTokenizer()
    for text, pattern in [("It cost $100 million", r"\$?100 million"), ("Deep Blue", "deep\\s+blue"), ("x", "(")]:
        assert has_answer(text, [pattern], regex=True) == pyserini_eval.has_answers(text, [pattern], tok, True)


def test_tokenize_rule():
    assert tokenize("Hello, World's 2nd!") == ["hello", ",", "world", "'", "s", "2nd", "!"]


def test_has_answer_on_random_real_strings_matches_pyserini(squad_bm25):
    run, questions, passages = squad_bm25
    tok = pyserini_eval.SimpleTokenizer()
    rng = random.Random(0)
    checked = 0
    for q in rng.sample(questions, 200):
        for docid, _ in run[q.qid][:5]:
            text = passages[docid][1]
            assert has_answer(text, q.answers) == pyserini_eval.has_answers(text, q.answers, tok, False)
            checked += 1
    assert checked == 1000


def _pyserini_accuracy(path, ks):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        pyserini_eval.evaluate_retrieval(str(path), ks, False)
    return {int(line.split("\t")[0][3:]): line.split(": ")[1] for line in buf.getvalue().splitlines() if line.startswith("Top")}


def test_dpr_accuracy_equals_pyserini_on_real_squad_run(squad_bm25, tmp_path):
    run, questions, passages = squad_bm25
    ks = [1, 5, 20, 100]
    records = retrieval_records(run, questions, passages)
    # pyserini recomputes has_answer from the text when the flag is absent: strip ours
    for rec in records.values():
        for c in rec["contexts"]:
            c.pop("has_answer")
    write_retrieval_json(tmp_path / "run.json", records)
    ref = _pyserini_accuracy(tmp_path / "run.json", ks)
    ours = evaluate_run(tmp_path / "run.json", ks=ks)["metrics"]
    assert {k: f"{ours[f'top{k}']:.4f}" for k in ks} == ref
    # and from a TREC run + answers + corpus, computing has_answer ourselves
    write_run(tmp_path / "run.trec", run)
    ours_trec = evaluate_run(tmp_path / "run.trec", questions, passages, ks=ks)["metrics"]
    assert ours_trec == ours
    assert 0.3 < ours["top1"] < ours["top5"] < ours["top20"] <= ours["top100"]  # BM25 on SQuAD is strong


def _pytrec(qrels, run, measures):
    ev = pytrec_eval.RelevanceEvaluator(qrels, measures)
    return ev.evaluate(run)


def _check_against_pytrec(qrels, run, ks):
    for k in ks:
        cut = {q: dict(sorted(d.items(), key=lambda x: (x[1], x[0]), reverse=True)[:k]) for q, d in run.items()}
        ref_rr = _pytrec(qrels, cut, {"recip_rank"})
        ref = _pytrec(qrels, run, {f"recall.{k}", f"ndcg_cut.{k}"})
        ours_r, ours_m, ours_n = (per_query(qrels, run, m, k) for m in ("recall", "mrr", "ndcg"))
        for q in ref:
            assert ours_r[q] == pytest.approx(ref[q][f"recall_{k}"], abs=1e-12)
            assert ours_n[q] == pytest.approx(ref[q][f"ndcg_cut_{k}"], abs=1e-12)
            assert ours_m[q] == pytest.approx(ref_rr[q]["recip_rank"], abs=1e-12)


def test_qrels_metrics_equal_pytrec_eval_with_ties_and_grades():
    rng = random.Random(1)
    qrels, run = {}, {}
    for qi in range(60):
        q = f"q{qi}"
        qrels[q] = {f"d{rng.randrange(40)}": rng.choice([0, 1, 2, 3]) for _ in range(rng.randint(1, 6))}
        if not any(qrels[q].values()):
            qrels[q][f"d{rng.randrange(40)}"] = 1
        # coarse scores make many ties: trec_eval breaks them by docid
        run[q] = {f"d{rng.randrange(40)}": float(rng.randint(0, 5)) for _ in range(rng.randint(1, 30))}
    _check_against_pytrec(qrels, run, [1, 3, 10, 100])


def test_qrels_metrics_equal_pytrec_eval_on_real_squad_run(squad_bm25, squad_dir):
    from dpr_xrisk.io.trec import read_qrels

    run, _, _ = squad_bm25
    qrels = {q: r for q, r in read_qrels(squad_dir / "test.qrels.tsv").items() if q in run}
    scored = {q: dict(h) for q, h in run.items()}
    _check_against_pytrec(qrels, scored, [1, 10, 100])
    means = qrels_metrics(qrels, scored, [10])
    ref = _pytrec(qrels, scored, {"recall.10"})
    assert len(ref) == len(qrels) == 800
    assert means["recall@10"] == pytest.approx(sum(v["recall_10"] for v in ref.values()) / len(ref), abs=1e-12)


def test_query_missing_from_run_scores_zero():
    # trec_eval -c semantics; pytrec_eval would skip the query instead
    means = qrels_metrics({"a": {"d": 1}, "b": {"d": 1}}, {"a": {"d": 1.0}}, [10])
    assert means["recall@10"] == 0.5 and means["mrr@10"] == 0.5


def test_dpr_topk_accuracy_by_hand():
    hits = {"a": [False, True], "b": [True], "c": [False, False, False]}
    assert dpr_topk_accuracy(hits, [1, 2, 5]) == {1: 1 / 3, 2: 2 / 3, 5: 2 / 3}


def test_evaluate_errors(tmp_path):
    from dpr_xrisk.errors import InputError
    from dpr_xrisk.io.questions import Question

    (tmp_path / "r.trec").write_text("7 Q0 d1 1 1.0 t\n")
    with pytest.raises(InputError, match="not in the questions file"):
        evaluate_run(tmp_path / "r.trec", [Question("0", "q", ("a",))], {"d1": ("", "a")})
    with pytest.raises(InputError, match="absent from the qrels"):
        evaluate_run(tmp_path / "r.trec", qrels={"0": {"d1": 1}})
    with pytest.raises(InputError, match="unknown run format"):
        evaluate_run(tmp_path / "r.xlsx")
    (tmp_path / "r2.trec").write_text("0 Q0 d9 1 1.0 t\n")
    with pytest.raises(InputError, match="'d9', which is not in the corpus"):
        evaluate_run(tmp_path / "r2.trec", [Question("0", "q", ("a",))], {"d1": ("", "a")})
    (tmp_path / "x.json").write_text(json.dumps([1, 2]))
    with pytest.raises(InputError, match="expected a DPR retrieval JSON"):
        evaluate_run(tmp_path / "x.json")

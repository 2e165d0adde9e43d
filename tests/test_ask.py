"""`dpr-xrisk ask` (issue #14 item 3): a question answered from the terminal, with the same
passages and scores `search` returns."""

from __future__ import annotations

import json

import pytest

from conftest import SAMPLE, cli
from dpr_xrisk.evaluation.answers import has_answer
from dpr_xrisk.io.passages import read_passages

QUESTION = "Where does the White Nile rise?"


@pytest.fixture(scope="module")
def sample_index(tiny_model_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("ask")
    cli("encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out", d / "emb")
    cli("index", "--embeddings", d / "emb", "--out", d / "idx")
    return d / "idx"


def test_ask_prints_the_passages_search_returns(sample_index, tmp_path):
    out = cli("ask", "--index", sample_index, QUESTION, "--k", 3, "--json")
    got = json.loads(out)
    (tmp_path / "q.tsv").write_text(f"{QUESTION}\t[]\n")
    cli("search", "--index", sample_index, "--queries", tmp_path / "q.tsv", "--k", 3, "--out-run", tmp_path / "r.trec")
    ref = [line.split() for line in (tmp_path / "r.trec").read_text().splitlines()]
    assert [h["id"] for h in got["hits"]] == [r[2] for r in ref]
    assert [h["score"] for h in got["hits"]] == pytest.approx([float(r[4]) for r in ref], abs=1e-5)
    texts = {p.id: (p.title, p.text) for p in read_passages(SAMPLE / "passages.tsv")}
    assert all((h["title"], h["text"]) == texts[h["id"]] for h in got["hits"])
    table = cli("ask", "--index", sample_index, QUESTION, "--k", 3)
    assert table.startswith(f"Q: {QUESTION}") and all(h["id"] in table for h in got["hits"])


def test_answer_marks_follow_has_answer(sample_index):
    got = json.loads(cli("ask", "--index", sample_index, QUESTION, "--k", 10, "--json", "--answers", "Lake Victoria",
                         "--answers", "Nile"))
    assert [h["has_answer"] for h in got["hits"]] == [has_answer(h["text"], ["Lake Victoria", "Nile"]) for h in got["hits"]]
    assert "✓" in cli("ask", "--index", sample_index, QUESTION, "--k", 400, "--answers", "Nile")  # every passage


def test_questions_from_standard_input_load_once(sample_index):
    out = cli("ask", "--index", sample_index, "--k", 2, "--json", stdin=f"{QUESTION}\n\nwhat is the longest river\n")
    lines = [json.loads(x) for x in out.splitlines()]
    assert [x["question"] for x in lines] == [QUESTION, "what is the longest river"]
    assert all(len(x["hits"]) == 2 for x in lines)


def test_hybrid_with_bm25(sample_index, tmp_path):
    cli("bm25", "index", "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / "bm25")
    got = json.loads(cli("ask", "--index", sample_index, QUESTION, "--k", 4, "--json", "--bm25-index", tmp_path / "bm25"))
    assert len(got["hits"]) == 4 and got["hits"][0]["score"] >= got["hits"][-1]["score"]


def test_bad_questions_and_missing_index_are_one_line_errors(sample_index, tmp_path):
    assert "empty question" in cli("ask", "--index", sample_index, "   ", code=2)
    long = " ".join(["river"] * 200)
    assert "tokens; the encoder reads" in cli("ask", "--index", sample_index, long, code=2)
    assert len(json.loads(cli("ask", "--index", sample_index, long, "--truncate", "--json", "--k", 1))["hits"]) == 1
    assert "not an index folder" in cli("ask", "--index", tmp_path, QUESTION, code=2)
    assert "no question on standard input" in cli("ask", "--index", sample_index, stdin="\n\n", code=2)


def test_ask_reads_texts_from_a_datasets_corpus(tiny_model_dir, tmp_path):
    cli("convert", "dataset", "--input", SAMPLE / "passages.tsv", "--out", tmp_path / "ds")
    cli("encode", "--model", tiny_model_dir, "--corpus", tmp_path / "ds", "--out", tmp_path / "emb")
    cli("index", "--embeddings", tmp_path / "emb", "--out", tmp_path / "idx")
    got = json.loads(cli("ask", "--index", tmp_path / "idx", QUESTION, "--k", 3, "--json"))
    texts = {p.id: (p.title, p.text) for p in read_passages(SAMPLE / "passages.tsv")}
    assert [(h["title"], h["text"]) for h in got["hits"]] == [texts[h["id"]] for h in got["hits"]]


def test_ask_refuses_an_empty_answer(sample_index):
    assert "empty answer string" in cli("ask", "--index", sample_index, QUESTION, "--answers", " ", code=2)

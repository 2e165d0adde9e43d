"""Readers and writers: round trips, the real DPR sample, and every bad input as a located error."""

from __future__ import annotations

import json

import pytest

from conftest import shared_path
from dpr_xrisk.errors import InputError
from dpr_xrisk.io import (Passage, Question, read_biencoder, read_passages, read_qrels, read_questions,
                          read_retrieval_json, read_run, write_passages_tsv, write_qa_tsv, write_qrels, write_run)
from dpr_xrisk.io.common import atomic_write
from dpr_xrisk.io.passages import count_passages, write_jsonl_collection


def test_passages_round_trip_tsv_and_jsonl(tmp_path):
    ps = [Passage("a1", "Paris is the capital.", "France"), Passage("b2", "Text\twith tab", 'Quoted "title"')]
    write_passages_tsv(tmp_path / "p.tsv", ps)
    got = list(read_passages(tmp_path / "p.tsv"))
    assert got[0] == ps[0] and got[1].text == "Text with tab" and got[1].title == 'Quoted "title"'
    assert count_passages(tmp_path / "p.tsv") == 2
    write_jsonl_collection(tmp_path / "p.jsonl", ps)
    assert [p.id for p in read_passages(tmp_path / "p.jsonl")] == ["a1", "b2"]
    assert list(read_passages(tmp_path / "p.jsonl"))[0] == ps[0]


def test_beir_folder(tmp_path):
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "T", "text": "hello world"}) + "\n")
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "hello?"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    assert list(read_passages(beir)) == [Passage("d1", "hello world", "T")]
    assert read_questions(beir) == [Question("q1", "hello?", ())]
    assert read_qrels(beir) == {"q1": {"d1": 1}}


def test_qa_tsv_ids_are_line_numbers_and_python_lists(tmp_path):
    f = tmp_path / "qa.tsv"
    f.write_text("who?\t[\"A\", \"B\"]\nwhat?\t['C']\n")
    assert read_questions(f) == [Question("0", "who?", ("A", "B")), Question("1", "what?", ("C",))]
    write_qa_tsv(tmp_path / "out.tsv", read_questions(f))
    assert read_questions(tmp_path / "out.tsv") == read_questions(f)


def test_qa_tsv_csv_quoted_fields_as_dpr_reads_them(tmp_path):
    """DPR reads QA files with csv.reader(delimiter="\t"): a csv-quoted field is unquoted (doubled
    quotes become one), anything else is literal; our writer quotes a question starting with a quote."""
    import csv

    f = tmp_path / "qa.tsv"
    f.write_text('"""Imagine"" singer"\t"[\'He said ""hi""\']"\nsay "x" now\t[\'y\']\n')
    got = read_questions(f)
    with open(f, newline="") as fh:
        dpr = list(csv.reader(fh, delimiter="\t"))
    assert [(q.text, q.answers) for q in got] == [('"Imagine" singer', ('He said "hi"',)), ('say "x" now', ("y",))]
    assert [r[0] for r in dpr] == [q.text for q in got]
    write_qa_tsv(tmp_path / "out.tsv", got)
    assert read_questions(tmp_path / "out.tsv") == got


def test_trec_run_and_qrels_round_trip(tmp_path):
    run = {"q1": [("d2", 3.5), ("d1", 1.25)], "q2": [("d9", 0.5)]}
    write_run(tmp_path / "r.trec", run)
    assert read_run(tmp_path / "r.trec") == run
    write_qrels(tmp_path / "q.txt", {"q1": {"d1": 1, "d3": 2}})
    assert read_qrels(tmp_path / "q.txt") == {"q1": {"d1": 1, "d3": 2}}


def test_real_dpr_biencoder_sample():
    recs = read_biencoder(shared_path("dpr-nq-dev-sample", "biencoder-nq-dev-sample.json"))
    assert len(recs) == 5
    assert sum(len(r["positive_ctxs"]) for r in recs) == 22
    assert sum(len(r["hard_negative_ctxs"]) for r in recs) == 483
    assert all(c["passage_id"] for r in recs for c in r["positive_ctxs"])


def test_real_wiki_jsonl_collection():
    ps = list(read_passages(shared_path("wiki-passages-sample", "passages.jsonl")))
    assert len(ps) == 1000 and all(p.title and p.text and not p.title.startswith('"') for p in ps)


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_write(tmp_path / "x.txt") as f:
            f.write("half")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


BAD = [
    ("missing.tsv", None, read_passages, "file not found"),
    ("p.jsonl", '{"id": "a", "contents": "x"}\n{"id": "b", "contents": \n', read_passages, "p.jsonl:2: malformed JSON"),
    ("p.jsonl", '{"contents": "x"}\n', read_passages, "p.jsonl:1: missing required field 'id'"),
    ("p.tsv", "id\ttext\ttitle\na\t \tT\n", read_passages, "p.tsv:2: passage 'a' has empty text"),
    ("p.tsv", "id\ttext\ttitle\na\tx\tT\na\ty\tT\n", read_passages, "p.tsv:3: duplicate passage id 'a'"),
    ("p.tsv", "id\ttext\ttitle\nonlyid\n", read_passages, "p.tsv:2: expected 3 tab-separated fields"),
    ("p.xml", "x", read_passages, "unknown corpus format"),
    ("p.parquet", "x", read_passages, "cannot read the Parquet schema"),
    ("q.tsv", "ok\t[\"a\"]\n\t[\"b\"]\n", read_questions, "q.tsv:2: empty question text"),
    ("q.tsv", "ok\t[\"a\"\n", read_questions, "q.tsv:1: answers must be a list"),
    ("q.jsonl", '{"id": 1}\n', read_questions, "q.jsonl:1: missing or empty field 'question'"),
    ("b.json", '[{"question": "q", "answers": ["a"], "positive_ctxs": [{"title": "t"}]}]', read_biencoder, "has missing or empty 'text'"),
    ("b.json", '[{"answers": ["a"]}]', read_biencoder, "record 0: missing required field 'question'"),
    ("b.json", '{"question": 1}', read_biencoder, "expected a JSON list"),
    ("b.json", '[{"question": "q",\n "answers": [}]', read_biencoder, "b.json:2: malformed JSON"),
    ("r.trec", "q1 Q0 d1 1 0.5\n", read_run, "r.trec:1: expected 'qid Q0 docid rank score tag'"),
    ("r.trec", "q1 Q0 d1 one 0.5 t\n", read_run, "r.trec:1: rank must be an integer"),
    ("qr.txt", "q1 0 d1 yes\n", read_qrels, "qr.txt:1: relevance 'yes' is not a number"),
    ("rj.json", '{"0": {"question": "q"}}', read_retrieval_json, "missing 'answers' or 'contexts'"),
]


@pytest.mark.parametrize("name,content,reader,message", BAD, ids=[b[3][:30] for b in BAD])
def test_bad_input_is_a_located_error(tmp_path, name, content, reader, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError) as e:
        result = reader(path)
        list(result) if not isinstance(result, (dict, list)) else result
    assert message in str(e.value)
    assert str(path.name) in str(e.value) or "unknown" in str(e.value)

"""🤗 datasets underneath (issue #14 item 1): every reader also takes a save_to_disk folder, a
Parquet file and a folder of Parquet shards, with the same records as the DPR files; a missing
column is a one-line error naming it; `convert dataset` writes any input as a datasets folder."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import SAMPLE, cli
from dpr_xrisk.errors import InputError
from dpr_xrisk.io.biencoder import read_biencoder
from dpr_xrisk.io.passages import count_passages, read_passages
from dpr_xrisk.io.questions import read_questions


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    d = tmp_path_factory.mktemp("tables")
    cli("convert", "dataset", "--input", SAMPLE / "passages.tsv", "--out", d / "passages")
    cli("convert", "dataset", "--input", SAMPLE / "test.qa.tsv", "--out", d / "questions", "--kind", "questions")
    cli("convert", "dataset", "--input", SAMPLE / "biencoder-train.json", "--out", d / "train", "--kind", "biencoder")
    ps = list(read_passages(SAMPLE / "passages.tsv"))
    table = pa.table({"id": [p.id for p in ps], "text": [p.text for p in ps], "title": [p.title for p in ps]})
    pq.write_table(table, d / "passages.parquet")
    (d / "shards").mkdir()
    pq.write_table(table.slice(0, 100), d / "shards" / "part-0.parquet")
    pq.write_table(table.slice(100), d / "shards" / "part-1.parquet")
    return d


def test_every_table_form_reads_like_the_tsv(tables):
    ref = list(read_passages(SAMPLE / "passages.tsv"))
    for src in (tables / "passages", tables / "passages.parquet", tables / "shards"):
        assert list(read_passages(src)) == ref, src
        assert count_passages(src) == len(ref)
    assert read_questions(tables / "questions") == read_questions(SAMPLE / "test.qa.tsv")
    a, b = read_biencoder(tables / "train"), read_biencoder(SAMPLE / "biencoder-train.json")
    assert [(r["question"], r["answers"], [(c["title"], c["text"], c["passage_id"]) for c in r["positive_ctxs"]])
            for r in a] == [(r["question"], r["answers"], [(c["title"], c["text"], c["passage_id"])
                                                           for c in r["positive_ctxs"]]) for r in b]


def test_missing_column_names_it(tmp_path):
    pq.write_table(pa.table({"id": ["a"], "body": ["x"]}), tmp_path / "p.parquet")
    with pytest.raises(InputError, match=r"missing column 'text'"):
        list(read_passages(tmp_path / "p.parquet"))
    pq.write_table(pa.table({"query": ["x"]}), tmp_path / "q.parquet")
    with pytest.raises(InputError, match=r"missing column 'question' or 'text'"):
        read_questions(tmp_path / "q.parquet")
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["x", " "]}), tmp_path / "e.parquet")
    with pytest.raises(InputError, match=r"e.parquet:2: passage 'b' has empty text"):
        list(read_passages(tmp_path / "e.parquet"))


def test_pipeline_runs_on_a_datasets_corpus(tables, tiny_model_dir, tmp_path):
    """encode -> index -> search --out-json with the corpus given as a datasets folder: the same
    run as from the TSV."""
    for name, corpus in (("tsv", SAMPLE / "passages.tsv"), ("arrow", tables / "passages")):
        cli("encode", "--model", tiny_model_dir, "--corpus", corpus, "--out", tmp_path / name / "emb")
        cli("index", "--embeddings", tmp_path / name / "emb", "--out", tmp_path / name / "idx")
        cli("search", "--index", tmp_path / name / "idx", "--queries", tables / "questions", "--k", 5,
            "--out-json", tmp_path / name / "run.json")
    assert json.loads((tmp_path / "tsv" / "run.json").read_text()) == json.loads((tmp_path / "arrow" / "run.json").read_text())


def test_convert_dataset_writes_more_rows_than_one_batch(tmp_path):
    from dpr_xrisk.io import arrow

    n = arrow.BATCH * 2 + 7
    (tmp_path / "p.tsv").write_text("id\ttext\ttitle\n" + "".join(f"p{i}\ttext {i}\tT\n" for i in range(n)))
    cli("convert", "dataset", "--input", tmp_path / "p.tsv", "--out", tmp_path / "ds")
    got = list(read_passages(tmp_path / "ds"))
    assert len(got) == count_passages(tmp_path / "ds") == n and got[-1].id == f"p{n - 1}"


def test_table_bad_inputs_are_one_line_errors(tmp_path, tiny_model_dir):
    pq.write_table(pa.table({"id": ["a", "b"], "text": [1, 2]}), tmp_path / "t.parquet")
    with pytest.raises(InputError, match=r"t.parquet: column 'text' is integer, expected string"):
        list(read_passages(tmp_path / "t.parquet"))
    pq.write_table(pa.table({"id": ["a", "a"], "text": ["x", "y"]}), tmp_path / "d.parquet")
    with pytest.raises(InputError, match=r"d.parquet:2: duplicate passage id 'a'"):
        list(read_passages(tmp_path / "d.parquet"))
    pq.write_table(pa.table({"question": pa.array([], pa.string())}), tmp_path / "q0.parquet")
    with pytest.raises(InputError, match=r"q0.parquet: no questions in table"):
        read_questions(tmp_path / "q0.parquet")
    pq.write_table(pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())}), tmp_path / "p0.parquet")
    out = cli("encode", "--model", tiny_model_dir, "--corpus", tmp_path / "p0.parquet", "--out", tmp_path / "e", code=2)
    assert "corpus has no passages" in out
    pq.write_table(pa.table({"question": ["q"], "answers": [["a", ""]]}), tmp_path / "qa.parquet")
    with pytest.raises(InputError, match="empty answer string"):
        read_questions(tmp_path / "qa.parquet")
    assert "nothing to write" in cli("convert", "dataset", "--input", tmp_path / "p0.parquet", "--out", tmp_path / "x", code=2)


def test_convert_dataset_unknown_kind(tmp_path):
    assert "unknown kind 'rows'; valid: biencoder, passages, questions" in cli(
        "convert", "dataset", "--input", SAMPLE / "passages.tsv", "--out", tmp_path / "x", "--kind", "rows", code=2)
    assert not (tmp_path / "x").exists()

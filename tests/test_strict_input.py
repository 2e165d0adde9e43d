"""Issue #15: never a wrong number in silence. Each example of the issue that produced a wrong
result with exit code 0 (or a traceback) on main, now an exact parse or a one-line error."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import SAMPLE, cli
from dpr_xrisk.cli import app
from dpr_xrisk.errors import InputError
from dpr_xrisk.io.biencoder import read_biencoder
from dpr_xrisk.io.common import load_json
from dpr_xrisk.io.passages import count_passages, read_passages
from dpr_xrisk.io.questions import read_questions

runner = CliRunner()


def write(path, data: str | bytes):
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


# ---- strict readers ---------------------------------------------------------------------------
def test_bare_carriage_return_stays_in_its_text_and_never_splits_a_passage(tmp_path):
    p = write(tmp_path / "p.tsv", "id\ttext\ttitle\n1\tfirst half\rsecond half\tT\n2\tlast\tT\n")
    ps = list(read_passages(p))
    assert [x.id for x in ps] == ["1", "2"] and ps[0].text == "first half\rsecond half"
    assert count_passages(p) == 2


def test_crlf_line_ends_are_one_break(tmp_path):
    p = write(tmp_path / "p.tsv", "id\ttext\ttitle\r\n1\tone\tT\r\n2\ttwo\tT\r\n")
    assert [(x.id, x.text, x.title) for x in read_passages(p)] == [("1", "one", "T"), ("2", "two", "T")]


def test_byte_order_mark_is_stripped(tmp_path):
    p = write(tmp_path / "p.tsv", "\ufeffid\ttext\ttitle\n1\tone\tT\n")
    assert [x.id for x in read_passages(p)] == ["1"] and count_passages(p) == 1
    q = write(tmp_path / "q.tsv", "\ufeffwho?\t[\"a\"]\n")
    assert read_questions(q)[0].text == "who?"
    j = write(tmp_path / "b.json", "\ufeff" + json.dumps([{"question": "q", "answers": ["a"]}]))
    assert load_json(j)[0]["question"] == "q"


def test_wrong_column_count_is_an_error(tmp_path):
    p = write(tmp_path / "p.tsv", "id\ttext\ttitle\n1\tone\tT\n2\ttwo\tT\textra\n")
    with pytest.raises(InputError, match=r"p.tsv:3: expected 3 tab-separated fields"):
        list(read_passages(p))
    q = write(tmp_path / "q.tsv", "who?\t[\"a\"]\textra\n")
    with pytest.raises(InputError, match=r"q.tsv:1: expected 'question<TAB>answers', got 3"):
        read_questions(q)


def test_whitespace_only_line_is_counted_as_it_is_read(tmp_path):
    # a line holding only a non-breaking space: encode once wrote one more vector than ids
    p = write(tmp_path / "p.tsv", "id\ttext\ttitle\n1\tone\tT\n\u00a0\n2\ttwo\tT\n")
    assert count_passages(p) == len(list(read_passages(p))) == 2
    with pytest.raises(InputError, match=r"e.tsv:2: passage '1' has empty text"):
        list(read_passages(write(tmp_path / "e.tsv", "id\ttext\ttitle\n1\t\u00a0\u2003\tT\n")))
    with pytest.raises(InputError, match=r"contains whitespace"):
        list(read_passages(write(tmp_path / "w.tsv", "id\ttext\ttitle\na b\tone\tT\n")))


def test_bad_utf8_is_reported_on_its_own_line(tmp_path):
    good = "".join(f"{i}\tpassage {i}\tT\n" for i in range(1, 60)).encode()
    p = write(tmp_path / "p.tsv", b"id\ttext\ttitle\n" + good[: -len(b"59\tpassage 59\tT\n")] + b"59\tbad \xff byte\tT\n")
    with pytest.raises(InputError, match=r"p.tsv:60: not valid UTF-8"):
        list(read_passages(p))
    j = write(tmp_path / "b.json", b'[\n{"question": "q",\n "answers": ["\xff"]}]')
    with pytest.raises(InputError, match=r"b.json:3: not valid UTF-8"):
        load_json(j)


@pytest.mark.parametrize("name,content", [
    ("q.tsv", 'who?\t[""]\n'),
    ("q.jsonl", '{"id": "1", "question": "who?", "answers": ["a", " "]}\n'),
    ("b.json", '[{"question": "who?", "answers": [""]}]'),
])
def test_empty_answer_is_an_error_not_a_hit_everywhere(tmp_path, name, content):
    p = write(tmp_path / name, content)
    with pytest.raises(InputError, match="empty answer string"):
        read_biencoder(p) if name.endswith(".json") else read_questions(p)


# ---- evaluate's denominators -----------------------------------------------------------------
@pytest.fixture()
def twenty_one(tmp_path):
    """A run of 20 questions and qrels of 21 (question 20 is missing from the run)."""
    run = "".join(f"{q} Q0 d{q} 1 1.0 t\n" for q in range(20))
    qrels = "".join(f"{q} 0 d{q} 1\n" for q in range(21))
    return write(tmp_path / "run.trec", run), write(tmp_path / "qrels.txt", qrels)


def test_question_missing_from_the_run_is_an_error_or_a_counted_miss(tmp_path, twenty_one):
    run, qrels = twenty_one
    assert "1 question(s) of the qrels are not in the run, e.g. '20'" in cli(
        "evaluate", "--run", run, "--qrels", qrels, code=2)
    out = cli("evaluate", "--run", run, "--qrels", qrels, "--no-strict", "--out", tmp_path / "e.json")
    res = json.loads((tmp_path / "e.json").read_text())["results"][0]
    assert res["num_questions"] == 21 and res["missing_in_run"] == 1 and "missing from the run" in out
    assert res["metrics"]["recall@10"] == pytest.approx(20 / 21)


def test_missing_answers_questions_are_misses_in_n(tmp_path):
    run = write(tmp_path / "run.trec", "0 Q0 s1 1 1.0 t\n")
    cli("evaluate", "--run", run, "--answers", SAMPLE / "test.qa.tsv", "--corpus", SAMPLE / "passages.tsv", code=2)
    cli("evaluate", "--run", run, "--answers", SAMPLE / "test.qa.tsv", "--corpus", SAMPLE / "passages.tsv",
        "--no-strict", "--out", tmp_path / "e.json")
    res = json.loads((tmp_path / "e.json").read_text())["results"][0]
    assert res["num_questions"] == 20 and res["missing_in_run"] == 19


def test_empty_run_bad_k_and_unknown_qrels_docs_are_errors(tmp_path, twenty_one):
    run, qrels = twenty_one
    empty = write(tmp_path / "empty.json", "{}")
    assert "the run holds no questions" in cli("evaluate", "--run", empty, "--qrels", qrels, code=2)
    for k in ("0", "-1"):
        out = cli("evaluate", "--run", run, "--qrels", qrels, "--k", k, code=2)
        assert "Invalid value for '--k'" in out and ">= 1" in out.replace("greater than or equal to", ">=")
        assert out.count("\n") == 1  # one line, not Typer's usage box
    assert "Invalid value for '--qrels-k'" in cli("evaluate", "--run", run, "--qrels", qrels, "--qrels-k", 0, code=2)
    sample_qrels = write(tmp_path / "sq.txt", "0 0 s1 1\n1 0 nowhere 1\n")
    sample_run = write(tmp_path / "sr.trec", "0 Q0 s1 1 1.0 t\n1 Q0 s2 1 1.0 t\n")
    assert "judge 1 document id(s) not in the corpus, e.g. 'nowhere'" in cli(
        "evaluate", "--run", sample_run, "--qrels", sample_qrels, "--corpus", SAMPLE / "passages.tsv", code=2)


# ---- outputs carry provenance and refuse to mix -------------------------------------------------
def other_corpus(tmp_path):
    """The sample corpus with every text changed: same ids, same count."""
    lines = (SAMPLE / "passages.tsv").read_text().splitlines()
    out = [lines[0]] + [f"{i}\tchanged {t}\t{ti}" for i, t, ti in (x.split("\t") for x in lines[1:])]
    return write(tmp_path / "other.tsv", "\n".join(out) + "\n")


def test_encode_refuses_a_finished_folder_of_another_corpus(tmp_path, tiny_model_dir):
    emb = tmp_path / "emb"
    cli("encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out", emb)
    first = np.load(emb / "embeddings-00000-of-00001.npy")
    cli("encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out", emb)  # same: kept
    other = other_corpus(tmp_path)
    assert "finished encoding with other settings (corpus" in cli("encode", "--model", tiny_model_dir, "--corpus", other,
                                                        "--out", emb, code=2)
    cli("encode", "--model", tiny_model_dir, "--corpus", other, "--out", emb, "--overwrite")
    meta = json.loads((emb / "meta-00000-of-00001.json").read_text())
    assert meta["corpus"] == str(other.resolve())
    assert not np.allclose(np.load(emb / "embeddings-00000-of-00001.npy"), first)


def test_killed_encode_does_not_resume_with_another_corpus_of_the_same_size(tmp_path, tiny_encoder):
    from dpr_xrisk.retrieval.encode import encode_corpus

    class Killed(Exception):
        pass

    calls = {"n": 0}
    real = tiny_encoder.encode_passages

    def dies_after_one_chunk(*a, **kw):
        calls["n"] += 1
        if calls["n"] > 1:
            raise Killed
        return real(*a, **kw)

    tiny_encoder.encode_passages = dies_after_one_chunk
    try:
        with pytest.raises(Killed):
            encode_corpus(tiny_encoder, SAMPLE / "passages.tsv", tmp_path / "emb", chunk_size=64, progress=False)
    finally:
        del tiny_encoder.encode_passages
    assert (tmp_path / "emb" / "progress-00000-of-00001.json").exists()
    with pytest.raises(InputError, match=r"unfinished encoding with other settings \(corpus .*passages.tsv"):
        encode_corpus(tiny_encoder, other_corpus(tmp_path), tmp_path / "emb", chunk_size=64, progress=False)


@pytest.fixture(scope="module")
def cls_index(tiny_model_dir, tmp_path_factory):
    """An index encoded with a pooling other than the model's default."""
    d = tmp_path_factory.mktemp("cls-index")
    cli("encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out", d / "emb", "--pooling", "mean")
    cli("index", "--embeddings", d / "emb", "--out", d / "idx")
    return d / "idx"


def test_search_uses_the_index_settings_and_its_recorded_corpus_from_anywhere(tmp_path, cls_index, monkeypatch):
    monkeypatch.chdir(tmp_path)  # meta.json holds the absolute corpus path
    cli("search", "--index", cls_index, "--queries", SAMPLE / "test.qa.tsv", "--k", 5, "--out-json", tmp_path / "r.json")
    assert len(json.loads((tmp_path / "r.json").read_text())) == 20


def test_search_corpus_must_be_the_indexed_one(tmp_path, cls_index):
    other = other_corpus(tmp_path)
    out = cli("search", "--index", cls_index, "--queries", SAMPLE / "test.qa.tsv", "--corpus", other,
              "--out-json", tmp_path / "r.json", code=2)
    assert "is not the corpus this index was encoded from" in out and not (tmp_path / "r.json").exists()
    cli("search", "--index", cls_index, "--queries", SAMPLE / "test.qa.tsv", "--corpus", other,
        "--out-json", tmp_path / "r.json", "--allow-corpus-mismatch")


# ---- typed configuration -------------------------------------------------------------------------
@pytest.mark.parametrize("line,message", [
    ('shared = "no"', "'shared' must be true or false, got 'no'"),
    ('lr = "fast"', "'lr' must be a number, got 'fast'"),
    ("batch_size = 3.5", "'batch_size' must be an integer, got 3.5"),
])
def test_config_values_are_type_checked(tmp_path, line, message):
    cfg = write(tmp_path / "c.toml", line + "\n")
    out = cli("train", "--config", cfg, "--train", SAMPLE / "biencoder-train.json", "--out", tmp_path / "m", code=2)
    assert message in out and "c.toml" in out
    assert not (tmp_path / "m").exists()


# ---- one error boundary -------------------------------------------------------------------------
def test_damaged_index_files_are_one_line_errors(tmp_path, cls_index):
    import shutil

    bad = tmp_path / "idx"
    shutil.copytree(cls_index, bad)
    raw = (bad / "index.faiss").read_bytes()
    (bad / "index.faiss").write_bytes(raw[: len(raw) // 2])
    assert "cannot read the FAISS index" in cli("search", "--index", bad, "--queries", SAMPLE / "test.qa.tsv",
                                                "--out-run", tmp_path / "r", code=2)
    (bad / "index.faiss").write_bytes(raw)
    meta = (bad / "meta.json").read_text()
    (bad / "meta.json").write_text(meta[: len(meta) // 2])
    assert "meta.json" in cli("search", "--index", bad, "--queries", SAMPLE / "test.qa.tsv",
                              "--out-run", tmp_path / "r", code=2)


def test_unwritable_output_is_exit_2(tmp_path, twenty_one):
    run, qrels = twenty_one
    blocker = write(tmp_path / "file", "x")
    out = cli("evaluate", "--run", run, "--qrels", qrels, "--no-strict", "--out", blocker / "e.json", code=2)
    assert out.strip().splitlines()[-1].startswith("error: ")


def test_bm25_rejects_bad_parameters_before_java(tmp_path):
    out = cli("bm25", "search", "--index", tmp_path, "--queries", SAMPLE / "test.qa.tsv", "--k1", "-5",
              "--out-run", tmp_path / "r", code=2)
    assert "k1" in out


def test_internal_error_is_exit_1_with_the_debug_hint(tmp_path, twenty_one, monkeypatch):
    import dpr_xrisk.evaluation.evaluate as ev

    def boom(*a, **kw):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(ev, "evaluate_run", boom)
    run, qrels = twenty_one
    out = cli("evaluate", "--run", run, "--qrels", qrels, code=1)
    assert "internal error: ZeroDivisionError: a bug" in out and "DPR_XRISK_DEBUG=1" in out
    result = runner.invoke(app, ["evaluate", "--run", str(run), "--qrels", str(qrels)], env={"DPR_XRISK_DEBUG": "1"})
    assert isinstance(result.exception, ZeroDivisionError)


# ---- nothing half-written ------------------------------------------------------------------------
def test_squad_paragraph_without_context_is_a_located_error_and_writes_nothing(tmp_path):
    squad = {"data": [{"title": "T", "paragraphs": [
        {"context": "Some text.", "qas": [{"question": "what?", "answers": [{"text": "text"}]}]},
        {"qas": [{"question": "who?", "answers": [{"text": "x"}]}]}]}]}
    src = write(tmp_path / "squad.json", json.dumps(squad))
    out = cli("convert", "squad", "--input", src, "--out", tmp_path / "out", code=2)
    assert "data[0].paragraphs[1]: missing or empty 'context'" in out
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir()] == ["squad.json"]


def test_failed_beir_conversion_leaves_no_partial_output(tmp_path):
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    write(beir / "corpus.jsonl", '{"_id": "d1", "title": "T", "text": "one"}\n')
    write(beir / "queries.jsonl", '{"_id": "q1", "text": "what?"}\n')
    write(beir / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\tmissing\t1\n")
    (tmp_path / "out").mkdir()
    assert "'missing', which is not in corpus.jsonl" in cli("convert", "beir", "--input", beir, "--out", tmp_path / "out",
                                                            code=2)
    assert list((tmp_path / "out").iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["beir", "out"]


def test_eval_json_names_its_inputs_by_fingerprint(tmp_path, twenty_one):
    from dpr_xrisk.retrieval.encode import file_fingerprint

    run, qrels = twenty_one
    cli("evaluate", "--run", run, "--qrels", qrels, "--no-strict", "--out", tmp_path / "e.json")
    inputs = json.loads((tmp_path / "e.json").read_text())["inputs"]
    assert inputs["run"] == [{"path": str(run.resolve()), "fingerprint": file_fingerprint(run)}]
    assert inputs["qrels"]["fingerprint"] == file_fingerprint(qrels) and "corpus" not in inputs


def test_failed_training_leaves_no_output_folder(tmp_path):
    (tmp_path / "b.json").write_text('[{"question": "q", "answers": ["a"], "positive_ctxs": []}]')
    out = cli("train", "--train", tmp_path / "b.json", "--out", tmp_path / "m", "--batch-size", 2, code=2)
    # the error is the last line, one line (a note such as the resolved precision may precede it)
    assert out.splitlines()[-1].startswith("error: ") and out.count("error:") == 1 and not (tmp_path / "m").exists()


def test_search_output_and_trained_model_record_what_made_them(tmp_path, cls_index, tiny_model_dir):
    from dpr_xrisk.retrieval.encode import file_fingerprint

    cli("search", "--index", cls_index, "--queries", SAMPLE / "test.qa.tsv", "--out-run", tmp_path / "r.trec")
    made = json.loads((tmp_path / "r.trec.meta.json").read_text())
    assert made["inputs"]["queries"]["fingerprint"] == file_fingerprint(SAMPLE / "test.qa.tsv")
    assert made["index"] == [str(cls_index.resolve())] and made["fingerprint"]
    train = SAMPLE / "biencoder-train.json"
    cli("train", "--model", tiny_model_dir, "--train", train, "--out", tmp_path / "m", "--batch-size", 4, "--max-steps", 1)
    prov = json.loads((tmp_path / "m" / "provenance.json").read_text())
    assert prov["inputs"]["train"] == [{"path": str(train.resolve()), "fingerprint": file_fingerprint(train)}]


def test_a_text_that_starts_with_a_quote_keeps_its_columns(tmp_path):
    # seen in ../shared/data/wikipedia-100k: an unquoted text starting with '"' swallowed the title
    # column under csv parsing; DPR's own csv-quoted texts still unquote
    p = write(tmp_path / "p.tsv", 'id\ttext\ttitle\n1\t"As I turned toward writing, the legend.\tAlan Garner\n'
                                  '2\t"a ""quoted"" text"\tT\n')
    assert [(x.text, x.title) for x in read_passages(p)] == [('"As I turned toward writing, the legend.', "Alan Garner"),
                                                             ('a "quoted" text', "T")]

"""The CLI end to end: encode -> index -> search -> evaluate on the bundled sample (tiny model)
and on SQuAD from ../shared/data; BM25 and hybrid; bad input -> one line, exit 2, no traceback."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import SAMPLE, shared_path
from dpr_xrisk.cli import app

runner = CliRunner()


def run_ok(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def run_error(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return result.output


def test_help_lists_every_command():
    out = run_ok("--help")
    for cmd in ("encode", "index", "search", "evaluate", "bm25", "convert", "fuse"):
        assert cmd in out


def test_end_to_end_on_the_sample(tiny_model_dir, tmp_path):
    model = tmp_path / "model"
    from dpr_xrisk.retrieval.encoder import DualEncoder

    DualEncoder.load(tiny_model_dir, passage_max_length=64).save(model)
    run_ok("encode", "--model", model, "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / "emb")
    run_ok("index", "--embeddings", tmp_path / "emb", "--out", tmp_path / "idx")
    run_ok("search", "--index", tmp_path / "idx", "--queries", SAMPLE / "test.qa.tsv", "--k", 20,
           "--out-run", tmp_path / "dense.trec", "--out-json", tmp_path / "dense.json")
    run_ok("bm25", "index", "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / "bm25")
    run_ok("bm25", "search", "--index", tmp_path / "bm25", "--queries", SAMPLE / "test.qa.tsv", "--k", 20,
           "--out-run", tmp_path / "bm25.trec", "--out-json", tmp_path / "bm25.json")
    run_ok("search", "--index", tmp_path / "idx", "--queries", SAMPLE / "test.qa.tsv", "--k", 20,
           "--bm25-index", tmp_path / "bm25", "--out-json", tmp_path / "hybrid.json")
    out = run_ok("evaluate", "--run", tmp_path / "dense.json", "--run", tmp_path / "bm25.json", "--run", tmp_path / "hybrid.json",
                 "--run", tmp_path / "dense.trec", "--answers", SAMPLE / "test.qa.tsv", "--corpus", SAMPLE / "passages.tsv",
                 "--qrels", SAMPLE / "test.qrels.tsv", "--k", 1, "--k", 5, "--k", 20, "--out", tmp_path / "eval.json")
    assert "top1" in out and "recall@10" in out and "bm25.json" in out
    res = {r["run"].rsplit("/", 1)[-1]: r["metrics"] for r in json.loads((tmp_path / "eval.json").read_text())["results"]}
    assert res["dense.json"] == res["dense.trec"]  # same run, two formats, same numbers
    assert res["bm25.json"]["top20"] >= 0.8  # BM25 on the sample is strong; the random tiny model is not
    dense = json.loads((tmp_path / "dense.json").read_text())
    assert len(dense) == 20 and all(len(r["contexts"]) == 20 for r in dense.values())


@pytest.mark.slow
def test_end_to_end_on_squad(tiny_model_dir, squad_dir, tmp_path):
    model = tmp_path / "model"
    from dpr_xrisk.retrieval.encoder import DualEncoder

    DualEncoder.load(tiny_model_dir, passage_max_length=128).save(model)
    head = (squad_dir / "test.qa.tsv").read_text().splitlines()[:200]
    (tmp_path / "q.tsv").write_text("\n".join(head) + "\n")
    qrels = [x for x in (squad_dir / "test.qrels.tsv").read_text().splitlines() if int(x.split()[0]) < 200]
    (tmp_path / "qrels.tsv").write_text("\n".join(qrels) + "\n")
    run_ok("encode", "--model", model, "--corpus", squad_dir / "passages.tsv", "--out", tmp_path / "emb", "--num-shards", 2, "--shard-id", 0)
    run_ok("encode", "--model", model, "--corpus", squad_dir / "passages.tsv", "--out", tmp_path / "emb", "--num-shards", 2, "--shard-id", 1)
    run_ok("index", "--embeddings", tmp_path / "emb", "--out", tmp_path / "idx", "--factory", "HNSW32")
    run_ok("search", "--index", tmp_path / "idx", "--queries", tmp_path / "q.tsv", "--ef-search", 128,
           "--out-json", tmp_path / "run.json")
    # the full qrels hold 3,044 questions the run lacks: an error, never a mean over 3,244 with 3,044 zeros
    assert "3044 question(s) of the qrels are not in the run" in run_error(
        "evaluate", "--run", tmp_path / "run.json", "--qrels", squad_dir / "test.qrels.tsv")
    run_ok("evaluate", "--run", tmp_path / "run.json", "--qrels", tmp_path / "qrels.tsv", "--out", tmp_path / "e.json")
    res = json.loads((tmp_path / "e.json").read_text())["results"][0]
    m = res["metrics"]
    assert res["num_questions"] == 200 and "num_qrels_questions" not in res
    assert set(m) >= {"top1", "top100", "recall@10", "mrr@10", "ndcg@10"} and 0 <= m["top1"] <= m["top100"] <= 1


def test_convert_squad_splits_by_article(tmp_path):
    src = shared_path("squad-v1.1-dev", "dev-v1.1.json")
    run_ok("convert", "squad", "--input", src, "--out", tmp_path / "sq", "--test-fraction", 0.25)
    meta = json.loads((tmp_path / "sq" / "convert-meta.json").read_text())
    assert meta["passages"] == 2067 and meta["train"] + meta["test"] == 10570
    test_ids = {json.loads(l)["positive_ctxs"][0]["passage_id"].split("-")[1] for l in [json.dumps(r) for r in json.loads((tmp_path / "sq" / "biencoder-test.json").read_text())]}
    train_ids = {r["positive_ctxs"][0]["passage_id"].split("-")[1] for r in json.loads((tmp_path / "sq" / "biencoder-train.json").read_text())}
    assert test_ids and train_ids and not test_ids & train_ids


def test_convert_beir(tmp_path):
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "alpha"}\n{"_id": "d2", "title": "", "text": "beta"}\n')
    (beir / "queries.jsonl").write_text('{"_id": "q7", "text": "alpha?"}\n')
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq7\td1\t1\n")
    run_ok("convert", "beir", "--input", beir, "--out", tmp_path / "out")
    assert (tmp_path / "out" / "test.qrels.tsv").read_text() == "0 0 d1 1\n"
    assert (tmp_path / "out" / "qid-map.tsv").read_text() == "0\tq7\n"


@pytest.fixture(scope="module")
def built(tiny_model_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("built")
    run_ok("encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out", d / "emb")
    run_ok("index", "--embeddings", d / "emb", "--out", d / "idx")
    return d


def test_cli_bad_inputs_exit_2_with_one_line(tmp_path, tiny_model_dir, built):
    (tmp_path / "bad.tsv").write_text("id\ttext\ttitle\nx\tfine\tT\nx\tdup\tT\n")
    out = run_error("encode", "--model", tiny_model_dir, "--corpus", tmp_path / "bad.tsv", "--out", tmp_path / "e")
    assert out.strip().splitlines()[-1] == f"error: {tmp_path / 'bad.tsv'}:3: duplicate passage id 'x'"
    assert not list((tmp_path / "e").glob("meta-*"))
    assert "file not found" in run_error("encode", "--corpus", tmp_path / "nope.tsv", "--out", tmp_path / "e2")
    assert "unknown pooling 'max'; valid: cls, mean" in run_error(
        "encode", "--model", tiny_model_dir, "--pooling", "max", "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / "e3")
    assert "valid examples" in run_error("index", "--embeddings", built / "emb", "--out", tmp_path / "i", "--factory", "Nope")
    assert not (tmp_path / "i").exists()
    assert "index dimension 32 does not match the encoder's 384" in run_error(
        "search", "--index", built / "idx", "--queries", SAMPLE / "test.qa.tsv", "--model", "minilm", "--out-run", tmp_path / "r")
    (tmp_path / "q.tsv").write_text("ok\t[\"a\"]\n\t[\"b\"]\n")
    assert ":2: empty question text" in run_error("search", "--index", built / "idx", "--queries", tmp_path / "q.tsv", "--out-run", tmp_path / "r")
    assert not (tmp_path / "r").exists()
    (tmp_path / "run.trec").write_text("0 Q0 zzz 1 1.0 t\n")
    assert "'zzz', which is not in the corpus" in run_error(
        "evaluate", "--run", tmp_path / "run.trec", "--answers", SAMPLE / "test.qa.tsv", "--corpus", SAMPLE / "passages.tsv",
        "--no-strict")
    (tmp_path / "qrels.txt").write_text("5 0 s1 1\n")
    assert "absent from the qrels" in run_error("evaluate", "--run", tmp_path / "run.trec", "--qrels", tmp_path / "qrels.txt")
    assert "not an index folder" in run_error("search", "--index", tmp_path, "--queries", SAMPLE / "test.qa.tsv", "--out-run", tmp_path / "r")

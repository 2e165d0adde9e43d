"""Issue "Zero silent wrong numbers, zero leftovers": the hostile-user probes, one class per
section, as parametrised cases. Each case produced a wrong number with exit code 0, a mixed or
leftover artifact, or an internal error on main; now it is an exact result or a one-line error
(exit 2) naming the user's file and, where there is one, its line."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT, SAMPLE, cli
from dpr_xrisk.errors import InputError
from dpr_xrisk.evaluation.evaluate import read_any_run
from dpr_xrisk.io.questions import read_questions


def one_line_error(*args) -> str:
    """The command's error: exit 2, one line starting with ``error:``, the last thing printed
    (a progress bar may precede it on its own line)."""
    out = cli(*args, code=2)
    lines = [x for x in out.replace("\r", "\n").splitlines() if x.strip()]
    assert lines[-1].startswith("error: ") and out.count("error:") == 1 and "╭" not in out, out
    return lines[-1]


def write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def dpr_json(contexts: list[dict], question: str = "Where does the Danube start?") -> str:
    return json.dumps({"0": {"question": question, "answers": ["Black Forest"], "contexts": contexts}}, indent=2)


def ctx(docid, score=None, text="T\nsome text"):
    c = {"docid": docid, "text": text}
    if score is not None:
        c["score"] = score
    return c


# ---- runs: one ranking per table ---------------------------------------------------------------
def nth_docid_line(text: str, n: int) -> int:
    return [i for i, line in enumerate(text.splitlines(), start=1) if '"docid"' in line][n]


RUNS = {
    "duplicate passage (TREC)": ("dup.trec", "0 Q0 s1 1 2.0 t\n0 Q0 s2 2 1.5 t\n0 Q0 s1 3 1.0 t\n",
                                 r"dup.trec:3: passage 's1' is listed twice for question '0' \(also line 1\)"),
    "scores rise with rank (TREC)": ("rise.trec", "0 Q0 s1 1 1.0 t\n0 Q0 s2 2 3.0 t\n",
                                     r"rise.trec:2: question '0': rank 2 \(s2\) scores 3, above rank 1"),
    "repeated rank (TREC)": ("rank.trec", "0 Q0 s1 1 2.0 t\n0 Q0 s2 1 1.0 t\n", r"rank.trec:2: rank 1 appears twice"),
    "duplicate passage (JSON)": ("dup.json", dpr_json([ctx("s1", 2.0), ctx("s2", 1.5), ctx("s1", 1.0)]),
                                 r"dup.json:{line2}: passage 's1' is listed twice for question '0'"),
    "scores rise with rank (JSON)": ("rise.json", dpr_json([ctx("s1", 1.0), ctx("s2", 3.0)]),
                                     r"rise.json:{line1}: question '0': rank 2 \(s2\) scores 3, above rank 1"),
    "has_answer as a string (JSON)": ("flag.json", dpr_json([ctx("s1", 1.0) | {"has_answer": "false"}]),
                                      r"flag.json: question '0': 'has_answer' must be true or false, got 'false'"),
    "some scores missing (JSON)": ("part.json", dpr_json([ctx("s1", 1.0), ctx("s2")]),
                                   r"part.json:{line1}: question '0': context 2 has no 'score'"),
}


@pytest.mark.parametrize("case", list(RUNS))
def test_ambiguous_runs_are_located_errors(tmp_path, case):
    name, text, match = RUNS[case]
    run = write(tmp_path / name, text)
    if "{" in match:
        n = text.count('"docid"')
        match = match.format(line1=nth_docid_line(text, 1), line2=nth_docid_line(text, min(2, n - 1)))
    with pytest.raises(InputError, match=match):
        read_any_run(run)
    qrels = write(tmp_path / "q.qrels", "0 0 s1 1\n")
    assert name in one_line_error("evaluate", "--run", run, "--qrels", qrels)


def test_json_run_without_scores_is_ranked_by_its_context_order(tmp_path):
    # before: every score 0.0, so recall/MRR ranked the passages by id (s2 first) while DPR
    # accuracy read the file order (s1 first)
    run = write(tmp_path / "r.json", dpr_json([ctx("s1"), ctx("s2")]))
    qrels = write(tmp_path / "q.qrels", "0 0 s2 1\n")
    head, row = cli("evaluate", "--run", run, "--qrels", qrels, "--qrels-k", 10).splitlines()[:2]
    got = dict(zip(head.split(), row.split()))
    assert got["recall@10"] == "1.0000" and got["mrr@10"] == "0.5000"


def sample_json_run(tmp_path, questions, answers=None, name="run.json"):
    """A DPR JSON run of ``questions``: every question gets the same three sample passages."""
    from dpr_xrisk.retrieval.search import load_passage_texts, retrieval_records

    texts = load_passage_texts(SAMPLE / "passages.tsv", {"s10", "s12", "s1"})
    run = {q.qid: [("s10", 3.0), ("s12", 2.0), ("s1", 1.0)] for q in questions}
    records = retrieval_records(run, questions, texts)
    if answers is not None:
        for rec in records.values():
            rec["answers"] = answers
            for c in rec["contexts"]:
                c["has_answer"] = False
    return write(tmp_path / name, json.dumps(records, indent=2))


def test_json_run_is_scored_with_the_given_answers_or_refused(tmp_path):
    test = read_questions(SAMPLE / "test.qa.tsv")
    run = sample_json_run(tmp_path, test, answers=["zzz never"])  # stored answers and flags: wrong on purpose
    stored = cli("evaluate", "--run", run, "--k", 1, "--k", 3)
    given = cli("evaluate", "--run", run, "--answers", SAMPLE / "test.qa.tsv", "--k", 1, "--k", 3)
    assert stored.splitlines()[1].split()[2:] == ["0.0000", "0.0000"]
    assert given.splitlines()[1].split()[2] != "0.0000"  # question 0's answer is in s10: the given answers are used
    # before: the test run scored with its own stored answers, --answers dev.qa.tsv ignored
    assert "a run of other questions" in one_line_error("evaluate", "--run", run, "--answers", SAMPLE / "dev.qa.tsv")


def test_a_run_remembers_its_questions(tmp_path):
    from dpr_xrisk.retrieval.search import run_meta, write_run_outputs

    test = read_questions(SAMPLE / "test.qa.tsv")
    run = {q.qid: [("s10", 3.0), ("s12", 2.0)] for q in test}
    from dpr_xrisk.retrieval.encode import corpus_fingerprint

    meta = run_meta("t", test, SAMPLE / "test.qa.tsv", corpus_fingerprint=corpus_fingerprint(SAMPLE / "passages.tsv"))
    write_run_outputs(run, test, SAMPLE / "passages.tsv", tmp_path / "r.trec", None, "t", meta)
    assert json.loads((tmp_path / "r.trec.meta.json").read_text())["questions"]["count"] == 20
    trec = tmp_path / "r.trec"
    cli("evaluate", "--run", trec, "--answers", SAMPLE / "test.qa.tsv", "--corpus", SAMPLE / "passages.tsv",
        "--qrels", SAMPLE / "test.qrels.tsv")
    neutral = write(tmp_path / "questions.tsv", (SAMPLE / "dev.qa.tsv").read_text())  # no split in its name
    for args, match in ((("--answers", neutral, "--corpus", SAMPLE / "passages.tsv"), "retrieved for other questions"),
                        (("--qrels", SAMPLE / "dev.qrels.tsv"), "split names disagree"),
                        (("--answers", SAMPLE / "test.qa.tsv", "--corpus", tmp_path / "other.tsv"), "another corpus")):
        if "other.tsv" in str(args):
            write(tmp_path / "other.tsv", (SAMPLE / "passages.tsv").read_text().replace("Danube", "Rhine"))
        out = one_line_error("evaluate", "--run", trec, *args)
        assert match in out and "r.trec" in out


def test_a_run_naming_passages_outside_the_corpus_names_the_run(tmp_path):
    run = write(tmp_path / "r.trec", "0 Q0 nowhere 1 1.0 t\n")
    out = one_line_error("evaluate", "--run", run, "--answers", SAMPLE / "test.qa.tsv", "--corpus",
                         SAMPLE / "passages.tsv", "--no-strict")
    assert "r.trec:1: run names passage 'nowhere'" in out


def fake_bm25(tmp_path, **meta):
    d = tmp_path / "bm25"
    (d / "lucene").mkdir(parents=True)
    write(d / "meta.json", json.dumps({"kind": "bm25", "corpus": "c.tsv", **meta}))
    return d


@pytest.mark.parametrize("meta,sparse,match", [
    ({"corpus_fingerprint": "9-aa-bb", "count": 3}, None, "holds another corpus"),
    ({"count": 4}, None, "holds 4 passages, the dense index 3"),
    ({"corpus_fingerprint": "1-aa-bb", "count": 3}, {"q": [("p9", 1.0)]}, "returns passage id\\(s\\) the dense index lacks"),
])
def test_hybrid_refuses_a_bm25_index_of_another_corpus(tmp_path, meta, sparse, match):
    from dpr_xrisk.retrieval.bm25 import check_same_corpus

    with pytest.raises(InputError, match=match):
        check_same_corpus(fake_bm25(tmp_path, **meta), {"corpus_fingerprint": "1-aa-bb"}, ["p1", "p2", "p3"], sparse)


# ---- ties: one documented rule ---------------------------------------------------------------------
def test_faiss_ties_are_ordered_by_passage_id_across_the_cut():
    import faiss

    from dpr_xrisk.retrieval.index import search_many

    rng = np.random.default_rng(0)
    same = rng.normal(size=(1, 8)).astype(np.float32)
    vecs = np.concatenate([np.repeat(same, 6, axis=0), rng.normal(size=(10, 8)).astype(np.float32) * 0.01])
    ids = [f"p{i:02d}" for i in range(len(vecs))]
    results = []
    for seed in (0, 1, 2):  # the same passages in three row orders: one run
        perm = np.random.default_rng(seed).permutation(len(vecs))
        index = faiss.IndexFlatIP(8)
        index.add(vecs[perm])
        scores, found = search_many([(index, [ids[i] for i in perm], {})], same, 3)
        results.append(list(found[0]))
    assert results[0] == results[1] == results[2] == ["p05", "p04", "p03"]  # 6 tied: the 3 largest ids


def test_fusion_ties_are_ordered_by_passage_id_descending():
    from dpr_xrisk.retrieval.search import fuse

    dense = {"0": [("s10", 0.9), ("s12", 0.8)]}
    sparse = {"0": [("s12", 5.0), ("s10", 3.0)]}
    for a, b in ((dense, sparse), (sparse, dense)):
        run = fuse(a, b, method="rrf")
        assert [d for d, _ in run["0"]] == ["s12", "s10"] and run["0"][0][1] == run["0"][1][1]


def test_bm25_ties_are_ordered_by_passage_id_descending():
    from dpr_xrisk.retrieval.bm25 import ranked

    assert ranked([("a", 1.0), ("c", 2.0), ("b", 1.0), ("d", 1.0)]) == [("c", 2.0), ("d", 1.0), ("b", 1.0), ("a", 1.0)]


def test_trec_scores_are_written_exactly(tmp_path):
    # before: 6 decimals made 0.1234561 and 0.1234564 a tie that trec_eval re-ordered by id
    from dpr_xrisk.io.trec import read_run, write_run

    run = {"0": [("a", 0.1234564), ("b", 0.1234561)]}
    write_run(tmp_path / "r.trec", run)
    assert read_run(tmp_path / "r.trec") == run


# ---- tables and datasets: typed columns -------------------------------------------------------------
def _parquet(path, **cols):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(cols), path)
    return path


TABLES = {
    "answers as one string": (lambda p: _parquet(p / "q.parquet", question=["Where?"], answers=['["Black Forest"]']),
                              "questions", r"q.parquet: column 'answers' is string, expected list of strings"),
    "float question ids": (lambda p: _parquet(p / "q.parquet", id=[1.0], question=["Where?"], answers=[["x"]]),
                           "questions", r"column 'id' is double, expected string or integer \(ids would read as '1.0'"),
    "float passage ids": (lambda p: _parquet(p / "p.parquet", id=[1.0, 2.0], text=["a", "b"]),
                          "passages", r"p.parquet: column 'id' is double"),
    "list answers in a JSONL string": (lambda p: write(p / "q.jsonl", '{"id": "0", "question": "Where?", "answers": "[\\"x\\"]"}\n'),
                                       "questions", r"q.jsonl:1: field 'answers' is a string holding a list"),
    "header in another order": (lambda p: write(p / "h.tsv", "contents\tdocid\ttitle\nsome text\t1\tT\n"),
                                "passages", r"h.tsv:1: the header names the columns contents/docid/title"),
}


@pytest.mark.parametrize("case", list(TABLES))
def test_ambiguous_table_types_are_errors(tmp_path, case):
    from dpr_xrisk.io.passages import read_passages

    make, kind, match = TABLES[case]
    path = make(tmp_path)
    with pytest.raises(InputError, match=match):
        read_questions(path) if kind == "questions" else list(read_passages(path))


def test_pyserini_header_is_a_header(tmp_path):
    from dpr_xrisk.io.passages import count_passages, read_passages

    p = write(tmp_path / "p.tsv", "docid\tcontents\ttitle\n1\thello world\tT\n")
    assert [(x.id, x.text, x.title) for x in read_passages(p)] == [("1", "hello world", "T")] and count_passages(p) == 1


def test_integer_ids_read_as_integers(tmp_path):
    from dpr_xrisk.io.passages import read_passages

    p = _parquet(tmp_path / "p.parquet", id=[1, 2], text=["a", "b"])
    assert [x.id for x in read_passages(p)] == ["1", "2"]


def test_dataset_dict_names_its_splits(tmp_path, tiny_model_dir):
    import datasets

    datasets.disable_progress_bars()
    ds = datasets.Dataset.from_dict({"id": ["a"], "text": ["x"], "title": [""]})
    datasets.DatasetDict({"train": ds, "test": ds}).save_to_disk(str(tmp_path / "dd"))
    out = one_line_error("encode", "--model", tiny_model_dir, "--corpus", tmp_path / "dd", "--out", tmp_path / "e")
    assert "holds several splits (a DatasetDict: train, test): give one split's folder" in out
    assert not (tmp_path / "e").exists()


# ---- artifacts: one folder, one set of settings ----------------------------------------------------------
@pytest.fixture
def fp32_folder(tiny_encoder, tmp_path):
    from dpr_xrisk.retrieval.encode import encode_corpus

    encode_corpus(tiny_encoder, SAMPLE / "passages.tsv", tmp_path / "emb", progress=False)
    return tmp_path / "emb"


def snapshot(folder):
    return {f.name: f.read_bytes() for f in sorted(folder.iterdir())}


@pytest.mark.parametrize("change,match", [
    ({"dtype": "float16"}, "dtype float32 -> float16"),
    ({"bf16": True}, "bf16 False -> True"),
    ({"quantize": "int8"}, "quantize none -> int8"),
    ({"num_shards": 2}, "split into 1 shards, not 2"),
])
def test_encode_refuses_a_folder_of_other_settings(tiny_encoder, fp32_folder, change, match):
    from dpr_xrisk.retrieval.encode import encode_corpus

    change = dict(change)
    enc = tiny_encoder
    if change.pop("quantize", None):
        from dpr_xrisk.runtime.quantize import quantized

        enc = quantized(tiny_encoder, "int8")
    before = snapshot(fp32_folder)
    with pytest.raises(InputError, match=match):
        encode_corpus(enc, SAMPLE / "passages.tsv", fp32_folder, progress=False, **change)
    assert snapshot(fp32_folder) == before  # before: "wrote", fp32 vectors kept under a meta that said otherwise
    encode_corpus(enc, SAMPLE / "passages.tsv", fp32_folder, progress=False, overwrite=True, **change)
    n = change.get("num_shards", 1)
    metas = sorted(fp32_folder.glob("meta-*.json"))
    assert [m.name for m in metas] == [f"meta-00000-of-{n:05d}.json"]  # replaced, never merged
    meta = json.loads(metas[0].read_text())
    vecs = np.load(fp32_folder / metas[0].name.replace("meta", "embeddings").replace(".json", ".npy"))
    assert vecs.dtype == np.dtype(meta["dtype"]) == np.dtype(change.get("dtype", "float32"))


def test_encode_cli_refuses_float16_into_a_finished_fp32_folder(tiny_model_dir, tmp_path):
    cli("encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / "emb")
    before = snapshot(tmp_path / "emb")
    out = one_line_error("encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out",
                         tmp_path / "emb", "--dtype", "float16")
    assert "dtype float32 -> float16" in out and snapshot(tmp_path / "emb") == before


KILLED = """
import sys, time
from dpr_xrisk.retrieval.encoder import DualEncoder
from dpr_xrisk.retrieval.encode import encode_corpus
enc = DualEncoder.load(sys.argv[1], passage_max_length=64)
real = enc.encode_passages
def slow(*a, **kw):
    time.sleep(0.03)
    return real(*a, **kw)
enc.encode_passages = slow
print("ready", flush=True)
encode_corpus(enc, sys.argv[2], sys.argv[3], chunk_size=16, progress=False)
"""


@pytest.mark.parametrize("seed,change", [(0, {"dtype": "float16"}), (1, {"bf16": True}), (2, {"quantize": "int8"})])
def test_kill_9_then_resume_with_changed_options_is_refused(tiny_model_dir, tiny_encoder, tmp_path, seed, change):
    from dpr_xrisk.retrieval.encode import encode_corpus

    out = tmp_path / "emb"
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(tiny_model_dir), str(SAMPLE / "passages.tsv"), str(out)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(random.Random(seed).uniform(0.05, 0.8))  # 21 chunks of ~0.04 s: mostly within the run
    proc.kill()  # SIGKILL: no clean-up runs
    proc.wait()
    recorded = any(out.glob("progress-*.json")) or any(out.glob("meta-*.json"))
    before = snapshot(out) if out.exists() else None
    change, enc = dict(change), tiny_encoder
    if change.pop("quantize", None):
        from dpr_xrisk.runtime.quantize import quantized

        enc = quantized(tiny_encoder, "int8")
    if recorded:
        with pytest.raises(InputError, match="other settings"):
            encode_corpus(enc, SAMPLE / "passages.tsv", out, progress=False, **change)
        assert snapshot(out) == before  # nothing mixed in
    # the same options resume (or keep) to what one clean run writes
    encode_corpus(tiny_encoder, SAMPLE / "passages.tsv", out, progress=False)
    encode_corpus(tiny_encoder, SAMPLE / "passages.tsv", tmp_path / "clean", progress=False)
    got, want = (np.load(d / "embeddings-00000-of-00001.npy") for d in (out, tmp_path / "clean"))
    assert got.dtype == want.dtype and np.allclose(got, want, atol=1e-6)
    assert not list(out.glob("*.partial")) and not list(out.glob("progress-*"))


def test_outputs_may_not_be_their_inputs(tiny_model_dir, fp32_folder, tmp_path):
    out = one_line_error("export", "--format", "sentence-transformers", "--model", tiny_model_dir, "--out",
                         tiny_model_dir, "--overwrite")
    assert "--out is the model it is made from" in out and (tiny_model_dir / "config.json").exists()
    assert "--out is the embeddings folder" in one_line_error("index", "--embeddings", fp32_folder, "--out", fp32_folder,
                                                              "--overwrite")
    assert (fp32_folder / "meta-00000-of-00001.json").exists()
    corpus = write(tmp_path / "data" / "passages.tsv", (SAMPLE / "passages.tsv").read_text())
    assert "--out contains the corpus" in one_line_error("encode", "--model", tiny_model_dir, "--corpus", corpus,
                                                         "--out", tmp_path / "data")


# ---- leftovers: staged, moved in on success, removed on failure ------------------------------------------
@pytest.mark.parametrize("corpus,match", [
    ("id\ttext\ttitle\n" + "".join(f"p{i}\tt {i}\tT\n" for i in range(40)) + "p3\tagain\tT\n", "duplicate passage id 'p3'"),
    ("id\ttext\ttitle\n" + "".join(f"p{i}\tt {i}\tT\n" for i in range(40)) + "p40\tshort\n", "expected 3 tab-separated"),
    ("id\ttext\ttitle\n", "corpus has no passages"),
    ("", "corpus has no passages"),
])
def test_a_refused_encode_leaves_nothing(tiny_model_dir, tmp_path, corpus, match):
    c = write(tmp_path / "c.tsv", corpus)
    assert match in one_line_error("encode", "--model", tiny_model_dir, "--corpus", c, "--out", tmp_path / "e")
    assert not (tmp_path / "e").exists()  # before: *.npy.partial / *.txt.partial, or an empty folder


def test_search_checks_every_output_before_it_writes_any(tmp_path):
    (tmp_path / "dir").mkdir()
    out = one_line_error("search", "--index", tmp_path / "no-index", "--queries", SAMPLE / "test.qa.tsv",
                         "--out-run", tmp_path / "r.trec", "--out-json", tmp_path / "dir")
    assert "dir: is a folder; give a file path" in out
    assert not (tmp_path / "r.trec").exists()


def test_run_outputs_appear_together_or_not_at_all(tmp_path):
    from dpr_xrisk.retrieval.search import write_run_outputs

    q = read_questions(SAMPLE / "test.qa.tsv")[:1]
    with pytest.raises(InputError, match="passages.tsv: run names passage 'nowhere'"):
        write_run_outputs({"0": [("nowhere", 1.0)]}, q, SAMPLE / "passages.tsv", tmp_path / "r.trec", tmp_path / "r.json", "t")
    assert list(tmp_path.iterdir()) == []


def test_errors_name_the_users_path_never_a_temp_one(tmp_path):
    from dpr_xrisk.io.common import atomic_dir, atomic_write

    with pytest.raises(FileNotFoundError) as e:
        with atomic_dir(tmp_path / "out") as tmp:
            open(tmp / "missing" / "x")
    assert e.value.filename == str(tmp_path / "out" / "missing" / "x") and ".tmp" not in str(e.value)
    with pytest.raises(InputError, match=r"out.txt: bad"):
        with atomic_write(tmp_path / "out.txt") as f:
            raise InputError("bad", f.name)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [
    ("encode", "--model", "minilm", "--corpus", SAMPLE / "passages.tsv", "--out", "{file}/emb"),
    ("evaluate", "--run", "{run}", "--qrels", SAMPLE / "test.qrels.tsv", "--out", "{file}/eval.json"),
])
def test_out_under_a_file_says_so(tmp_path, args):
    f = write(tmp_path / "afile", "x")
    run = write(tmp_path / "r.trec", "".join(f"{i} Q0 s1 1 1.0 t\n" for i in range(20)))
    args = [str(a).format(file=f, run=run) for a in args]
    out = one_line_error(*args)
    assert f"{f} is a file, not a folder" in out and "File exists" not in out


# ---- messages: numeric ranges, damaged files, conversions --------------------------------------------------
@pytest.mark.parametrize("args", [
    ("ask", "--index", "x", "--k", 0, "q"),
    ("encode", "--corpus", "c", "--out", "o", "--threads", -1),
    ("encode", "--corpus", "c", "--out", "o", "--threads", 0),
    ("encode", "--corpus", "c", "--out", "o", "--batch-size", 0),
    ("index", "--embeddings", "e", "--out", "o", "--threads", 0),
    ("search", "--index", "i", "--queries", "q", "--k", 0),
    ("search", "--index", "i", "--queries", "q", "--alpha", -1),
    ("bm25", "search", "--index", "i", "--queries", "q", "--k", 0),
    ("evaluate", "--run", "r", "--k", 0),
    ("convert", "squad", "--input", "x", "--out", "o", "--test-fraction", 2),
    ("encode",),
])
def test_usage_errors_are_one_line(args):
    out = one_line_error(*args)
    assert ("Invalid value for" in out or "Missing option" in out) and "Usage:" not in out


@pytest.mark.parametrize("damage,match", [
    (lambda npy: np.save(npy, np.zeros((3, 4), np.float32)), r"holds vectors of shape \[3, 4\], its meta says"),
    (lambda npy: npy.write_bytes(npy.read_bytes()[:200]), "cannot read the vectors"),
    (lambda npy: np.save(npy, np.load(npy).astype(np.float16)), "holds float16 vectors, its meta says float32"),
])
def test_damaged_vectors_are_located_errors(fp32_folder, tmp_path, damage, match):
    npy = fp32_folder / "embeddings-00000-of-00001.npy"
    damage(npy)
    out = one_line_error("index", "--embeddings", fp32_folder, "--out", tmp_path / "idx")
    assert "embeddings-00000-of-00001.npy" in out and match.split(",")[0].replace("\\", "")[:20] in out


def test_convert_squad_drops_answers_its_paragraph_lacks(tmp_path):
    from dpr_xrisk.io.biencoder import read_biencoder

    squad = {"data": [{"title": "Danube", "paragraphs": [{"context": "The Danube starts in the Black Forest.", "qas": [
        {"question": "Where does the Danube start?", "answers": [{"text": "Black Forest"}, {"text": "Alps"}]},
        {"question": "What is its length?", "answers": [{"text": "2850 km"}]}]}]}]}
    src = write(tmp_path / "squad.json", json.dumps(squad))
    out = cli("convert", "squad", "--input", src, "--out", tmp_path / "dpr")
    assert "'dropped_answers': 2" in out and "'dropped_questions': 1" in out
    qs = read_questions(tmp_path / "dpr" / "train.qa.tsv")
    assert [(q.text, q.answers) for q in qs] == [("Where does the Danube start?", ("Black Forest",))]
    rec = read_biencoder(tmp_path / "dpr" / "biencoder-train.json")[0]
    assert all(a in rec["positive_ctxs"][0]["text"] for a in rec["answers"])
    assert json.loads((tmp_path / "dpr" / "convert-meta.json").read_text())["dropped_questions"] == 1


def test_hybrid_search_refuses_a_bm25_index_of_another_corpus(tiny_model_dir, fp32_folder, tmp_path):
    other = write(tmp_path / "other.tsv", "id\ttext\ttitle\n" + "".join(
        f"o{i}\tthe Danube starts in the Black Forest {i}\tT\n" for i in range(5)))
    cli("bm25", "index", "--corpus", other, "--out", tmp_path / "bm25")
    cli("index", "--embeddings", fp32_folder, "--out", tmp_path / "idx")
    out = one_line_error("search", "--index", tmp_path / "idx", "--queries", SAMPLE / "test.qa.tsv", "--model",
                         tiny_model_dir, "--bm25-index", tmp_path / "bm25", "--out-run", tmp_path / "h.trec")
    assert "bm25: holds another corpus" in out  # before: a hybrid run full of o0..o4
    assert not (tmp_path / "h.trec").exists()


@pytest.mark.parametrize("name,text,reader,match", [
    ("q.qrels", "0 0 d1 0.5\n", "qrels", r"q.qrels:1: relevance '0.5' is not an integer grade"),
    ("q.qrels", "0 0 d1 1\n0 0 d1 0\n", "qrels", r"q.qrels:2: document 'd1' of question '0' is judged twice"),
    ("q.jsonl", '{"id": "a", "question": "x?"}\n{"id": "a", "question": "y?"}\n', "questions",
     r"q.jsonl: question id 'a' appears twice \(questions 1 and 2 of the file\)"),
    ("r.trec", "0 Q0 d1 1 nan t\n", "run", r"r.trec:1: score nan of passage 'd1' is not a finite number"),
])
def test_inputs_that_would_be_merged_or_rounded_in_silence(tmp_path, name, text, reader, match):
    from dpr_xrisk.io.questions import check_unique_ids
    from dpr_xrisk.io.trec import read_qrels

    f = write(tmp_path / name, text)
    with pytest.raises(InputError, match=match):
        {"qrels": read_qrels, "questions": lambda f: check_unique_ids(read_questions(f), f), "run": read_any_run}[reader](f)


def test_tune_fusion_refuses_runs_of_other_questions(tmp_path):
    from dpr_xrisk.retrieval.search import run_meta, write_run_outputs

    test = read_questions(SAMPLE / "test.qa.tsv")
    for name, hits in (("d.trec", [("s10", 3.0), ("s12", 2.0)]), ("s.trec", [("s12", 9.0), ("s10", 1.0)])):
        write_run_outputs({q.qid: hits for q in test}, test, None, tmp_path / name, None, "t",
                          run_meta("t", test, SAMPLE / "test.qa.tsv"))
    dev = write(tmp_path / "questions.tsv", (SAMPLE / "dev.qa.tsv").read_text())
    out = one_line_error("tune-fusion", "--dense", tmp_path / "d.trec", "--sparse", tmp_path / "s.trec",
                         "--answers", dev, "--corpus", SAMPLE / "passages.tsv")
    assert "d.trec: was retrieved for other questions" in out
    assert "split names disagree" in one_line_error("tune-fusion", "--dense", tmp_path / "d.trec", "--sparse",
                                                    tmp_path / "s.trec", "--qrels", SAMPLE / "dev.qrels.tsv")


def test_indexes_of_other_quantisation_are_not_searched_together(tmp_path):
    from dpr_xrisk.retrieval.index import load_indexes

    for name, quantize in (("a", "none"), ("b", "int8")):
        d = tmp_path / name
        d.mkdir()
        import faiss

        index = faiss.IndexFlatIP(4)
        index.add(np.eye(4, dtype=np.float32)[:2])
        faiss.write_index(index, str(d / "index.faiss"))
        write(d / "ids.txt", f"{name}1\n{name}2\n")
        write(d / "meta.json", json.dumps({"dim": 4, "fingerprint": "f", "model": "m", "corpus_fingerprint": "c",
                                           "quantize": quantize}))
    with pytest.raises(InputError, match="different --backend/--quantize"):
        load_indexes([tmp_path / "a", tmp_path / "b"])


def test_a_meta_left_beside_a_replaced_run_is_not_believed(tmp_path):
    from dpr_xrisk.retrieval.search import run_meta, write_run_outputs

    test = read_questions(SAMPLE / "test.qa.tsv")
    write_run_outputs({q.qid: [("s10", 1.0)] for q in test}, test, None, tmp_path / "r.trec", None, "t",
                      run_meta("t", test, SAMPLE / "test.qa.tsv"))
    dev = write(tmp_path / "questions.tsv", (SAMPLE / "dev.qa.tsv").read_text())
    assert "retrieved for other questions" in one_line_error("evaluate", "--run", tmp_path / "r.trec", "--answers", dev,
                                                             "--corpus", SAMPLE / "passages.tsv")
    write(tmp_path / "r.trec", "".join(f"{q.qid} Q0 s11 1 1.0 other\n" for q in test))  # another tool's run, same path
    cli("evaluate", "--run", tmp_path / "r.trec", "--answers", dev, "--corpus", SAMPLE / "passages.tsv")


def test_a_conversion_replaces_never_merges(tmp_path):
    squad = {"data": [{"title": f"A{a}", "paragraphs": [{"context": f"text {a} answer{a}", "qas": [
        {"question": f"q{a}?", "answers": [{"text": f"answer{a}"}]}]}]} for a in range(4)]}
    src = write(tmp_path / "squad.json", json.dumps(squad))
    cli("convert", "squad", "--input", src, "--out", tmp_path / "dpr", "--test-fraction", 0.5)
    assert (tmp_path / "dpr" / "test.qa.tsv").exists()
    assert "not empty (use --overwrite" in one_line_error("convert", "squad", "--input", src, "--out", tmp_path / "dpr")
    cli("convert", "squad", "--input", src, "--out", tmp_path / "dpr", "--overwrite")  # no test split this time
    assert not (tmp_path / "dpr" / "test.qa.tsv").exists()  # before: the old test split stayed beside the new files
    assert "--out contains the input" in one_line_error("convert", "squad", "--input", src, "--out", tmp_path,
                                                        "--overwrite")
    assert src.exists()

"""Encoder loading/saving, sharded resumable encoding, FAISS indexes vs brute force, and the
errors a mismatched index or shard set must raise."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import SAMPLE
from dpr_xrisk.retrieval.encode import encode_corpus, load_shards, shard_arrays
from dpr_xrisk.retrieval.encoder import DualEncoder
from dpr_xrisk.errors import InputError
from dpr_xrisk.retrieval.index import build_index, load_index, make_index, set_search_params
from dpr_xrisk.io.passages import read_passages
from dpr_xrisk.io.questions import read_questions
from dpr_xrisk.retrieval.search import check_compatible, dense_search, fuse, topk_matrix_search

CORPUS = SAMPLE / "passages.tsv"


def test_minilm_settings_come_from_its_sentence_transformers_config():
    enc = DualEncoder.load("minilm")
    s = enc.settings
    assert (s.pooling, s.normalize, s.passage_max_length, s.title) == ("mean", True, 256, "join")
    assert enc.dim == 384


def test_save_load_round_trip_gives_identical_embeddings(tiny_model_dir, tmp_path):
    enc = DualEncoder.load(tiny_model_dir, pooling="mean", normalize=True, query_prefix="q: ")
    enc.save(tmp_path / "m")
    again = DualEncoder.load(tmp_path / "m")
    assert again.settings == enc.settings
    assert (tmp_path / "m" / "query_encoder" / "model.safetensors").exists()
    texts = ["who wrote hamlet", "what is the speed of light"]
    np.testing.assert_array_equal(enc.encode_queries(texts), again.encode_queries(texts))
    assert enc.fingerprint() == again.fingerprint()
    shared = DualEncoder.load(tiny_model_dir, shared=True)
    assert shared.query_model is shared.passage_model
    shared.save(tmp_path / "s")
    assert json.loads((tmp_path / "s" / "dpr_xrisk.json").read_text())["towers"] == {"query": "encoder", "passage": "encoder"}


def test_length_sorted_batched_encoding_equals_one_by_one(tiny_encoder):
    ps = list(read_passages(CORPUS))[:20]
    batched = tiny_encoder.encode_passages([p.title for p in ps], [p.text for p in ps], batch_size=7)
    single = np.concatenate([tiny_encoder.encode_passages([p.title], [p.text]) for p in ps])
    np.testing.assert_allclose(batched, single, atol=1e-5)


@pytest.mark.parametrize("title", ["pair", "join", "none"])
def test_compact_padding_equals_the_tokenizers_padding(tiny_model_dir, title):
    """encode_* pads int32 token rows itself; it must feed the model what tokenizer(padding=True) does."""
    import torch

    enc = DualEncoder.load(tiny_model_dir, pooling="mean", title=title, passage_max_length=48)
    ps = list(read_passages(CORPUS))[:13]
    ours = enc.encode_passages([p.title for p in ps], [p.text for p in ps], batch_size=13)
    with torch.inference_mode():
        ref = enc.embed_passages(enc.tokenize_passages([p.title for p in ps], [p.text for p in ps])).numpy()
    np.testing.assert_allclose(ours, ref, atol=1e-6)
    qs = ["who wrote it", "a much longer question about the history of a place"] * 3
    with torch.inference_mode():
        ref_q = enc.embed_queries(enc.tokenize_queries(qs)).numpy()
    np.testing.assert_allclose(enc.encode_queries(qs, batch_size=4), ref_q, atol=1e-6)


def test_duplicate_id_in_a_later_chunk_is_found(tiny_encoder, tmp_path):
    rows = [f"p{i}\tpassage number {i}\tT" for i in range(30)] + ["p3\tagain\tT"]
    (tmp_path / "c.tsv").write_text("id\ttext\ttitle\n" + "\n".join(rows) + "\n")
    with pytest.raises(InputError, match=r"c.tsv:32: duplicate passage id 'p3'"):
        encode_corpus(tiny_encoder, tmp_path / "c.tsv", tmp_path / "e", chunk_size=8, progress=False)
    assert not list((tmp_path / "e").glob("meta-*"))


@pytest.mark.parametrize("bad,msg", [({"pooling": "max"}, "unknown pooling 'max'; valid: cls, mean"),
                                     ({"title": "x"}, "unknown title mode"), ({"colour": 1}, "unknown encoder setting")])
def test_bad_encoder_settings(tiny_model_dir, bad, msg):
    with pytest.raises(InputError, match=msg):
        DualEncoder.load(tiny_model_dir, **bad)


def test_unknown_model_path():
    with pytest.raises(InputError, match="local Hugging Face model folder"):
        DualEncoder.load("bert-base-uncased")


def test_sharded_encoding_merges_into_the_unsharded_index(tiny_encoder, tmp_path):
    encode_corpus(tiny_encoder, CORPUS, tmp_path / "one", progress=False)
    for i in range(3):
        encode_corpus(tiny_encoder, CORPUS, tmp_path / "three", shard_id=i, num_shards=3, progress=False)
    a = np.concatenate([shard_arrays(m)[0] for m in load_shards(tmp_path / "one")])
    metas = load_shards(tmp_path / "three")
    b = np.concatenate([shard_arrays(m)[0] for m in metas])
    ids = sum((shard_arrays(m)[1] for m in metas), [])
    assert ids == [p.id for p in read_passages(CORPUS)]
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_interrupted_encoding_resumes_to_the_same_result(tiny_encoder, tmp_path, monkeypatch):
    encode_corpus(tiny_encoder, CORPUS, tmp_path / "full", chunk_size=50, progress=False)
    calls = {"n": 0}
    real = tiny_encoder.encode_passages

    def dying(*a, **kw):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(tiny_encoder, "encode_passages", dying)
    with pytest.raises(KeyboardInterrupt):
        encode_corpus(tiny_encoder, CORPUS, tmp_path / "cut", chunk_size=50, progress=False)
    assert not list((tmp_path / "cut").glob("meta-*"))  # unfinished: no meta
    progress = json.loads(next((tmp_path / "cut").glob("progress-*")).read_text())
    assert progress["chunks_done"] == 3
    monkeypatch.setattr(tiny_encoder, "encode_passages", real)
    calls["n"] = 0
    encode_corpus(tiny_encoder, CORPUS, tmp_path / "cut", chunk_size=50, progress=False)
    (va, ia), (vb, ib) = (shard_arrays(load_shards(tmp_path / d)[0]) for d in ("full", "cut"))
    assert ia == ib
    np.testing.assert_array_equal(va, vb)
    assert not list((tmp_path / "cut").glob("*.partial")) and not list((tmp_path / "cut").glob("progress-*"))


def test_float16_storage(tiny_encoder, tmp_path):
    encode_corpus(tiny_encoder, CORPUS, tmp_path / "e", dtype="float16", progress=False)
    v, _ = shard_arrays(load_shards(tmp_path / "e")[0])
    assert v.dtype == np.float16


@pytest.fixture(scope="module")
def emb_dir(tiny_encoder, tmp_path_factory):
    d = tmp_path_factory.mktemp("emb")
    encode_corpus(tiny_encoder, CORPUS, d, progress=False)
    return d


def test_flat_search_equals_numpy_brute_force(tiny_encoder, emb_dir, tmp_path):
    build_index(emb_dir, tmp_path / "idx")
    index, ids, meta = load_index(tmp_path / "idx")
    questions = read_questions(SAMPLE / "test.qa.tsv")
    run = dense_search(tiny_encoder, index, ids, meta, questions, k=10, progress=False)
    vecs, all_ids = shard_arrays(load_shards(emb_dir)[0])
    q = tiny_encoder.encode_queries([x.text for x in questions])
    scores, rows = topk_matrix_search(q, np.asarray(vecs), 10)
    for qi, question in enumerate(questions):
        got = run[question.qid]
        np.testing.assert_allclose([s for _, s in got], scores[qi], rtol=1e-5, atol=1e-5)
        # ids equal up to the order of exactly tied scores
        exp = {all_ids[r] for r in rows[qi]}
        assert {d for d, _ in got} == exp or np.isclose(scores[qi][-1], scores[qi][-2])


def test_approximate_indexes_build_and_search(emb_dir, tmp_path):
    for factory, params in (("HNSW16", {"ef_search": 64}), ("IVF4,Flat", {"nprobe": 4}), ("IVF2,PQ8", {"nprobe": 2})):
        out = build_index(emb_dir, tmp_path / factory.replace(",", "_"), factory=factory)
        index, ids, meta = load_index(out)
        set_search_params(index, **params)
        assert index.ntotal == len(ids) == meta["count"] and meta["factory"] == factory
    with pytest.raises(InputError, match="does not apply"):
        set_search_params(load_index(tmp_path / "HNSW16")[0], nprobe=3)


@pytest.mark.parametrize("factory", ["IVF4,PQ8", "PQ8", "OPQ8,IVF4,PQ8"])
def test_pq_indexes_skip_polysemous_training(factory):
    import faiss

    from dpr_xrisk.retrieval.index import make_index

    index = make_index(32, factory)
    assert faiss.downcast_index(faiss.extract_index_ivf(index) if "IVF" in factory else index).do_polysemous_training is False


def test_bad_factory_lists_valid_examples():
    with pytest.raises(InputError, match="FAISS rejects factory string 'Bogus42'.*valid examples: Flat, HNSW32"):
        make_index(32, "Bogus42")


def test_index_from_another_model_is_refused(emb_dir, tmp_path, tiny_model_dir):
    build_index(emb_dir, tmp_path / "idx")
    _, _, meta = load_index(tmp_path / "idx")
    other = DualEncoder.load(tiny_model_dir, pooling="mean")
    with pytest.raises(InputError, match="built with another model"):
        check_compatible(other, meta)
    with pytest.raises(InputError, match="dimension 32 does not match the encoder's 384"):
        check_compatible(DualEncoder.load("minilm"), meta)


def test_inconsistent_shard_sets(tiny_encoder, tiny_model_dir, tmp_path):
    d = tmp_path / "e"
    encode_corpus(tiny_encoder, CORPUS, d, shard_id=0, num_shards=2, progress=False)
    with pytest.raises(InputError, match=r"missing shard\(s\) \[1\] of 2"):
        load_shards(d)
    other = DualEncoder.load(tiny_model_dir, pooling="mean")
    with pytest.raises(InputError, match=r"other settings \(model"):  # one folder, one artifact
        encode_corpus(other, CORPUS, d, shard_id=1, num_shards=2, progress=False)
    assert not list(d.glob("*-00001-of-00002.*"))
    # a folder assembled by hand is still refused when loaded
    encode_corpus(other, CORPUS, tmp_path / "other", shard_id=1, num_shards=2, progress=False)
    for f in (tmp_path / "other").iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    with pytest.raises(InputError, match="mismatched models"):
        load_shards(d)
    # overlapping ids: the same shard copied under another name
    d2 = tmp_path / "dup"
    encode_corpus(tiny_encoder, CORPUS, d2, shard_id=0, num_shards=2, progress=False)
    for f in d2.glob("*-00000-of-00002.*"):
        (d2 / f.name.replace("00000-of", "00001-of")).write_bytes(f.read_bytes())
    meta = json.loads((d2 / "meta-00001-of-00002.json").read_text())
    (d2 / "meta-00001-of-00002.json").write_text(json.dumps(meta | {"shard_id": 1}))
    with pytest.raises(InputError, match="more than one shard"):
        build_index(d2, tmp_path / "idx")


def test_existing_index_folder_is_not_overwritten(emb_dir, tmp_path):
    build_index(emb_dir, tmp_path / "idx")
    with pytest.raises(InputError, match="already exists"):
        build_index(emb_dir, tmp_path / "idx")


def test_fusion():
    dense = {"q": [("a", 0.9), ("b", 0.8), ("c", 0.1)]}
    sparse = {"q": [("c", 20.0), ("a", 10.0)]}
    rrf = fuse(dense, sparse, "rrf", k=3)["q"]
    assert [d for d, _ in rrf] == ["a", "c", "b"]
    assert rrf[0][1] == pytest.approx(1 / 61 + 1 / 62)
    interp = fuse(dense, sparse, "interpolation", alpha=1.0, normalize=False, k=3)["q"]
    assert dict(interp) == pytest.approx({"a": 10.9, "c": 20.1, "b": 10.8})
    with pytest.raises(InputError, match="unknown fusion"):
        fuse(dense, sparse, "max")


def test_fusion_ties_follow_trec_eval_so_file_order_and_qrels_metrics_agree():
    """Under RRF a document first in one list and one first in the other tie; the fused order must
    be the one trec_eval (and dpr_xrisk.evaluation.metrics) recompute from the scores -- docid descending --
    or DPR accuracy (file order) and MRR (scores) would rank the same run two ways."""
    from dpr_xrisk.evaluation.metrics import qrels_metrics

    dense = {"q": [("a", 0.9), ("x", 0.5)]}
    sparse = {"q": [("b", 30.0), ("y", 10.0)]}
    fused = fuse(dense, sparse, "rrf", k=4)["q"]
    assert fused[0][1] == fused[1][1]  # a and b tie at 1/61
    assert [d for d, _ in fused] == ["b", "a", "y", "x"]
    ranked = [d for d, _ in sorted(dict(fused).items(), key=lambda t: (t[1], t[0]), reverse=True)]
    assert ranked == [d for d, _ in fused]
    assert qrels_metrics({"q": {"b": 1}}, {"q": dict(fused)}, [10])["mrr@10"] == 1.0
    assert qrels_metrics({"q": {"a": 1}}, {"q": dict(fused)}, [10])["mrr@10"] == 0.5


def test_per_shard_indexes_searched_together_equal_the_merged_index(tiny_encoder, tmp_path):
    from dpr_xrisk.retrieval.index import load_indexes

    for i in range(3):
        encode_corpus(tiny_encoder, CORPUS, tmp_path / "e", shard_id=i, num_shards=3, progress=False)
    build_index(tmp_path / "e", tmp_path / "all")
    for i in range(3):
        build_index(tmp_path / "e", tmp_path / f"s{i}", shards=[i])
    questions = read_questions(SAMPLE / "test.qa.tsv")
    index, ids, meta = load_index(tmp_path / "all")
    merged = dense_search(tiny_encoder, index, ids, meta, questions, k=10, progress=False)
    parts = load_indexes([tmp_path / f"s{i}" for i in range(3)])
    sharded = dense_search(tiny_encoder, *parts[0], questions, k=10, progress=False, more=parts[1:])
    for q in questions:
        np.testing.assert_allclose([s for _, s in merged[q.qid]], [s for _, s in sharded[q.qid]], atol=1e-6)
        last = merged[q.qid][-1][1]  # ids agree above the k-th score (ties there may go either way)
        assert {d for d, s in merged[q.qid] if s > last + 1e-6} == {d for d, s in sharded[q.qid] if s > last + 1e-6}
    with pytest.raises(InputError, match="indexes overlap"):
        load_indexes([tmp_path / "all", tmp_path / "s0"])

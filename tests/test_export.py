"""`dpr-xrisk export` (issue #14 item 2): a trained model loads in sentence-transformers and gives
dpr-xrisk's vectors; an index loads in pyserini's FaissSearcher and gives our ids and scores."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import SAMPLE, cli
from dpr_xrisk.retrieval.encoder import DualEncoder
from dpr_xrisk.io.passages import read_passages
from dpr_xrisk.io.questions import read_questions


@pytest.fixture(scope="module")
def two_towers(tiny_model_dir, tmp_path_factory):
    """A dual encoder whose towers differ (the passage tower's weights perturbed), mean pooling,
    normalised, no titles (sentence-transformers encodes single texts)."""
    import torch

    d = tmp_path_factory.mktemp("two-towers")
    enc = DualEncoder.load(tiny_model_dir, pooling="mean", normalize=True, title="join", query_max_length=64,
                           passage_max_length=48)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in enc.passage_model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    enc.save(d / "model")
    return d / "model"


@pytest.mark.parametrize("shared", [False, True])
def test_sentence_transformers_export_gives_our_vectors(two_towers, tiny_model_dir, tmp_path, shared):
    from sentence_transformers import SentenceTransformer

    model = two_towers
    if shared:
        DualEncoder.load(tiny_model_dir, pooling="cls", normalize=False, shared=True, title="join").save(tmp_path / "m")
        model = tmp_path / "m"
    cli("export", "--format", "sentence-transformers", "--model", model, "--out", tmp_path / "st")
    enc = DualEncoder.load(model)
    questions = [q.text for q in read_questions(SAMPLE / "test.qa.tsv")]
    texts = [p.text for p in read_passages(SAMPLE / "passages.tsv")][:40]
    ours_q = enc.encode_queries(questions)
    ours_p = enc.encode_passages([""] * len(texts), texts)
    q_dir, p_dir = (tmp_path / "st" / "encoder",) * 2 if shared else (tmp_path / "st" / "query_encoder", tmp_path / "st" / "passage_encoder")
    st_q = SentenceTransformer(str(q_dir), device="cpu").encode(questions, convert_to_numpy=True)
    st_p = SentenceTransformer(str(p_dir), device="cpu").encode(texts, convert_to_numpy=True)
    assert np.abs(st_q - ours_q).max() <= 1e-5 and np.abs(st_p - ours_p).max() <= 1e-5
    if not shared:  # the towers really differ, so the test would see a swapped folder
        assert np.abs(enc.encode_queries(texts[:5]) - ours_p[:5]).max() > 1e-3


def test_pyserini_export_gives_our_ids_and_scores(two_towers, tmp_path):
    cli("export", "--format", "sentence-transformers", "--model", two_towers, "--out", tmp_path / "st")
    (tmp_path / "corpus.tsv").write_text("id\ttext\ttitle\n" + "".join(
        f"{p.id}\t{p.text}\t\n" for p in read_passages(SAMPLE / "passages.tsv")))
    cli("encode", "--model", two_towers, "--corpus", tmp_path / "corpus.tsv", "--out", tmp_path / "emb")
    cli("index", "--embeddings", tmp_path / "emb", "--out", tmp_path / "idx")
    cli("export", "--format", "pyserini", "--index", tmp_path / "idx", "--out", tmp_path / "pyserini")
    cli("search", "--index", tmp_path / "idx", "--queries", SAMPLE / "test.qa.tsv", "--k", 5, "--out-run", tmp_path / "r.trec")
    ours: dict = {}
    for line in (tmp_path / "r.trec").read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        ours.setdefault(qid, []).append((doc, float(score)))

    from dpr_xrisk._pyserini import start_jvm

    start_jvm()
    from pyserini.encode import AutoQueryEncoder
    from pyserini.search.faiss import FaissSearcher

    encoder = AutoQueryEncoder(str(tmp_path / "st" / "query_encoder"), pooling="mean", l2_norm=True)
    searcher = FaissSearcher(str(tmp_path / "pyserini"), encoder)
    for q in read_questions(SAMPLE / "test.qa.tsv"):
        hits = searcher.search(q.text, k=5)
        assert [h.docid for h in hits] == [d for d, _ in ours[q.qid]]
        assert np.allclose([h.score for h in hits], [s for _, s in ours[q.qid]], atol=1e-4)


def test_export_errors(tmp_path, two_towers):
    assert "unknown export format 'onnx'" in cli("export", "--format", "onnx", "--model", two_towers, "--out", tmp_path / "x", code=2)
    assert "give --index" in cli("export", "--format", "pyserini", "--out", tmp_path / "x", code=2)
    assert "not an index folder" in cli("export", "--format", "pyserini", "--index", tmp_path, "--out", tmp_path / "x", code=2)
    (tmp_path / "exists").mkdir()
    assert "already exists" in cli("export", "--format", "sentence-transformers", "--model", two_towers,
                                   "--out", tmp_path / "exists", code=2)

"""The ONNX Runtime backend (issue #13): exported towers give the torch towers' vectors (fp32:
to float rounding; int8: cosine >= 0.99 per vector), the same vectors on every run, exports
cached by weight fingerprint and rebuilt when damaged, through encode/index/search/mine and the
training refresh; every bad input is one line with exit code 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from conftest import SAMPLE, assert_same_weights, cli, train_killed_at
from dpr_xrisk.retrieval.encoder import DualEncoder
from dpr_xrisk.errors import InputError

pytest.importorskip("onnxruntime", reason="the 'fast' extra (cli/setup.sh installs it)")

from dpr_xrisk.runtime import onnx_backend as O  # noqa: E402

TRAIN = str(SAMPLE / "biencoder-train.json")
CORPUS = SAMPLE / "passages.tsv"
TEXTS = ["the quick brown fox", "jumps over the lazy dog and keeps running far away", "the nile is a river",
         "a", "river " * 60]


def cosines(a, b):
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture(scope="module")
def onnx_root(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx")


def test_onnx_towers_match_torch_and_themselves(tiny_encoder, onnx_root):
    titles = ["", "T", "", "x", "long"]
    ref_p = tiny_encoder.encode_passages(titles, TEXTS, batch_size=2)  # several batch shapes
    ref_q = tiny_encoder.encode_queries(TEXTS, batch_size=3)
    before = {k: v.clone() for k, v in tiny_encoder.state_dict().items()}
    fp32, export_s = O.onnx_encoder(tiny_encoder, "none", onnx_root)
    assert export_s > 0 and fp32.backend == "onnx" and fp32.fingerprint() == tiny_encoder.fingerprint()
    np.testing.assert_allclose(fp32.encode_passages(titles, TEXTS, batch_size=2), ref_p, atol=1e-5)
    np.testing.assert_allclose(fp32.encode_queries(TEXTS, batch_size=3), ref_q, atol=1e-5)
    int8, _ = O.onnx_encoder(tiny_encoder, "int8", onnx_root)
    v = int8.encode_passages(titles, TEXTS, batch_size=2)
    assert cosines(v, ref_p).min() >= 0.99 and np.abs(v - ref_p).max() > 1e-4  # close, and really int8
    np.testing.assert_array_equal(v, int8.encode_passages(titles, TEXTS, batch_size=2))  # exactly repeatable
    again, export_s = O.onnx_encoder(tiny_encoder, "int8", onnx_root)
    assert export_s == 0  # from the cache
    np.testing.assert_array_equal(v, again.encode_passages(titles, TEXTS, batch_size=2))
    assert all(t.equal(before[k]) for k, t in tiny_encoder.state_dict().items())  # the original is untouched
    assert isinstance(tiny_encoder.passage_model, torch.nn.Module) and not isinstance(tiny_encoder.passage_model, O.OrtTower)


def test_bert_towers_are_fused_into_attention_nodes(tiny_encoder, onnx_root):
    """The BERT export is one ONNX Runtime can fuse: Attention (QAttention once int8), not the
    unfused MatMul/Softmax attention of the dynamo export."""
    import onnx

    assert O.onnx_encoder(tiny_encoder, "int8", onnx_root)[0].smoothed_channels > 0
    ops, graphs = {}, {}
    for q in ("fp32", "int8"):
        (folder,) = [d for d in onnx_root.iterdir() if d.name.endswith(f"-{q}") and d.is_dir()]
        graphs[q] = onnx.load(str(folder / "model.onnx")).graph
        ops[q] = [n.op_type for n in graphs[q].node]
        assert json.loads((folder / "meta.json").read_text())["opset"] == O.LEGACY_OPSET
    layers = tiny_encoder.passage_model.config.num_hidden_layers
    assert ops["fp32"].count("Attention") == layers and "Softmax" not in ops["fp32"]
    assert ops["int8"].count("QAttention") == layers and "Softmax" not in ops["int8"]
    # int8 is exported from the smoothed tower: one multiply before each FFN Linear (quantize.smooth_outliers)
    made_by = {o: n.op_type for n in graphs["int8"].node for o in n.output}
    scaled = [n for n in graphs["int8"].node if n.op_type == "DynamicQuantizeLinear" and made_by.get(n.input[0]) == "Mul"]
    assert len(scaled) == 2 * layers


def test_export_cache_reuse_and_invalidation(tiny_encoder, tmp_path, monkeypatch, capsys):
    calls = []
    real = O.export_tower
    monkeypatch.setattr(O, "export_tower", lambda *a, **k: (calls.append(a[2] if len(a) > 2 else "none"), real(*a, **k)))
    path, fresh = O.load_or_export(tiny_encoder.passage_model, tmp_path)
    assert fresh and calls == ["none"] and path.parent.name == f"{O.tower_fingerprint(tiny_encoder.passage_model)}-fp32"
    assert O.load_or_export(tiny_encoder.passage_model, tmp_path) == (path, False) and len(calls) == 1
    # changed weights are another key: exported anew, the first export kept
    other = DualEncoder.load(tiny_encoder.settings.base_model, passage_max_length=64)
    with torch.no_grad():
        next(other.passage_model.parameters()).add_(0.01)
    path2, fresh2 = O.load_or_export(other.passage_model, tmp_path)
    assert fresh2 and path2 != path and path.exists()
    # a damaged file (cut short) is found by its hash and exported again with a one-line notice
    path.write_bytes(path.read_bytes()[:1000])
    capsys.readouterr()
    assert O.load_or_export(tiny_encoder.passage_model, tmp_path) == (path, True)
    assert "does not match its meta.json" in capsys.readouterr().err and len(calls) == 3
    (path.parent / "meta.json").write_text("{oops")
    assert O.load_or_export(tiny_encoder.passage_model, tmp_path)[1]
    assert "is unreadable" in capsys.readouterr().err
    assert json.loads((path.parent / "meta.json").read_text())["opset"] == O.LEGACY_OPSET  # a BERT tower (opset >= 17, as the issue asks)


def test_onnx_pipeline_encode_index_search_mine(tiny_model_dir, tmp_path):
    out = {}
    for backend, quant in (("torch", "none"), ("onnx", "none"), ("onnx", "int8")):
        emb, idx, run = (tmp_path / f"{x}-{backend}-{quant}" for x in ("emb", "idx", "run"))
        cli("encode", "--model", tiny_model_dir, "--corpus", CORPUS, "--out", emb, "--backend", backend, "--quantize", quant)
        meta = json.loads((emb / "meta-00000-of-00001.json").read_text())
        assert (meta["backend"], meta["quantize"]) == (backend, quant)
        cli("index", "--embeddings", emb, "--out", idx)
        cli("search", "--index", idx, "--queries", SAMPLE / "test.qa.tsv", "--out-run", run, "--backend", backend,
            "--quantize", quant)
        out[backend, quant] = np.load(emb / "embeddings-00000-of-00001.npy")
    np.testing.assert_allclose(out["onnx", "none"], out["torch", "none"], atol=1e-5)
    assert cosines(out["onnx", "int8"], out["torch", "none"]).min() >= 0.99
    assert (tiny_model_dir / "onnx").is_dir()  # cached next to the (writable) model
    # fp32 vectors agree across backends: an ONNX fp32 index takes torch fp32 queries; int8 ones do not mix
    cli("search", "--index", tmp_path / "idx-onnx-none", "--queries", SAMPLE / "test.qa.tsv", "--out-run", tmp_path / "r")
    assert "encoded with --backend onnx --quantize int8, the queries would be --backend torch --quantize int8" in cli(
        "search", "--index", tmp_path / "idx-onnx-int8", "--queries", SAMPLE / "test.qa.tsv", "--out-run", tmp_path / "r",
        "--quantize", "int8", code=2)
    cli("mine", "--model", tiny_model_dir, "--train", TRAIN, "--corpus", CORPUS, "--out", tmp_path / "neg.jsonl",
        "--k", "20", "--backend", "onnx", "--quantize", "int8", "--check-against", "fp32")
    m = json.loads((tmp_path / "neg.jsonl.meta.json").read_text())
    assert m["backend"] == "onnx" and m["check_questions"] == 80 and 0 <= m["pool_overlap_vs_fp32"] <= 1


def test_refresh_on_onnx_logs_export_time_and_resumes_exactly(tiny_model_dir, tmp_path):
    from dpr_xrisk.train.config import TrainConfig
    from dpr_xrisk.train.trainer import train

    # one shared tower: one export per refresh (each takes seconds even for the tiny model)
    cfg = TrainConfig(train=(TRAIN,), model=str(tiny_model_dir), corpus=str(CORPUS), shared=True, batch_size=8,
                      max_steps=4, lr=1e-3, warmup_ratio=0.0, negatives="model", refresh_every=2, refresh_k=20,
                      hard_negatives=2, refresh_backend="onnx", refresh_quantize="int8", save_every=2)
    train(cfg, tmp_path / "full", progress=False)
    recs = [json.loads(x) for x in (tmp_path / "full" / "refresh_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == [0, 2] and all(r["export_s"] > 0 for r in recs)
    assert 0 <= recs[0]["int8_pool_overlap_vs_fp32"] <= 1
    assert len(list((tmp_path / "full" / "refresh_onnx").iterdir())) == 1  # this refresh's tower only

    train_killed_at(cfg, tmp_path / "cut", 3)
    train(cfg, tmp_path / "cut", resume=True, progress=False)
    assert_same_weights(tmp_path / "full", tmp_path / "cut")


def test_bad_backend_inputs_are_one_line_errors(tiny_model_dir, tmp_path, monkeypatch):
    assert "unknown backend 'openvino'; valid: onnx, torch" in cli(
        "encode", "--model", tiny_model_dir, "--corpus", CORPUS, "--out", tmp_path / "e", "--backend", "openvino", code=2)
    assert "--bf16 is for the torch backend" in cli(
        "encode", "--model", tiny_model_dir, "--corpus", CORPUS, "--out", tmp_path / "e", "--backend", "onnx", "--bf16",
        code=2)
    assert "unknown refresh_backend 'tvm'" in cli(
        "train", "--model", tiny_model_dir, "--train", TRAIN, "--out", tmp_path / "m", "--refresh-backend", "tvm", code=2)
    # ONNX Runtime missing: one line naming the extra to install
    import builtins

    real_import = builtins.__import__

    def no_ort(name, *a, **k):
        if name == "onnxruntime":
            raise ImportError(name)
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_ort)
    with pytest.raises(InputError, match=r"--backend onnx needs onnxruntime: pip install 'dpr_xrisk\[fast\]'"):
        O.require_onnxruntime()
    assert "pip install 'dpr_xrisk[fast]'" in cli(
        "encode", "--model", tiny_model_dir, "--corpus", CORPUS, "--out", tmp_path / "e2", "--backend", "onnx", code=2)
    assert not (tmp_path / "e2").exists()  # refused before anything was written


def test_the_dynamo_export_of_other_towers_matches_torch(tiny_encoder, tmp_path, monkeypatch):
    """Towers that are not BERT go through torch's dynamo exporter (opset 18, no attention fusion)."""
    monkeypatch.setattr(O, "_legacy_export", lambda model: False)
    monkeypatch.setattr(O, "_is_bert", lambda model: False)
    ref = tiny_encoder.encode_passages([""] * len(TEXTS), TEXTS, batch_size=2)
    enc, _ = O.onnx_encoder(tiny_encoder, "none", tmp_path)
    np.testing.assert_allclose(enc.encode_passages([""] * len(TEXTS), TEXTS, batch_size=2), ref, atol=1e-5)
    (folder,) = [d for d in tmp_path.iterdir() if d.name.endswith("-fp32")]
    assert json.loads((folder / "meta.json").read_text())["opset"] == O.OPSET

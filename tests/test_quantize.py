"""int8 inference (issue #13, torch backend): dynamic int8 Linear layers give vectors close to
fp32 with the same model fingerprint, through encode/search/mine and the training refresh."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from conftest import SAMPLE, assert_same_weights, cli
from dpr_xrisk.cli import app
from dpr_xrisk.errors import InputError
from dpr_xrisk.runtime.quantize import overlap_at_k, quantized

runner = CliRunner()
TRAIN = str(SAMPLE / "biencoder-train.json")


def test_int8_copy_is_close_keeps_the_fingerprint_and_leaves_the_original(tiny_encoder):
    texts = ["the quick brown fox", "jumps over the lazy dog", "the nile is a river"]
    before = {k: v.clone() for k, v in tiny_encoder.state_dict().items()}
    q = quantized(tiny_encoder, "int8")
    assert q.fingerprint() == tiny_encoder.fingerprint() and q.quantize == "int8"
    a, b = tiny_encoder.encode_passages([""] * 3, texts), q.encode_passages([""] * 3, texts)
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cos.min() > 0.98 and np.abs(a - b).max() > 0  # close, and really another computation
    assert all(v.equal(before[k]) for k, v in tiny_encoder.state_dict().items())
    assert quantized(tiny_encoder, "none") is tiny_encoder
    with pytest.raises(InputError, match="unknown quantize mode 'int4'"):
        quantized(tiny_encoder, "int4")


def test_int8_without_vnni_says_it_buys_no_speed(tiny_model_dir, tmp_path, monkeypatch):
    """Where the CPU has no AVX-512 VNNI, int8 measured no faster than fp32: `encode --quantize
    int8` says so in one line (and still encodes); with VNNI, or in fp32, no such line."""
    import dpr_xrisk.runtime.device as dev

    note = "this CPU has no AVX-512 VNNI: int8 encoding measured no faster than fp32"
    monkeypatch.setattr(dev, "cpu_info", lambda: ("x86", frozenset({"avx2"})))  # an x86 CPU, whatever runs the test
    for vnni in (False, True):
        monkeypatch.setattr(dev, "cpu_has_vnni", lambda v=vnni: v)
        out = cli("encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / f"e{vnni}",
                  "--quantize", "int8")
        assert (note in out) is (not vnni)
        assert (tmp_path / f"e{vnni}" / "meta-00000-of-00001.json").exists()
    monkeypatch.setattr(dev, "cpu_has_vnni", lambda: False)
    assert note not in cli("encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / "f")
    monkeypatch.setattr(dev, "cpu_info", lambda: ("arm", frozenset({"neon"})))  # nothing measured there: silent
    assert note not in cli("encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / "g",
                           "--quantize", "int8")


def test_overlap_at_k():
    assert overlap_at_k({1: ["a", "b"], 2: ["c", "d"]}, {1: ["a", "x"], 2: ["d", "c"]}) == 0.75


def test_int8_pipeline_encode_search_mine(tiny_model_dir, tmp_path):
    cli("encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / "emb", "--quantize", "int8")
    meta = json.loads((tmp_path / "emb" / "meta-00000-of-00001.json").read_text())
    assert meta["quantize"] == "int8" and meta["activation_bits"] in (7, 8) and meta["smoothed_channels"] == 32
    cli("index", "--embeddings", tmp_path / "emb", "--out", tmp_path / "idx")
    assert json.loads((tmp_path / "idx" / "meta.json").read_text())["quantize"] == "int8"
    assert "encoded with --backend torch --quantize int8, the queries would be --backend torch --quantize none" in cli(
        "search", "--index", tmp_path / "idx", "--queries", SAMPLE / "test.qa.tsv", "--out-run", tmp_path / "r.trec", code=2)
    cli("search", "--index", tmp_path / "idx", "--queries", SAMPLE / "test.qa.tsv", "--out-run", tmp_path / "r.trec",
        "--allow-backend-mismatch")  # fp32 queries on purpose
    cli("search", "--index", tmp_path / "idx", "--queries", SAMPLE / "test.qa.tsv", "--out-run", tmp_path / "r8.trec",
        "--quantize", "int8")
    out = runner.invoke(app, [str(x) for x in ("mine", "--model", tiny_model_dir, "--train", TRAIN, "--corpus",
                                               SAMPLE / "passages.tsv", "--out", tmp_path / "neg.jsonl", "--k", 20,
                                               "--quantize", "int8", "--check-against", "fp32")])
    assert out.exit_code == 0, out.output
    m = json.loads((tmp_path / "neg.jsonl.meta.json").read_text())
    assert m["quantize"] == "int8" and 0 <= m["pool_overlap_vs_fp32"] <= 1 and m["check_questions"] == 80
    assert "pool overlap" in out.output
    assert "--check-against fp32 compares a --quantize int8 or --backend onnx mining" in cli("mine", "--model", tiny_model_dir, "--train", TRAIN, "--corpus",
                                         SAMPLE / "passages.tsv", "--out", tmp_path / "n2.jsonl", "--check-against", "fp32", code=2)


def test_refresh_on_int8_logs_its_quality_guard(tiny_model_dir, tmp_path):
    from dpr_xrisk.train.config import TrainConfig
    from dpr_xrisk.train.trainer import train

    cfg = TrainConfig(train=(TRAIN,), model=str(tiny_model_dir), corpus=str(SAMPLE / "passages.tsv"), batch_size=8,
                      max_steps=4, negatives="model", refresh_every=2, refresh_k=20, refresh_quantize="int8")
    train(cfg, tmp_path / "m", progress=False)
    recs = [json.loads(x) for x in (tmp_path / "m" / "refresh_log.jsonl").read_text().splitlines()]
    assert len(recs) == 2 and all("quantize_s" in r and r["activation_bits"] in (7, 8) and r["smoothed_channels"] == 32
                                  and r["calibration"] == [16, 64] for r in recs)
    assert 0 <= recs[0]["int8_pool_overlap_vs_fp32"] <= 1 and "int8_pool_overlap_vs_fp32" not in recs[1]
    assert recs[0]["int8_check_questions"] == 80  # all of them: fewer than the guard's 256

    # mining only the next refresh's questions (2 steps of 8): the guard compares those
    train(dataclasses.replace(cfg, refresh_questions="upcoming"), tmp_path / "up", progress=False)
    recs = [json.loads(x) for x in (tmp_path / "up" / "refresh_log.jsonl").read_text().splitlines()]
    assert [r["mined_questions"] for r in recs] == [16, 16] and recs[0]["int8_check_questions"] == 16
    assert 0 <= recs[0]["int8_pool_overlap_vs_fp32"] <= 1

    # the guard only measures: without it the same run, bit for bit, and no fp32 mining logged
    train(dataclasses.replace(cfg, refresh_questions="upcoming", refresh_guard=False), tmp_path / "noguard",
          progress=False)
    recs = [json.loads(x) for x in (tmp_path / "noguard" / "refresh_log.jsonl").read_text().splitlines()]
    assert not any("int8_check_seconds" in r for r in recs) and len(recs) == 2
    assert_same_weights(tmp_path / "up", tmp_path / "noguard")


def test_smaller_calibration_finds_the_same_scale_of_outliers(tiny_encoder):
    """quantized(calibration=...) sets the smoothing's calibration batch (the refresh's 16 x 64
    tokens): a copy as close to fp32 as the default's, and a different computation from it."""
    from dpr_xrisk.runtime.quantize import REFRESH_CALIBRATION

    texts = ["the quick brown fox", "jumps over the lazy dog", "the nile is a river", "a b c d e f g"]
    a = tiny_encoder.encode_passages([""] * 4, texts)
    cos, vecs = {}, {}
    for cal in ((32, 128), REFRESH_CALIBRATION):
        vecs[cal] = b = quantized(tiny_encoder, "int8", calibration=cal).encode_passages([""] * 4, texts)
        cos[cal] = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert min(cos[REFRESH_CALIBRATION]) > 0.98 and min(cos[(32, 128)]) > 0.98
    assert not np.array_equal(vecs[(32, 128)], vecs[REFRESH_CALIBRATION])


def test_int8_refresh_under_bf16_training(tiny_model_dir, tmp_path):
    """bf16 training with an int8 refresh: the int8 copy encodes in its own kernels (bf16 autocast
    is for the torch tower only; it used to fail with 'expected scalar type Float but found
    BFloat16'), at the int8 path's batch, and the guard compares with fp32."""
    from dpr_xrisk.runtime.device import encode_batch_size
    from dpr_xrisk.train.config import TrainConfig
    from dpr_xrisk.train.trainer import train

    cfg = TrainConfig(train=(TRAIN,), model=str(tiny_model_dir), corpus=str(SAMPLE / "passages.tsv"), batch_size=8,
                      max_steps=4, negatives="model", refresh_every=2, refresh_k=20, refresh_quantize="int8",
                      refresh_fraction=0.5, precision="bf16")
    train(cfg, tmp_path / "m", progress=False)
    recs = [json.loads(x) for x in (tmp_path / "m" / "refresh_log.jsonl").read_text().splitlines()]
    assert len(recs) == 2 and all("quantize_s" in r for r in recs)
    assert all(r["encode_batch_size"] == encode_batch_size(torch.device("cpu"), False) for r in recs)
    assert 0 <= recs[0]["int8_pool_overlap_vs_fp32"] <= 1


def test_auto_refresh_quantize_is_int8_on_a_vnni_cpu_and_none_elsewhere(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """refresh_quantize = "auto" (the recommended recipe's): int8 where training runs on a CPU with
    AVX-512 VNNI, except bf16 training on a CPU with AMX (the bf16 refresh measured ~1.8x faster
    than int8 there), none on a CPU without VNNI (int8 measured no faster than fp32) and on a GPU,
    recorded in the run's config.json; on a GPU an explicit torch int8 refresh is a clear error
    (its int8 kernels are CPU-only) and an ONNX one is left to ONNX Runtime."""
    import dpr_xrisk.runtime.device as dev
    from dpr_xrisk.errors import InputError
    from dpr_xrisk.train.config import TrainConfig
    from dpr_xrisk.train.trainer import refresh_quantize_on, train

    cfg = TrainConfig(train=(TRAIN,), model=str(tiny_model_dir), corpus=str(SAMPLE / "passages.tsv"), batch_size=8,
                      max_steps=2, negatives="model", refresh_every=2, refresh_k=20, refresh_quantize="auto",
                      refresh_guard=False, precision="fp32")
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert refresh_quantize_on(cfg, cpu, vnni=True) == "int8" and refresh_quantize_on(cfg, cpu, vnni=False) == "none"
    assert refresh_quantize_on(cfg, cuda, vnni=True) == "none" and refresh_quantize_on(cfg, cuda, vnni=False) == "none"
    assert refresh_quantize_on(cfg, cpu) == ("int8" if dev.cpu_has_vnni() else "none")  # this machine's answer
    bf16 = dataclasses.replace(cfg, bf16=True)  # bf16 training: AMX decides between bf16 and int8
    assert refresh_quantize_on(bf16, cpu, vnni=True, amx=True) == "none"
    assert refresh_quantize_on(bf16, cpu, vnni=True, amx=False) == "int8"
    assert refresh_quantize_on(bf16, cpu, vnni=False, amx=False) == "none"
    assert refresh_quantize_on(cfg, cpu, vnni=True, amx=True) == "int8"  # fp32 training: int8 beats fp32
    assert refresh_quantize_on(bf16, cuda, vnni=True, amx=True) == "none"
    onnx = dataclasses.replace(bf16, refresh_backend="onnx")  # ONNX refreshes in fp32: AMX does not help it
    assert refresh_quantize_on(onnx, cpu, vnni=True, amx=True) == "int8"
    for value in ("none", "int8"):
        for vnni in (True, False):  # an explicit choice is kept whatever the CPU
            assert refresh_quantize_on(dataclasses.replace(cfg, refresh_quantize=value), cpu, vnni=vnni) == value
    assert refresh_quantize_on(dataclasses.replace(cfg, refresh_quantize="none"), cuda) == "none"
    assert refresh_quantize_on(dataclasses.replace(cfg, refresh_quantize="int8", refresh_backend="onnx"), cuda) == "int8"
    with pytest.raises(InputError, match="refresh_quantize = 'int8' runs on the CPU only, and this run trains on cuda:0"):
        refresh_quantize_on(dataclasses.replace(cfg, refresh_quantize="int8"), cuda)
    for vnni, want in ((True, "int8"), (False, "none")):  # the run resolves auto from the CPU it trains on
        monkeypatch.setattr(dev, "cpu_has_vnni", lambda v=vnni: v)
        out = tmp_path / want
        train(cfg, out, progress=False)
        assert json.loads((out / "config.json").read_text())["refresh_quantize"] == want
        recs = [json.loads(x) for x in (out / "refresh_log.jsonl").read_text().splitlines()]
        assert len(recs) == 1
        if want == "int8":
            assert recs[0]["calibration"] == [16, 64] and "quantize_s" in recs[0]
        else:
            assert "quantize_s" not in recs[0] and "activation_bits" not in recs[0]
    # bf16 training on an AMX CPU: the run records the refresh at the training precision
    monkeypatch.setattr(dev, "cpu_has_vnni", lambda: True)
    monkeypatch.setattr(dev, "cpu_has_amx", lambda: True)
    train(dataclasses.replace(cfg, precision="bf16"), tmp_path / "amx", progress=False)
    assert json.loads((tmp_path / "amx" / "config.json").read_text())["refresh_quantize"] == "none"
    assert all("quantize_s" not in json.loads(x) for x in (tmp_path / "amx" / "refresh_log.jsonl").read_text().splitlines())
    monkeypatch.setattr(dev, "cpu_has_amx", lambda: False)
    # an explicit int8 refresh where int8 buys no speed runs, with a one-line note; with VNNI no note
    note = "this CPU has no AVX-512 VNNI: int8 encoding measured no faster than fp32"
    monkeypatch.setattr(dev, "cpu_info", lambda: ("x86", frozenset({"avx2"})))
    for vnni in (False, True):
        monkeypatch.setattr(dev, "cpu_has_vnni", lambda v=vnni: v)
        capsys.readouterr()
        train(dataclasses.replace(cfg, refresh_quantize="int8"), tmp_path / f"explicit-{vnni}", progress=False)
        assert (note in capsys.readouterr().err) is (not vnni)


def test_bad_quantize_options_are_one_line_errors(tiny_model_dir, tmp_path):
    assert "unknown quantize mode 'int4'; valid: int8, none" in cli(
        "encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / "e", "--quantize", "int4",
        code=2)
    assert "--check-against 'bf16': valid: fp32" in cli(
        "mine", "--model", tiny_model_dir, "--train", TRAIN, "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / "n.jsonl",
        "--quantize", "int8", "--check-against", "bf16", code=2)
    for command in (["encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / "e2"],
                    ["search", "--index", tmp_path, "--queries", SAMPLE / "test.qa.tsv", "--out-run", tmp_path / "r.tsv"]):
        assert "--bf16 and --quantize int8 are two precisions; choose one" in cli(*command, "--quantize", "int8", "--bf16",
                                                                                   code=2)
    assert "unknown refresh_quantize 'int4'" in cli(
        "train", "--model", tiny_model_dir, "--train", TRAIN, "--out", tmp_path / "m", "--refresh-quantize", "int4", code=2)


def test_default_batch_size_is_the_measured_one_per_path():
    import torch

    from dpr_xrisk.cli._options import default_batch_size

    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    assert default_batch_size(None, cpu) == 16 and default_batch_size(None, cpu, bf16=True) == 64
    assert default_batch_size(None, gpu) == 128 and default_batch_size(7, cpu) == 7 and default_batch_size(7, gpu, True) == 7


def _one_layer_encoder(lin):
    """What quantized() reads of an encoder: its towers (one shared Linear) and fingerprint."""
    from torch import nn

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.query_model = self.passage_model = nn.Sequential(lin)

        def fingerprint(self):
            return "x"

    return Enc()


def _naive_dynamic_int8(x, w, b, levels: int):
    """Reference int8 Linear: per-channel symmetric int8 weights, activations quantised per tensor
    to ``levels`` (256: 8 bits, 128: 7 bits) with an asymmetric range that includes 0, the dot
    products in integers, then dequantised."""
    import torch

    w_scale = w.abs().amax(1).clamp_min(1e-12) / 127.5  # torch's symmetric per-channel observer: 2*max/255
    w_q = torch.clamp(torch.round(w / w_scale[:, None]), -128, 127)
    lo, hi = min(0.0, x.min().item()), max(0.0, x.max().item())
    scale = (hi - lo) / (levels - 1)
    zp = int(round(-lo / scale))
    x_q = torch.clamp(torch.round(x / scale) + zp, 0, levels - 1)
    acc = (x_q - zp).double() @ w_q.double().T
    return (acc * scale * w_scale.double()[None, :]).float() + b


def test_int8_linear_matches_a_naive_reference_with_8_or_7_bit_activations():
    import torch
    from torch import nn

    from dpr_xrisk.runtime.quantize import activation_bits, cpu_has_vnni, quantized

    torch.manual_seed(0)
    lin = nn.Linear(64, 48)
    x = torch.randn(10, 64) * 3
    # 8-bit activations only where the CPU has VNNI (elsewhere the kernels can saturate: the
    # reason the toolkit uses 7 bits there), 7-bit ones everywhere
    for full, levels in ((True, 256), (False, 128)) if cpu_has_vnni() else ((False, 128),):
        q = quantized(_one_layer_encoder(lin), "int8", full_range=full)
        assert q.activation_bits == (8 if full else 7) and activation_bits(full) == q.activation_bits
        y = q.passage_model(x)
        ref, other = (_naive_dynamic_int8(x, lin.weight.detach(), lin.bias.detach(), n) for n in (levels, 384 - levels))
        err, err_other = (y - ref).abs().max().item(), (y - other).abs().max().item()
        assert err < 0.02 and err < err_other / 3, (full, err, err_other)  # the kernel is the reference it claims


def test_8_bit_activations_do_not_saturate_where_they_are_used():
    """Inputs that put pairs of uint8 x int8 products past int16 (255 x 127 x 2 > 32767): exact
    with VNNI's int32 accumulation; the toolkit picks 8 bits only on such CPUs."""
    import torch
    from torch import nn

    from dpr_xrisk.runtime.quantize import activation_bits, cpu_has_vnni, quantized

    if not cpu_has_vnni():
        assert activation_bits() == 7
        pytest.skip("no AVX-512 VNNI on this CPU: int8 towers use 7-bit activations here")
    lin = nn.Linear(32, 4)
    with torch.no_grad():
        lin.weight.fill_(1.0)
        lin.bias.zero_()
    x = torch.full((2, 32), 10.0)
    x[0, 0] = 0.0  # the range's low end, so every other input quantises to 255

    y = quantized(_one_layer_encoder(lin), "int8").passage_model(x)
    torch.testing.assert_close(y, lin(x), atol=0.5, rtol=0.01)  # saturated pairs would lose ~half


def _outlier_bert(seed: int = 0):
    """A random 2-layer BertModel with one outlier channel entering each FFN Linear, as trained
    BERTs have (MiniLM: 28 against a median of 2): channel 5 of the post-attention LayerNorm
    (the first FFN Linear's input) and channel 7 of the GELU output (the second's)."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    m = BertModel(BertConfig(vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=128, max_position_embeddings=64)).eval()
    with torch.no_grad():
        for layer in m.encoder.layer:
            layer.attention.output.LayerNorm.weight[5] = 25.0
            layer.intermediate.dense.weight[7] *= 20.0
            layer.intermediate.dense.bias[7] = 10.0
    return m


def test_smoothing_is_exact_in_fp32_and_divides_the_outlier_channels_down():
    import torch

    from dpr_xrisk.runtime.quantize import InputScaled, smooth_outliers

    m = _outlier_bert()
    s, n = smooth_outliers(m, k=4)
    assert n == 4  # two FFN Linears per layer
    ids = torch.randint(0, 200, (3, 20), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[0, 12:] = 0
    with torch.inference_mode():
        a = m(input_ids=ids, attention_mask=mask).last_hidden_state
        b = s(input_ids=ids, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-4)  # the same function in fp32
    for layer in s.encoder.layer:
        fin, fout = layer.intermediate.dense, layer.output.dense
        assert isinstance(fin, InputScaled) and isinstance(fout, InputScaled)
        assert fin.inv_scale[5] < 0.3 and fout.inv_scale[7] < 0.3  # the injected outliers, divided down
        assert (fin.inv_scale < 1).sum() == 4 and (fout.inv_scale < 1).sum() == 4  # k of them, no more
    assert all(p.equal(q) for p, q in zip(m.state_dict().values(), _outlier_bert().state_dict().values()))
    # copy_model=False (export_tower's own float copy): rewritten in place, the same function
    same, _ = smooth_outliers(m, k=4, copy_model=False)
    assert same is m and isinstance(m.encoder.layer[0].intermediate.dense, InputScaled)
    with torch.inference_mode():
        torch.testing.assert_close(m(input_ids=ids, attention_mask=mask).last_hidden_state, a, atol=1e-4, rtol=1e-4)
    # towers without BERT-style FFN blocks come back unchanged
    from torch import nn

    assert smooth_outliers(nn.Sequential(nn.Linear(4, 4)))[1] == 0


def test_smoothing_cuts_the_int8_error_of_outlier_channels():
    """The point of smooth_outliers: with an outlier channel setting the activations' range, int8
    hidden states drift from fp32; smoothed, the drift is several times smaller."""
    import torch

    m = _outlier_bert()

    class Enc(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.query_model = self.passage_model = m

        def fingerprint(self):
            return "x"

    ids = torch.randint(0, 200, (8, 24), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        ref = m(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
        errs = {}
        for k in (0, 4):
            q = quantized(Enc(), "int8", smooth=k)
            assert q.smoothed_channels == k
            out = q.passage_model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
            errs[k] = ((out - ref).norm() / ref.norm()).item()
    assert errs[4] < errs[0] / 2, errs


def test_a_resumed_run_keeps_the_refresh_path_auto_resolved_at_its_start(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """refresh_quantize = "auto" resolves once per run: resumed on a machine (or under a default)
    that would pick another path, the run keeps its first session's, with a one-line note, and
    resumes to the same weights as an uninterrupted run."""
    import dpr_xrisk.runtime.device as dev
    from conftest import train_killed_at
    from dpr_xrisk.train.config import TrainConfig
    from dpr_xrisk.train.trainer import train

    cfg = TrainConfig(train=(TRAIN,), model=str(tiny_model_dir), corpus=str(SAMPLE / "passages.tsv"), batch_size=8,
                      max_steps=6, negatives="model", refresh_every=2, refresh_k=20, refresh_quantize="auto",
                      refresh_guard=False, save_every=1, precision="fp32")
    monkeypatch.setattr(dev, "cpu_has_vnni", lambda: True)
    train(cfg, tmp_path / "full", progress=False)
    train_killed_at(cfg, tmp_path / "cut", 3)
    monkeypatch.setattr(dev, "cpu_has_vnni", lambda: False)  # resumed where auto would pick none
    capsys.readouterr()
    train(cfg, tmp_path / "cut", resume=True, progress=False)
    assert "resolved to 'int8' when this run started" in capsys.readouterr().err
    assert json.loads((tmp_path / "cut" / "config.json").read_text())["refresh_quantize"] == "int8"
    recs = [json.loads(x) for x in (tmp_path / "cut" / "refresh_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == [0, 2, 4] and all("quantize_s" in r for r in recs)  # step 4: after the resume
    assert_same_weights(tmp_path / "full", tmp_path / "cut")


def test_int8_engine_packs_for_onednn_on_amx_and_matches_the_reference_on_every_engine(monkeypatch):
    """`quantized(..., engine=)` packs the weights for that torch engine (onednn by default where
    the CPU has AMX-INT8: its Linear runs on the tiles), gives the naive reference's output on
    each, the same output at every call, and leaves torch's global engine as it was."""
    import torch
    from torch import nn

    import dpr_xrisk.runtime.quantize as Q

    torch.manual_seed(0)
    lin = nn.Linear(64, 48)
    x = torch.randn(10, 64) * 3
    levels = 2 ** Q.activation_bits()
    ref = _naive_dynamic_int8(x, lin.weight.detach(), lin.bias.detach(), levels)
    before = torch.backends.quantized.engine
    engines = [e for e in ("x86", "onednn") if e in torch.backends.quantized.supported_engines]
    assert engines
    for engine in engines:
        q = Q.quantized(_one_layer_encoder(lin), "int8", engine=engine)
        assert q.int8_engine == engine and torch.backends.quantized.engine == before
        y = q.passage_model(x)
        assert (y - ref).abs().max().item() < 0.02, engine
        assert torch.equal(y, q.passage_model(x))  # exactly itself across calls
    with pytest.raises(InputError, match="unknown quantized engine 'int4k'"):
        Q.quantized(_one_layer_encoder(lin), "int8", engine="int4k")
    assert torch.backends.quantized.engine == before
    # the default: onednn where the CPU has AMX-INT8, torch's own engine elsewhere
    monkeypatch.setattr(Q, "cpu_has_amx_int8", lambda: True)
    assert Q.int8_engine() == ("onednn" if "onednn" in engines else Q.int8_engine())
    monkeypatch.setattr(Q, "cpu_has_amx_int8", lambda: False)
    assert Q.int8_engine() == before  # e.g. qnnpack on ARM, as before this choice existed


def test_bf16_towers_copy_is_close_keeps_the_fingerprint_and_skips_autocast(tiny_encoder, monkeypatch):
    """quantize.bf16_towers: bfloat16 weights in a copy (the original untouched, same fingerprint),
    vectors close to fp32; the encoder runs such towers without autocast (nothing to cast)."""
    from dpr_xrisk.runtime.quantize import bf16_towers

    texts = ["the quick brown fox", "jumps over the lazy dog", "the nile is a river"]
    before = {k: v.clone() for k, v in tiny_encoder.state_dict().items()}
    b = bf16_towers(tiny_encoder)
    assert b.fingerprint() == tiny_encoder.fingerprint() and b.bf16_weights
    assert all(p.dtype == torch.bfloat16 for p in b.passage_model.parameters())
    assert (b.passage_model is b.query_model) is (tiny_encoder.passage_model is tiny_encoder.query_model)
    assert all(v.equal(before[k]) and v.dtype == torch.float32 for k, v in tiny_encoder.state_dict().items())
    x, y = tiny_encoder.encode_passages([""] * 3, texts), b.encode_passages([""] * 3, texts, bf16=True)
    assert y.dtype == np.float32
    cos = (x * y).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1)
    assert cos.min() > 0.99 and np.abs(x - y).max() > 0
    calls = []
    real = torch.autocast

    def spy(*a, enabled=True, **k):
        calls.append(enabled)
        return real(*a, enabled=enabled, **k)

    monkeypatch.setattr(torch, "autocast", spy)
    b.encode_passages([""] * 3, texts, bf16=True)
    tiny_encoder.encode_passages([""] * 3, texts, bf16=True)
    assert calls == [False, True]  # bf16 weights: no autocast; fp32 weights: autocast


def test_bf16_refresh_on_a_cpu_runs_bf16_weights_and_resumes_exactly(tiny_model_dir, tmp_path):
    """bf16 training with the refresh at the training precision (refresh_quantize none) on a CPU:
    each refresh encodes with a bfloat16-weights copy of the current towers (logged: bf16_weights,
    cast_s); a killed and resumed run ends with the same weights and refresh cache."""
    from conftest import train_killed_at
    from dpr_xrisk.retrieval.encode import load_shards, shard_arrays
    from dpr_xrisk.train.config import TrainConfig
    from dpr_xrisk.train.trainer import train

    cfg = TrainConfig(train=(TRAIN,), model=str(tiny_model_dir), corpus=str(SAMPLE / "passages.tsv"), batch_size=8,
                      max_steps=6, lr=1e-3, warmup_ratio=0.0, negatives="model", refresh_every=2, refresh_k=20,
                      refresh_quantize="none", refresh_fraction=0.5, precision="bf16", save_every=2)
    full, cut = tmp_path / "full", tmp_path / "cut"
    train(cfg, full, progress=False)
    recs = [json.loads(x) for x in (full / "refresh_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == [0, 2, 4]
    assert all(r["bf16_weights"] is True and r["cast_s"] >= 0 and "quantize_s" not in r for r in recs)
    meta = json.loads(next((full / "refresh_cache").glob("step-*/emb/meta*.json")).read_text())
    assert meta["bf16"] is True and meta["bf16_weights"] is True
    train_killed_at(cfg, cut, 5)
    train(cfg, cut, resume=True, progress=False)
    assert_same_weights(full, cut)
    va, vb = (shard_arrays(load_shards(d / "refresh_cache" / "step-4" / "emb")[0])[0] for d in (full, cut))
    np.testing.assert_array_equal(va, vb)

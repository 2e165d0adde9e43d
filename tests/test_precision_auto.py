"""precision = "auto": bf16 where the device computes bfloat16 natively (AMX/AVX512-BF16 CPUs,
GPUs from Ampere on), fp32 elsewhere; printed once, recorded resolved, and an explicit choice
(--precision, --bf16, --fp32) always wins. The device is faked by monkeypatching the CPU flags
or CUDA's capability, so every test but the one marked `gpu` runs on a CPU-only machine."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from conftest import SAMPLE
from dpr_xrisk.cli import app
from dpr_xrisk.runtime import device as D

TRAIN = str(SAMPLE / "biencoder-train.json")
CPU = torch.device("cpu")
AMX = ("Fake Xeon", frozenset({"avx512f", "avx512_bf16", "amx_bf16"}))
AVX512_BF16 = ("Fake Xeon", frozenset({"avx512f", "avx512_bf16"}))
AVX2 = ("Fake Core", frozenset({"avx2"}))


@pytest.fixture
def cpu_is(monkeypatch):
    """Pretend this machine's CPU is one of AMX, AVX512_BF16, AVX2 or None (unknown)."""
    def set_cpu(info):
        monkeypatch.setattr(D, "cpu_info", lambda: info)
    return set_cpu


@pytest.mark.parametrize("info, want, why", [(AMX, "bf16", "AMX"), (AVX512_BF16, "bf16", "AVX512-BF16"),
                                             (AVX2, "fp32", "no AMX/AVX512-BF16"), (None, "fp32", "no AMX")])
def test_auto_on_a_cpu_follows_native_bf16(cpu_is, capsys, info, want, why):
    cpu_is(info)
    assert D.resolve_precision("auto", CPU) == want
    err = capsys.readouterr().err
    assert err.count("precision auto") == 1 and f"precision auto → {want} ({why}" in err
    assert "warning" not in err  # auto never picks the slow bf16 of a CPU without it


def test_auto_on_cuda_follows_the_capability(monkeypatch, capsys):
    cuda = torch.device("cuda:0")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    assert D.resolve_precision("auto", cuda) == "bf16"
    assert "precision auto → bf16 (CUDA sm_90)" in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (7, 5))  # Turing: no bf16 units
    assert D.resolve_precision("auto", cuda) == "fp32"
    assert "precision auto → fp32 (no native bfloat16 on this GPU)" in capsys.readouterr().err


def test_explicit_precision_wins_and_is_silent(cpu_is, capsys):
    cpu_is(AMX)
    assert D.resolve_precision("fp32", CPU) == "fp32"
    assert D.resolve_precision("auto", CPU, warn=False) == "bf16"
    cpu_is(AVX2)
    assert D.resolve_precision("auto", CPU, bf16_alias=True, warn=False) == "bf16"  # the old --bf16 switch
    assert "precision auto" not in capsys.readouterr().err
    with pytest.raises(Exception, match="valid: auto, fp32, bf16, fp16"):
        D.resolve_precision("fp8", CPU)


def test_inference_bf16_switch(cpu_is, capsys, monkeypatch):
    monkeypatch.delenv(D.PRECISION_ENV, raising=False)
    cpu_is(AMX)
    assert D.resolve_bf16(None, CPU) is True
    assert D.resolve_bf16(False, CPU) is False  # --fp32
    assert D.resolve_bf16(None, CPU, backend="onnx") is False  # ONNX Runtime runs fp32
    assert D.resolve_bf16(None, CPU, quantize="int8") is False
    assert capsys.readouterr().err.count("precision auto") == 1
    cpu_is(AVX2)
    assert D.resolve_bf16(None, CPU) is False
    assert D.resolve_bf16(True, CPU, warn=False) is True  # --bf16


def test_auto_is_the_training_default():
    from dpr_xrisk.train.config import TrainConfig

    assert TrainConfig().precision == "auto"
    assert TrainConfig(precision="auto").precision == "auto"


def _train(tiny_model_dir, out, *extra):
    args = ["train", "--model", tiny_model_dir, "--train", TRAIN, "--out", out, "--batch-size", 4,
            "--max-steps", 1, "--seed", 1, *extra]
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r, json.loads((out / "config.json").read_text())


@pytest.mark.parametrize("info, want", [(AMX, "bf16"), (AVX2, "fp32")])
def test_training_records_the_resolved_precision(tiny_model_dir, tmp_path, cpu_is, info, want):
    cpu_is(info)
    r, saved = _train(tiny_model_dir, tmp_path / "m")
    assert saved["precision"] == want and saved["bf16"] == (want == "bf16")  # never "auto"
    assert r.stderr.count("precision auto") == 1 and f"precision auto → {want}" in r.stderr


def test_training_flags_win_over_auto(tiny_model_dir, tmp_path, cpu_is):
    cpu_is(AMX)
    r, saved = _train(tiny_model_dir, tmp_path / "fp32", "--fp32")
    assert saved["precision"] == "fp32" and "precision auto" not in r.stderr
    r, saved = _train(tiny_model_dir, tmp_path / "p", "--precision", "fp32")
    assert saved["precision"] == "fp32" and "precision auto" not in r.stderr
    cpu_is(AVX2)
    r, saved = _train(tiny_model_dir, tmp_path / "bf16", "--bf16")
    assert saved["precision"] == "bf16" and "precision auto" not in r.stderr


def test_a_resumed_auto_run_keeps_its_first_precision(tiny_model_dir, tmp_path, cpu_is, capsys):
    """Resumed on a machine where auto would pick otherwise, the run keeps what it started with."""
    import dataclasses

    from conftest import train_killed_at
    from dpr_xrisk.train.config import TrainConfig
    from dpr_xrisk.train.trainer import train

    cpu_is(AMX)
    cfg = TrainConfig(train=(TRAIN,), model=str(tiny_model_dir), batch_size=4, max_steps=2, save_every=1)
    train_killed_at(cfg, tmp_path / "m", 1)
    cpu_is(AVX2)
    train(dataclasses.replace(cfg), tmp_path / "m", resume=True, progress=False)
    assert json.loads((tmp_path / "m" / "config.json").read_text())["precision"] == "bf16"


def test_old_checkpoint_with_the_bf16_switch_resumes():
    from dpr_xrisk.train.setup import saved_precision

    assert saved_precision({"precision": "fp32", "bf16": True}) == "bf16"
    assert saved_precision({"precision": "fp32", "bf16": False}) == "fp32"
    assert saved_precision({"bf16": False}) == "fp32"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here (eval/gpu_check.sh runs it on a GPU)")
def test_auto_on_this_gpu():
    dev = torch.device("cuda:0")
    major, _ = torch.cuda.get_device_capability(dev)
    assert D.resolve_precision("auto", dev, warn=False) == ("bf16" if major >= 8 else "fp32")


def test_the_environment_sets_the_unset_inference_precision(cpu_is, monkeypatch, capsys):
    cpu_is(AMX)
    for value, want in (("fp32", False), ("bf16", True), ("auto", True), (" BF16 ", True), ("", True)):
        monkeypatch.setenv(D.PRECISION_ENV, value)
        assert D.resolve_bf16(None, CPU, warn=False) is want, value
        assert D.resolve_bf16(False, CPU) is False  # --fp32 still wins
    cpu_is(AVX2)
    monkeypatch.setenv(D.PRECISION_ENV, "auto")
    assert D.resolve_bf16(None, CPU, warn=False) is False
    monkeypatch.setenv(D.PRECISION_ENV, "fp16")  # not an inference precision
    with pytest.raises(D.InputError, match="DPR_XRISK_PRECISION='fp16': valid: auto, fp32, bf16"):
        D.resolve_bf16(None, CPU)
    r = CliRunner().invoke(app, ["encode", "--corpus", str(SAMPLE / "passages.tsv"), "--out", "x"])
    assert r.exit_code == 2 and "DPR_XRISK_PRECISION='fp16'" in r.output and "Traceback" not in r.output


@pytest.fixture
def small_model(tiny_model_dir, tmp_path):
    from dpr_xrisk.retrieval.encoder import DualEncoder

    DualEncoder.load(tiny_model_dir, passage_max_length=32).save(tmp_path / "model")
    return tmp_path / "model"


@pytest.mark.parametrize("cpu, flag, want, said", [(AMX, [], True, "precision auto → bf16 (AMX)"),
                                                    (AVX2, [], False, "precision auto → fp32"),
                                                    (AMX, ["--fp32"], False, None)])
def test_encode_and_search_resolve_auto_print_and_record_it(cpu_is, monkeypatch, small_model, tmp_path,
                                                             cpu, flag, want, said):
    """Unset --bf16/--fp32 is auto on the device: printed once per command and recorded in the
    embeddings' settings and the run's meta; an explicit flag wins and nothing is printed."""
    monkeypatch.delenv(D.PRECISION_ENV, raising=False)
    cpu_is(cpu)
    runner = CliRunner()
    r = runner.invoke(app, ["encode", "--model", str(small_model), "--corpus", str(SAMPLE / "passages.tsv"),
                            "--out", str(tmp_path / "emb"), "--device", "cpu", *flag])
    assert r.exit_code == 0, r.output
    assert (r.output.count("precision auto") == 1 and said in r.output) if said else "precision auto" not in r.output
    assert json.loads((tmp_path / "emb" / "meta-00000-of-00001.json").read_text())["bf16"] is want
    assert runner.invoke(app, ["index", "--embeddings", str(tmp_path / "emb"), "--out", str(tmp_path / "idx")]).exit_code == 0
    r = runner.invoke(app, ["search", "--index", str(tmp_path / "idx"), "--queries", str(SAMPLE / "test.qa.tsv"),
                            "--k", "5", "--out-run", str(tmp_path / "run.trec"), "--device", "cpu", *flag])
    assert r.exit_code == 0, r.output
    assert (said in r.output) if said else "precision auto" not in r.output
    assert json.loads((tmp_path / "run.trec.meta.json").read_text())["bf16"] is want


def test_serve_and_ask_resolve_auto(cpu_is, monkeypatch, small_model, tmp_path, capsys):
    from dpr_xrisk.serve.engine import load_retriever

    monkeypatch.delenv(D.PRECISION_ENV, raising=False)
    cpu_is(AVX2)
    runner = CliRunner()
    assert runner.invoke(app, ["encode", "--model", str(small_model), "--corpus", str(SAMPLE / "passages.tsv"),
                               "--out", str(tmp_path / "emb")]).exit_code == 0
    assert runner.invoke(app, ["index", "--embeddings", str(tmp_path / "emb"), "--out", str(tmp_path / "idx")]).exit_code == 0
    capsys.readouterr()
    for cpu, want in ((AMX, True), (AVX2, False)):
        cpu_is(cpu)
        r = load_retriever([tmp_path / "idx"], device="cpu", threads=1)
        assert r.bf16 is want and r.status()["settings"]["bf16"] is want  # /status shows what runs
        assert f"precision auto → {'bf16' if want else 'fp32'}" in capsys.readouterr().err
    assert load_retriever([tmp_path / "idx"], device="cpu", bf16=False, threads=1).bf16 is False  # --fp32
    cpu_is(AMX)
    r = runner.invoke(app, ["ask", "--index", str(tmp_path / "idx"), "where does the danube start", "--json"])
    assert r.exit_code == 0, r.output
    assert "precision auto → bf16 (AMX)" in r.output

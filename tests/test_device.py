"""--device and --precision (issue #16 items 1-2): resolved and checked before any work, the CPU
path unchanged; GPU-only checks carry the `gpu` marker and skip without CUDA."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from conftest import SAMPLE, cli, train_killed_at
from dpr_xrisk.cli import app
from dpr_xrisk.runtime.device import resolve_device, resolve_precision
from dpr_xrisk.errors import InputError

runner = CliRunner()
TRAIN = str(SAMPLE / "biencoder-train.json")
NO_CUDA = not torch.cuda.is_available()
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(NO_CUDA, reason="no CUDA device here (eval/gpu_check.sh runs these on a GPU)")


def test_device_parsing():
    assert resolve_device("auto") == (torch.device("cuda:0") if not NO_CUDA else torch.device("cpu"))
    assert resolve_device("CPU") == torch.device("cpu")
    with pytest.raises(InputError, match=r"--device 'gpu': valid: auto, cpu, cuda, cuda:N"):
        resolve_device("gpu")
    with pytest.raises(InputError, match=r"cuda:x: expected cuda:N" if not NO_CUDA else "CUDA is not available"):
        resolve_device("cuda:x")


@pytest.mark.skipif(not NO_CUDA, reason="checks the CPU-only errors")
def test_cuda_without_cuda_is_an_error_naming_what_is_available():
    for spec in ("cuda", "cuda:7"):
        with pytest.raises(InputError, match=rf"--device {spec}: CUDA is not available here .*available: cpu$"):
            resolve_device(spec)
    with pytest.raises(InputError, match="fp16 needs a CUDA device"):
        resolve_precision("fp16", torch.device("cpu"))
    assert resolve_precision("fp32", torch.device("cpu"), bf16_alias=True, warn=False) == "bf16"


@pytest.mark.skipif(not NO_CUDA, reason="checks the CPU-only errors")
def test_cli_refuses_an_absent_device_before_any_work(tiny_model_dir, tmp_path):
    assert "--device cuda: CUDA is not available" in cli("encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv",
                                                        "--out", tmp_path / "e", "--device", "cuda", code=2)
    assert not (tmp_path / "e").exists()
    common = ["train", "--model", tiny_model_dir, "--train", TRAIN, "--out", tmp_path / "m", "--batch-size", 4, "--max-steps", 1]
    assert "device cuda:7: CUDA is not available" in cli(*common, "--device", "cuda:7", code=2)
    assert "--precision fp16 needs a CUDA device" in cli(*common, "--precision", "fp16", code=2)
    assert "unknown precision 'fp8'" in cli(*common, "--precision", "fp8", code=2)
    assert not (tmp_path / "m").exists()


def test_precision_bf16_is_the_old_bf16_switch(tiny_model_dir, tmp_path):
    from dpr_xrisk.retrieval.encoder import DualEncoder

    common = ["train", "--model", tiny_model_dir, "--train", TRAIN, "--batch-size", 4, "--max-steps", 2, "--seed", 1]
    cli(*common, "--out", tmp_path / "a", "--precision", "bf16")
    out = runner.invoke(app, [str(x) for x in (*common, "--out", tmp_path / "b", "--bf16")])
    assert out.exit_code == 0 and "old spelling of --precision bf16" in out.output
    a, b = (DualEncoder.load(tmp_path / d).state_dict() for d in "ab")
    assert all(torch.equal(a[k], b[k]) for k in a)


@gpu
@needs_cuda
def test_training_on_cuda_resumes_on_cpu(tiny_model_dir, tmp_path):
    """A checkpoint written on the GPU resumes on the CPU (and the loss state moves with it)."""
    from dpr_xrisk.train.config import TrainConfig
    from dpr_xrisk.train.trainer import train

    cfg = TrainConfig(train=(TRAIN,), model=str(tiny_model_dir), batch_size=4, max_steps=4, save_every=2,
                      estimator="fcco", gamma_warmup_steps=0, device="cuda")

    train_killed_at(cfg, tmp_path / "m", 2)
    import dataclasses

    train(dataclasses.replace(cfg, device="cpu"), tmp_path / "m", resume=True, progress=False)
    assert (tmp_path / "m" / "dpr_xrisk.json").exists()


@gpu
@needs_cuda
def test_encode_on_cuda_matches_cpu(tiny_encoder):
    texts = ["the quick brown fox", "jumps over the lazy dog", "a river in africa"]
    cpu = tiny_encoder.encode_passages([""] * 3, texts)
    tiny_encoder.to("cuda")
    try:
        gpu_vecs = tiny_encoder.encode_passages([""] * 3, texts)
    finally:
        tiny_encoder.to("cpu")
    assert abs(cpu - gpu_vecs).max() < 1e-4


def test_faiss_gpu_without_gpu_faiss_is_an_error(tmp_path):
    import faiss

    if hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
        pytest.skip("a GPU faiss with a GPU is installed")
    out = cli("search", "--index", tmp_path, "--queries", SAMPLE / "test.qa.tsv", "--out-run", tmp_path / "r",
              "--faiss-gpu", code=2)
    assert "--faiss-gpu:" in out and not (tmp_path / "r").exists()


def test_encode_under_torchrun_takes_its_shard_from_the_rank(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        cli("encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out", tmp_path / "emb", "--device", "cpu")
    assert sorted(p.name for p in (tmp_path / "emb").glob("meta-*")) == ["meta-00000-of-00002.json", "meta-00001-of-00002.json"]

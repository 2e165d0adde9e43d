"""Cached gradients (issue #16 item 4, GradCache): a micro-batch embedded in chunks without
activations and back-propagated chunk by chunk gives the uncached step's gradients, for every
loss, hard negatives, the symmetric direction and FCCO."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from conftest import SAMPLE
from dpr_xrisk.cli import app
from dpr_xrisk.train.batch import collate
from dpr_xrisk.train.config import TrainConfig
from dpr_xrisk.train.setup import build_loss, prepare
from dpr_xrisk.train.step import cached_step_loss, step_loss

TRAIN = str(SAMPLE / "biencoder-train.json")

CASES = {
    "dpm": {}, "dpm-symmetric": {"symmetric": True}, "listwise-logistic": {"loss": "listwise", "pairwise_loss": "logistic"},
    "infonce": {"loss": "infonce"}, "infonce-symmetric": {"loss": "infonce", "symmetric": True},
    "dpm-fcco": {"estimator": "fcco", "gamma": 0.5, "gamma_warmup_steps": 0},
    "listwise-fcco": {"loss": "listwise", "estimator": "fcco", "gamma": 0.5, "gamma_warmup_steps": 0},
}


def grads_of(encoder):
    return {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("chunk", [1, 3])
def test_cached_step_has_the_uncached_gradients(tiny_model_dir, case, chunk):
    cfg = TrainConfig(train=(TRAIN,), model=str(tiny_model_dir), batch_size=8, hard_negatives=1, pooling="mean",
                      normalize=True, **CASES[case])
    encoder, store, sets, _ = prepare(cfg)
    encoder.eval()  # dropout off: chunking changes dropout masks, not the function
    tau = cfg.resolved_tau(encoder.settings.normalize)
    loss_a = build_loss(cfg, tau, sets, 10, 10)
    loss_b = copy.deepcopy(loss_a)
    b = collate(encoder, sets[0], store, list(range(8)), np.random.default_rng(0), loss=cfg.loss, hard_negatives=1,
                max_positives=cfg.max_positives, in_batch_q=cfg.in_batch_q, corpus_size=10_000,
                filter_answers=cfg.filter_answers)
    encoder.zero_grad()
    loss, value_a = step_loss(encoder, loss_a, b, False, step=3)
    loss.backward()
    ga = grads_of(encoder)
    encoder.zero_grad()
    value_b = cached_step_loss(encoder, loss_b, b, False, 3, 0, None, chunk)
    gb = grads_of(encoder)
    assert float(value_a) == pytest.approx(float(value_b), abs=1e-6)
    assert ga.keys() == gb.keys() and len(ga) > 10
    scale = max(g.abs().max().item() for g in ga.values())
    for n in ga:
        torch.testing.assert_close(gb[n], ga[n], atol=1e-5 * max(1.0, scale), rtol=1e-4, msg=lambda m, n=n: f"{n}: {m}")
    if case.endswith("fcco"):  # the moving averages were updated once, identically
        for k, v in loss_a.state_dict().items():
            assert torch.equal(v, loss_b.state_dict()[k]), k


def test_training_with_grad_cache_runs_and_logs(tiny_model_dir, tmp_path):
    r = CliRunner().invoke(app, ["train", "--model", str(tiny_model_dir), "--train", TRAIN, "--out", str(tmp_path / "m"),
                                 "--batch-size", "8", "--max-steps", "2", "--grad-cache-chunk", "3"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("chunk", ["0", "9"])
def test_grad_cache_chunk_out_of_range_is_an_error(tiny_model_dir, tmp_path, chunk):
    r = CliRunner().invoke(app, ["train", "--model", str(tiny_model_dir), "--train", TRAIN, "--out", str(tmp_path / "m"),
                                 "--batch-size", "8", "--max-steps", "1", "--grad-cache-chunk", chunk])
    assert r.exit_code == 2 and "grad_cache_chunk must be between 1 and the micro-batch size (8)" in r.output
    assert not (tmp_path / "m").exists()

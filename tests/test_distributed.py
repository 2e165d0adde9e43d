"""Two processes (torchrun, gloo) train exactly like one process with the same global batch.

Exactly means to float rounding: the gradient is summed from two partial backward passes instead
of one, and AdamW turns rounding-level differences of near-zero gradients into updates of the
order of the learning rate, so the tolerance 1e-5 holds at the default lr (2e-5), not at 1e-3."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys

import pytest
import torch

from conftest import SAMPLE, train_killed_at

TRAIN = str(SAMPLE / "biencoder-train.json")

# Parameters whose gradient is zero in exact arithmetic, so what they get is rounding noise, and
# AdamW's first steps turn a noise gradient into an update of up to ±lr whatever its size (|g| >>
# eps): two runs that are equal to rounding can differ there by ~lr (seen: 1.2e-5 at lr 2e-5, one
# element of the passage tower's last LayerNorm bias). test_noise_only_parameters_have_no_gradient
# checks the list.
#  - every attention key bias: it adds q·b_k to all the logits of a softmax row;
#  - the passage tower's last LayerNorm bias: it moves every passage embedding ([CLS], not
#    normalised) by the same b, so all of a question's scores move by q·b and a softmax-type loss
#    does not change.
NOISE_ONLY = re.compile(r"\.attention\.self\.key\.bias$|^passage_model\.encoder\.layer\.1\.output\.LayerNorm\.bias$")


def assert_same_weights(a: dict, b: dict, atol: float) -> None:
    assert a.keys() == b.keys()
    checked = [k for k in a if not NOISE_ONLY.search(k)]
    assert len(checked) == len(a) - 5  # 2 towers x 2 layers of key biases + 1 LayerNorm bias
    for k in checked:
        torch.testing.assert_close(a[k], b[k], atol=atol, rtol=0, msg=lambda m, k=k: f"{k}: {m}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def no_dropout_model(tiny_model_dir, tmp_path_factory):
    """The tiny BERT without dropout: dropout masks depend on how a batch is split."""
    from transformers import AutoTokenizer, BertModel

    out = tmp_path_factory.mktemp("tiny-nodrop")
    model = BertModel.from_pretrained(tiny_model_dir, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(out)
    return out


def test_noise_only_parameters_have_no_gradient(no_dropout_model):
    """In float64, a DPM step (with and without importance weights) gives the parameters that
    assert_same_weights leaves out no gradient beyond rounding, and their same-shaped neighbours a
    real one. (In float32 their "zero" is ~1e-4 of the largest gradient: s/τ is in the hundreds
    for a random tower, and its rounding survives the softmax.)"""
    from dpr_xrisk.retrieval.encoder import DualEncoder
    from dpr_xrisk.losses import CandidateBatch, DPMLoss

    enc = DualEncoder.load(no_dropout_model).double()
    questions = ["who wrote the iliad", "when did the war end", "where is the lazy dog", "what is a fox"]
    texts = ["homer wrote the iliad", "the war ended in 1945", "the quick brown fox", "jumps over the lazy dog",
             "a fox is an animal", "paris is in france", "the dog sleeps", "an epic poem"]

    def cls(model, batch):  # DualEncoder's [CLS] pooling, without its cast to float32
        return model(**{k: v for k, v in batch.items() if k != "special_tokens_mask"}).last_hidden_state[:, 0]

    q = cls(enc.query_model, enc.tokenize_queries(questions))
    p = cls(enc.passage_model, enc.tokenize_passages([""] * len(texts), texts))
    pos = torch.zeros(4, 8, dtype=torch.bool)
    pos[torch.arange(4), torch.tensor([0, 1, 3, 4])] = True
    log_q = torch.log(torch.linspace(0.1, 0.9, 8, dtype=torch.float64)).expand(4, 8)
    for batch in (CandidateBatch.from_embeddings(q, p, pos), CandidateBatch.from_embeddings(q, p, pos, log_q=log_q)):
        enc.zero_grad()
        DPMLoss(tau=0.05)(batch).backward(retain_graph=True)
        grads = {n: w.grad for n, w in enc.named_parameters() if w.grad is not None}
        scale = torch.cat([g.flatten() for g in grads.values()]).abs().max()
        noise = {n for n in grads if NOISE_ONLY.search(n)}
        assert len(noise) == 5
        for n, g in grads.items():
            if n in noise:
                assert g.abs().max() < 1e-10 * scale, n
            elif n.endswith(("value.bias", "layer.1.output.LayerNorm.weight", "layer.1.output.LayerNorm.bias")):
                assert g.abs().max() > 1e-4 * scale, n


def train_cmd(model, out, extra=()):
    return ["-m", "dpr_xrisk", "train", "--model", str(model), "--train", TRAIN, "--out", str(out),
            "--batch-size", "8", "--max-steps", "4", "--lr", "2e-5", "--hard-negatives", "1", "--seed", "3",
            "--threads", "1", "--precision", "fp32", *extra]


@pytest.mark.slow
@pytest.mark.parametrize("estimator,cache", [("minibatch", None), ("fcco", None), ("fcco", "3")])
def test_two_processes_match_one(no_dropout_model, tmp_path, estimator, cache):
    """(cache: the two processes use cached gradients in chunks of 3 rows, the one process does not)"""
    # eps = 1e-6 (torch: 1e-8) also damps the updates of gradient elements that are near zero
    # without being structurally zero (NOISE_ONLY), and leaves the real ones (|g| >> 1e-6) as they are
    (tmp_path / "eps.toml").write_text("adam_eps = 1e-6\n")
    extra = ["--estimator", estimator, "--gamma", "0.5", "--config", str(tmp_path / "eps.toml")]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    one = subprocess.run([sys.executable, *train_cmd(no_dropout_model, tmp_path / "one", extra)],
                         capture_output=True, text=True, env=env)
    assert one.returncode == 0, one.stderr[-2000:]
    cached = extra + (["--grad-cache-chunk", cache] if cache else [])
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "--master-port", str(free_port()), *train_cmd(no_dropout_model, tmp_path / "two", cached)],
                         capture_output=True, text=True, env=env)
    assert two.returncode == 0, two.stderr[-3000:]
    from dpr_xrisk.retrieval.encoder import DualEncoder

    a, b = (DualEncoder.load(tmp_path / d).state_dict() for d in ("one", "two"))
    assert_same_weights(a, b, atol=1e-5)
    la, lb = ([json.loads(l) for l in (tmp_path / d / "train_log.jsonl").read_text().splitlines()] for d in ("one", "two"))
    steps_a, steps_b = ([r for r in log if "loss" in r] for log in (la, lb))
    assert len(steps_a) == len(steps_b) == 4
    assert [r["loss"] for r in steps_a] == pytest.approx([r["loss"] for r in steps_b], abs=1e-5)
    # AdamW is blind to the gradient's scale (its first update is lr·sign(g)), so the weights alone
    # would not see, e.g., a gradient summed instead of averaged over ranks: the norms do
    assert [r["grad_norm"] for r in steps_a] == pytest.approx([r["grad_norm"] for r in steps_b], rel=1e-4)
    assert [r.get("world_size") for r in lb if r.get("event") == "start"] == [2]


@pytest.mark.slow
def test_resume_on_another_world_size(no_dropout_model, tmp_path):
    """A 1-process run killed after its step-2 checkpoint, resumed by 2 processes, ends where an
    uninterrupted 1-process run ends (the state is per global batch, not per rank)."""
    from dpr_xrisk.retrieval.encoder import DualEncoder
    from dpr_xrisk.train.config import TrainConfig
    from dpr_xrisk.train.trainer import train

    cfg = TrainConfig(train=(TRAIN,), model=str(no_dropout_model), batch_size=8, max_steps=4, hard_negatives=1,
                      seed=3, save_every=2, precision="fp32")
    train(cfg, tmp_path / "full", progress=False)

    train_killed_at(cfg, tmp_path / "cut", 3)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                          str(free_port()), *train_cmd(no_dropout_model, tmp_path / "cut", ["--save-every", "2", "--resume"])],
                         capture_output=True, text=True, env=env)
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = (DualEncoder.load(tmp_path / d).state_dict() for d in ("full", "cut"))
    assert_same_weights(a, b, atol=1e-5)


@pytest.mark.slow
def test_killed_rank_fails_loudly_and_resume_recovers(no_dropout_model, tmp_path):
    """Rank 1 of 2 is SIGKILLed after step 3 (its step-2 checkpoint is on disk): torchrun must
    stop the whole job with a non-zero exit naming the dead rank, not hang, and ``--resume``
    must then finish from the step-2 checkpoint to the uninterrupted run's weights."""
    from dpr_xrisk.retrieval.encoder import DualEncoder

    env = dict(os.environ, OMP_NUM_THREADS="1")
    helper = os.path.join(os.path.dirname(__file__), "_kill_rank.py")

    def run_helper(out, kill_at):
        return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                               str(free_port()), helper, str(no_dropout_model), str(out), str(kill_at), TRAIN],
                              capture_output=True, text=True, env=env, timeout=600)

    full = run_helper(tmp_path / "full", -1)  # the uninterrupted 2-process run
    assert full.returncode == 0, full.stderr[-3000:]
    killed = run_helper(tmp_path / "cut", 3)
    assert killed.returncode != 0
    assert "Signal 9 (SIGKILL)" in killed.stderr and "local_rank: 1" in killed.stderr, killed.stderr[-3000:]
    ckpts = sorted(p.name for p in (tmp_path / "cut" / "checkpoints").iterdir())
    assert ckpts == ["step-2"]  # nothing half-written: only the complete checkpoint
    assert not (tmp_path / "cut" / "model.safetensors").exists() and not (tmp_path / "cut" / "query").exists()
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                          str(free_port()), *train_cmd(no_dropout_model, tmp_path / "cut", ["--save-every", "2", "--resume"])],
                         capture_output=True, text=True, env=env, timeout=600)
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = (DualEncoder.load(tmp_path / d).state_dict() for d in ("full", "cut"))
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=1e-6, rtol=0)

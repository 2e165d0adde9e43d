"""Training: the collator's layout against a hand-built reference, a smoke run that learns,
exact resume, multi-dataset sampling, and every bad input as a clear error before step 1."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from conftest import SAMPLE, train_killed_at
from dpr_xrisk.cli import app
from dpr_xrisk.errors import InputError
from dpr_xrisk.train.batch import collate
from dpr_xrisk.train.config import TrainConfig
from dpr_xrisk.train.data import PassageStore, TrainingSet, TrainQuestion
from dpr_xrisk.train.mining import sample_negatives
from dpr_xrisk.train.trainer import train

TRAIN = str(SAMPLE / "biencoder-train.json")


def base(tiny_model_dir, **kw) -> TrainConfig:
    values = dict(train=(TRAIN,), model=str(tiny_model_dir), batch_size=8, max_steps=6, lr=1e-3,
                  warmup_ratio=0.0, pooling="mean", normalize=True)
    values.update(kw)
    return TrainConfig(**values)


def ctx(pid, text, title="T"):
    return {"passage_id": pid, "title": title, "text": text}


def test_collator_layout_matches_the_rules(tiny_encoder):
    store = PassageStore()
    qs = []
    specs = [  # (answers, positive ids, hard-negative ids)
        (("paris",), ["p0"], ["n0", "n1", "n2", "n3"]),
        (("berlin",), ["p1", "p1b"], ["n4", "dup0"]),
        (("rome",), ["p2"], []),
    ]
    texts = {"p0": "paris is the capital", "p1": "berlin is big", "p1b": "berlin again", "p2": "rome is old",
             "n0": "lyon", "n1": "marseille", "n2": "nice", "n3": "paris in spring",  # n3 holds q0's answer
             "n4": "munich", "dup0": "paris is the capital"}  # dup0 = same text as p0 under another id
    for pid, t in texts.items():
        store.add(ctx(pid, t))
    for i, (ans, pos, neg) in enumerate(specs):
        qs.append(TrainQuestion(i, f"question {i}", ans, pos, neg))
    s = TrainingSet("t", "t.json", qs, pools=[[("n0", 0.0), ("n1", 0.0), ("n2", 0.0)], [("n4", 0.0), ("dup0", 0.0)], []])
    rng = np.random.default_rng(0)
    b = collate(tiny_encoder, s, store, [0, 1, 2], rng, loss="dpm", hard_negatives=2, max_positives=4,
                in_batch_q="uniform", corpus_size=1000, filter_answers=True, q_rule="separate")
    n = b.pos_mask.shape[1]
    assert b.pos_mask.sum(1).tolist() == [1, 1, 1]
    assert not (b.pos_mask & b.neg_mask).any()
    # every row: log q of its own hard negatives is log(h / L); in-batch ones log(n_b / N)
    # columns are identified by their decoded text
    row_keys = [tiny_encoder.tokenizer.decode(b.p_inputs["input_ids"][j], skip_special_tokens=True) for j in range(n)]
    q0_hard = math.log(2 / 3)
    own0 = b.log_q[0][b.neg_mask[0]]
    assert (torch.isclose(own0, torch.tensor(q0_hard)).sum() == 2)
    nb0 = int(b.neg_mask[0].sum()) - 2
    assert torch.isclose(own0[~torch.isclose(own0, torch.tensor(q0_hard))], torch.tensor(math.log(nb0 / 1000))).all()
    # dup0 duplicates q0's positive under another id: masked for q0 only
    dup_cols = [j for j, t in enumerate(row_keys) if "paris is the capital" in t]
    assert len(dup_cols) == 2
    for j in dup_cols:
        assert not b.neg_mask[0, j]
    assert b.neg_mask[1, dup_cols].any()
    # q1's pool has exactly h = 2 entries (included with certainty, log q = 0); q2 has none
    assert b.num_hard == 4
    j_n4 = row_keys.index("T munich") if "T munich" in row_keys else [j for j, t in enumerate(row_keys) if "munich" in t][0]
    assert b.neg_mask[1, j_n4] and b.log_q[1, j_n4] == 0.0
    # n3 ("paris in spring") holds q0's answer: never in q0's pool, and masked if in the batch
    assert all(not b.neg_mask[0, j] for j, t in enumerate(row_keys) if "paris" in t)


def test_sample_pool_inclusion_probability_is_h_over_L():
    pool = [(f"d{i}", 0.0) for i in range(5)]
    rng = np.random.default_rng(1)
    counts = {k: 0 for k, _ in pool}
    draws = 20000
    for _ in range(draws):
        picks = sample_negatives(pool, 2, rng)
        assert all(lq == pytest.approx(math.log(2 / 5)) for _, lq in picks)
        for k, _ in picks:
            counts[k] += 1
    for c in counts.values():
        assert c / draws == pytest.approx(2 / 5, abs=0.015)
    assert sample_negatives(pool[:2], 3, rng) == [("d0", 0.0), ("d1", 0.0)]


@pytest.mark.slow
def test_smoke_training_lowers_loss_and_raises_accuracy(tiny_model_dir, tmp_path):
    cfg = base(tiny_model_dir, batch_size=16, max_steps=40, eval_every=20, dev=TRAIN,
               corpus=str(SAMPLE / "passages.tsv"))
    summary = train(cfg, tmp_path / "out", progress=False)
    log = [json.loads(l) for l in (tmp_path / "out" / "train_log.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in log if "loss" in r]
    evals = [r for r in log if r.get("event") == "eval"]
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
    assert evals[0]["step"] == 0 and evals[-1]["step"] == 40
    assert evals[-1]["top5"] > evals[0]["top5"] + 0.2
    assert summary["best"] >= evals[-1]["top5"]
    from dpr_xrisk.retrieval.encoder import DualEncoder

    again = DualEncoder.load(tmp_path / "out")  # the output folder is a model folder
    # trained at 32/128 tokens, saved with the starting model's inference lengths (64/256)
    assert (again.settings.query_max_length, again.settings.passage_max_length) == (64, 256)
    assert DualEncoder.load(tmp_path / "out" / "best").settings.passage_max_length == 256


def _weights(path):
    from dpr_xrisk.retrieval.encoder import DualEncoder

    enc = DualEncoder.load(path)
    return {k: v.clone() for k, v in enc.state_dict().items()}


@pytest.mark.parametrize("loss,estimator", [("dpm", "minibatch"), ("listwise", "minibatch"), ("dpm", "fcco"), ("listwise", "fcco")])
def test_resume_continues_to_the_same_weights(tiny_model_dir, tmp_path, loss, estimator):
    cfg = base(tiny_model_dir, loss=loss, save_every=2, grad_accum=2, estimator=estimator, gamma_warmup_steps=1)
    train(cfg, tmp_path / "full", progress=False)

    train_killed_at(cfg, tmp_path / "cut", 3)
    assert [p.name for p in (tmp_path / "cut" / "checkpoints").iterdir()] == ["step-2"]
    train(cfg, tmp_path / "cut", resume=True, progress=False)
    a, b = _weights(tmp_path / "full"), _weights(tmp_path / "cut")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    log = [json.loads(l) for l in (tmp_path / "cut" / "train_log.jsonl").read_text().splitlines()]
    assert any(r.get("resumed") for r in log if r.get("event") == "start")
    full = [json.loads(l) for l in (tmp_path / "full" / "train_log.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in log if "loss" in r]
    assert steps == [r["step"] for r in full if "loss" in r] == list(range(1, 7))  # each step once (#15)
    if estimator == "fcco":  # the estimator state is restored exactly too
        from safetensors.torch import load_file

        sa, sb = (load_file(str(tmp_path / d / "checkpoints" / "step-6" / "loss.safetensors")) for d in ("full", "cut"))
        assert sa.keys() == {"v", "seen"} and all(torch.equal(sa[k], sb[k]) for k in sa)
        assert any(r.get("gamma") == 0.9 for r in log) and any("fcco_seen_fraction" in r for r in log)


def test_multi_dataset_batches_follow_the_weights(tiny_model_dir, tmp_path):
    recs = json.loads((SAMPLE / "biencoder-train.json").read_text())
    (tmp_path / "a.json").write_text(json.dumps(recs[:40]))
    (tmp_path / "b.json").write_text(json.dumps(recs[40:]))
    cfg = base(tiny_model_dir, train=(str(tmp_path / "a.json"), str(tmp_path / "b.json")), train_weights=(3.0, 1.0),
               max_steps=40, batch_size=4, hard_negatives=0)
    train(cfg, tmp_path / "out", progress=False)
    log = [json.loads(l) for l in (tmp_path / "out" / "train_log.jsonl").read_text().splitlines()]
    names = [r["dataset"] for r in log if "dataset" in r]
    assert len(names) == 40 and set(names) == {"a", "b"}
    assert 0.55 <= names.count("a") / 40 <= 0.95


runner = CliRunner()


def cli_error(*args) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return result.output


def test_training_bad_inputs(tiny_model_dir, tmp_path):
    m = str(tiny_model_dir)
    common = ["train", "--model", m, "--out", tmp_path / "o", "--max-steps", 1, "--batch-size", 4]
    recs = json.loads((SAMPLE / "biencoder-train.json").read_text())[:6]
    recs[2]["positive_ctxs"] = []
    (tmp_path / "nopos.json").write_text(json.dumps(recs))
    (tmp_path / "fail.toml").write_text('no_positive = "fail"\n')
    assert "record 2" in cli_error(*common, "--train", tmp_path / "nopos.json", "--config", tmp_path / "fail.toml")
    (tmp_path / "empty.json").write_text("[]")
    assert "training file has no records" in cli_error(*common, "--train", tmp_path / "empty.json")
    assert "tau must be > 0" in cli_error(*common, "--train", TRAIN, "--tau", 0)
    assert "batch_size 128 is larger than the 80 usable" in cli_error(*common[:-2], "--batch-size", 128, "--train", TRAIN)
    (tmp_path / "typo.toml").write_text("learning_rate = 0.1\n")
    out = cli_error(*common, "--train", TRAIN, "--config", tmp_path / "typo.toml")
    assert "unknown config" in out and "'learning_rate'" in out and "lr" in out
    (tmp_path / "corpus.tsv").write_text("id\ttext\ttitle\ns1\tsome text\tT\n")
    assert "is not in the corpus" in cli_error(*common, "--train", TRAIN, "--corpus", tmp_path / "corpus.tsv")
    assert "unknown loss 'hinge'; valid: dpm, infonce, listwise" in cli_error(*common, "--train", TRAIN, "--loss", "hinge")


def test_skip_questions_without_positives_and_count_them(tiny_model_dir, tmp_path):
    recs = json.loads((SAMPLE / "biencoder-train.json").read_text())[:10]
    recs[0]["positive_ctxs"] = []
    (tmp_path / "t.json").write_text(json.dumps(recs))
    train(base(tiny_model_dir, train=(str(tmp_path / "t.json"),), max_steps=1, batch_size=4), tmp_path / "o", progress=False)
    start = json.loads((tmp_path / "o" / "train_log.jsonl").read_text().splitlines()[0])
    assert start["skipped_no_positive"] == 1 and start["questions"] == 9


def test_resume_with_an_incompatible_config_is_refused(tiny_model_dir, tmp_path):
    train(base(tiny_model_dir, max_steps=2, batch_size=4), tmp_path / "o", progress=False)
    with pytest.raises(InputError, match="made with another config.*differs in loss"):
        train(base(tiny_model_dir, max_steps=2, batch_size=4, loss="listwise"), tmp_path / "o", resume=True, progress=False)
    with pytest.raises(InputError, match="use --resume"):
        train(base(tiny_model_dir, max_steps=2, batch_size=4), tmp_path / "o", progress=False)


def test_config_files_toml_and_yaml(tmp_path):
    (tmp_path / "c.toml").write_text('train = ["a.json"]\nloss = "listwise"\nbatch_size = 8\n')
    (tmp_path / "c.yaml").write_text("train: [a.json]\nloss: listwise\nbatch_size: 8\n")
    a = TrainConfig.load(tmp_path / "c.toml", {"tau": 0.1})
    b = TrainConfig.load(tmp_path / "c.yaml", {"tau": 0.1})
    assert a == b and a.train == ("a.json",) and a.tau == 0.1 and a.loss == "listwise"


def test_fcco_probe_logs_the_gap_to_the_exact_full_corpus_loss(tiny_model_dir, tmp_path):
    cfg = base(tiny_model_dir, estimator="fcco", gamma=0.5, gamma_warmup_steps=0, probe_every=3, probe_size=80,
               max_steps=6, batch_size=16, corpus=str(SAMPLE / "passages.tsv"))
    train(cfg, tmp_path / "o", progress=False)
    log = [json.loads(l) for l in (tmp_path / "o" / "train_log.jsonl").read_text().splitlines()]
    probes = [r for r in log if r.get("event") == "probe"]
    assert [p["step"] for p in probes] == [3, 6]
    assert probes[-1]["probe_seen"] > probes[0]["probe_seen"] > 0  # more questions visited over time
    for p in probes:
        assert math.isfinite(p["probe_exact_loss"]) and p["probe_exact_loss"] > 0
        assert math.isfinite(p["probe_gap"]) and p["probe_abs_gap"] >= abs(p["probe_gap"]) - 1e-9


def test_an_improving_dev_evaluation_leaves_the_towers_training(tiny_encoder, tmp_path, monkeypatch):
    """run_eval saves the best model in eval mode and must hand the towers back in training mode:
    left in eval mode, every step after the first improving in-loop evaluation trained without
    dropout (and a run resumed from a checkpoint after it with dropout)."""
    from dpr_xrisk.train import dev_eval as E
    from dpr_xrisk.train.log import JsonlLog

    monkeypatch.setattr(E, "evaluate_dev", lambda *a: {"top1": 0.5, "top5": 0.5, "top20": 0.5})
    cfg = TrainConfig(train=(TRAIN,))
    state = {"best": None, "best_step": None}
    dev, log = E.DevSet([], {}), JsonlLog(tmp_path / "log.jsonl")
    tiny_encoder.train()
    E.run_eval(tiny_encoder, cfg, dev, state, 10, log, tmp_path, tiny_encoder.settings)
    assert state["best_step"] == 10 and (tmp_path / "best").is_dir()  # it improved, and saved
    assert tiny_encoder.training and all(m.training for m in tiny_encoder.passage_model.modules())
    tiny_encoder.eval()  # a caller in eval mode stays there
    state["best"] = None
    E.run_eval(tiny_encoder, cfg, dev, state, 11, log, tmp_path, tiny_encoder.settings)
    assert not tiny_encoder.training


def test_dropout_option_sets_every_tower_dropout(tiny_model_dir, tmp_path):
    from dpr_xrisk.retrieval.encoder import DualEncoder
    from dpr_xrisk.train.setup import set_dropout

    enc = DualEncoder.load(str(tiny_model_dir))
    assert {m.p for m in enc.passage_model.modules() if isinstance(m, torch.nn.Dropout)} == {0.1}
    n = set_dropout(enc, 0.0)
    assert n > 0 and {m.p for t in (enc.query_model, enc.passage_model) for m in t.modules()
                      if isinstance(m, torch.nn.Dropout)} == {0.0}
    # no dropout: a training-mode forward equals the eval-mode one
    enc.train()
    a = enc.encode_passages(["T"], ["some words here"])
    enc.eval()
    assert np.allclose(a, enc.encode_passages(["T"], ["some words here"]), atol=1e-6)
    # the trainer applies it, and the run's config records it; a bad value is one clear error
    train(base(tiny_model_dir, max_steps=1, dropout=0.0), tmp_path / "o", progress=False)
    assert json.loads((tmp_path / "o" / "config.json").read_text())["dropout"] == 0.0
    with pytest.raises(InputError, match="dropout"):
        base(tiny_model_dir, dropout=1.5)


@pytest.mark.parametrize("flag, value, message", [
    ("--lr", "-1", "lr must be > 0 and finite, got -1.0"),
    ("--lr", "nan", "lr must be > 0 and finite, got nan"),
    ("--max-grad-norm", "-1", "max_grad_norm must be > 0 (inf: no clipping), got -1.0"),
    ("--threads", "-1", "threads must be >= 1 (or 0: torch's default), got -1"),
    ("--epochs", "0", "epochs must be > 0 and finite, got 0.0"),
    ("--batch-size", "0", "batch_size must be >= 1"),
    ("--tau", "-0.5", "tau must be > 0 and finite, got -0.5"),
    ("--warmup-ratio", "1.5", "warmup_ratio must be in [0, 1], got 1.5"),
    ("--log-every", "0", "log_every must be >= 1, got 0"),
])
def test_out_of_range_values_are_one_line_usage_errors(flag, value, message):
    """Range checks live where the config is built, so a flag is refused before anything loads,
    in one line (exit 2, no Typer box); a negative max_grad_norm used to reach clip_grad_norm_
    and flip the gradients."""
    out = cli_error("train", "--train", TRAIN, flag, value, "--print-config")
    assert message in out and "╭" not in out
    assert len(out.strip().splitlines()) == 1, out


def test_toml_and_recipe_values_share_the_range_checks(tmp_path):
    (tmp_path / "c.toml").write_text("lr = nan\nmax_grad_norm = -1.0\n")
    with pytest.raises(InputError, match="lr must be > 0 and finite, got nan"):
        TrainConfig.load(tmp_path / "c.toml")
    with pytest.raises(InputError, match="threads must be >= 1"):
        TrainConfig.load(None, {"threads": -1}, recipe="recommended")
    assert TrainConfig(max_grad_norm=float("inf")).max_grad_norm == float("inf")  # no clipping


def test_refreshing_is_one_property_of_the_config():
    assert not TrainConfig().refreshing
    assert TrainConfig(refresh_every=4, corpus="c.tsv").refreshing
    assert TrainConfig(refresh_every_epochs=0.5, corpus="c.tsv").refreshing
    assert TrainConfig(negatives="model", corpus="c.tsv").refreshing
    with pytest.raises(InputError, match="needs a corpus"):
        TrainConfig(negatives="model")


def test_the_encoder_trains_at_its_training_lengths_and_is_saved_at_the_inference_ones(tiny_model_dir):
    """The lengths are resolved once, at load: training uses query/passage_max_length; the saved
    settings keep inference_*_max_length, else the starting model's own lengths."""
    from dpr_xrisk.train.setup import load_encoder

    cfg = TrainConfig(model=str(tiny_model_dir), query_max_length=16, passage_max_length=40)
    encoder, saved = load_encoder(cfg)
    assert (encoder.settings.query_max_length, encoder.settings.passage_max_length) == (16, 40)
    assert (saved.query_max_length, saved.passage_max_length) == (64, 256)  # the tiny model declares the defaults
    _, saved = load_encoder(TrainConfig(model=str(tiny_model_dir), inference_passage_max_length=96))
    assert (saved.query_max_length, saved.passage_max_length) == (64, 96)

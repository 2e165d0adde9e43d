"""Importance weights of the joint in-batch + pool sampler (docs/method.md §3): q_ij is the probability that
candidate j is in question i's sample at all, 1 - (1 - q_b)(1 - q_h·[j ∈ Π_i]), whichever route
brought j into the batch. Checked against simulated inclusion frequencies of the real samplers and
against a hand computation in the collator; N is never guessed; refresh periods are "and/or"."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpr_xrisk.train.batch import collate
from dpr_xrisk.train.config import TrainConfig
from dpr_xrisk.train.data import PassageStore, TrainingSet, TrainQuestion
from dpr_xrisk.train.refresh import pool_log_q, sample_negatives
from dpr_xrisk.train.trainer import RefreshSchedule


@pytest.mark.parametrize("sampler,h", [("uniform", 2), ("softmax", 1), ("softmax", 3)])
def test_joint_q_equals_the_simulated_inclusion_frequency(sampler, h):
    """Corpus of N passages, i's pool = the first L of them with scores. Each simulated sample is
    the union of the in-batch route (n_b passages uniform from the corpus, the model docs/method.md §3 takes
    for in-batch negatives) and the pool route (``sample_negatives``, the collator's own sampler).
    The frequency with which each passage is in the union must equal q_ij."""
    N, L, n_b, T, temp = 40, 6, 8, 40_000, 0.05
    pool = [(f"d{j}", 0.5 + 0.02 * j) for j in range(L)]
    rng = np.random.default_rng(123)
    counts = np.zeros(N)
    for _ in range(T):
        seen = np.zeros(N, dtype=bool)
        seen[rng.choice(N, size=n_b, replace=False)] = True
        for key, _ in sample_negatives(pool, h, rng, sampler, temp):
            seen[int(key[1:])] = True
        counts += seen
    freq = counts / T
    q_b = n_b / N
    q_h = np.zeros(N)
    q_h[:L] = np.exp(pool_log_q(pool, h, sampler, temp))
    q = 1 - (1 - q_b) * (1 - q_h)
    tol = 4.5 * np.sqrt(q * (1 - q) / T)  # binomial standard errors
    assert (np.abs(freq - q) <= tol).all(), np.c_[freq, q][np.abs(freq - q) > tol]
    # the pool's own inclusion probabilities alone (in-batch route off) match too
    assert np.isclose(np.exp(pool_log_q(pool, h, sampler, temp)).sum(), h) or sampler == "softmax"


def test_pool_log_q_agrees_with_sample_negatives():
    pool = [(f"d{j}", 0.1 * j) for j in range(7)]
    for sampler in ("uniform", "softmax"):
        lq = dict(zip([k for k, _ in pool], pool_log_q(pool, 2, sampler, 0.3)))
        for k, v in sample_negatives(pool, 2, np.random.default_rng(0), sampler, 0.3):
            assert v == pytest.approx(lq[k], abs=1e-12)
    assert pool_log_q(pool[:2], 2).tolist() == [0.0, 0.0]  # L <= h: both certain


def _batch_fixture():
    """Three questions; q1's positive p1 and q2's hard negative n9 are also in q0's pool."""
    store = PassageStore()
    texts = {"p0": "alpha one", "p1": "beta two", "p2": "gamma three", "n0": "delta four", "n1": "eps five",
             "n9": "zeta six", "n5": "eta seven"}
    for pid, t in texts.items():
        store.add({"passage_id": pid, "title": "", "text": t})
    qs = [TrainQuestion(0, "q zero", ("zzz",), ["p0"], []), TrainQuestion(1, "q one", ("yyy",), ["p1"], []),
          TrainQuestion(2, "q two", ("xxx",), ["p2"], [])]
    pools = [[("n0", 0.9), ("n1", 0.8), ("p1", 0.7), ("n9", 0.6)], [("n5", 0.5)], [("n9", 0.4)]]
    return store, TrainingSet("t", "t.json", qs, pools=pools)


def _columns(tiny_encoder, b):
    return [tiny_encoder.tokenizer.decode(ids, skip_special_tokens=True) for ids in b.p_inputs["input_ids"]]


TEXT_OF = {"alpha one": "p0", "beta two": "p1", "gamma three": "p2", "delta four": "n0", "eps five": "n1",
           "zeta six": "n9", "eta seven": "n5"}


@pytest.mark.parametrize("seed", range(6))
def test_collator_gives_every_candidate_its_joint_inclusion_probability(tiny_encoder, seed):
    """Hand computation: replay the collator's draws (one positive index per question, then
    ``sample_negatives`` per question, same generator), then q_ij = 1 - (1 - n_b/N)(1 - q_h)
    with n_b = i's unmasked candidates that i did not draw and q_h = h/L for members of Π_i."""
    store, s = _batch_fixture()
    N, h = 1000, 1
    b = collate(tiny_encoder, s, store, [0, 1, 2], np.random.default_rng(seed), loss="dpm", hard_negatives=h,
                max_positives=1, in_batch_q="uniform", corpus_size=N, filter_answers=True)
    keys = [TEXT_OF[c] for c in _columns(tiny_encoder, b)]
    replay = np.random.default_rng(seed)
    for q in s.questions:
        replay.integers(len(q.positives))
    drawn = [{k for k, _ in sample_negatives(p, h, replay)} for p in s.pools]
    for i in range(3):
        negs = [j for j in range(len(keys)) if b.neg_mask[i, j]]
        assert {keys[j] for j in negs} >= drawn[i]
        q_b = (len(negs) - len(drawn[i])) / N
        pool = dict(s.pools[i])
        for j in negs:
            q_h = h / len(pool) if keys[j] in pool else 0.0
            want = math.log(1 - (1 - q_b) * (1 - q_h))
            assert float(b.log_q[i, j]) == pytest.approx(want, rel=1e-5), (seed, i, keys[j])
    # q1's positive p1 sits in q0's pool (L = 4, h = 1): weighted at about q_h = 1/4, never at
    # the in-batch q_b ~ 0.005 (which over-counts it ~50-fold: docs/method.md §3's double count)
    assert float(b.log_q[0, keys.index("p1")]) > math.log(0.25)


def test_separate_rule_keeps_the_old_weights(tiny_encoder):
    store, s = _batch_fixture()
    b = collate(tiny_encoder, s, store, [0, 1, 2], np.random.default_rng(0), loss="dpm", hard_negatives=1,
                max_positives=1, in_batch_q="uniform", corpus_size=1000, filter_answers=True, q_rule="separate")
    keys = _columns(tiny_encoder, b)
    j = keys.index("beta two")  # q1's positive, in q0's pool: the in-batch q under the old rule
    n_b = int(b.neg_mask[0].sum()) - 1
    assert float(b.log_q[0, j]) == pytest.approx(math.log(n_b / 1000), rel=1e-5)


@pytest.mark.parametrize("kw", [dict(corpus_size=None), dict(corpus_size=1000, in_batch_q="one")])
def test_unknown_corpus_size_or_in_batch_q_one_make_every_candidate_certain(tiny_encoder, kw):
    store, s = _batch_fixture()
    args = dict(loss="dpm", hard_negatives=1, max_positives=1, in_batch_q="uniform", filter_answers=True)
    args.update(kw)
    b = collate(tiny_encoder, s, store, [0, 1, 2], np.random.default_rng(0), **args)
    assert b.neg_mask.any() and (b.log_q == 0).all()


def test_refresh_schedule_is_and_or():
    # docs/method.md §5 "every R steps and/or every E epochs": R = 3 and E = 0.5 of 10 steps per epoch
    at = RefreshSchedule(3, 0.5, 10.0, steps=12)
    assert [t for t in range(0, 14) if at.due(t)] == [3, 5, 6, 9, 10]
    assert [at.next_after(t) for t in (0, 3, 5, 6, 10, 11)] == [3, 5, 6, 9, 12, 12]
    assert at.planned() == [t for t in range(0, 14) if at.due(t)]
    none = RefreshSchedule(None, None, 10.0, steps=12)
    assert not none and not any(none.due(t) for t in range(13)) and none.next_after(0) == 12


def test_epoch_refreshes_stay_on_the_epoch_fractions():
    # 7,070 questions at batch 32 = 220.94 steps per epoch, 2 epochs = 442 steps: a quarter epoch is
    # 55.23 steps, so the refreshes come at the first step after each k/4 epoch (a naive reading
    # by hand: ceil(55.23 k)), not at multiples of a rounded 55 (which would refresh at step 440
    # for the last 2 steps); the one at 2 epochs would end training and is not made
    spe = 7070 / 32
    at = RefreshSchedule(None, 0.25, spe, steps=442)
    naive = [k for k in range(1, 442) if any(k - 1 < j * spe / 4 <= k for j in range(1, 9))]
    assert at.epoch_steps == naive == [56, 111, 166, 221, 277, 332, 387]
    assert at.next_after(387) == 442 and at.next_after(0) == 56
    # exact fractions land on their step: 10 steps per epoch, every half epoch
    assert RefreshSchedule(None, 0.5, 10.0, steps=21).epoch_steps == [5, 10, 15, 20]
    # a period under one step refreshes at every step (no endless loop over k)
    assert RefreshSchedule(None, 1e-9, 10.0, steps=5).epoch_steps == [1, 2, 3, 4]


def test_unknown_q_rule_is_an_error():
    from dpr_xrisk.errors import InputError

    with pytest.raises(InputError, match="q_rule"):
        TrainConfig(train=("x.json",), q_rule="both")


def test_training_without_corpus_never_guesses_n(tiny_model_dir, tmp_path, capsys):
    import json

    from conftest import SAMPLE
    from dpr_xrisk.train.trainer import train

    cfg = TrainConfig(train=(str(SAMPLE / "biencoder-train.json"),), model=str(tiny_model_dir), batch_size=8,
                      max_steps=1, warmup_ratio=0.0, negatives="none", hard_negatives=0)
    train(cfg, tmp_path / "o", progress=False)
    start = json.loads((tmp_path / "o" / "train_log.jsonl").read_text().splitlines()[0])
    assert start["corpus_size"] is None and start["q_rule"] == "joint"
    assert "corpus size N unknown" in capsys.readouterr().err


def test_weight_margin_flags_the_settings_that_lost_to_zero_shot():
    from dpr_xrisk.train.trainer import weight_margin

    cfg = TrainConfig(train=("x.json",), batch_size=32)
    m = weight_margin(cfg, 0.05, 21_015_324, normalize=True)
    assert m == pytest.approx(0.05 * math.log(21_015_324 / 31))  # ~0.67: the diagnosis' losing runs
    assert weight_margin(cfg, 0.02, 21_015_324, True) < 0.4  # the recommended recipe
    assert weight_margin(cfg, 0.05, 1543, True) < 0.4
    assert weight_margin(TrainConfig(train=("x.json",), zeta_normalize=True), 0.05, 21_015_324, True) is None
    assert weight_margin(TrainConfig(train=("x.json",), zeta_scale=0.0), 0.05, 21_015_324, True) is None
    assert weight_margin(cfg, 0.05, None, True) is None

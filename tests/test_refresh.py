"""Index refresh: filtered pools, the softmax sampler's q against empirical inclusion rates,
pools that follow the encoder, exact resume across refreshes, `mine`, and early errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from conftest import SAMPLE, assert_same_weights, cli, train_killed_at
from dpr_xrisk.evaluation.answers import has_answer
from dpr_xrisk.cli import app
from dpr_xrisk.retrieval.encoder import DualEncoder
from dpr_xrisk.errors import InputError
from dpr_xrisk.train.config import TrainConfig
from dpr_xrisk.train.data import PassageStore, load_training_set
from dpr_xrisk.train.mining import refresh_pools, sample_negatives, validate_refresh
from dpr_xrisk.train.trainer import train

TRAIN = str(SAMPLE / "biencoder-train.json")
CORPUS = str(SAMPLE / "passages.tsv")


@pytest.fixture()
def setup(tiny_model_dir):
    enc = DualEncoder.load(tiny_model_dir, pooling="mean", normalize=True, passage_max_length=64)
    store = PassageStore()
    return enc, store, load_training_set(TRAIN, store)


def test_refreshed_pools_hold_no_positive_and_no_answer(setup):
    enc, store, s = setup
    res = refresh_pools(enc, [s], store, CORPUS, k=30, skip_ranks=1)
    pools = res.pools[0]
    assert len(pools) == len(s.questions)
    for q, pool in zip(s.questions, pools):
        assert pool and len(pool) <= 29
        for key, _ in pool:
            assert key not in q.positives
            assert not has_answer(store.texts[key][1], q.answers)
        scores = [sc for _, sc in pool]
        assert scores == sorted(scores, reverse=True)
    removed = res.stats["removed"]
    assert removed["answer"] > 0
    # skip_ranks=1 drops each question's top hit unless a stronger rule (positive, answer) already
    # did: its pool is then the unskipped pool without its head, else the unskipped pool itself
    plain = refresh_pools(enc, [s], store, CORPUS, k=30).pools[0]
    assert all(b in (a, a[1:]) for a, b in zip(plain, pools))
    skipped = sum(b == a[1:] for a, b in zip(plain, pools))
    assert removed["rank"] == skipped > len(pools) // 2
    assert 0 <= res.stats["train_recall@1"] <= res.stats["train_recall@10"] <= res.stats["train_recall@30"] <= 1
    # margin rule: with m = 0 nothing scoring above the positive survives
    res_m = refresh_pools(enc, [s], store, CORPUS, k=30, margin=0.0)
    assert res_m.stats["removed"]["margin"] > 0


def test_margin_rule_matches_a_naive_filter(setup):
    """refresh_margin m keeps a candidate of the unfiltered pool iff its score is at most
    (1 - m) x the question's score with its first positive, both recomputed here from the encoder
    (the refresh reads the positive's vector from its own index); the recipe's m = 0.05."""
    from dpr_xrisk.retrieval.search import load_passage_texts

    enc, store, s = setup
    plain = refresh_pools(enc, [s], store, CORPUS, k=30).pools[0]
    res = refresh_pools(enc, [s], store, CORPUS, k=30, margin=0.05)
    corpus = load_passage_texts(CORPUS)
    qs = [q for q in s.questions if q.positives[0] in corpus]
    assert len(qs) > len(s.questions) // 2
    qv = enc.encode_queries([q.text for q in qs])
    pv = enc.encode_passages([corpus[q.positives[0]][0] for q in qs], [corpus[q.positives[0]][1] for q in qs])
    s_pos = {id(q): float(a @ b) for q, a, b in zip(qs, qv, pv)}
    dropped = 0
    for q, before, after in zip(s.questions, plain, res.pools[0]):
        if id(q) not in s_pos:  # positive not in the corpus: no margin rule
            assert after == before
            continue
        bound = 0.95 * s_pos[id(q)]
        near = [d for d, sc in before if abs(sc - bound) < 1e-4]  # float ties: either way
        assert [d for d, _ in after if d not in near] == [d for d, sc in before if sc <= bound and d not in near]
        dropped += len(before) - len(after)
    assert dropped == res.stats["removed"]["margin"] > 0


def test_pools_change_when_the_encoder_changes(setup):
    enc, store, s = setup
    before = refresh_pools(enc, [s], store, CORPUS, k=10).pools[0]
    with torch.no_grad():
        for p in enc.passage_model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    after = refresh_pools(enc, [s], store, CORPUS, k=10).pools[0]
    changed = sum({k for k, _ in a} != {k for k, _ in b} for a, b in zip(before, after))
    assert changed > len(s.questions) // 2


@pytest.mark.parametrize("h,temperature", [(1, 0.5), (3, 0.2)])
def test_softmax_sampler_q_is_the_inclusion_probability(h, temperature):
    pool = [(f"d{i}", s) for i, s in enumerate([0.9, 0.8, 0.5, 0.45, 0.1, 0.0])]
    rng = np.random.default_rng(0)
    draws, counts, qs = 40000, {}, {}
    for _ in range(draws):
        for key, lq in sample_negatives(pool, h, rng, "softmax", temperature):
            counts[key] = counts.get(key, 0) + 1
            qs[key] = lq
    p = np.exp(np.array([s for _, s in pool]) / temperature)
    p /= p.sum()
    for i, (key, _) in enumerate(pool):
        exact = 1 - (1 - p[i]) ** h
        assert math.exp(qs[key]) == pytest.approx(exact, rel=1e-9)  # the q given to the loss
        assert counts[key] / draws == pytest.approx(exact, abs=0.01)  # ... is how often it is drawn


def test_refresh_errors_before_training(setup, tmp_path):
    enc, _, _ = setup
    with pytest.raises(InputError, match="refresh_k = 999 must be between 1 and the corpus size"):
        validate_refresh(enc, CORPUS, 999, "Flat")
    with pytest.raises(InputError, match="FAISS rejects factory string 'IVFxx'"):
        validate_refresh(enc, CORPUS, 10, "IVFxx")
    with pytest.raises(InputError, match="refresh_every must be >= 1"):
        TrainConfig(train=(TRAIN,), corpus=CORPUS, refresh_every=0)
    with pytest.raises(InputError, match="needs a corpus"):
        TrainConfig(train=(TRAIN,), refresh_every=5)
    bad = tmp_path / "c.tsv"
    bad.write_text("id\ttext\ttitle\nzzz\tnothing here\tT\n")
    with pytest.raises(InputError, match="is not in the corpus"):
        train(TrainConfig(train=(TRAIN,), corpus=str(bad), refresh_every=2, model=str(enc.settings.base_model) or "minilm"),
              tmp_path / "o", progress=False)


def test_training_with_refresh_resumes_exactly(tiny_model_dir, tmp_path):
    cfg = TrainConfig(train=(TRAIN,), corpus=CORPUS, model=str(tiny_model_dir), pooling="mean", normalize=True,
                      batch_size=8, max_steps=6, lr=1e-3, warmup_ratio=0.0, negatives="model", refresh_every=2,
                      refresh_k=20, hard_negatives=2, pool_sampler="softmax", save_every=2)
    summary = train(cfg, tmp_path / "full", progress=False)
    assert 0 < summary["refresh_share"] < 1

    train_killed_at(cfg, tmp_path / "cut", 5)
    train(cfg, tmp_path / "cut", resume=True, progress=False)
    assert_same_weights(tmp_path / "full", tmp_path / "cut")
    log = [json.loads(l) for l in (tmp_path / "full" / "refresh_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [0, 2, 4]
    assert all(r["mean_pool_size"] > 0 and "train_recall@20" in r for r in log)
    state = json.loads((tmp_path / "full" / "checkpoints" / "step-6" / "state.json").read_text())
    assert len(state["pools"][0]) == 80


def test_mine_writes_negatives_usable_for_training(tiny_model_dir, tmp_path):
    out = tmp_path / "neg.jsonl"
    r = CliRunner().invoke(app, ["mine", "--model", str(tiny_model_dir), "--train", TRAIN, "--corpus", CORPUS,
                                 "--out", str(out), "--k", "15", "--hard-negatives", "2"])
    assert r.exit_code == 0, r.output
    lines = [json.loads(l) for l in out.read_text().splitlines()]
    assert len(lines) == 80 and all(n["rank"] >= 1 and 0 < n["q"] <= 1 for l in lines for n in l["negatives"])
    cfg = TrainConfig(train=(TRAIN,), corpus=CORPUS, model=str(tiny_model_dir), batch_size=8, max_steps=1,
                      negatives="negatives-file", negatives_file=str(out))
    train(cfg, tmp_path / "o", progress=False)
    start = json.loads((tmp_path / "o" / "train_log.jsonl").read_text().splitlines()[0])
    assert start["mean_pool_size"] > 5


def test_refresh_every_epochs_is_converted_to_steps(tiny_model_dir, tmp_path):
    # 80 questions / batch 8 = 10 steps per epoch: refreshing every half epoch = every 5 steps
    cfg = TrainConfig(train=(TRAIN,), corpus=CORPUS, model=str(tiny_model_dir), batch_size=8, max_steps=11,
                      refresh_every_epochs=0.5, refresh_k=10, hard_negatives=1, precision="fp32")
    train(cfg, tmp_path / "o", progress=False)
    log = [json.loads(l) for l in (tmp_path / "o" / "refresh_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [5, 10]
    # the refresh encodes at the measured batch of its path (CPU fp32: 16), not a fixed 128
    assert {r["encode_batch_size"] for r in log} == {16}


def test_refresh_every_steps_and_epochs_refresh_at_multiples_of_each(tiny_model_dir, tmp_path):
    # docs/method.md §5 "every R steps and/or every E epochs": R = 3 and E = 0.5 (5 steps) refresh at the
    # multiples of 3 and of 5, not only at those of the smaller period
    cfg = TrainConfig(train=(TRAIN,), corpus=CORPUS, model=str(tiny_model_dir), batch_size=8, max_steps=11,
                      refresh_every=3, refresh_every_epochs=0.5, refresh_k=10, hard_negatives=1)
    train(cfg, tmp_path / "o", progress=False)
    log = [json.loads(l) for l in (tmp_path / "o" / "refresh_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [3, 5, 6, 9, 10]


def test_refresh_fraction_reencodes_the_oldest_share_and_resumes_exactly(tiny_model_dir, tmp_path):
    """--refresh-fraction 0.25: the first refresh encodes all 335 passages, each later one the
    ceil(0.25 * 335) = 84 oldest (a cursor walking round the corpus); the re-encoded rows equal
    a full encode with the current tower, the others keep their earlier vectors; staleness is
    logged; a killed and resumed run ends with the same weights and the same cache."""
    from dpr_xrisk.retrieval.encode import load_shards, shard_arrays

    cfg = TrainConfig(train=(TRAIN,), corpus=CORPUS, model=str(tiny_model_dir), pooling="mean", normalize=True,
                      passage_max_length=64, batch_size=8, max_steps=6, lr=1e-3, warmup_ratio=0.0,
                      negatives="model", refresh_every=2, refresh_k=20, hard_negatives=2, refresh_fraction=0.25,
                      save_every=2)
    full = tmp_path / "full"
    summary = train(cfg, full, progress=False)
    log = [json.loads(l) for l in (full / "refresh_log.jsonl").read_text().splitlines()]
    assert [(r["step"], r["reencoded"], r["cursor"]) for r in log] == [(0, 335, 0), (2, 84, 84), (4, 84, 168)]
    assert log[1]["stale_share"] == round(251 / 335, 4) and log[1]["max_staleness_steps"] == 2
    assert log[2]["mean_staleness_steps"] == round((84 * 2 + 167 * 4) / 335, 3)
    assert 0 < summary["refresh_share"] < 1
    # the step-4 version: rows 84..167 re-encoded at step 4, 0..83 at step 2, the rest from step 0
    age = np.load(full / "refresh_cache" / "step-4" / "age.npy")
    assert (age[:84] == 2).all() and (age[84:168] == 4).all() and (age[168:] == 0).all()
    # versions kept: the current one and those the checkpoints refer to (a checkpoint at step 2n
    # is written before the refresh at step 2n, so it refers to version 2n - 2)
    refs = {json.loads(p.read_text())["refresh_cache_step"] for p in (full / "checkpoints").glob("step-*/state.json")}
    assert sorted(p.name for p in (full / "refresh_cache").iterdir()) == [f"step-{s}" for s in sorted(refs | {4})]

    # killed after step 5 (the checkpoint at step 4 uses version 2), resumed: same weights, same cache
    cut = tmp_path / "cut"
    train_killed_at(cfg, cut, 5)
    train(cfg, cut, resume=True, progress=False)
    assert_same_weights(full, cut)
    va, vb = (shard_arrays(load_shards(d / "refresh_cache" / "step-4" / "emb")[0])[0] for d in (full, cut))
    np.testing.assert_array_equal(va, vb)


def test_partial_reencode_rows_equal_a_fresh_encode(setup, tmp_path):
    from dpr_xrisk.retrieval.encode import encode_corpus, load_shards, shard_arrays
    from dpr_xrisk.train.mining import partial_reencode

    enc, _, _ = setup
    cache = tmp_path / "cache"
    partial_reencode(enc, CORPUS, cache, 0, None, 0, 0.5)
    old = np.array(shard_arrays(load_shards(cache / "step-0" / "emb")[0])[0])
    with torch.no_grad():
        for p in enc.passage_model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    emb, cursor, st = partial_reencode(enc, CORPUS, cache, 3, 0, 300, 0.5)  # rows 300..334, 0..132
    assert cursor == (300 + 168) % 335 and st["reencoded"] == 168
    new = shard_arrays(load_shards(emb)[0])[0]
    encode_corpus(enc, CORPUS, tmp_path / "fresh", progress=False)
    fresh = shard_arrays(load_shards(tmp_path / "fresh")[0])[0]
    rows = np.r_[300:335, 0:133]
    np.testing.assert_allclose(new[rows], fresh[rows], atol=1e-6)
    kept = np.setdiff1d(np.arange(335), rows)
    np.testing.assert_array_equal(new[kept], old[kept])
    assert st["stale_share"] == round(len(kept) / 335, 4) and st["max_staleness_steps"] == 3


def test_refresh_fraction_out_of_range_is_an_error():
    with pytest.raises(InputError, match=r"refresh_fraction must be in \(0, 1\], got 0"):
        TrainConfig(train=(TRAIN,), corpus=CORPUS, refresh_every=2, refresh_fraction=0)


def test_upcoming_refresh_mines_only_the_next_window_and_trains_the_same(tiny_model_dir, tmp_path):
    """refresh_questions = "upcoming": each refresh mines only the questions that the steps until
    the next refresh draw (two sets drawn 1:2, refreshes every 3 steps and every half epoch, so
    windows of 1, 2 and 3 steps). The pools those steps use are the ones "all" mines, so the run
    trains the same: the same losses step by step (up to float noise of other query batches)
    and a killed run resumes bit-exactly."""
    import dataclasses

    from dpr_xrisk.train.order import DataOrder, upcoming_rows

    base = TrainConfig(train=(TRAIN, TRAIN), train_weights=(1.0, 2.0), corpus=CORPUS, model=str(tiny_model_dir),
                       pooling="mean", normalize=True, batch_size=8, max_steps=11, lr=1e-3, warmup_ratio=0.0,
                       negatives="model", refresh_every=3, refresh_every_epochs=0.25, refresh_k=20, hard_negatives=2,
                       pool_sampler="softmax", save_every=2, precision="fp32")  # fp32: compared at 1e-4
    up = dataclasses.replace(base, refresh_questions="upcoming")
    train(base, tmp_path / "all", progress=False)
    train(up, tmp_path / "up", progress=False)
    logs = {name: [json.loads(l) for l in (tmp_path / name / "train_log.jsonl").read_text().splitlines()]
            for name in ("all", "up")}
    losses = {name: [r["loss"] for r in log if "loss" in r and "event" not in r] for name, log in logs.items()}
    assert len(losses["all"]) == 11 and np.allclose(losses["all"], losses["up"], rtol=1e-4, atol=1e-6)

    # 160 questions, 20 steps an epoch: refreshes at 0 (initial mining) and 3, 5, 6, 9, 10
    rec = {name: [json.loads(l) for l in (tmp_path / name / "refresh_log.jsonl").read_text().splitlines()]
           for name in ("all", "up")}
    assert [r["step"] for r in rec["up"]] == [0, 3, 5, 6, 9, 10] and {r["mined_questions"] for r in rec["all"]} == {160}
    # the replayed draws of each window, from the data order of a fresh run (the first window)
    weights = np.array([1.0, 2.0]) / 3
    first = upcoming_rows(DataOrder([80, 80], 8, base.seed), 2, weights, base.seed, 0, 3)
    assert rec["up"][0]["mined_questions"] == sum(map(len, first)) == 24
    assert all(0 < r["mined_questions"] <= 8 * 3 for r in rec["up"])

    train_killed_at(up, tmp_path / "cut", 7)
    train(up, tmp_path / "cut", resume=True, progress=False)
    assert_same_weights(tmp_path / "up", tmp_path / "cut")


def test_upcoming_rows_replays_the_training_draws():
    """upcoming_rows against a naive replay of the loop's draws, across an epoch boundary, and
    without moving the real data order."""
    from dpr_xrisk.train.order import DataOrder, upcoming_rows

    order = DataOrder([10, 7], 3, 5)
    weights = np.array([0.5, 0.5])
    for step in range(4):  # the run so far
        order.next(int(np.random.default_rng([5, step]).choice(2, p=weights)))
    before = order.state()
    got = upcoming_rows(order, 2, weights, 5, 4, 12)
    assert order.state() == before
    naive = [set(), set()]
    for step in range(4, 12):
        t = int(np.random.default_rng([5, step]).choice(2, p=weights))
        naive[t].update(order.next(t))
    assert got == [sorted(s) for s in naive] and all(got)


def test_unknown_refresh_questions_is_a_one_line_error(tiny_model_dir, tmp_path):
    with pytest.raises(InputError, match="unknown refresh_questions 'next'; valid: all, upcoming"):
        TrainConfig(train=(TRAIN,), corpus=CORPUS, refresh_every=2, refresh_questions="next")
    assert "unknown refresh_questions 'next'; valid: all, upcoming" in cli(
        "train", "--model", tiny_model_dir, "--train", TRAIN, "--corpus", CORPUS, "--out", tmp_path / "m",
        "--refresh-every", 2, "--refresh-questions", "next", code=2)
    assert not (tmp_path / "m" / "train_log.jsonl").exists()


# ---- the answer filter, computed once per run (train/answer_index.py) ------------------------
def _reference_filtered(hits, q, pos_tk, tkey, texts, removed, *, answers, skip_ranks, s_pos, margin):
    """The per-candidate filter as it was before the answer index: has_answer on every pair."""
    pool = []
    for rank, (d, sc) in enumerate(hits):
        if d in q.positives or tkey[d] in pos_tk:
            removed["positive"] += 1
        elif answers is not None and q.answers and has_answer(texts[d][1], q.answers):
            removed["answer"] += 1
        elif rank < skip_ranks:
            removed["rank"] += 1
        elif s_pos is not None and sc > (1 - margin) * s_pos:
            removed["margin"] += 1
        else:
            pool.append((d, sc))
    return pool


def test_answer_index_equals_has_answer_on_random_texts():
    from dpr_xrisk.train.answer_index import AnswerIndex

    rng = np.random.default_rng(0)
    vocab = ["the", "a", "Paris", "paris", "café", "cafe\u0301", "1,000", "U.S.", "-", "x", "y", "z", "Ölfarbe", "x-y"]

    def text(n):
        return " ".join(rng.choice(vocab, size=n))

    passages = {f"p{i}": text(int(rng.integers(0, 40))) for i in range(300)}
    questions = [[text(int(rng.integers(1, 4))) for _ in range(int(rng.integers(1, 4)))] for _ in range(200)]
    questions += [["  "], ["x", "\u200b"]]  # answers without a DPR token match every passage, as in has_answer
    index = AnswerIndex(questions)
    pairs = [(q, d) for q in questions for d in passages]
    for q, d in pairs:
        assert index.has_answer(d, passages[d], index.ids(q)) == has_answer(passages[d], q), (q, passages[d])
    assert sum(has_answer(passages[d], q) for q, d in pairs) > len(pairs) // 20  # both outcomes are tested
    late = AnswerIndex(questions[:5])  # an answer registered after passages were walked is still found
    for q, d in pairs[:2000]:
        assert late.has_answer(d, passages[d], late.ids(q)) == has_answer(passages[d], q)


def test_refresh_removes_the_same_candidates_as_the_per_pair_filter(setup, monkeypatch):
    from dpr_xrisk.train import mining
    from dpr_xrisk.train.answer_index import AnswerIndex

    enc, store, s = setup
    answers = AnswerIndex.of_sets([s])
    fast = [refresh_pools(enc, [s], store, CORPUS, k=30, skip_ranks=1, margin=0.2, answers=answers) for _ in range(2)]
    monkeypatch.setattr(mining, "_filtered", _reference_filtered)
    ref = refresh_pools(enc, [s], store, CORPUS, k=30, skip_ranks=1, margin=0.2)
    assert ref.stats["removed"]["answer"] > 0
    for res in fast:  # the second refresh reuses the passages the first one tokenised
        assert res.pools == ref.pools and res.stats["removed"] == ref.stats["removed"]

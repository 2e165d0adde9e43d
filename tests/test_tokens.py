"""The refresh corpus tokenised once (issue #13 item 2) and the refresh's --max-length override:
the cached word pieces equal the tokenizer's, encoding from them is bit-identical to encoding
from text, the cache is reused when nothing changed and rebuilt (with a notice) when the
tokenizer, the passage settings or the files change."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from conftest import SAMPLE, cli
from dpr_xrisk.retrieval.encode import encode_corpus, load_shards, shard_arrays
from dpr_xrisk.retrieval.encoder import DualEncoder
from dpr_xrisk.errors import InputError
from dpr_xrisk.io.passages import read_passages
from dpr_xrisk.retrieval.tokens import CorpusTokens
from dpr_xrisk.train.config import TrainConfig
from dpr_xrisk.train.refresh import partial_reencode, with_passage_length
from dpr_xrisk.train.trainer import train

TRAIN = str(SAMPLE / "biencoder-train.json")
CORPUS = str(SAMPLE / "passages.tsv")


@pytest.fixture()
def enc(tiny_model_dir):
    return DualEncoder.load(tiny_model_dir, pooling="mean", normalize=True, passage_max_length=48)


def vectors(folder):
    return np.array(shard_arrays(load_shards(folder)[0])[0])


def test_cached_tokens_are_the_tokenizers_own(enc, tmp_path):
    tokens = CorpusTokens.load_or_build(enc, CORPUS, tmp_path)
    ps = list(read_passages(CORPUS))
    ref = enc.tokenize_passages([p.title for p in ps], [p.text for p in ps], padding=False, return_tensors=None)
    assert tokens.count == len(ps) == 335
    got = tokens.rows(range(len(ps)))
    assert [r.tolist() for r in got["input_ids"]] == ref["input_ids"]
    assert [r.tolist() for r in got["token_type_ids"]] == ref["token_type_ids"]
    assert max(len(r) for r in got["input_ids"]) == 48  # truncated at the passage length
    rows = [7, 300, 2]  # any rows, in the order asked
    assert [r.tolist() for r in tokens.rows(rows)["input_ids"]] == [ref["input_ids"][i] for i in rows]


def test_encoding_from_cached_tokens_is_bit_identical(enc, tmp_path):
    tokens = CorpusTokens.load_or_build(enc, CORPUS, tmp_path / "tok")
    encode_corpus(enc, CORPUS, tmp_path / "text", progress=False, chunk_size=100)
    encode_corpus(enc, CORPUS, tmp_path / "tokens", progress=False, chunk_size=100, tokens=tokens)
    np.testing.assert_array_equal(vectors(tmp_path / "text"), vectors(tmp_path / "tokens"))
    ids = [(tmp_path / d / "ids-00000-of-00001.txt").read_text() for d in ("text", "tokens")]
    assert ids[0] == ids[1]
    # a shard of a sharded encode reads its own rows of the cache
    encode_corpus(enc, CORPUS, tmp_path / "s1", progress=False, shard_id=1, num_shards=2)
    encode_corpus(enc, CORPUS, tmp_path / "s1t", progress=False, shard_id=1, num_shards=2, tokens=tokens)
    a, b = (shard_arrays(load_shards(tmp_path / d, only=[1])[0])[0] for d in ("s1", "s1t"))
    np.testing.assert_array_equal(a, b)
    # the partial re-encode of the refresh: the same rows from tokens as from text
    for name, t in (("pt", None), ("pk", tokens)):
        partial_reencode(enc, CORPUS, tmp_path / name, 0, None, 0, 0.3, tokens=t)
        partial_reencode(enc, CORPUS, tmp_path / name, 2, 0, 250, 0.3, tokens=t)
    np.testing.assert_array_equal(vectors(tmp_path / "pt" / "step-2" / "emb"), vectors(tmp_path / "pk" / "step-2" / "emb"))


def test_cache_is_reused_and_rebuilt_when_stale(enc, tmp_path, monkeypatch, capsys):
    import dpr_xrisk.retrieval.tokens as T

    first = CorpusTokens.load_or_build(enc, CORPUS, tmp_path)
    calls = []
    real_build = T.build
    monkeypatch.setattr(T, "build", lambda *a, **k: (calls.append(1), real_build(*a, **k)))
    again = CorpusTokens.load_or_build(enc, CORPUS, tmp_path)
    assert calls == [] and again.folder == first.folder  # nothing changed: reused, not rebuilt
    # another passage length is another key: rebuilt, and the old folder removed
    short = CorpusTokens.load_or_build(with_passage_length(enc, 16), CORPUS, tmp_path)
    assert calls == [1] and short.folder != first.folder and not first.folder.exists()
    assert max(len(r) for r in short.rows(range(short.count))["input_ids"]) == 16
    # another corpus (same tokenizer) is another key too
    other = tmp_path / "other.tsv"
    other.write_text("id\ttext\ttitle\n" + "".join(f"p{i}\tsome text number {i}\tT{i}\n" for i in range(5)))
    assert CorpusTokens.load_or_build(enc, other, tmp_path / "o").count == 5
    # a damaged cache (arrays cut short, or meta.json garbage) is rebuilt with a one-line notice
    folder = CorpusTokens.load_or_build(enc, CORPUS, tmp_path).folder
    np.save(folder / "input_ids.npy", np.zeros(3, dtype=np.int32))
    capsys.readouterr()
    fixed = CorpusTokens.load_or_build(enc, CORPUS, tmp_path)
    assert "unreadable" in capsys.readouterr().err
    assert fixed.offsets[-1] == len(fixed.input_ids) > 3
    (folder / "meta.json").write_text("{not json")
    CorpusTokens.load_or_build(enc, CORPUS, tmp_path)
    assert "tokenising the corpus again" in capsys.readouterr().err
    assert json.loads((folder / "meta.json").read_text())["count"] == 335


def test_tokenizer_change_changes_the_key(enc, tiny_model_dir, tmp_path):
    from dpr_xrisk.retrieval.tokens import token_key, tokenizer_fingerprint

    lower = DualEncoder.load(tiny_model_dir, pooling="mean", normalize=True, passage_max_length=48)
    assert tokenizer_fingerprint(lower.tokenizer) == tokenizer_fingerprint(enc.tokenizer)
    lower.tokenizer.backend_tokenizer.normalizer = __import__("tokenizers").normalizers.BertNormalizer(lowercase=False)
    assert token_key(lower, "fp")[0] != token_key(enc, "fp")[0]
    assert token_key(with_passage_length(enc, 48), "fp")[0] == token_key(enc, "fp")[0]
    prefixed = DualEncoder.load(tiny_model_dir, passage_max_length=48, passage_prefix="passage: ")
    assert token_key(prefixed, "fp")[0] != token_key(enc, "fp")[0]


def test_refresh_tokenises_once_and_max_length_is_logged(tiny_model_dir, tmp_path, monkeypatch):
    import dpr_xrisk.retrieval.tokens as T

    calls = []
    real_build = T.build
    monkeypatch.setattr(T, "build", lambda *a, **k: (calls.append(1), real_build(*a, **k)))
    cfg = TrainConfig(train=(TRAIN,), corpus=CORPUS, model=str(tiny_model_dir), pooling="mean", normalize=True,
                      passage_max_length=64, batch_size=8, max_steps=4, lr=1e-3, warmup_ratio=0.0,
                      negatives="model", refresh_every=2, refresh_k=20, hard_negatives=1, refresh_max_length=24)
    train(cfg, tmp_path / "o", progress=False)
    log = [json.loads(l) for l in (tmp_path / "o" / "refresh_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [0, 2] and calls == [1]  # two refreshes, one tokenisation
    assert all(r["max_length"] == 24 and r["tokens_s"] >= 0 for r in log)
    meta = json.loads(next((tmp_path / "o" / "refresh_tokens").glob("tokens-*/meta.json")).read_text())
    assert meta["passage_max_length"] == 24 and meta["count"] == 335
    # the saved model keeps its inference length (the model's declared 256): the override is the refresh's alone
    assert DualEncoder.load(tmp_path / "o").settings.passage_max_length == 256


def test_refresh_max_length_below_two_is_an_error():
    with pytest.raises(InputError, match="refresh_max_length must be >= 2"):
        TrainConfig(train=(TRAIN,), corpus=CORPUS, refresh_every=2, refresh_max_length=1)


def test_mine_max_length_is_recorded(tiny_model_dir, tmp_path):
    out = tmp_path / "neg.jsonl"
    cli("mine", "--model", str(tiny_model_dir), "--train", TRAIN, "--corpus", CORPUS, "--out", str(out),
        "--k", "10", "--max-length", "16")
    assert json.loads((tmp_path / "neg.jsonl.meta.json").read_text())["max_length"] == 16
    cli("mine", "--model", str(tiny_model_dir), "--train", TRAIN, "--corpus", CORPUS, "--out", str(out),
        "--max-length", "1", code=2)


def test_only_the_encode_command_fixes_the_mmap_threshold(enc, tiny_model_dir, tmp_path, monkeypatch):
    """glibc's mmap threshold, once set, stays set for the process: set inside training (the
    refresh encodes its corpus with encode_corpus), every step's activations were mapped and
    unmapped afresh (13.5M vs 1.1M page faults, steps 2.7 s instead of 1.7 s on MiniLM). Only the
    ``encode`` command, a process of its own, bounds its heap that way."""
    import dpr_xrisk.retrieval.encode as E

    calls = []
    monkeypatch.setattr(E, "fix_mmap_threshold", lambda *a: calls.append(a))
    encode_corpus(enc, CORPUS, tmp_path / "plain", progress=False)
    assert calls == []
    encode_corpus(enc, CORPUS, tmp_path / "bounded", progress=False, bound_heap=True)
    assert len(calls) == 1
    calls.clear()
    cli("encode", "--model", tiny_model_dir, "--corpus", CORPUS, "--out", tmp_path / "cli", "--fp32")
    assert calls == [(E.MMAP_FAST,)]  # a small shard: the fast heap (git show 3ee76c0:eval/RESULTS.md, bench_heap)


def test_the_encode_heap_is_flat_for_long_shards_and_the_environment_overrides_it(monkeypatch):
    import dpr_xrisk.retrieval.encode as E

    monkeypatch.delenv("DPR_XRISK_MMAP_THRESHOLD", raising=False)
    assert E.mmap_threshold(E.FAST_HEAP_PASSAGES) == E.MMAP_FAST == 32 << 20
    assert E.mmap_threshold(E.FAST_HEAP_PASSAGES + 1) == E.MMAP_BOUNDED == 1 << 20
    monkeypatch.setenv("DPR_XRISK_MMAP_THRESHOLD", "0")  # glibc's own dynamic threshold: nothing set
    assert E.mmap_threshold(10) == 0
    monkeypatch.setenv("DPR_XRISK_MMAP_THRESHOLD", "4194304")
    assert E.mmap_threshold(10 ** 8) == 4 << 20
    for bad in ("lots", "-1"):
        monkeypatch.setenv("DPR_XRISK_MMAP_THRESHOLD", bad)
        with pytest.raises(InputError, match="DPR_XRISK_MMAP_THRESHOLD"):
            E.mmap_threshold(10)


def test_encode_refuses_a_bad_mmap_threshold_before_it_writes(tiny_model_dir, tmp_path):
    out = cli("encode", "--model", tiny_model_dir, "--corpus", CORPUS, "--out", tmp_path / "emb", "--fp32",
              code=2, env={"DPR_XRISK_MMAP_THRESHOLD": "32MiB"})
    assert "DPR_XRISK_MMAP_THRESHOLD must be a number of bytes" in out
    assert not list((tmp_path / "emb").glob("*.partial"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc thresholds")
@pytest.mark.skipif(not __import__("dpr_xrisk.runtime.device").runtime.device.cpu_has_native_bf16(),
                    reason="measured where bf16 runs natively (the refresh that warm_heap was made for)")
def test_warm_heap_keeps_batch_buffers_off_fresh_pages():
    """A fresh process maps (or trims) a BERT batch's activation buffers afresh and faults on each
    page; after warm_heap they are reused from the heap. Counted in minor page faults over ten
    bf16 forward passes of a random 2-layer MiniLM-shaped tower at 64 x 64 tokens (the refresh's
    batch), each in its own process; never in time."""
    import subprocess

    code = """
import resource, sys
import torch
from transformers import BertConfig, BertModel
from dpr_xrisk.retrieval.encode import warm_heap
if sys.argv[1] == "warm":
    warm_heap()
torch.manual_seed(0)
torch.set_num_threads(1)
cfg = BertConfig(vocab_size=1000, hidden_size=384, num_hidden_layers=2, num_attention_heads=12, intermediate_size=1536)
model = BertModel(cfg).eval().to(torch.bfloat16)
ids = torch.randint(0, 1000, (64, 64))
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
with torch.inference_mode():
    for _ in range(10):
        model(input_ids=ids, attention_mask=torch.ones_like(ids))
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
    faults = {m: int(subprocess.run([sys.executable, "-c", code, m], capture_output=True, text=True,
                                    check=True).stdout.split()[-1]) for m in ("cold", "warm")}
    assert faults["warm"] < faults["cold"] / 3, faults

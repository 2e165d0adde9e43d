"""Shared fixtures: a tiny random BERT with a WordPiece vocab built on the fly (offline, fast),
the bundled demo sample, and the real data in ../shared/data (skipped with a message if absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# the inference commands' unset --bf16/--fp32 is "auto", which picks bf16 on AMX/AVX512-BF16 CPUs:
# pinned to fp32 so that scores and fingerprints are the same on every CI machine (subprocesses
# inherit it); tests/test_precision_auto.py removes it where it tests auto itself
os.environ["DPR_XRISK_PRECISION"] = "fp32"

from hypothesis import settings as _hypothesis  # noqa: E402

# fuzzed readers (tests/test_fuzz.py): bounded in the normal suite, deeper with
# --hypothesis-profile=long (python -m eval run fuzz)
_hypothesis.register_profile("default", max_examples=40, deadline=None, derandomize=True)
_hypothesis.register_profile("long", max_examples=2000, deadline=None)
_hypothesis.load_profile("default")

import torch  # noqa: E402

# the tiny test models are fastest on one thread, and a busy machine oversubscribed by torch's
# thread pool can be many times slower
torch.set_num_threads(1)
import faiss  # noqa: E402

faiss.omp_set_num_threads(1)  # same reason: OpenMP spin-waiting on a busy machine is very slow

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
SHARED = Path(os.environ.get("DPR_XRISK_SHARED_DATA", ROOT.parent / "shared" / "data"))


def shared_path(*parts: str) -> Path:
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"real data not found at {p} (set DPR_XRISK_SHARED_DATA to ../shared/data)")
    return p


def wordpiece_vocab(texts: list[str], size: int) -> dict[str, int]:
    """A WordPiece vocab built from ``texts``, the same one in every process: the special tokens,
    every character seen (alone and as a ``##`` continuation) and then the most frequent words
    (ties by the word itself) up to ``size`` entries. tokenizers' WordPieceTrainer breaks count
    ties in Rust hash-map order, so it trains a different vocab in every process (seen: three
    sessions, three vocabs) and with it a different tiny model: a test could pass or fail with
    the session."""
    from collections import Counter

    from tokenizers import normalizers, pre_tokenizers

    norm, pre = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    counts = Counter(w for t in texts for w, _ in pre.pre_tokenize_str(norm.normalize_str(t)))
    chars = sorted({c for w in counts for c in w})
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *("##" + c for c in chars)]
    seen = set(tokens)
    tokens += [w for w, _ in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0])) if w not in seen]
    return {t: i for i, t in enumerate(tokens[:size])}


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer, 32-wide random BertModel and a WordPiece vocab built from the sample texts."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, BertTokenizerFast

    out = tmp_path_factory.mktemp("tiny-bert")
    corpus = [line for f in sorted(SAMPLE.glob("*.tsv")) for line in f.read_text().splitlines()]
    corpus += ["the quick brown fox jumps over the lazy dog"] * 10
    tok = Tokenizer(models.WordPiece(wordpiece_vocab(corpus, 2000), unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[(t, tok.token_to_id(t)) for t in ("[CLS]", "[SEP]")])
    fast = BertTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                             sep_token="[SEP]", mask_token="[MASK]")
    fast.save_pretrained(out)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=512)
    BertModel(cfg).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_encoder(tiny_model_dir):
    from dpr_xrisk.retrieval.encoder import DualEncoder

    return DualEncoder.load(tiny_model_dir, passage_max_length=64)


@pytest.fixture(scope="session")
def squad_dir(tmp_path_factory) -> Path:
    """SQuAD v1.1 dev converted to DPR formats (in a temp folder, never in the repository)."""
    from dpr_xrisk.io.convert import squad_to_dpr

    src = shared_path("squad-v1.1-dev", "dev-v1.1.json")
    out = tmp_path_factory.mktemp("squad")
    squad_to_dpr(src, out, test_fraction=0.25, seed=0)
    return out


@pytest.fixture(scope="session")
def squad_bm25(squad_dir, tmp_path_factory):
    """A real BM25 run (pyserini) of SQuAD's held-out questions over all its paragraphs:
    returns (run, questions, passage texts)."""
    from dpr_xrisk.retrieval.bm25 import bm25_search, build_bm25_index
    from dpr_xrisk.io.questions import read_questions
    from dpr_xrisk.retrieval.search import load_passage_texts

    index = build_bm25_index(squad_dir / "passages.tsv", tmp_path_factory.mktemp("bm25") / "idx")
    questions = read_questions(squad_dir / "test.qa.tsv")[:800]  # enough for the references, quick
    run = bm25_search(index, questions, k=100, progress=False)
    return run, questions, load_passage_texts(squad_dir / "passages.tsv")


def cli(*args, code: int = 0, stdin: str | None = None, env: dict | None = None) -> str:
    """Run ``dpr-xrisk ARGS`` in-process; assert the exit code and that no traceback was printed;
    return what it printed (stdout and stderr)."""
    from typer.testing import CliRunner

    from dpr_xrisk.cli import app

    r = CliRunner().invoke(app, [str(a) for a in args], input=stdin, env=env)
    assert r.exit_code == code, r.output + repr(r.exception)
    assert "Traceback" not in r.output
    return r.output


def train_killed_at(cfg, out, step: int) -> None:
    """``train(cfg, out)`` stopped by a KeyboardInterrupt right after step ``step`` (what a kill
    leaves: the checkpoints written so far); asserts that it was stopped."""
    from dpr_xrisk.train.trainer import train

    def die(done):
        if done == step:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(cfg, out, progress=False, on_step=die)


def assert_same_weights(a, b) -> None:
    """The two model folders hold bit-identical weights."""
    import torch

    from dpr_xrisk.retrieval.encoder import DualEncoder

    wa, wb = (DualEncoder.load(d).state_dict() for d in (a, b))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)

"""eval/stats_lengths.py's answer position against a naive check: tokenise the passage truncated at
L word pieces, as the encoder does, and look for the answer's word pieces in what is left."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "eval"))

import stats_lengths  # noqa: E402

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample" / "passages.tsv"


def _contains(seq: list[int], sub: list[int]) -> bool:
    return any(seq[i:i + len(sub)] == sub for i in range(len(seq) - len(sub) + 1))


def test_answer_end_matches_truncation(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    with open(SAMPLE, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))[:20]
    checked = cut = 0
    for r in rows:
        words = r["text"].split()
        # plain words at spread positions whose first occurrence in the text is a whole word
        for w in words[5::7]:
            first = r["text"].find(w)
            after = r["text"][first + len(w):first + len(w) + 1]
            if not w.isalpha() or (first > 0 and r["text"][first - 1] != " ") or (after and after.isalnum()):
                continue
            n, end = stats_lengths.answer_end_token(tok, r["title"], r["text"], [w])
            joined = f"{r['title']} {r['text']}"
            assert end is not None and n == len(tok(joined)["input_ids"])
            # the naive rule: the answer's pieces (as they tokenise in context) inside the truncated ids
            prefix = tok(f"{r['title']} {r['text'][:first + len(w)]}", add_special_tokens=False)["input_ids"]
            assert end == len(prefix) + 1  # + [CLS]
            for L in (8, 16, 24, 32, 48, 64):
                kept = tok(joined, max_length=L, truncation=True)["input_ids"]
                visible = len(kept) - 1 >= end  # positions 1..len-2 are text; end is 1-based from [CLS]
                assert visible == (end <= L - 1), (w, L, end)
                # and the truncated ids then hold the whole prefix up to the answer's end
                assert _contains(kept, prefix) == visible, (w, L, end)
                cut += not visible
            checked += 1
    assert checked >= 20 and cut > 0  # answers both inside and past the cut-offs were checked


def test_answer_not_in_passage_and_earliest_answer(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = "the quick brown fox jumps over the lazy dog near the river"
    n, end = stats_lengths.answer_end_token(tok, "fox", text, ["zebra"])
    assert end is None and n == len(tok(f"fox {text}")["input_ids"])
    # of two answers the earlier occurrence counts; the title is not searched ("fox" is the title too)
    _, e1 = stats_lengths.answer_end_token(tok, "fox", text, ["river", "quick"])
    _, e2 = stats_lengths.answer_end_token(tok, "fox", text, ["quick"])
    assert e1 == e2 == len(tok("fox the quick", add_special_tokens=False)["input_ids"]) + 1
    _, e3 = stats_lengths.answer_end_token(tok, "fox", text, ["fox"])
    assert e3 == len(tok("fox the quick brown fox", add_special_tokens=False)["input_ids"]) + 1

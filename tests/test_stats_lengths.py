"""The SQuAD protocol's length statistic (eval/squad.py, `python -m eval lengths`): the answer position against a naive check: tokenise the passage truncated at
L word pieces, as the encoder does, and look for the answer's word pieces in what is left."""

from __future__ import annotations

import csv
from pathlib import Path

from eval import squad

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
            n, end = squad.answer_end_token(tok, r["title"], r["text"], [w])
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
    n, end = squad.answer_end_token(tok, "fox", text, ["zebra"])
    assert end is None and n == len(tok(f"fox {text}")["input_ids"])
    # of two answers the earlier occurrence counts; the title is not searched ("fox" is the title too)
    _, e1 = squad.answer_end_token(tok, "fox", text, ["river", "quick"])
    _, e2 = squad.answer_end_token(tok, "fox", text, ["quick"])
    assert e1 == e2 == len(tok("fox the quick", add_special_tokens=False)["input_ids"]) + 1
    _, e3 = squad.answer_end_token(tok, "fox", text, ["fox"])
    assert e3 == len(tok("fox the quick brown fox", add_special_tokens=False)["input_ids"]) + 1


def test_main_missing_train_file_says_how_to_make_it(tmp_path):
    import pytest

    with pytest.raises(SystemExit) as e:
        squad.lengths(tmp_path / "train.json", tmp_path / "o.json")
    assert "train.json is missing" in str(e.value) and "python -m eval run squad" in str(e.value)


def test_main_counts_records_without_positive_and_refuses_malformed(tmp_path, tiny_model_dir):
    import json

    import pytest
    from transformers import AutoTokenizer

    from dpr_xrisk.errors import InputError

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = " ".join(["alpha"] * 40 + ["omega"])  # the answer is the last word: past short cut-offs
    recs = [{"question": "q1", "answers": ["omega"], "positive_ctxs": [{"title": "t", "text": text}]},
            {"question": "q2", "answers": ["omega"], "positive_ctxs": []},
            {"question": "q3", "answers": ["zulu"], "positive_ctxs": [{"title": "t", "text": "short text"}]}]
    train = tmp_path / "train.json"
    train.write_text(json.dumps(recs))
    out = squad.lengths(train, tmp_path / "o.json", tokenizer=tok)
    assert (out["records"], out["no_positive"], out["questions"], out["answer_not_found"]) == (3, 1, 2, 1)
    n1, end1 = squad.answer_end_token(tok, "t", text, ["omega"])
    n3 = len(tok("t short text")["input_ids"])
    for r in out["rows"]:  # denominators: the 2 usable questions, not the 3 records
        L = r["max_length"]
        assert r["positives_longer"] == ((n1 > L) + (n3 > L)) / 2
        assert r["answer_cut_off"] == (end1 > L - 1) / 2
    assert json.loads((tmp_path / "o.json").read_text()) == out
    # every record without a positive: a clear exit, not a division by zero
    train.write_text(json.dumps([recs[1]]))
    with pytest.raises(SystemExit, match="none of its 1 records has a positive"):
        squad.lengths(train, tmp_path / "o.json", tokenizer=tok)
    # a malformed record stops with its number (the toolkit's reader validates it)
    train.write_text(json.dumps([{"answers": ["x"], "positive_ctxs": []}]))
    with pytest.raises(InputError, match="record 0"):
        squad.lengths(train, tmp_path / "o.json", tokenizer=tok)

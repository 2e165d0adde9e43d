"""How much of each positive the training length lets the model see (issue #17 item 0, "training
vs inference lengths"): for every training question of bench_full's split, the word-piece length
of its positive passage as the encoder tokenises it (title joined to the text, MiniLM's
tokenizer) and the position of the word piece where the answer ends, at each cut-off length.

    python eval/stats_lengths.py            # after eval/bench_full.py has prepared its data

Prints a Markdown table (and writes eval/results/stats_lengths.json): the share of positives
longer than L word pieces and the share of training questions whose answer ends past the L-th
(the model trained at L sees that positive without the answer). Seconds; no model weights run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS, WORK  # noqa: E402

LENGTHS = (64, 128, 192, 256, 384)


def answer_end_token(tok, title: str, text: str, answers) -> tuple[int, int | None]:
    """(word pieces of the passage with [CLS]/[SEP], 1-based position of the word piece where the
    earliest occurrence of any answer ends, or None where no answer string occurs in the text)."""
    joined = f"{title} {text}" if title else text
    enc = tok(joined, return_offsets_mapping=True, truncation=False)
    n = len(enc["input_ids"])
    starts = [(joined.find(a, len(title) + 1 if title else 0), a) for a in answers]
    starts = [(s, a) for s, a in starts if s >= 0]
    if not starts:
        return n, None
    s, a = min(starts)
    e = s + len(a)
    last = max(i for i, (o0, o1) in enumerate(enc["offset_mapping"]) if o1 > o0 and o0 < e)
    return n, last + 1  # positions count [CLS]; a cut-off of L keeps positions 1..L-1 and the final [SEP]


def main(argv: list[str] | None = None, tokenizer=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", type=Path, default=WORK / "full" / "train.json")
    ap.add_argument("--out", type=Path, default=RESULTS / "stats_lengths.json")
    args = ap.parse_args(argv)
    if not args.train.exists():
        sys.exit(f"{args.train} is missing: run eval/bench_full.py first (it prepares the split)")
    from dpr_xrisk.io.biencoder import read_biencoder

    tok = tokenizer
    if tok is None:
        from transformers import AutoTokenizer

        from dpr_xrisk.retrieval.encoder import resolve_model_path
        tok = AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    data = read_biencoder(args.train)  # validated: a malformed record stops here with its number
    # records without a positive are not trained on (the trainer's default no_positive = "skip"):
    # left out of the statistic and counted, never a share of a smaller denominator unannounced
    usable = [rec for rec in data if rec["positive_ctxs"]]
    no_positive = len(data) - len(usable)
    if not usable:
        sys.exit(f"{args.train}: none of its {len(data)} records has a positive passage")
    lens, ends, missing = [], [], 0
    for rec in usable:
        p = rec["positive_ctxs"][0]
        n, end = answer_end_token(tok, p.get("title", ""), p["text"], rec["answers"])
        lens.append(n)
        if end is None:
            missing += 1
        else:
            ends.append(end)
    lens, ends = np.array(lens), np.array(ends)
    # a cut-off of L word pieces keeps positions 1..L-1 of the text ([CLS] first, [SEP] last)
    rows = [{"max_length": L, "positives_longer": float((lens > L).mean()),
             "answer_cut_off": float((ends > L - 1).sum() / len(lens))} for L in LENGTHS]
    out = {"train": args.train.name, "records": len(data), "no_positive": no_positive,
           "questions": len(lens), "answer_not_found": missing, "median_length": float(np.median(lens)),
           "mean_length": float(lens.mean()), "rows": rows}
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"{len(lens)} training questions ({no_positive} of {len(data)} records without a positive left out); "
          f"positive length (word pieces, title joined): median "
          f"{np.median(lens):.0f}, mean {lens.mean():.1f}; answer string not in the positive: {missing}\n")
    print("| training max length | positives longer | answers ending past the cut-off |\n|---:|---:|---:|")
    for r in rows:
        print(f"| {r['max_length']} | {100 * r['positives_longer']:.1f} % | {100 * r['answer_cut_off']:.1f} % |")
    return out


if __name__ == "__main__":
    main()

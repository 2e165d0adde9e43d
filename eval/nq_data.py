"""Rebuild the NQ benchmark's inputs from ../shared/data (never committed: only this rule is).

    python eval/nq_data.py [--shared ../shared/data] [--out eval/work/nq-data] [--distractors 20000]

The rule (seed 0, numpy default_rng):
- the 2,024 questions of ``nq-open-train/train.json`` are split **by gold passage**: the distinct
  passage ids, sorted, are shuffled by default_rng(0); the first 20 % (rounded down) are dev
  passages, and every question whose positive is a dev passage is a dev question. No dev
  question's passage is a training positive.
- the search corpus holds every NQ gold passage (training positives included: they are the hubs a
  real corpus has), the 2,067 SQuAD v1.1 dev paragraphs (ids ``squad{i}`` in file order) and
  ``--distractors`` passages of ``wikipedia-100k`` (a default_rng(0) sample of its rows, kept in file
  order; 100000 = all of them).

Writes ``train.json`` (DPR biencoder, no negatives), ``dev.qa.tsv`` (DPR QA: question, JSON answer
list; ids are line numbers) and ``corpus-<N>.tsv`` (DPR passages), plus ``split.json`` with the
counts and the SHA-256 of every file, checked on every rebuild: the same rule gives the same files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEV_SHARE = 0.2
SEED = 0


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _clean(s: str) -> str:
    return " ".join(s.replace("\t", " ").split())


def _tsv(path: Path) -> list[list[str]]:
    """DPR passage rows, split on tabs only (texts hold quotes, which csv would read as quoting)."""
    rows = [line.rstrip("\n").split("\t") for line in open(path, encoding="utf-8")]
    bad = [i + 1 for i, r in enumerate(rows) if len(r) != 3]
    if bad:
        raise SystemExit(f"error: {path}: line {bad[0]} does not have 3 tab-separated fields")
    return rows


def split(records: list[dict]) -> tuple[list[dict], list[dict]]:
    """(train, dev) records, split by the positive passage id (the rule in the module doc)."""
    for i, r in enumerate(records):
        if len(r.get("positive_ctxs") or []) != 1 or not r["positive_ctxs"][0].get("passage_id"):
            raise SystemExit(f"error: record {i}: expected exactly one positive with a passage_id")
    pids = sorted({r["positive_ctxs"][0]["passage_id"] for r in records})
    order = np.random.default_rng(SEED).permutation(len(pids))
    dev_ids = {pids[i] for i in order[: int(len(pids) * DEV_SHARE)]}
    train = [r for r in records if r["positive_ctxs"][0]["passage_id"] not in dev_ids]
    dev = [r for r in records if r["positive_ctxs"][0]["passage_id"] in dev_ids]
    assert not {r["positive_ctxs"][0]["passage_id"] for r in train} & dev_ids
    return train, dev


def build(shared: Path, out: Path, distractors: int) -> dict:
    nq = shared / "nq-open-train"
    records = json.loads((nq / "train.json").read_text(encoding="utf-8"))
    if len(records) != 2024:
        raise SystemExit(f"error: {nq / 'train.json'}: {len(records)} records, expected 2,024")
    train, dev = split(records)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.json").write_text(json.dumps([
        {"question": r["question"], "answers": r["answers"], "positive_ctxs": r["positive_ctxs"],
         "negative_ctxs": [], "hard_negative_ctxs": []} for r in train]), encoding="utf-8")
    with open(out / "dev.qa.tsv", "w", encoding="utf-8", newline="") as f:
        for r in dev:
            f.write(f"{_clean(r['question'])}\t{json.dumps(r['answers'], ensure_ascii=False)}\n")
    squad = json.loads((shared / "squad-v1.1-dev" / "dev-v1.1.json").read_text(encoding="utf-8"))
    paragraphs = [(a["title"].replace("_", " "), p["context"]) for a in squad["data"] for p in a["paragraphs"]]
    wiki = _tsv(shared / "wikipedia-100k" / "psgs.tsv")
    header, wiki = wiki[0], wiki[1:]
    if header != ["id", "text", "title"] or len(wiki) != 100_000:
        raise SystemExit(f"error: wikipedia-100k/psgs.tsv: header {header}, {len(wiki)} rows")
    keep = np.sort(np.random.default_rng(SEED).choice(len(wiki), size=min(distractors, len(wiki)), replace=False))
    corpus = out / f"corpus-{distractors // 1000}k.tsv"
    n = 0
    with open(corpus, "w", encoding="utf-8", newline="") as f:
        f.write("id\ttext\ttitle\n")
        for row in _tsv(nq / "psgs.tsv"):
            if row[0] != "id":
                f.write(f"{row[0]}\t{_clean(row[1])}\t{_clean(row[2])}\n")
                n += 1
        for i, (title, text) in enumerate(paragraphs):
            f.write(f"squad{i}\t{_clean(text)}\t{_clean(title)}\n")
        for i in keep:
            pid, text, title = wiki[i]
            f.write(f"{pid}\t{_clean(text)}\t{_clean(title)}\n")
    info = {"rule": "by gold passage, default_rng(0), 20 % dev", "train_questions": len(train),
            "dev_questions": len(dev), "nq_passages": n, "squad_paragraphs": len(paragraphs),
            "wiki_distractors": int(len(keep)), "corpus_passages": n + len(paragraphs) + int(len(keep)),
            "sha256": {p.name: _sha(p) for p in (out / "train.json", out / "dev.qa.tsv", corpus)}}
    return info


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=ROOT / "eval" / "work" / "nq-data")
    ap.add_argument("--distractors", type=int, default=20_000)
    args = ap.parse_args(argv)
    info = build(args.shared, args.out, args.distractors)
    record = args.out / f"split-{args.distractors // 1000}k.json"
    if record.exists():
        old = json.loads(record.read_text())
        if old["sha256"] != info["sha256"]:
            raise SystemExit(f"error: {record}: the rebuilt files differ from the recorded ones")
    record.write_text(json.dumps(info, indent=2) + "\n")
    print(json.dumps(info, indent=2))
    return info


if __name__ == "__main__":
    sys.exit(main() and 0)

"""Zero-shot baseline on SQuAD v1.1 dev: BM25 vs MiniLM (dense) vs hybrid (RRF, interpolation).

Data: ``dpr-xrisk convert squad --test-fraction 0.25 --seed 0`` of
../shared/data/squad-v1.1-dev/dev-v1.1.json (split by article; the TEST split's questions are
evaluated -- the split later training benchmarks use). Corpus = all 2,067 SQuAD paragraphs +
the first N passages of ../shared/data/wikipedia-100k/psgs.tsv as distractors (``--wiki N``,
default 20,000: encoding all 102k with MiniLM on 2 CPU cores takes well over an hour; rerun
with ``--wiki 100000`` for the full pool). Everything derived (the converted SQuAD
included) lives in eval/work/squad-zs/.

Every stage runs the real CLI as a subprocess and is timed: ``convert squad``, ``bm25 index``,
``bm25 search``, ``encode`` (packaged all-MiniLM-L6-v2, fp32 unless ``--bf16``), ``index``
(Flat, exact), ``search`` (dense), ``search --bm25-index --fusion rrf`` and ``--fusion
interpolation --alpha A`` (hybrids, 1000 candidates per side), ``evaluate`` (DPR top-1/5/20/100
answer accuracy from the retrieval JSONs, and recall/MRR/nDCG@10/100 from test.qrels.tsv, whose
only relevant passage per question is its SQuAD paragraph; answer matching also counts
Wikipedia passages that contain the answer).

    python eval/bench_squad_zeroshot.py [--wiki 20000] [--bf16] [--alpha 0.5] [--batch-size 64]
    python eval/bench_squad_zeroshot.py --wiki 100000 --reuse-prefix eval/work/squad-zs/wiki20000/emb
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import SHARED, WIKI, WORK, save  # noqa: E402

CLI = str(Path(sys.executable).parent / "dpr-xrisk")
SQUAD = SHARED / "squad-v1.1-dev" / "dev-v1.1.json"


def stage(name: str, args: list, times: dict, skip_if: Path | None = None) -> None:
    """Run ``dpr-xrisk <args>``, time it, stream its output to our log."""
    if skip_if is not None and skip_if.exists():
        print(f"[{name}] reusing {skip_if}", flush=True)
        times[name] = None
        return
    cmd = [CLI, *map(str, args)]
    print(f"[{name}] $ {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    times[name] = round(time.perf_counter() - t0, 1)
    print(f"[{name}] {times[name]} s", flush=True)


def combined_corpus(squad_passages: Path, n_wiki: int, out: Path) -> Path:
    """SQuAD paragraphs + the first n_wiki Wikipedia passages, one DPR passages TSV."""
    if not out.exists():
        tmp = out.with_suffix(".partial")
        with open(tmp, "w", encoding="utf-8") as g:
            with open(squad_passages, encoding="utf-8") as f:
                g.writelines(f)  # with its header
            with open(WIKI, encoding="utf-8") as f:
                next(f)  # header
                g.writelines(itertools.islice(f, n_wiki))
        os.replace(tmp, out)
    return out


def encode_with_prefix(prefix: Path, corpus: Path, emb: Path, batch_size: int, times: dict) -> None:
    """Encode ``corpus`` reusing a finished embeddings folder of a prefix of it (e.g. --wiki 20000's
    22,067 passages are the first rows of --wiki 100000's corpus): only the remaining passages are
    encoded (same model, fp32), then the two parts are joined into one ordinary embeddings folder.
    The prefix's ids must equal the corpus's first ids, in order (checked)."""
    import numpy as np

    from dpr_xrisk.retrieval.encode import corpus_fingerprint, load_shards, shard_arrays
    from dpr_xrisk.io.passages import count_passages, read_passages

    if (emb / "meta-00000-of-00001.json").exists():
        times["encode"] = None
        return
    head_meta = load_shards(prefix)[0]
    head_vecs, head_ids = shard_arrays(head_meta)
    n_head = len(head_ids)
    ids = [p.id for p in itertools.islice(read_passages(corpus), n_head)]
    if ids != head_ids:
        raise SystemExit(f"{prefix} is not an encoding of the first {n_head} passages of {corpus}")
    tail = corpus.with_name(corpus.stem + f"-from{n_head}.tsv")
    if not tail.exists():
        with open(corpus, encoding="utf-8") as f, open(tail, "w", encoding="utf-8") as g:
            g.write(next(f))  # header
            g.writelines(itertools.islice(f, n_head, None))
    tail_emb = emb.with_name(emb.name + "-tail")
    stage("encode", ["encode", "--model", "minilm", "--corpus", tail, "--out", tail_emb, "--threads", 2,
                     "--batch-size", batch_size, "--fp32"], times, skip_if=tail_emb / "meta-00000-of-00001.json")
    tail_meta = load_shards(tail_emb)[0]
    if tail_meta["fingerprint"] != head_meta["fingerprint"]:
        raise SystemExit("the prefix was encoded with another model")
    tail_vecs, tail_ids = shard_arrays(tail_meta)
    emb.mkdir(parents=True, exist_ok=True)
    np.save(emb / "embeddings-00000-of-00001.npy", np.concatenate([head_vecs, tail_vecs]))
    (emb / "ids-00000-of-00001.txt").write_text("".join(i + "\n" for i in head_ids + tail_ids), encoding="utf-8")
    total = count_passages(corpus)
    meta = {k: v for k, v in tail_meta.items() if k != "_path"} | {
        "count": total, "range": [0, total], "corpus": str(corpus), "corpus_size": total,
        "corpus_fingerprint": corpus_fingerprint(corpus), "seconds": tail_meta["seconds"],
        "encoded_here": len(tail_ids),  # seconds cover only these (the prefix was encoded earlier)
        "joined_from": [str(prefix), str(tail_emb)]}
    (emb / "meta-00000-of-00001.json").write_text(json.dumps(meta))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wiki", type=int, default=20_000, help="Wikipedia distractor passages (first N of 100k)")
    ap.add_argument("--bf16", action="store_true", help="encode with bfloat16 autocast")
    ap.add_argument("--alpha", type=float, default=0.5, help="BM25 weight of the interpolation hybrid")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--reuse-prefix", type=Path, help="finished embeddings folder of a prefix of this corpus "
                    "(e.g. eval/work/squad-zs/wiki20000/emb): only the other passages are encoded")
    args = ap.parse_args()

    w = WORK / "squad-zs"
    squad = w / "squad"  # our own copy: other benchmarks write eval/work/squad
    tag = f"wiki{args.wiki}" + ("-bf16" if args.bf16 else "")
    runs = w / tag
    runs.mkdir(parents=True, exist_ok=True)
    times: dict = {}
    stage("convert", ["convert", "squad", "--input", SQUAD, "--out", squad, "--test-fraction", "0.25", "--seed", "0"],
          times, skip_if=squad / "test.qrels.tsv")
    corpus = combined_corpus(squad / "passages.tsv", args.wiki, w / f"corpus-wiki{args.wiki}.tsv")
    qa, qrels = squad / "test.qa.tsv", squad / "test.qrels.tsv"
    bm25 = w / f"bm25-wiki{args.wiki}"
    stage("bm25 index", ["bm25", "index", "--corpus", corpus, "--out", bm25], times, skip_if=bm25 / "meta.json")
    stage("bm25 search", ["bm25", "search", "--index", bm25, "--queries", qa, "--k", 100,
                          "--out-json", runs / "bm25.json"], times,
          skip_if=runs / "bm25.json")
    emb = runs / "emb"
    if args.reuse_prefix and not args.bf16:
        encode_with_prefix(args.reuse_prefix, corpus, emb, args.batch_size, times)
    else:
        stage("encode", ["encode", "--model", "minilm", "--corpus", corpus, "--out", emb, "--threads", 2,
                         "--batch-size", args.batch_size, "--bf16" if args.bf16 else "--fp32"], times,
              skip_if=emb / "meta-00000-of-00001.json")
    idx = runs / "index-flat"
    stage("index", ["index", "--embeddings", emb, "--out", idx, "--overwrite"], times)
    common = ["search", "--index", idx, "--queries", qa, "--k", 100] + (["--bf16"] if args.bf16 else [])
    stage("dense search", common + ["--out-json", runs / "dense.json"], times, skip_if=runs / "dense.json")
    # hybrids: search --bm25-index fuses the top-1000 of each (its --depth), not the top-100 runs
    stage("hybrid rrf", common + ["--bm25-index", bm25, "--fusion", "rrf", "--out-json", runs / "hybrid-rrf.json"], times,
          skip_if=runs / "hybrid-rrf.json")
    stage("hybrid interpolation", common + ["--bm25-index", bm25, "--fusion", "interpolation", "--alpha", args.alpha,
                                            "--out-json", runs / "hybrid-interp.json"], times,
          skip_if=runs / "hybrid-interp.json")
    names = ["bm25", "dense", "hybrid-rrf", "hybrid-interp"]
    stage("evaluate", ["evaluate", *itertools.chain.from_iterable(("--run", runs / f"{n}.json") for n in names),
                       "--qrels", qrels, "--out", runs / "eval.json"], times)

    results = json.loads((runs / "eval.json").read_text())["results"]
    meta = json.loads((emb / "meta-00000-of-00001.json").read_text())
    n_q = sum(1 for _ in open(qa, encoding="utf-8"))
    n_psg = sum(1 for _ in open(corpus, encoding="utf-8")) - 1
    n_enc = meta.get("encoded_here", n_psg)
    print(f"\n{n_q} test questions, {n_psg} passages (2,067 SQuAD + {args.wiki} Wikipedia), "
          f"encode {'bf16' if args.bf16 else 'fp32'} {n_enc} passages in {meta['seconds']:.0f} s "
          f"({n_enc / meta['seconds']:.1f} psg/s)")
    cols = ["top1", "top5", "top20", "top100", "mrr@10", "recall@100"]
    print(f"{'system':14s} " + " ".join(f"{c:>10s}" for c in cols))
    table = {}
    for name, r in zip(names, results):
        table[name] = r["metrics"]
        print(f"{name:14s} " + " ".join(f"{r['metrics'][c]:10.4f}" for c in cols))
    print("stage seconds: " + ", ".join(f"{k} {v}" for k, v in times.items()))
    save("bench_squad_zeroshot", {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "questions": n_q, "passages": n_psg,
                                  "encode_seconds": meta["seconds"], "encoded_passages": n_enc,
                                  "encode_psg_per_s": n_enc / meta["seconds"],
                                  "stage_seconds": times, "metrics": table})


if __name__ == "__main__":
    main()

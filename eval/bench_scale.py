"""Index build, search and memory at 10k/22k/100k real passages and 100k/1M synthetic vectors (eval/SCALE.md).

What: for each corpus size N and FAISS index type, the build time (train + add), the index's
memory (``len(faiss.serialize_index)``, what a loaded index occupies), search queries/s at k = 100
(DPR's depth) for 1,000 queries, and recall@10 against exact search. Real vectors: the packaged
all-MiniLM-L6-v2 embeddings of 2,067 SQuAD paragraphs + the first 20,000 Wikipedia passages
(eval/work/squad-zs/wiki20000/emb, written by ``python eval/bench_squad_zeroshot.py --wiki 20000``),
queried with 1,000 SQuAD test questions; N = 10,000 is their first 10,000 rows. Synthetic vectors:
bench_search.py's 384-dim Gaussian mixture (1,024 components, L2-normalised), N = 100k and 1M.
Once ``bench_squad_zeroshot.py --wiki 100000`` has run, the real vectors come from its 102,067
passages (eval/work/squad-zs/wiki100000/emb) and N = 100,000 is measured on real vectors too.
Index types: exact ``Flat``; ``HNSW32`` (efSearch 128) and the memory-lean ``HNSW32,SQ8``
(N <= 100k: HNSW's build time on 2 cores at 1M is extrapolated in SCALE.md, not measured);
``IVF{c},PQ64`` (c = 4·sqrt(N) rounded to a power of two, nprobe 16) and ``IVF{c},SQ8``.

How: rows are appended to eval/results/bench_scale.json as they finish and a rerun skips finished
(N, index) rows, so the command resumes. FAISS threads: 2.

    python eval/bench_scale.py [--real-sizes 10000 22067 100000] [--synthetic-sizes 100000 1000000]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from _common import RESULTS, WORK, median, save  # noqa: E402
from bench_search import build_and_measure, mixture, write_embeddings_folder  # noqa: E402

REAL_DIRS = [WORK / "squad-zs" / "wiki100000" / "emb", WORK / "squad-zs" / "wiki20000" / "emb"]  # the first that exists
QUESTIONS = WORK / "squad-zs" / "squad" / "test.qa.tsv"


def factories(n: int) -> list[tuple[str, dict]]:
    c = 2 ** round(math.log2(4 * math.sqrt(n)))
    out = [("Flat", {})]
    if n <= 100_000:
        out += [("HNSW32", {"ef_search": 128}), ("HNSW32,SQ8", {"ef_search": 128})]
    out += [(f"IVF{c},PQ64", {"nprobe": 16}), (f"IVF{c},SQ8", {"nprobe": 16})]
    return out


def real_vectors(n: int, n_q: int):
    from dpr_xrisk.retrieval.encode import load_shards, shard_arrays
    from dpr_xrisk.retrieval.encoder import DualEncoder
    from dpr_xrisk.io.questions import read_questions

    real = next((d for d in REAL_DIRS if (d / "meta-00000-of-00001.json").exists()), None)
    if real is None:
        raise SystemExit("no real embeddings: run eval/bench_squad_zeroshot.py first (see the docstring)")
    vecs, _ = shard_arrays(load_shards(real)[0])
    if n > len(vecs):
        raise SystemExit(f"only {len(vecs)} real vectors in {real}")
    cache = WORK / "bench_scale" / "real_queries.npy"
    if not cache.exists():
        qs = [q.text for q in read_questions(QUESTIONS)][:n_q]
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, DualEncoder.load("minilm").encode_queries(qs, batch_size=128))
    return np.ascontiguousarray(vecs[:n], dtype=np.float32), np.load(cache)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--real-sizes", type=int, nargs="*", default=[10_000, 22_067, 100_000])
    ap.add_argument("--synthetic-sizes", type=int, nargs="*", default=[100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()

    import faiss
    import torch

    torch.set_num_threads(2)
    faiss.omp_set_num_threads(2)
    from dpr_xrisk.retrieval.index import set_search_params

    done_path = RESULTS / "bench_scale.json"
    done = {(r["n"], r["vectors"], r["factory"]) for r in json.loads(done_path.read_text())} if done_path.exists() else set()
    for n, real in [(n, True) for n in args.real_sizes] + [(n, False) for n in args.synthetic_sizes]:
        kind = "real MiniLM" if real else "synthetic mixture"
        todo = [(f, p) for f, p in factories(n) if (n, kind, f) not in done]
        if not todo:
            continue
        if real:
            x, q = real_vectors(n, args.queries)
        else:
            x, q = mixture(n, args.queries, 384, 1024, 0)
        emb = write_embeddings_folder(x, WORK / "bench_scale" / "emb")
        flat = faiss.IndexFlatIP(x.shape[1])
        flat.add(x)
        _, exact = flat.search(q, 10)  # the reference for recall@10
        del flat, x
        for factory, params in todo:
            index, meta, wall, size = build_and_measure(emb, WORK / "bench_scale" / factory.replace(",", "_"), factory)
            set_search_params(index, **params)
            times = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                _, ids = index.search(q, 100)
                times.append(time.perf_counter() - t0)
            recall = float(np.mean([len(set(a[:10]) & set(b)) / 10 for a, b in zip(ids, exact)]))
            row = {"n": n, "vectors": kind, "factory": factory,
                   "params": params, "build_wall_s": round(wall, 2), "train_s": meta["train_seconds"],
                   "bytes": size, "bytes_per_million": size / n * 1e6, "qps_k100": args.queries / median(times),
                   "recall_at_10": recall, "raw_search_s": times, "faiss_threads": faiss.omp_get_max_threads()}
            save("bench_scale", row)
            print(f"N={n:>8d} {kind[:9]:9s} {factory:16s} build {wall:8.1f} s  {size / 1e6:9.1f} MB ({size / n:6.0f} B/vec)  "
                  f"{row['qps_k100']:8.0f} q/s  recall@10 {recall:.3f}", flush=True)
            del index


if __name__ == "__main__":
    main()

"""FAISS index trade-offs through dpr_xrisk's index path: build time, size, queries/s, recall@10.

Data (synthetic, seeded): N x 384 float32 vectors from a Gaussian mixture -- C random unit
centres, each point = centre + isotropic noise of norm ~r (r drawn per component in [0.6, 1.2]),
then L2-normalised, so that the data is clustered as real embeddings are and IVF/HNSW behave
realistically -- plus Q queries drawn from the same mixture (not copies of database vectors).

Path: the vectors are written as an embeddings folder in the layout of ``dpr-xrisk encode``
(``embeddings/ids/meta-00000-of-00001``, see dpr_xrisk/retrieval/encode.py) under eval/work/, and every
index is built by ``dpr_xrisk.retrieval.index.build_index`` (which trains IVF/PQ on a sample of up to
262,144 vectors, i.e. all of them here), loaded by ``load_index`` and tuned by
``set_search_params`` -- the code behind ``dpr-xrisk index`` / ``search``.

Measured: build seconds (train + add, from the index meta, and the whole call incl. writing),
index bytes (len(faiss.serialize_index)) and bytes per million vectors, search queries/s (all Q
queries in one batched ``index.search(q, 10)``, FAISS on all cores; median of R repetitions,
configurations interleaved within each repetition) and recall@10 against the exact ``Flat``
top 10 (|approx top10 & exact top10| / 10, averaged over queries).

    python eval/bench_search.py [--n 200000] [--queries 1000] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from _common import WORK, median, save  # noqa: E402

CONFIGS = [("Flat", {}), ("HNSW32", {"ef_search": 16}), ("HNSW32", {"ef_search": 64}), ("HNSW32", {"ef_search": 256}),
           ("IVF1024,PQ64", {"nprobe": 1}), ("IVF1024,PQ64", {"nprobe": 8}), ("IVF1024,PQ64", {"nprobe": 32})]


def mixture(n_db: int, n_q: int, dim: int, components: int, seed: int):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((components, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    radius = rng.uniform(0.6, 1.2, components).astype(np.float32)

    def draw(n):
        comp = rng.integers(0, components, n)
        x = centres[comp] + rng.standard_normal((n, dim), dtype=np.float32) * (radius[comp, None] / np.sqrt(dim))
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    return np.concatenate([draw(min(50000, n_db - i)) for i in range(0, n_db, 50000)]), draw(n_q)


def write_embeddings_folder(x: np.ndarray, out: Path) -> Path:
    """The layout encode_corpus writes (one finished shard), with a synthetic 'model'."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    np.save(out / "embeddings-00000-of-00001.npy", x)
    (out / "ids-00000-of-00001.txt").write_text("".join(f"v{i}\n" for i in range(len(x))))
    meta = {"model": "synthetic-mixture", "fingerprint": "synthetic", "settings": {"normalize": True},
            "dim": x.shape[1], "dtype": "float32", "similarity": "cosine", "count": len(x), "shard_id": 0,
            "num_shards": 1, "range": [0, len(x)], "corpus": "synthetic", "corpus_fingerprint": "synthetic",
            "corpus_size": len(x)}
    (out / "meta-00000-of-00001.json").write_text(json.dumps(meta))
    return out


def build_and_measure(emb: Path, out: Path, factory: str):
    """Build ``factory`` from ``emb`` through dpr_xrisk's build_index; return the loaded index,
    its meta, the build wall time and its size in bytes (what the loaded index occupies)."""
    import faiss

    from dpr_xrisk.retrieval.index import build_index, load_index

    t0 = time.perf_counter()
    build_index(emb, out, factory=factory, overwrite=True)
    wall = time.perf_counter() - t0
    index, _, meta = load_index(out)
    return index, meta, wall, len(faiss.serialize_index(index))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--components", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()

    import faiss

    from dpr_xrisk.retrieval.index import set_search_params

    t0 = time.perf_counter()
    x, q = mixture(args.n, args.queries, args.dim, args.components, args.seed)
    print(f"{args.n} x {args.dim} database, {args.queries} queries, {args.components} components "
          f"({time.perf_counter() - t0:.1f} s to generate); faiss {faiss.__version__}, {faiss.omp_get_max_threads()} threads")
    emb = write_embeddings_folder(x, WORK / "bench_search" / "emb")
    del x

    built, rows = {}, []
    for factory in dict.fromkeys(f for f, _ in CONFIGS):
        index, meta, wall, size = build_and_measure(emb, WORK / "bench_search" / factory.replace(",", "_"), factory)
        built[factory] = index
        rows.append({"factory": factory, "build_wall_s": wall, "train_s": meta["train_seconds"],
                     "build_s": meta["build_seconds"], "bytes": size, "bytes_per_million": size / args.n * 1e6})
        print(f"built {factory:14s} train {meta['train_seconds']:7.1f} s  train+add {meta['build_seconds']:7.1f} s  "
              f"wall {wall:7.1f} s  {size / 1e6:8.1f} MB  ({size / args.n:.0f} B/vector)", flush=True)

    times = {i: [] for i in range(len(CONFIGS))}
    results = {}
    for rep in range(args.reps):
        for i, (factory, params) in enumerate(CONFIGS):
            index = built[factory]
            set_search_params(index, **params)
            t0 = time.perf_counter()
            _, ids = index.search(q, args.k)
            times[i].append(time.perf_counter() - t0)
            results[i] = ids
    exact = results[0]
    table = []
    print(f"\n{'index':14s} {'params':15s} {'q/s':>10s} {'recall@10':>9s}")
    for i, (factory, params) in enumerate(CONFIGS):
        recall = float(np.mean([len(set(a) & set(b)) / args.k for a, b in zip(results[i], exact)]))
        qps = args.queries / median(times[i])
        label = ",".join(f"{k}={v}" for k, v in params.items()) or "-"
        table.append({"factory": factory, "params": params, "qps": qps, "recall_at_10": recall, "raw_seconds": times[i]})
        print(f"{factory:14s} {label:15s} {qps:10.0f} {recall:9.4f}")
    save("bench_search", {"args": vars(args), "faiss": faiss.__version__, "faiss_threads": faiss.omp_get_max_threads(),
                          "build": rows, "search": table})


if __name__ == "__main__":
    main()

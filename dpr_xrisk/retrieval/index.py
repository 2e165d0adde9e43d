"""Embeddings folder -> FAISS index folder (``index.faiss``, ``ids.txt``, ``meta.json``).

Any FAISS factory string works (``Flat``, ``HNSW32``, ``IVF4096,PQ64``, ...); indexes that need
training are trained on a random sample. Scores are inner products; for cosine similarity with
an encoder that does not normalise, vectors are normalised here and queries at search time.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from dpr_xrisk.retrieval.encode import load_shards, shard_arrays
from dpr_xrisk.errors import InputError, unknown_name
from dpr_xrisk.io.common import atomic_dir

METRICS = ("ip", "cosine")
FACTORY_EXAMPLES = "Flat, HNSW32, HNSW32,SQ8, IVF1024,Flat, IVF4096,PQ64, IVF1024,SQ8, PQ64"
BLOCK = 65536  # vectors added per call: bounds the float32 copy of a float16 shard


def make_index(dim: int, factory: str):
    """An empty index of ``factory``. PQ codebooks skip FAISS's polysemous training: it only serves
    Hamming-distance pre-filtering (``polysemous_ht``), which search never turns on, does not change
    the distances, and made training an ``IVF512,PQ64`` index on 10k vectors take 142 s instead of
    ~20 s (`git show 3ee76c0:eval/RESULTS.md`)."""
    import faiss

    try:
        index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as e:
        reason = str(e).strip().splitlines()[-1][:120]
        raise InputError(f"FAISS rejects factory string {factory!r} for dim {dim} ({reason}); "
                         f"valid examples: {FACTORY_EXAMPLES}") from None
    for sub in _sub_indexes(index):
        if hasattr(sub, "do_polysemous_training"):
            sub.do_polysemous_training = False
    return index


def _sub_indexes(index):
    """The index and what it wraps (IVF inside a pre-transform, PQ inside IVF...), downcast."""
    import faiss

    seen, todo = [], [index]
    while todo:
        ix = faiss.downcast_index(todo.pop())
        seen.append(ix)
        for attr in ("index", "base_index"):
            inner = getattr(ix, attr, None)
            if isinstance(inner, faiss.Index):
                todo.append(inner)
    return seen


def build_index(emb_dir: str | Path, out_dir: str | Path, factory: str = "Flat", metric: str | None = None,
                train_size: int = 262144, seed: int = 0, overwrite: bool = False, threads: int | None = None,
                shards: list[int] | None = None) -> Path:
    """Merge all shards of ``emb_dir`` (or just ``shards``) into one index in ``out_dir``.

    Per-shard indexes (``shards=[i]``) can be searched together with :func:`search_many`."""
    import faiss

    from dpr_xrisk.io.common import check_apart

    check_apart(emb_dir, out_dir, "embeddings folder")
    if threads:
        faiss.omp_set_num_threads(threads)
    metas = load_shards(emb_dir, shards)
    dim = metas[0]["dim"]
    metric = metric or metas[0]["similarity"]
    if metric not in METRICS:
        raise unknown_name("metric", metric, METRICS)
    normalize = metric == "cosine" and not metas[0]["settings"]["normalize"]
    index = make_index(dim, factory)
    shards = [shard_arrays(m) for m in metas]
    ids: list[str] = []
    seen: set[str] = set()
    for _, shard_ids in shards:
        for pid in shard_ids:
            if pid in seen:
                raise InputError(f"passage id {pid!r} appears in more than one shard (overlapping shards)", emb_dir)
            seen.add(pid)
        ids.extend(shard_ids)
    del seen
    total = len(ids)

    def block(vecs, lo, hi):
        x = np.ascontiguousarray(vecs[lo:hi], dtype=np.float32)
        if normalize:
            faiss.normalize_L2(x)
        return x

    t0 = time.perf_counter()
    if not index.is_trained:
        rng = np.random.default_rng(seed)
        take = np.sort(rng.choice(total, size=min(train_size, total), replace=False))
        offsets = np.cumsum([0] + [v.shape[0] for v, _ in shards])
        sample = np.concatenate([block(v, 0, v.shape[0])[take[(take >= offsets[i]) & (take < offsets[i + 1])] - offsets[i]]
                                 for i, (v, _) in enumerate(shards)])
        try:
            index.train(sample)
        except RuntimeError as e:
            raise InputError(f"cannot train {factory!r} on {len(sample)} vectors: {str(e).strip().splitlines()[-1][:160]}") from None
    train_s = time.perf_counter() - t0
    for vecs, _ in shards:
        for lo in range(0, vecs.shape[0], BLOCK):
            index.add(block(vecs, lo, min(lo + BLOCK, vecs.shape[0])))
    meta = {
        "model": metas[0]["model"], "fingerprint": metas[0]["fingerprint"], "settings": metas[0]["settings"],
        "dim": dim, "metric": metric, "normalize_queries": normalize, "factory": factory, "count": total,
        "corpus": metas[0]["corpus"], "corpus_fingerprint": metas[0]["corpus_fingerprint"],
        "num_shards": len(metas), "shards": [m["shard_id"] for m in metas], "of_shards": metas[0]["num_shards"], "train_seconds": round(train_s, 3),
        "build_seconds": round(time.perf_counter() - t0, 3), "faiss_version": faiss.__version__,
        "quantize": metas[0].get("quantize", "none"), "backend": metas[0].get("backend", "torch"),
        "dtype": metas[0].get("dtype", "float32"), "bf16": metas[0].get("bf16", False),  # how the vectors were made
    }
    from dpr_xrisk.runtime.onnx_backend import vector_mode

    if len({vector_mode(m.get("backend", "torch"), m.get("quantize", "none")) for m in metas}) != 1:
        raise InputError("shards encoded with different --backend/--quantize; encode them alike", emb_dir)
    with atomic_dir(out_dir, overwrite=overwrite) as tmp:
        faiss.write_index(index, str(tmp / "index.faiss"))
        (tmp / "ids.txt").write_text("".join(i + "\n" for i in ids), encoding="utf-8")
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return Path(out_dir)


def load_index(index_dir: str | Path):
    """Return (faiss index, ids, meta) of an index folder."""
    import faiss

    d = Path(index_dir)
    for name in ("index.faiss", "ids.txt", "meta.json"):
        if not (d / name).exists():
            raise InputError(f"not an index folder (no {name})", d)
    from dpr_xrisk.io.common import load_json

    meta = load_json(d / "meta.json")  # a truncated file is a located InputError
    missing = [k for k in ("dim", "fingerprint", "model") if not isinstance(meta, dict) or k not in meta]
    if missing:
        raise InputError(f"index meta lacks {missing} (not written by `dpr-xrisk index`, or damaged)", d / "meta.json")
    try:
        index = faiss.read_index(str(d / "index.faiss"))
    except RuntimeError as e:
        raise InputError(f"cannot read the FAISS index (truncated or damaged?): {str(e).strip().splitlines()[-1]}",
                         d / "index.faiss") from None
    ids = (d / "ids.txt").read_text(encoding="utf-8").splitlines()
    if len(ids) != index.ntotal:
        raise InputError(f"index holds {index.ntotal} vectors but ids.txt {len(ids)} ids", d)
    return index, ids, meta


def set_search_params(index, ef_search: int | None = None, nprobe: int | None = None) -> None:
    """HNSW efSearch / IVF nprobe, through FAISS's ParameterSpace (works on wrapped indexes)."""
    import faiss

    ps = faiss.ParameterSpace()
    for name, value in (("efSearch", ef_search), ("nprobe", nprobe)):
        if value is not None:
            try:
                ps.set_index_parameter(index, name, value)
            except RuntimeError:
                raise InputError(f"--{'ef-search' if name == 'efSearch' else 'nprobe'} does not apply to this index type") from None


def check_faiss_gpu() -> None:
    """A GPU faiss that sees a GPU, or a one-line error naming the option."""
    import faiss

    if not hasattr(faiss, "StandardGpuResources"):
        raise InputError("--faiss-gpu: the installed faiss has no GPU support (faiss-cpu); install a GPU faiss, "
                         "e.g. pip install 'dpr_xrisk[gpu]' after removing faiss-cpu")
    if faiss.get_num_gpus() == 0:
        raise InputError("--faiss-gpu: faiss sees no GPU")


def index_to_gpu(index):
    """The index on every visible GPU (Flat and IVF types)."""
    import faiss

    check_faiss_gpu()
    try:
        return faiss.index_cpu_to_all_gpus(index)
    except RuntimeError as e:
        raise InputError(f"--faiss-gpu: this index type cannot go to the GPU ({str(e).strip().splitlines()[-1]})") from None


def load_indexes(index_dirs) -> list[tuple]:
    """Load several index folders that must form one consistent, non-overlapping collection."""
    loaded = [load_index(d) for d in index_dirs]
    metas = [m for _, _, m in loaded]
    for key, what in (("dim", "dimensions"), ("fingerprint", "models"), ("corpus_fingerprint", "corpora")):
        if len({str(m.get(key)) for m in metas}) != 1:
            raise InputError(f"indexes have mismatched {what}; search only indexes built from one encoding run")
    from dpr_xrisk.runtime.onnx_backend import vector_mode

    if len({vector_mode(m.get("backend", "torch"), m.get("quantize", "none")) for m in metas}) != 1:
        raise InputError("indexes were encoded with different --backend/--quantize; search only indexes built from "
                         "one encoding run")
    seen: set[str] = set()
    for _, ids, _ in loaded:
        overlap = seen.intersection(ids)
        if overlap:
            raise InputError(f"indexes overlap (passage {sorted(overlap)[0]!r} is in two of them)")
        seen.update(ids)
    return loaded


def _search_depth(loaded, queries, depth: int):
    """Each index searched for ``depth`` (at most its size), results merged by score: (n, sum) arrays."""
    all_scores, all_ids = [], []
    for index, ids, _ in loaded:
        scores, rows = index.search(queries, min(depth, index.ntotal))  # (n, k_i)
        all_scores.append(scores)
        all_ids.append(np.vectorize(lambda r, ids=ids: ids[r] if r >= 0 else "", otypes=[object])(rows))
    scores = np.concatenate(all_scores, axis=1)  # (n, sum k_i)
    ids = np.concatenate(all_ids, axis=1)
    order = np.argsort(-scores, axis=1, kind="stable")
    return np.take_along_axis(scores, order, 1), np.take_along_axis(ids, order, 1)


def search_many(loaded, queries, k: int):
    """Top-k over several indexes: each is searched for k, and the lists are merged by score
    (exact for exact indexes: the global top-k is within the union of the per-shard top-k).

    Ties: equal scores are ordered by passage id descending (trec_eval's order, the one rule of
    every ranked list dpr_xrisk writes), never by FAISS's internal row order, and a tie across
    the k-th place is searched past the cut until it ends, so which of the tied passages make the
    top k is decided by the same rule: one index and one question give one run on every machine."""
    total = sum(index.ntotal for index, _, _ in loaded)
    k = min(k, total)
    n = queries.shape[0]
    out_scores = np.zeros((n, k), dtype=np.float32)
    out_ids = np.empty((n, k), dtype=object)
    todo, depth = np.arange(n), min(k + 1, total)
    while len(todo):
        scores, ids = _search_depth(loaded, queries[todo], depth)  # (m, >= depth), by score
        valid = ids != ""
        tied = valid[:, 1:] & valid[:, :-1] & (scores[:, 1:] == scores[:, :-1])  # (m, width - 1)
        cut_tie = tied[:, k - 1] if depth > k and tied.shape[1] >= k else np.zeros(len(todo), dtype=bool)
        again = cut_tie & (depth < total)
        for j in np.flatnonzero(~again):
            row_s, row_i = scores[j], ids[j]
            if tied[j].any():
                pairs = sorted(zip(row_s.tolist(), row_i.tolist()), key=lambda x: (x[1] != "", x[0], x[1]), reverse=True)
                row_s = np.array([s for s, _ in pairs], dtype=np.float32)
                row_i = np.array([i for _, i in pairs], dtype=object)
            out_scores[todo[j]] = row_s[:k]
            out_ids[todo[j]] = row_i[:k]
        todo, depth = todo[again], min(depth * 2, total)
    return out_scores, out_ids

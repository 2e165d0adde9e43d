"""Corpus -> embeddings folder, streamed, sharded and resumable.

Layout of an embeddings folder (one set of files per shard ``i`` of ``n``)::

    embeddings-0000i-of-0000n.npy   float32/float16 (count, dim), in corpus order
    ids-0000i-of-0000n.txt          one passage id per line, same order
    meta-0000i-of-0000n.json        model, fingerprint, dim, dtype, similarity, count, range

A shard is finished exactly when its ``meta`` file exists. While it runs, vectors go straight
into a memory-mapped ``.npy.partial`` file chunk by chunk and a ``progress`` file records the
finished chunks, so a killed run resumes at the first unfinished chunk. Only one chunk of text
and tokens sits in memory at a time, large buffers bypass the heap in the ``encode`` command (``bound_heap``),
freed heap pages go back to the OS after each chunk, and the duplicate-id check keeps 8 bytes per
passage (:class:`IdCheck`): the peak RSS does not grow with the corpus (shards of up to a million
passages trade a slow drift for 1.3x the speed: :func:`mmap_threshold`).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from dpr_xrisk.errors import InputError
from dpr_xrisk.io.fingerprint import corpus_fingerprint, file_fingerprint, same_corpus  # noqa: F401 (their home is io/)
from dpr_xrisk.io.common import atomic_write, write_json
from dpr_xrisk.io.passages import count_passages, read_passages

CHUNK = 8192  # passages per resumable unit: ~2.5 min of MiniLM on 2 CPU cores
# glibc mmap threshold of the `encode` command (measured: `git show 3ee76c0:eval/RESULTS.md`,
# "What the heap bound costs"):
# at 1 MiB every batch's activations are mapped and page-faulted afresh (MiniLM: 1.31x / 1.37x
# slower in fp32 / bf16 than at 32 MiB) but the peak RSS is flat; at 32 MiB it drifts up slowly
# (tiny model: ~700 MiB over the first chunks, 840 MiB peak over 300k passages, against ~610
# flat). Shards up to FAST_HEAP_PASSAGES take the fast setting; longer ones the flat one.
MMAP_FAST, MMAP_BOUNDED = 32 << 20, 1 << 20
FAST_HEAP_PASSAGES = 1_000_000
DTYPES = ("float32", "float16")


def shard_name(kind: str, shard_id: int, num_shards: int, ext: str) -> str:
    return f"{kind}-{shard_id:05d}-of-{num_shards:05d}.{ext}"


def shard_range(n: int, shard_id: int, num_shards: int) -> tuple[int, int]:
    """Contiguous, balanced split of [0, n) into num_shards ranges."""
    return n * shard_id // num_shards, n * (shard_id + 1) // num_shards


class IdCheck:
    """Duplicate passage ids in 8 bytes per passage: a sorted array of the ids' hashes instead of
    a set of strings (~80 bytes each, 1.7 GB for DPR's 21M passages). ``repeats`` is True when a
    hash repeats; the caller then confirms with an exact scan (a true hash collision is harmless)."""

    def __init__(self) -> None:
        self.seen = np.empty(0, dtype=np.int64)

    def repeats(self, ids: list[str]) -> bool:
        h = np.sort(np.fromiter((hash(i) for i in ids), dtype=np.int64, count=len(ids)))
        if (h[1:] == h[:-1]).any():
            return True
        pos = np.searchsorted(self.seen, h)
        if len(self.seen) and (self.seen[np.minimum(pos, len(self.seen) - 1)] == h).any():
            return True
        self.seen = np.insert(self.seen, pos, h)
        return False


@functools.lru_cache(maxsize=1)
def _libc():
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def mmap_threshold(count: int) -> int:
    """The ``encode`` command's glibc mmap threshold for a shard of ``count`` passages (see
    MMAP_FAST); ``DPR_XRISK_MMAP_THRESHOLD`` (bytes; 0: glibc's own, dynamic one) overrides it."""
    env = os.environ.get("DPR_XRISK_MMAP_THRESHOLD")
    if env is not None:
        if not env.strip().isdigit():
            raise InputError(f"DPR_XRISK_MMAP_THRESHOLD must be a number of bytes (0: glibc's own), got {env!r}")
        return int(env)
    return MMAP_FAST if count <= FAST_HEAP_PASSAGES else MMAP_BOUNDED


def fix_mmap_threshold(nbytes: int = MMAP_BOUNDED) -> None:
    """Serve every allocation of ``nbytes`` or more with its own mmap (glibc ``mallopt``).

    glibc raises its mmap threshold each time a large block is freed (up to 32 MB), after which
    the attention and activation buffers of every batch (shapes vary with dynamic padding) land
    on the heap, fragment it, and the peak RSS of ``encode`` crept up ~20 MB per chunk
    (eval/results/bench_encode_rss.json). A fixed threshold of 1 MiB keeps big buffers off the heap, so the
    peak stays flat, at the price of a page fault per fresh page of every batch's activations; a
    fixed 32 MiB (:data:`MMAP_FAST`) keeps them on the heap with a slow drift. A no-op where glibc
    is absent."""
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(-3, nbytes)  # M_MMAP_THRESHOLD; setting it also turns the dynamic adjustment off


def warm_heap(nbytes: int = MMAP_FAST - (64 << 10)) -> None:
    """Raise glibc's dynamic mmap and trim thresholds now, as a long-running process's first big
    free would (allocate and free one ``nbytes`` block, served by mmap): a fresh process serves
    each batch's multi-MB activation buffers with their own mmap, or trims them off the heap top
    again, and pays a page fault per fresh page of every batch. Measured on MiniLM at 64 word
    pieces, batch 64, bf16 weights, 2 threads (AMX Xeon, 3,000 passages, three rounds, two
    processes each): 3.9-4.3 s and ~5-20 thousand minor faults after it, 5.5-6.2 s and 1.1-1.7
    million without -- the training refresh at step 0 ran 1.4x slower per passage than the later
    ones for this reason. Leaves the adjustment dynamic (unlike :func:`fix_mmap_threshold`); a
    no-op where glibc is absent."""
    import ctypes

    libc = _libc()
    if libc is None or not (hasattr(libc, "malloc") and hasattr(libc, "free")):
        return
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    block = libc.malloc(ctypes.c_size_t(nbytes))
    if block:
        libc.free(block)


def release_free_memory() -> None:
    """Hand freed heap pages back to the OS after a chunk (glibc's ``malloc_trim``)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def provenance(**inputs) -> dict:
    """Each input's absolute path and :func:`file_fingerprint` ({name: {path, fingerprint}}, a list
    for a list of paths; None values skipped): what an output was made from."""
    out = {}
    for name, value in inputs.items():
        paths = value if isinstance(value, (list, tuple)) else [value]
        recs = [{"path": str(Path(p).resolve()), "fingerprint": file_fingerprint(p)} for p in paths
                if p is not None and Path(p).exists()]
        if recs:
            out[name] = recs if isinstance(value, (list, tuple)) else recs[0]
    return out


def _remove_shard(out: Path, shard_id: int, num_shards: int) -> None:
    for kind, ext in (("embeddings", "npy"), ("ids", "txt"), ("meta", "json"), ("progress", "json")):
        f = out / shard_name(kind, shard_id, num_shards, ext)
        for g in (f, Path(f"{f}.partial")):
            g.unlink(missing_ok=True)


# what makes two encodings one artifact: a folder holds vectors of one model, corpus and precision
# (absent from older metas: their defaults)
SETTING_DEFAULTS = {"dtype": "float32", "bf16": False, "quantize": "none", "backend": "torch", "bf16_weights": False}


def encode_settings(encoder, fingerprint: str, corpus_fp: str, dtype: str, bf16: bool) -> dict:
    """The settings an embeddings folder records and every later call must repeat: model
    fingerprint, corpus fingerprint, stored dtype, bf16 autocast, quantisation, backend."""
    return {"fingerprint": fingerprint, "corpus_fingerprint": corpus_fp, "dtype": dtype, "bf16": bool(bf16),
            "quantize": getattr(encoder, "quantize", "none"), "backend": getattr(encoder, "backend", "torch"),
            "bf16_weights": bool(getattr(encoder, "bf16_weights", False))}


def setting_differences(recorded: dict, wanted: dict) -> list[str]:
    """``name recorded -> wanted`` for each setting of ``wanted`` that ``recorded`` (a meta or
    progress file) does not share; empty when they describe one artifact."""
    out = []
    for key, value in wanted.items():
        old = recorded.get(key, SETTING_DEFAULTS.get(key))
        if key == "corpus_fingerprint":
            if not same_corpus(old, value):
                out.append(f"corpus {recorded.get('corpus', old)}")
        elif key == "fingerprint":
            if old != value:
                out.append(f"model {recorded.get('model', '?')} (fingerprint {old} -> {value})")
        elif old != value:
            out.append(f"{key} {old} -> {value}")
    return out


SHARD_FILE = re.compile(r"^(embeddings|ids|meta|progress)-(\d+)-of-(\d+)\.(npy|txt|json)(\.partial)?$")


def _folder_shards(out: Path) -> dict[tuple[int, int], dict]:
    """{(shard id, shards): recorded settings} of every finished (meta) or unfinished (progress)
    shard in ``out``; a shard with only leftover files (no meta, no progress) maps to None."""
    from dpr_xrisk.io.common import load_json

    found: dict[tuple[int, int], dict | None] = {}
    for f in sorted(out.iterdir()) if out.is_dir() else ():
        m = SHARD_FILE.match(f.name)
        if m is None:
            continue
        key = (int(m.group(2)), int(m.group(3)))
        if m.group(1) in ("meta", "progress") and not m.group(5):
            rec = load_json(f)
            if not isinstance(rec, dict):
                raise InputError("damaged shard record (not a JSON object); --overwrite replaces the folder", f)
            if m.group(1) == "progress" and "settings" in rec:
                rec = {**rec, **rec["settings"]}
            if m.group(1) == "meta" or found.get(key) is None:
                found[key] = rec | {"_finished": m.group(1) == "meta"}
        else:
            found.setdefault(key, None)
    return found


def _check_folder(out: Path, shard_id: int, num_shards: int, wanted: dict, overwrite: bool) -> None:
    """An embeddings folder is one artifact: refuse (or, ``overwrite``, remove) every shard of
    other settings or of another split into shards, and anything that is not an encoding."""
    if not out.exists():
        return
    foreign = [n for n in ("index.faiss", "meta.json", "lucene", "dpr_xrisk.json", "config.json") if (out / n).exists()]
    if foreign:
        raise InputError(f"holds {foreign[0]}, not an embeddings folder: give a new --out", out)
    for (i, n), rec in _folder_shards(out).items():
        if rec is None:
            continue  # leftovers of a run killed before its first chunk: nothing recorded, nothing mixed
        diff = setting_differences(rec, wanted)
        if n != num_shards:
            diff.append(f"split into {n} shards, not {num_shards}")
        if not diff:
            continue
        if not overwrite:
            what = "a finished" if rec.get("_finished") else "an unfinished"
            raise InputError(f"holds {what} encoding with other settings ({'; '.join(diff)}): an output folder is one "
                             "artifact; --overwrite replaces it, or give a new --out", out)
        _remove_shard(out, i, n)


def encode_corpus(encoder, corpus: str | Path, out_dir: str | Path, *, batch_size: int = 128,
                  dtype: str = "float32", bf16: bool = False, shard_id: int = 0, num_shards: int = 1,
                  chunk_size: int = CHUNK, progress: bool = True, model_name: str = "", overwrite: bool = False,
                  desc: str | None = None, tokens=None, bound_heap: bool = False) -> Path:
    """Encode one shard of ``corpus`` into ``out_dir``; returns the shard's meta path.

    ``bound_heap`` (the ``encode`` command, a process of its own): serve big buffers with their own
    mmap for the rest of the process (:func:`fix_mmap_threshold` at :func:`mmap_threshold`), so a
    long encode's peak RSS stays bounded. Never inside training: the setting cannot be undone,
    and every training step's activations would then be mapped and unmapped afresh (13.5M vs
    1.1M page faults, steps 2.7 s instead of 1.7 s on MiniLM at batch 16, one thread).

    ``tokens``: the corpus already tokenised (:class:`dpr_xrisk.retrieval.tokens.CorpusTokens`, made for
    this encoder and corpus); the passages' texts are then read only for their ids.

    The folder is one artifact (:func:`encode_settings`: model, corpus, dtype, bf16, quantisation,
    backend, and one split into shards). A finished shard of the same settings is kept as it is;
    an unfinished one resumes only when all of them match; a shard of other settings anywhere in
    the folder is an error (``overwrite``: those shards are removed and this one encoded anew --
    replaced, never merged). An input error (a duplicate id, a malformed line) removes this
    shard's unfinished files, and a folder this call created is removed when it stays empty;
    an interruption keeps them for the resume."""
    import torch  # noqa: F401  (fail early if torch is missing)
    from tqdm import tqdm

    from dpr_xrisk.io.common import check_apart, check_output

    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}")
    if not (0 <= shard_id < num_shards):
        raise InputError(f"--shard-id must be in [0, {num_shards}), got {shard_id}")
    if batch_size < 1 or chunk_size < 1:
        raise InputError(f"batch size and chunk size must be >= 1, got {batch_size} and {chunk_size}")
    out = check_output(out_dir, folder=True)
    check_apart(corpus, out, "corpus")  # never vectors inside a corpus folder, nor a corpus inside the vectors
    meta_path = out / shard_name("meta", shard_id, num_shards, "json")
    fingerprint, corpus_fp = encoder.fingerprint(), corpus_fingerprint(corpus)
    wanted = encode_settings(encoder, fingerprint, corpus_fp, dtype, bf16)
    if meta_path.exists() and not overwrite:
        from dpr_xrisk.io.common import load_json

        old = load_json(meta_path)
        if isinstance(old, dict) and not setting_differences(old, wanted):
            _check_folder(out, shard_id, num_shards, wanted, overwrite)  # the rest of the folder too
            return meta_path  # finished shards are never redone
    _check_folder(out, shard_id, num_shards, wanted, overwrite)
    if overwrite:
        _remove_shard(out, shard_id, num_shards)
    total = count_passages(corpus)  # an empty or header-only corpus fails before anything is created
    if total == 0:
        raise InputError("corpus has no passages", corpus)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _encode_shard(encoder, corpus, out, total, wanted, batch_size=batch_size, dtype=dtype, bf16=bf16,
                             shard_id=shard_id, num_shards=num_shards, chunk_size=chunk_size, progress=progress,
                             model_name=model_name, desc=desc, tokens=tokens, bound_heap=bound_heap, tqdm=tqdm)
    except InputError:
        _remove_shard(out, shard_id, num_shards)  # a bad corpus: its unfinished files can never resume
        if created and not any(out.iterdir()):
            out.rmdir()
        raise


class _ShardFiles:
    """The paths of shard ``shard_id`` of ``num_shards`` in ``out``: the finished files (meta,
    vectors, ids) and the unfinished ones a killed run resumes from (``.partial``, progress)."""

    def __init__(self, out: Path, shard_id: int, num_shards: int) -> None:
        self.meta = out / shard_name("meta", shard_id, num_shards, "json")
        self.embeddings = out / shard_name("embeddings", shard_id, num_shards, "npy")
        self.ids = out / shard_name("ids", shard_id, num_shards, "txt")
        self.partial, self.ids_partial = Path(f"{self.embeddings}.partial"), Path(f"{self.ids}.partial")
        self.progress = out / shard_name("progress", shard_id, num_shards, "json")


def _encode_shard(encoder, corpus, out: Path, total: int, wanted: dict, *, batch_size, dtype, bf16, shard_id,
                  num_shards, chunk_size, progress, model_name, desc, tokens, bound_heap, tqdm) -> Path:
    files = _ShardFiles(out, shard_id, num_shards)
    start, end = shard_range(total, shard_id, num_shards)
    count, dim = end - start, encoder.dim
    threshold = mmap_threshold(count) if bound_heap else 0  # a bad DPR_XRISK_MMAP_THRESHOLD fails before any work
    if tokens is not None and tokens.count != total:
        raise ValueError(f"token cache has {tokens.count} passages, the corpus {total}")

    state = _unfinished_state(files, wanted, count, out)
    if state:  # resume in the unit the killed run recorded its progress in
        chunk_size = int(state.get("chunk_size", CHUNK))
    done = state["chunks_done"] if state else 0
    before = state.get("seconds", 0.0) if state else 0.0  # encoding time of earlier (killed) sessions
    vectors = _open_vectors(files, state, (count, dim), dtype, out)

    passages = itertools.islice(read_passages(corpus, check_duplicates=False), start, end)
    bar = tqdm(total=count, initial=min(done * chunk_size, count), unit="psg", disable=not progress,
               desc=desc or f"encode shard {shard_id}/{num_shards}", smoothing=0.1)
    t0 = time.perf_counter()
    encoder.eval()
    if threshold > 0:
        fix_mmap_threshold(threshold)
    model = model_name or encoder.settings.base_model
    try:
        _encode_chunks(encoder, corpus, passages, vectors, files, wanted, first=start, chunk_size=chunk_size,
                       done=done, clock=lambda: before + time.perf_counter() - t0, model=model, tokens=tokens,
                       batch_size=batch_size, bf16=bf16, dtype=dtype, on_batch=bar.update)
    finally:
        bar.close()  # ends the bar's line, so an error message starts on its own line
    del vectors
    os.replace(files.partial, files.embeddings)
    os.replace(files.ids_partial, files.ids)
    meta = _shard_meta(encoder, model, wanted, dtype=dtype, bf16=bf16, shard_id=shard_id, num_shards=num_shards,
                       start=start, end=end, corpus=corpus, total=total,
                       seconds=before + time.perf_counter() - t0)  # all sessions of a resumed run
    write_json(files.meta, meta)
    files.progress.unlink(missing_ok=True)
    return files.meta


def _unfinished_state(files: _ShardFiles, wanted: dict, count: int, out: Path) -> dict | None:
    """The progress record of a killed run of this shard, or None when there is none to resume;
    one of other settings or another passage count is an error."""
    if not (files.progress.exists() and files.partial.exists() and files.ids_partial.exists()):
        return None
    from dpr_xrisk.io.common import load_json

    state = load_json(files.progress)
    recorded = {**state, **state.get("settings", {})} if isinstance(state, dict) else {}
    diff = setting_differences(recorded, wanted)
    if not isinstance(state, dict) or diff or state.get("count") != count:
        raise InputError(f"an unfinished run with other settings ({'; '.join(diff) or 'another count'}) is in this "
                         "folder; use --overwrite to start again, or a new --out", out)
    return state


def _open_vectors(files: _ShardFiles, state: dict | None, shape: tuple[int, int], dtype: str, out: Path):
    """The shard's memory-mapped ``(count, dim)`` vectors: the killed run's (its ids file cut back
    to the last finished chunk) when ``state`` resumes one, else a new, empty file."""
    if not state:
        vectors = np.lib.format.open_memmap(files.partial, mode="w+", dtype=dtype, shape=shape)
        files.ids_partial.write_bytes(b"")
        return vectors
    try:
        vectors = np.lib.format.open_memmap(files.partial, mode="r+")
    except ValueError as e:
        raise InputError(f"unfinished vectors are damaged ({e}); --overwrite starts again", files.partial) from None
    if vectors.shape != shape or vectors.dtype != np.dtype(dtype):
        raise InputError(f"unfinished vectors are {vectors.dtype}{list(vectors.shape)}, this run writes "
                         f"{dtype}{list(shape)}; --overwrite starts again", out)
    with open(files.ids_partial, "r+b") as f:
        f.truncate(state["ids_bytes"])
    return vectors


def _encode_chunks(encoder, corpus, passages, vectors, files: _ShardFiles, wanted: dict, *, first: int,
                   chunk_size: int, done: int, clock, model: str, tokens, batch_size, bf16, dtype, on_batch) -> None:
    """Encode ``passages`` (the shard's, from corpus row ``first``) chunk by chunk into ``vectors``
    and the ids file, recording each finished chunk in the progress file; the first ``done``
    chunks (a killed run's) are only read, for the duplicate-id check. ``clock()``: the seconds
    spent encoding so far."""
    id_check = IdCheck()
    for chunk_idx in itertools.count():
        chunk = list(itertools.islice(passages, chunk_size))
        if not chunk:
            break
        if id_check.repeats([p.id for p in chunk]):
            for _ in read_passages(corpus):  # the exact check: raises naming the file and line
                pass
        if chunk_idx < done:
            continue
        row = chunk_idx * chunk_size
        if tokens is not None:
            vecs = encoder.encode_passage_tokens(tokens.rows(range(first + row, first + row + len(chunk))),
                                                 batch_size=batch_size, bf16=bf16, on_batch=on_batch)
        else:
            vecs = encoder.encode_passages([p.title for p in chunk], [p.text for p in chunk],
                                           batch_size=batch_size, bf16=bf16, on_batch=on_batch)
        vectors[row : row + len(chunk)] = vecs.astype(dtype)
        vectors.flush()
        with open(files.ids_partial, "a", encoding="utf-8") as f:
            f.write("".join(p.id + "\n" for p in chunk))
        state = {"fingerprint": wanted["fingerprint"], "corpus_fingerprint": wanted["corpus_fingerprint"],
                 "count": len(vectors), "chunks_done": chunk_idx + 1, "ids_bytes": files.ids_partial.stat().st_size,
                 "seconds": clock(), "chunk_size": chunk_size, "settings": wanted,
                 "corpus": str(Path(corpus).resolve()), "model": model}
        with atomic_write(files.progress) as f:
            json.dump(state, f)
        del chunk, vecs
        release_free_memory()


def _shard_meta(encoder, model: str, wanted: dict, *, dtype, bf16, shard_id, num_shards, start, end, corpus, total,
                seconds) -> dict:
    """What a finished shard's ``meta`` file records (:func:`load_shards` reads it)."""
    meta = {
        "model": model, "fingerprint": wanted["fingerprint"],
        "settings": asdict(encoder.settings), "dim": encoder.dim, "dtype": dtype,
        "similarity": encoder.settings.similarity, "count": end - start, "shard_id": shard_id,
        "num_shards": num_shards, "range": [start, end], "corpus": str(Path(corpus).resolve()),
        "corpus_fingerprint": wanted["corpus_fingerprint"], "corpus_size": total,
        "seconds": round(seconds, 3), "bf16": bf16,
        "quantize": getattr(encoder, "quantize", "none"), "backend": getattr(encoder, "backend", "torch"),
    }
    if getattr(encoder, "bf16_weights", False):  # bfloat16 weights, not autocast (quantize.bf16_towers)
        meta["bf16_weights"] = True
    if getattr(encoder, "activation_bits", None):  # torch int8: 8-bit activations with VNNI, else 7
        meta["activation_bits"] = encoder.activation_bits
    if getattr(encoder, "quantize", "none") == "int8":  # FFN outlier channels smoothed before quantising
        meta["smoothed_channels"] = getattr(encoder, "smoothed_channels", 0)
        if getattr(encoder, "int8_engine", None):  # the kernels the weights were packed for
            meta["int8_engine"] = encoder.int8_engine
    return meta


def load_shards(emb_dir: str | Path, only: list[int] | None = None) -> list[dict]:
    """Validate a complete, consistent set of shards; return their metas in shard order
    (``only``: just these shard ids, each of which must be finished)."""
    from dpr_xrisk.io.common import load_json

    d = Path(emb_dir)
    if not d.is_dir():
        raise InputError("embeddings folder not found", d)
    metas = []
    for p in sorted(d.glob("meta-*-of-*.json")):
        m = load_json(p)  # a damaged file is a located error
        missing = [k for k in ("num_shards", "shard_id", "dim", "fingerprint", "count", "settings", "similarity")
                   if not isinstance(m, dict) or k not in m]
        if missing:
            raise InputError(f"shard meta lacks {missing} (not written by `dpr-xrisk encode`, or damaged)", p)
        metas.append(m | {"_path": p})
    if not metas:
        raise InputError("no finished shards (meta-*.json) in embeddings folder", d)
    n = {m["num_shards"] for m in metas}
    if len(n) != 1:
        raise InputError(f"shards from different splits ({sorted(n)} shards) in one folder", d)
    n = n.pop()
    have = {m["shard_id"] for m in metas}
    missing = sorted(set(only if only is not None else range(n)) - have)
    if missing:
        raise InputError(f"missing shard(s) {missing} of {n} (finish them with encode --shard-id)", d)
    for key, what in (("dim", "dimensions"), ("fingerprint", "models"), ("corpus_fingerprint", "corpora")):
        vals = {m.get(key) for m in metas}
        if len(vals) != 1:
            raise InputError(f"shards have mismatched {what}: {sorted(map(str, vals))}", d)
    for m in metas[1:]:
        diff = setting_differences(m, {k: metas[0].get(k, v) for k, v in SETTING_DEFAULTS.items()})
        if diff:
            raise InputError(f"shards {metas[0]['shard_id']} and {m['shard_id']} were encoded with other settings "
                             f"({'; '.join(diff)}): encode them alike", d)
    return sorted([m for m in metas if only is None or m["shard_id"] in only], key=lambda m: m["shard_id"])


def shard_arrays(meta: dict) -> tuple[np.ndarray, list[str]]:
    """Memory-mapped vectors and ids of one finished shard, checked against its meta (shape,
    dtype, id count): a truncated or foreign file is a located error."""
    base = Path(meta["_path"]).parent
    i, n = meta["shard_id"], meta["num_shards"]
    npy, ids_file = base / shard_name("embeddings", i, n, "npy"), base / shard_name("ids", i, n, "txt")
    for f in (npy, ids_file):
        if not f.is_file():
            raise InputError(f"shard {i} has a meta but no {f.name} (an unfinished or damaged folder)", f)
    try:
        vecs = np.load(npy, mmap_mode="r")
    except (ValueError, OSError, EOFError) as e:
        raise InputError(f"cannot read the vectors (truncated or damaged?): {str(e).splitlines()[0][:120]}", npy) from None
    want = (meta["count"], meta["dim"])
    if vecs.ndim != 2 or tuple(vecs.shape) != want:
        raise InputError(f"holds vectors of shape {list(vecs.shape)}, its meta says {list(want)} (damaged or "
                         "replaced?); encode again", npy)
    if vecs.dtype != np.dtype(meta.get("dtype", "float32")):
        raise InputError(f"holds {vecs.dtype} vectors, its meta says {meta.get('dtype', 'float32')}; encode again", npy)
    ids = ids_file.read_text(encoding="utf-8").splitlines()
    if len(ids) != vecs.shape[0]:
        raise InputError(f"shard {i}: {len(ids)} ids but {vecs.shape[0]} vectors", base)
    return vecs, ids

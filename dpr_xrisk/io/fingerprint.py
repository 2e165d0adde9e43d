"""Fingerprints of input files: what tells two corpora, question sets or runs apart cheaply
(size plus the hashes of the first and last MiB), written into every artifact's meta and
compared wherever one artifact is used with another."""

from __future__ import annotations

from pathlib import Path

from dpr_xrisk.errors import InputError


def corpus_fingerprint(path: str | Path) -> str:
    """Size + hashes of the first and last MiB: cheap, and enough to tell two corpora apart
    (two files of one size that differ only in their middle are not told apart). A table folder
    (Parquet shards, ``save_to_disk``) hashes each of its files' names, sizes, heads and tails."""
    from dpr_xrisk.io.passages import corpus_file

    return file_fingerprint(corpus_file(path))  # a missing file is an InputError naming it


def file_fingerprint(path: str | Path) -> str:
    """:func:`corpus_fingerprint` of any file, or of every file under a folder."""
    import hashlib

    p = Path(path)
    if not p.exists():
        raise InputError("file not found", p)
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
    size, head, tail = 0, hashlib.sha256(), hashlib.sha256()
    for f in files:
        st = f.stat()
        size += st.st_size
        if len(files) > 1:
            head.update(f"{f.relative_to(p)}:{st.st_size};".encode())
        with open(f, "rb") as fh:
            head.update(fh.read(1 << 20))
            fh.seek(max(0, st.st_size - (1 << 20)))
            tail.update(fh.read(1 << 20))
    return f"{size}-{head.hexdigest()[:16]}-{tail.hexdigest()[:16]}"


def same_corpus(a: str | None, b: str | None) -> bool:
    """Whether two corpus fingerprints name one corpus (older ones lack the tail hash)."""
    if not a or not b:
        return False
    pa, pb = a.split("-"), b.split("-")
    n = min(len(pa), len(pb))
    return pa[:n] == pb[:n]

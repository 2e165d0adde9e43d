"""A corpus tokenised once (issue #13): the training refresh re-encodes the same passages with
the same tokenizer at every refresh, so their word pieces are computed once per run and kept
on disk as flat int32 arrays.

Layout of a token folder ``tokens-<key>/``::

    input_ids.npy        int32, every passage's word pieces, concatenated in corpus order
    token_type_ids.npy   int8, the same length (only when the tokenizer returns them)
    offsets.npy          int64 (n + 1,): passage r is input_ids[offsets[r]:offsets[r + 1]]
    meta.json            what the key hashes, the count, the corpus fingerprint; written last

``key`` hashes the corpus fingerprint, the tokenizer (its whole serialised state) and the
passage settings that shape the tokens (max length, title mode, prefix), so a folder is reused
exactly when it would be rebuilt identically. A folder whose meta is missing, unreadable or
disagrees with its arrays is rebuilt with a one-line notice.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np

from dpr_xrisk.io.common import write_json

FORMAT = 1
SLICE = 1024  # passages tokenised per call


def tokenizer_fingerprint(tokenizer) -> str:
    """A hash of everything that decides a tokenizer's output: the fast tokenizer's serialised
    pipeline (vocabulary, normaliser, pre-tokeniser, post-processor; not the truncation and
    padding of its last call), else the vocabulary and the class's init arguments."""
    h = hashlib.sha256(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        state = json.loads(backend.to_str())
        # truncation and padding are per call (transformers sets them on the backend at each call)
        state.pop("truncation", None), state.pop("padding", None)
        h.update(json.dumps(state, sort_keys=True).encode())
    else:
        h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
        h.update(json.dumps(getattr(tokenizer, "init_kwargs", {}), sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def token_key(encoder, corpus_fp: str) -> tuple[str, dict]:
    s = encoder.settings
    what = {"format": FORMAT, "corpus_fingerprint": corpus_fp, "tokenizer": tokenizer_fingerprint(encoder.tokenizer),
            "passage_max_length": s.passage_max_length, "title": s.title, "passage_prefix": s.passage_prefix}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16], what


class CorpusTokens:
    """Memory-mapped word pieces of a whole corpus; :meth:`rows` gives what
    ``DualEncoder._encode_tokenized`` takes."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.meta = json.loads((folder / "meta.json").read_text())
        self.offsets = np.load(folder / "offsets.npy")
        self.input_ids = np.load(folder / "input_ids.npy", mmap_mode="r")
        tt = folder / "token_type_ids.npy"
        self.token_type_ids = np.load(tt, mmap_mode="r") if tt.exists() else None
        self.count = len(self.offsets) - 1
        if self.count != self.meta["count"] or self.offsets[-1] != len(self.input_ids) or \
                (self.token_type_ids is not None and len(self.token_type_ids) != len(self.input_ids)):
            raise ValueError(f"token arrays disagree with meta.json in {folder}")

    def rows(self, rows) -> dict:
        """The tokens of corpus rows ``rows`` (a range or a sequence of row numbers)."""
        o = self.offsets
        out = {"input_ids": [np.asarray(self.input_ids[o[r]:o[r + 1]]) for r in rows]}
        if self.token_type_ids is not None:
            out["token_type_ids"] = [np.asarray(self.token_type_ids[o[r]:o[r + 1]], dtype=np.int32) for r in rows]
        return out

    @classmethod
    def load_or_build(cls, encoder, corpus: str | Path, root: str | Path, progress: bool = False) -> "CorpusTokens":
        """The token folder of ``corpus`` under ``root`` for ``encoder``'s tokenizer and passage
        settings: reused when its key matches and it is intact, built otherwise. Folders of
        other keys under ``root`` are deleted (a run keeps one)."""
        from dpr_xrisk.retrieval.encode import corpus_fingerprint

        root = Path(root)
        key, what = token_key(encoder, corpus_fingerprint(corpus))
        folder = root / f"tokens-{key}"
        if (folder / "meta.json").exists():
            try:
                tokens = cls(folder)
                if tokens.meta.get("key") == key:
                    return tokens
                problem = "was made for other inputs"
            except (OSError, ValueError, KeyError) as e:
                problem = f"is unreadable ({str(e).splitlines()[0]})"
            print(f"token cache {folder} {problem}; tokenising the corpus again", file=sys.stderr)
        if root.is_dir():
            for old in root.glob("tokens-*"):
                shutil.rmtree(old, ignore_errors=True)
        build(encoder, corpus, folder, key, what, progress)
        return cls(folder)


def build(encoder, corpus: str | Path, folder: Path, key: str, what: dict, progress: bool = False) -> None:
    """Tokenise ``corpus`` into ``folder`` (written to ``folder.partial`` and renamed when done)."""
    import itertools

    from tqdm import tqdm

    from dpr_xrisk.io.passages import read_passages

    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    lengths: list[int] = []
    with open(tmp / "input_ids.bin", "wb") as ids_f, open(tmp / "token_type_ids.bin", "wb") as tt_f:
        has_tt = None
        passages = read_passages(corpus, check_duplicates=False)
        bar = tqdm(unit="psg", disable=not progress, desc="tokenise corpus")
        while chunk := list(itertools.islice(passages, SLICE)):
            enc = encoder.tokenize_passages([p.title for p in chunk], [p.text for p in chunk], padding=False,
                                            return_tensors=None)
            has_tt = "token_type_ids" in enc if has_tt is None else has_tt
            for r, ids in enumerate(enc["input_ids"]):
                ids_f.write(np.asarray(ids, dtype=np.int32).tobytes())
                if has_tt:
                    tt_f.write(np.asarray(enc["token_type_ids"][r], dtype=np.int8).tobytes())
                lengths.append(len(ids))
            bar.update(len(chunk))
        bar.close()
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    np.save(tmp / "offsets.npy", offsets)
    for name, dtype, keep in (("input_ids", np.int32, True), ("token_type_ids", np.int8, has_tt)):
        raw = tmp / f"{name}.bin"
        if keep:  # .bin -> .npy through memory maps: the heap never holds the corpus's tokens
            src = np.memmap(raw, dtype=dtype, mode="r") if offsets[-1] else np.zeros(0, dtype=dtype)
            dst = np.lib.format.open_memmap(tmp / f"{name}.npy", mode="w+", dtype=dtype, shape=(int(offsets[-1]),))
            dst[:] = src
            dst.flush()
            del src, dst
        raw.unlink()
    write_json(tmp / "meta.json", {"key": key, **what, "count": len(lengths), "tokens": int(offsets[-1])})
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)

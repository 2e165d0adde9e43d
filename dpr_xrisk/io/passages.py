"""Passage corpora: DPR passages TSV, pyserini JsonCollection JSONL, BEIR ``corpus.jsonl``.

Readers stream (a 21M-passage corpus never sits in memory) and validate every line: missing
fields, empty text and duplicate ids are errors naming the file and line.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from dpr_xrisk.errors import InputError
from dpr_xrisk.io.common import atomic_write, check_file, json_lines, numbered_lines

csv.field_size_limit(sys.maxsize)

DPR_HEADER = ["id", "text", "title"]


class Passage(NamedTuple):
    id: str
    text: str
    title: str = ""

    def contents(self) -> str:
        """pyserini's JsonCollection ``contents``: title, newline, text (DPR wikipedia style)."""
        return f"{self.title}\n{self.text}"


def corpus_file(path: str | Path) -> Path:
    """Resolve a corpus argument: a file, or a BEIR folder holding ``corpus.jsonl``."""
    p = Path(path)
    if p.is_dir():
        if (p / "corpus.jsonl").exists():
            return p / "corpus.jsonl"
        raise InputError("folder has no corpus.jsonl (expected a BEIR folder or a corpus file)", p)
    return check_file(p)


def read_passages(path: str | Path, check_duplicates: bool = True) -> Iterator[Passage]:
    """Stream passages from a TSV (DPR) or JSONL (pyserini / BEIR) corpus."""
    p = corpus_file(path)
    reader = _read_tsv if p.suffix.lower() in (".tsv", ".csv", ".txt") else _read_jsonl
    if p.suffix.lower() not in (".tsv", ".csv", ".txt", ".jsonl", ".json"):
        raise InputError("unknown corpus format; valid: .tsv (DPR passages), .jsonl (pyserini/BEIR)", p)
    seen: set[str] = set()
    for lineno, passage in reader(p):
        if not passage.id:
            raise InputError("empty passage id", p, lineno)
        if not passage.text.strip():
            raise InputError(f"passage {passage.id!r} has empty text", p, lineno)
        if check_duplicates:
            if passage.id in seen:
                raise InputError(f"duplicate passage id {passage.id!r}", p, lineno)
            seen.add(passage.id)
        yield passage


def _read_tsv(p: Path) -> Iterator[tuple[int, Passage]]:
    cols = None
    for lineno, line in numbered_lines(p):
        if not line.strip():
            continue
        fields = next(csv.reader([line], delimiter="\t", quotechar='"'))
        if cols is None:
            cols = {"id": 0, "text": 1, "title": 2}
            if [f.strip().lower() for f in fields] == DPR_HEADER:
                continue  # the DPR header line
        if len(fields) < 2:
            raise InputError(f"expected 'id<TAB>text<TAB>title', got {len(fields)} field(s)", p, lineno)
        title = fields[2] if len(fields) > 2 else ""
        yield lineno, Passage(fields[0].strip(), fields[1], title)


def _read_jsonl(p: Path) -> Iterator[tuple[int, Passage]]:
    for lineno, obj in json_lines(p):
        pid = obj.get("id", obj.get("_id", obj.get("docid")))
        if pid is None:
            raise InputError("missing required field 'id' (or BEIR '_id')", p, lineno)
        pid = str(pid)
        if "contents" in obj:  # pyserini JsonCollection: "Title\ntext"
            contents = obj["contents"]
            if not isinstance(contents, str):
                raise InputError("field 'contents' must be a string", p, lineno)
            title, sep, text = contents.partition("\n")
            if not sep:
                title, text = "", contents
            title = title.strip()
            if len(title) >= 2 and title[0] == title[-1] == '"':
                title = title[1:-1]
        elif "text" in obj:
            text, title = obj["text"], obj.get("title") or ""
            if not isinstance(text, str):
                raise InputError("field 'text' must be a string", p, lineno)
        else:
            raise InputError("missing required field 'contents' (pyserini) or 'text' (BEIR)", p, lineno)
        yield lineno, Passage(pid, text, str(title))


def _clean(s: str) -> str:
    return " ".join(s.split())  # TSV cells may not hold tabs or newlines


def write_passages_tsv(path: str | Path, passages: Iterable[Passage]) -> int:
    """Write DPR's passages TSV (header ``id  text  title``); returns the count."""
    n = 0
    with atomic_write(path) as f:
        f.write("\t".join(DPR_HEADER) + "\n")
        for psg in passages:
            f.write(f"{psg.id}\t{_clean(psg.text)}\t{_clean(psg.title)}\n")
            n += 1
    return n


def write_jsonl_collection(path: str | Path, passages: Iterable[Passage]) -> int:
    """Write a pyserini JsonCollection file (``id``, ``contents`` = title\\ntext)."""
    n = 0
    with atomic_write(path) as f:
        for psg in passages:
            f.write(json.dumps({"id": psg.id, "contents": psg.contents()}, ensure_ascii=False) + "\n")
            n += 1
    return n


def count_passages(path: str | Path) -> int:
    """Count passages without parsing them (for sharding)."""
    p = corpus_file(path)
    n = 0
    with open(p, "rb") as f:
        first = True
        for raw in f:
            if first and p.suffix.lower() != ".jsonl":
                first = False
                if raw.decode("utf-8", "replace").strip().lower().split("\t") == DPR_HEADER:
                    continue
            first = False
            if raw.strip():
                n += 1
    return n

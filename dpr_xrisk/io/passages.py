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
# the names other tools give DPR's columns in a header line (pyserini: docid/contents, BEIR: _id)
HEADER_NAMES = ({"id", "docid", "_id", "pid", "doc_id", "passage_id", "corpus-id"},
                {"text", "contents", "content", "passage", "body"}, {"title"})


def is_header(fields: list[str], p=None, lineno: int | None = None) -> bool:
    """Whether a first line is a header: every field a known column name (``id text title``,
    ``docid contents title``, ...). A header naming the columns in another order than DPR's
    (id, text, title) is an error: its rows would be read with shifted fields."""
    names = [f.strip().lower() for f in fields]
    known = set().union(*HEADER_NAMES)
    if not names or not all(n in known for n in names):
        return False
    if len(names) in (2, 3) and all(n in HEADER_NAMES[i] for i, n in enumerate(names)):
        return True
    raise InputError(f"the header names the columns {'/'.join(names)}; a passages TSV has them in DPR's order: "
                     "id, text[, title]", p, lineno)


class Passage(NamedTuple):
    id: str
    text: str
    title: str = ""

    def contents(self) -> str:
        """pyserini's JsonCollection ``contents``: title, newline, text (DPR wikipedia style)."""
        return f"{self.title}\n{self.text}"


def corpus_file(path: str | Path) -> Path:
    """Resolve a corpus argument: a file, a BEIR folder holding ``corpus.jsonl``, or a table
    (Parquet file or shards, ``save_to_disk`` folder: :mod:`dpr_xrisk.io.arrow`)."""
    from dpr_xrisk.io import arrow

    p = Path(path)
    if arrow.is_table(p):
        return p
    if p.is_dir():
        if (p / "corpus.jsonl").exists():
            return p / "corpus.jsonl"
        raise InputError("folder has no corpus.jsonl (expected a BEIR folder or a corpus file)", p)
    return check_file(p)


def read_passages(path: str | Path, check_duplicates: bool = True) -> Iterator[Passage]:
    """Stream passages from a TSV (DPR) or JSONL (pyserini / BEIR) corpus."""
    from dpr_xrisk.io import arrow

    p = corpus_file(path)
    if arrow.is_table(p):
        reader = _read_table
    elif p.suffix.lower() not in (".tsv", ".csv", ".txt", ".jsonl", ".json"):
        raise InputError("unknown corpus format; valid: .tsv (DPR passages), .jsonl (pyserini/BEIR), "
                         ".parquet or a datasets folder (columns id, text, title)", p)
    else:
        reader = _read_tsv if p.suffix.lower() in (".tsv", ".csv", ".txt") else _read_jsonl
    seen: set[str] = set()
    for lineno, passage in reader(p):
        if not passage.id:
            raise InputError("empty passage id", p, lineno)
        if any(c.isspace() for c in passage.id):
            raise InputError(f"passage id {passage.id!r} contains whitespace (TREC runs and qrels could not hold it)",
                             p, lineno)
        if not passage.text.strip():
            raise InputError(f"passage {passage.id!r} has empty text", p, lineno)
        if check_duplicates:
            if passage.id in seen:
                raise InputError(f"duplicate passage id {passage.id!r}", p, lineno)
            seen.add(passage.id)
        yield passage


def _read_tsv(p: Path) -> Iterator[tuple[int, Passage]]:
    """DPR's ``id<TAB>text<TAB>title`` (header optional; ``id<TAB>text`` without one). Every line
    has the column count of the first (3 after the DPR header): an extra or missing column is an
    error, never a silently dropped or shifted field. Blank lines (nothing but whitespace) are
    skipped, as :func:`count_passages` skips them."""
    ncols = None
    for lineno, line in numbered_lines(p):
        if not line.strip():
            continue
        fields = _split_tsv(line, p, lineno)
        if ncols is None:
            if is_header(fields, p, lineno):
                ncols = len(fields)
                continue  # the header line (DPR's, or pyserini's docid/contents names)
            if len(fields) not in (2, 3):
                raise InputError(f"expected 'id<TAB>text<TAB>title' (or 'id<TAB>text'), got {len(fields)} field(s)",
                                 p, lineno)
            ncols = len(fields)
        if len(fields) != ncols:
            raise InputError(f"expected {ncols} tab-separated fields like the first line, got {len(fields)} "
                             "(a tab or quote inside a text?)", p, lineno)
        title = fields[2] if ncols == 3 else ""
        yield lineno, Passage(fields[0].strip(), fields[1], title)


def unquote(field: str) -> str:
    """A csv-quoted field (``"a ""b"" c"``, as DPR's files and our writer quote texts holding a
    quote) becomes its text; anything else is taken literally, so a text that merely starts with
    a quote never swallows the next column."""
    if len(field) >= 2 and field[0] == field[-1] == '"' and '"' not in field[1:-1].replace('""', ""):
        return field[1:-1].replace('""', '"')
    return field


def _split_tsv(line: str, p: Path, lineno: int) -> list[str]:
    """One line's fields: split on tabs (texts never hold one), each field csv-unquoted if it is
    csv-quoted. The column count is then checked by the caller, so nothing is ever merged or
    shifted in silence."""
    return [unquote(f) for f in line.split("\t")]


def _read_table(p: Path) -> Iterator[tuple[int, Passage]]:
    """A table with DPR's columns ``id`` (or ``_id``/``docid``), ``text``, ``title`` (optional)."""
    from dpr_xrisk.io import arrow

    names = arrow.column_names(p)
    cols = arrow.require_columns(p, names, [("id", "_id", "docid"), "text"])
    title = "title" if "title" in names else None
    arrow.check_column_types(p, {cols["id"]: ("string", "integer"), cols["text"]: ("string",),
                                 **({title: ("string",)} if title else {})})
    wanted = [cols["id"], cols["text"]] + ([title] if title else [])
    for row, rec in arrow.iter_rows(p, wanted):
        pid, text = rec[cols["id"]], rec[cols["text"]]
        if pid is None or not isinstance(text, str):
            raise InputError("row has no id or a text that is not a string", p, row)
        t = rec.get(title) if title else ""
        yield row, Passage(str(pid).strip(), text, t if isinstance(t, str) else "")


def _read_jsonl(p: Path) -> Iterator[tuple[int, Passage]]:
    for lineno, obj in json_lines(p):
        yield lineno, passage_from_json(obj, p, lineno)


def passage_from_json(obj: dict, p=None, lineno: int | None = None) -> Passage:
    """One pyserini JsonCollection (``id``, ``contents`` = title newline text) or BEIR (``_id``,
    ``title``, ``text``) record."""
    pid = obj.get("id", obj.get("_id", obj.get("docid")))
    if pid is None:
        raise InputError("missing required field 'id' (or BEIR '_id')", p, lineno)
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
    return Passage(str(pid), text, str(title))


def _clean(s: str) -> str:
    return " ".join(s.split())  # TSV cells may not hold tabs or newlines


def write_passages_tsv(path: str | Path, passages: Iterable[Passage]) -> int:
    """Write DPR's passages TSV (header ``id  text  title``) with DPR's csv quoting, so a text
    holding or starting with ``"`` reads back exactly; returns the count."""
    n = 0
    with atomic_write(path) as f:
        w = csv.writer(f, delimiter="\t", quotechar='"', quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        w.writerow(DPR_HEADER)
        for psg in passages:
            w.writerow([psg.id, _clean(psg.text), _clean(psg.title)])
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
    """Count passages without parsing them (for sharding and preallocation): exactly the number
    :func:`read_passages` yields, by the same rules (blank lines skipped, DPR header not counted)."""
    from dpr_xrisk.io import arrow

    p = corpus_file(path)
    if arrow.is_table(p):
        return arrow.num_rows(p)  # every row is a passage (an empty one is an error when read)
    tsv = p.suffix.lower() != ".jsonl" and p.suffix.lower() != ".json"
    n, first = 0, True
    for lineno, line in numbered_lines(p):
        if not line.strip():
            continue
        if first and tsv and is_header(_split_tsv(line, p, lineno), p, lineno):
            first = False
            continue
        first = False
        n += 1
    return n

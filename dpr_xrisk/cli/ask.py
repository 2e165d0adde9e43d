from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from dpr_xrisk.cli._options import Bf16

SNIPPET = 200  # characters of each passage shown in the table


def ask(
    index: Annotated[Path, typer.Option("--index", "-i", help="Index folder written by `index`.")],
    question: Annotated[Optional[str], typer.Argument(help="The question. Without it, one question per line is read from standard input (model and index load once).")] = None,
    k: Annotated[int, typer.Option("--k", "-k", min=1, max=1000, help="Passages shown per question.")] = 5,
    answers: Annotated[Optional[list[str]], typer.Option("--answers", "-a", help="An answer string; repeat for several. Marks answer-bearing passages (DPR's has_answer).")] = None,
    bm25_index: Annotated[Optional[Path], typer.Option(help="Fuse with BM25 from this `bm25 index` folder (reciprocal-rank fusion).")] = None,
    corpus: Annotated[Optional[Path], typer.Option("--corpus", "-c", help="Passage texts; default: the corpus recorded in the index (it must be the indexed one).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per question on standard output, for scripts.")] = False,
    truncate: Annotated[bool, typer.Option(help="Cut a question longer than the encoder's query length instead of refusing it.")] = False,
    bf16: Bf16 = None,
):
    """Ask the retriever a question from the terminal: the top passages as a table.

    dpr-xrisk ask --index indexes/x "who wrote hamlet" --answers Shakespeare
    """
    from dpr_xrisk.errors import InputError
    from dpr_xrisk.retrieval.index import load_index
    from dpr_xrisk.retrieval.search import corpus_for_json, load_query_encoder

    if answers:
        from dpr_xrisk.io.questions import check_answers

        check_answers(answers, None, None)  # "" would mark every passage as answer-bearing
    faiss_index, ids, meta = load_index(index)
    texts_from = corpus_for_json(meta, corpus)
    # torch queries on the CPU whatever the index was encoded with: a preview, not a run to score
    import torch

    from dpr_xrisk.runtime.device import resolve_bf16

    bf16 = resolve_bf16(bf16, torch.device("cpu"))  # unset: auto, printed
    encoder = load_query_encoder(meta, bf16=bf16, allow_backend_mismatch=True)
    lookup = PassageLookup(texts_from)
    if bm25_index is not None:
        from dpr_xrisk.io.common import load_json

        bm = load_json(Path(bm25_index) / "meta.json") if (Path(bm25_index) / "meta.json").exists() else None
        if not isinstance(bm, dict) or bm.get("kind") != "bm25":
            raise InputError("not a `bm25 index` folder", bm25_index)
        from dpr_xrisk.retrieval.bm25 import check_same_corpus, open_searcher

        known_ids = frozenset(ids)
        check_same_corpus(bm25_index, meta, known_ids)  # a BM25 index of another corpus would fuse in its ids
        searcher = open_searcher(bm25_index)  # once, for every question
    questions = [question] if question is not None else (line.rstrip("\n") for line in sys.stdin)
    asked = 0
    for n, text in enumerate(questions):
        if question is None and not text.strip():
            continue  # blank lines between questions on standard input
        try:
            hits = answer_one(text, encoder, faiss_index, ids, meta, k, bm25_index, truncate, bf16,
                              known_ids=known_ids if bm25_index is not None else None,
                              searcher=searcher if bm25_index is not None else None)
        except InputError as e:
            if question is not None:
                raise
            typer.echo(f"error: line {n + 1}: {e}", err=True)  # one bad line does not end the session
            continue
        asked += 1
        rows = []
        found = lookup.texts([d for d, _ in hits])
        for rank, (docid, score) in enumerate(hits, start=1):
            title, body = found.get(docid, ("", "(text not found in the corpus)"))
            row = {"rank": rank, "score": round(score, 6), "id": docid, "title": title, "text": body}
            if answers:
                from dpr_xrisk.evaluation.answers import has_answer

                row["has_answer"] = has_answer(body, answers)
            rows.append(row)
        if as_json:
            typer.echo(json.dumps({"question": text.strip(), "hits": rows}, ensure_ascii=False))
        else:
            typer.echo(format_hits(text.strip(), rows, marks=bool(answers)))
    if question is None and asked == 0:
        raise InputError("no question on standard input")


def answer_one(text: str, encoder, faiss_index, ids, meta, k: int, bm25_index, truncate: bool, bf16: bool,
               known_ids=None, searcher=None):
    from dpr_xrisk.errors import InputError
    from dpr_xrisk.io.questions import Question
    from dpr_xrisk.retrieval.search import dense_search, fuse

    text = " ".join(text.split())
    if not text:
        raise InputError("empty question")
    limit = encoder.settings.query_max_length
    n_tokens = len(encoder.tokenizer(encoder.settings.query_prefix + text)["input_ids"])
    if n_tokens > limit and not truncate:
        raise InputError(f"the question has {n_tokens} tokens; the encoder reads {limit} (--truncate cuts it)")
    q = [Question("q", text)]
    depth = max(k, 100) if bm25_index is not None else k
    run = dense_search(encoder, faiss_index, ids, meta, q, k=depth, bf16=bf16, progress=False)
    if bm25_index is not None:
        from dpr_xrisk.retrieval.bm25 import bm25_search, check_same_corpus

        sparse = bm25_search(bm25_index, q, k=depth, progress=False, searcher=searcher)
        check_same_corpus(bm25_index, meta, known_ids if known_ids is not None else frozenset(ids), sparse)
        run = fuse(run, sparse, method="rrf", k=k)
    return run["q"][:k]


class PassageLookup:
    """Passage texts by id. A corpus file: by byte offset (one scan on the first lookup, then one
    seek per passage; memory: one offset per passage), each line parsed by the corpus reader's own
    rules. A table corpus (datasets, Parquet): streamed, memory-mapped, for the ids asked."""

    def __init__(self, corpus: Path):
        self.corpus, self.offsets = Path(corpus), None

    def texts(self, ids: list[str]) -> dict[str, tuple[str, str]]:
        """{id: (title, text)} of the ``ids`` found in the corpus."""
        from dpr_xrisk.io import arrow
        from dpr_xrisk.io.passages import _split_tsv, corpus_file, passage_from_json

        if arrow.is_table(self.corpus):
            from dpr_xrisk.retrieval.search import load_passage_texts

            return load_passage_texts(self.corpus, set(ids))
        if self.offsets is None:
            self.file, self.offsets = corpus_file(self.corpus), {}
            self.jsonl = self.file.suffix.lower() in (".jsonl", ".json")
            with open(self.file, "rb") as f:
                pos = 0
                for raw in f:
                    pid = self._id(raw.decode("utf-8", "replace").lstrip("\ufeff"))
                    if pid:
                        self.offsets.setdefault(pid, pos)
                    pos += len(raw)
        out = {}
        with open(self.file, "rb") as f:
            for docid in ids:
                if docid not in self.offsets:
                    continue
                f.seek(self.offsets[docid])
                line = f.readline().decode("utf-8", "replace").rstrip("\n").rstrip("\r").lstrip("\ufeff")
                if self.jsonl:
                    psg = passage_from_json(json.loads(line), self.file)
                    out[docid] = (psg.title, psg.text)
                else:
                    fields = _split_tsv(line, self.file, 0)
                    out[docid] = ((fields[2] if len(fields) > 2 else ""), fields[1] if len(fields) > 1 else "")
        return out

    def _id(self, line: str) -> str | None:
        from dpr_xrisk.errors import InputError
        from dpr_xrisk.io.passages import _split_tsv, passage_from_json

        line = line.rstrip("\n").rstrip("\r")
        if self.jsonl:
            try:
                return passage_from_json(json.loads(line)).id
            except (ValueError, AttributeError, InputError):
                return None  # a blank or malformed line: the corpus reader refused it at encode time
        from dpr_xrisk.io.passages import is_header

        fields = _split_tsv(line, self.file, 0)
        try:
            if is_header(fields):
                return None  # the header line is not a passage
        except InputError:
            return None  # a header in another order: the corpus reader refused it at encode time
        return fields[0].strip() or None


def format_hits(question: str, rows: list[dict], marks: bool) -> str:
    head = f"Q: {question}"
    lines = [head, "-" * min(len(head), 100)]
    for r in rows:
        mark = (" ✓" if r.get("has_answer") else "  ") if marks else ""
        snippet = r["text"] if len(r["text"]) <= SNIPPET else r["text"][: SNIPPET - 1].rstrip() + "…"
        title = f"[{r['title']}] " if r["title"] else ""
        lines.append(f"{r['rank']:>3}{mark} {r['score']:>9.4f}  {r['id']}  {title}{snippet}")
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Dense pipeline")(ask)

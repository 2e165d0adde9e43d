from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dpr_xrisk.cli._options import K, Corpus, OutJson, OutRun, Queries

app = typer.Typer(no_args_is_help=True, help="BM25 through pyserini/Lucene (k1=0.9, b=0.4 as in DPR/pyserini).")


@app.callback()
def bm25_options(
    verbose: Annotated[bool, typer.Option("--verbose", help="Show Java/Lucene's INFO lines (hidden by default).")] = False,
):
    """BM25 through pyserini/Lucene (k1=0.9, b=0.4 as in DPR/pyserini)."""
    if verbose:
        import os

        os.environ["DPR_XRISK_VERBOSE"] = "1"


@app.command("index")
def bm25_index(
    corpus: Corpus,
    out: Annotated[Path, typer.Option("--out", "-o", help="BM25 index folder to create.")],
    threads: Annotated[int, typer.Option(min=1, help="Lucene indexing threads.")] = 2,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing index folder.")] = False,
    store_raw: Annotated[bool, typer.Option(help="Also store each document's JSON, for pyserini's doc(id).raw(); dpr-xrisk never reads it, and deep searches take twice as long with it.")] = False,
):
    """Build a Lucene BM25 index (contents = title + newline + text) of a corpus."""
    from dpr_xrisk.retrieval.bm25 import build_bm25_index

    typer.echo(f"wrote {build_bm25_index(corpus, out, threads=threads, overwrite=overwrite, store_raw=store_raw)}")


@app.command("search")
def bm25_search(
    index: Annotated[Path, typer.Option("--index", "-i", help="Folder written by `bm25 index`.")],
    queries: Queries,
    out_run: OutRun = None,
    out_json: OutJson = None,
    corpus: Annotated[Path | None, typer.Option("--corpus", "-c", help="Passage texts for --out-json; default: the indexed corpus.")] = None,
    k: K = 100,
    k1: Annotated[float, typer.Option(min=0.0, help="BM25 k1 (term-frequency saturation, >= 0).")] = 0.9,
    b: Annotated[float, typer.Option(min=0.0, max=1.0, help="BM25 b (length normalisation, 0..1).")] = 0.4,
    threads: Annotated[int, typer.Option(min=1, help="Search threads.")] = 2,
):
    """Retrieve the top-k passages per question with BM25."""
    from dpr_xrisk.io.questions import check_unique_ids, read_questions
    from dpr_xrisk.retrieval.bm25 import bm25_meta
    from dpr_xrisk.retrieval.bm25 import bm25_search as search
    from dpr_xrisk.retrieval.search import check_run_outputs, run_meta, write_run_outputs

    check_run_outputs(out_run, out_json)  # before any work
    meta = bm25_meta(index)
    questions = check_unique_ids(read_questions(queries), queries)
    if corpus is None and out_json is not None:
        corpus = Path(meta["corpus"])
        if not corpus.exists():
            from dpr_xrisk.errors import InputError

            raise InputError(f"the corpus recorded in the BM25 index ({corpus}) is not there; give --corpus", index)
    run = search(index, questions, k=k, k1=k1, b=b, threads=threads)
    made_from = run_meta("bm25", questions, queries, index=[str(Path(index).resolve())], k=k, k1=k1, b=b,
                         corpus_fingerprint=meta.get("corpus_fingerprint"))
    for path in write_run_outputs(run, questions, corpus, out_run, out_json, "bm25", made_from):
        typer.echo(f"wrote {path}", err=True)

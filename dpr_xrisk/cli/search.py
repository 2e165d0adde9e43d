from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from dpr_xrisk.cli._options import K, Backend, BatchSize, Bf16, Device, OutJson, OutRun, Quantize, Queries, check_inference, default_batch_size

Hybrid = "Hybrid (dense + BM25)"
Fusion = Annotated[str, typer.Option(help="rrf (reciprocal-rank fusion, scale-free) | interpolation (dense + alpha*bm25, pyserini's hybrid).", rich_help_panel=Hybrid)]
Alpha = Annotated[float, typer.Option(min=0.0, help="Weight of BM25 in interpolation (both lists min-max centred first, so 1 weighs them equally); choose it on dev questions with `tune-fusion`.", rich_help_panel=Hybrid)]


def search(
    index: Annotated[list[Path], typer.Option("--index", "-i", help="Index folder written by `index`; repeat to search per-shard indexes together (top-k merged by score).")],
    queries: Queries,
    out_run: OutRun = None,
    out_json: OutJson = None,
    k: K = 100,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Encoder; default: the one recorded in the index (it must match).")] = None,
    corpus: Annotated[Optional[Path], typer.Option("--corpus", "-c", help="Passage texts for --out-json; default: the corpus recorded in the index.")] = None,
    batch_size: BatchSize = None,
    bf16: Bf16 = None,
    device: Device = "auto",
    quantize: Quantize = "none",
    backend: Backend = "torch",
    faiss_gpu: Annotated[bool, typer.Option("--faiss-gpu", help="Search Flat/IVF indexes on the GPU (needs a GPU faiss: the 'gpu' extra).", rich_help_panel="Index parameters")] = False,
    ef_search: Annotated[Optional[int], typer.Option(min=1, help="HNSW efSearch (recall/speed trade-off).", rich_help_panel="Index parameters")] = None,
    nprobe: Annotated[Optional[int], typer.Option(min=1, help="IVF lists probed per query.", rich_help_panel="Index parameters")] = None,
    bm25_index: Annotated[Optional[Path], typer.Option(help="Fuse with BM25 from this `bm25 index` folder.", rich_help_panel=Hybrid)] = None,
    fusion: Fusion = "rrf",
    alpha: Alpha = 0.5,
    depth: Annotated[int, typer.Option(min=1, help="Candidates taken from each run before fusion.", rich_help_panel=Hybrid)] = 1000,
    allow_backend_mismatch: Annotated[bool, typer.Option("--allow-backend-mismatch", help="Search an index encoded with another --backend/--quantize than the queries' (int8 vectors differ slightly from fp32 ones; torch and ONNX fp32 agree).")] = False,
    allow_corpus_mismatch: Annotated[bool, typer.Option("--allow-corpus-mismatch", help="Accept a --corpus other than the indexed one (has_answer is then scored against its texts).")] = False,
):
    """Retrieve the top-k passages per question from a FAISS index (optionally fused with BM25)."""
    from dpr_xrisk.io.questions import check_unique_ids, read_questions
    from dpr_xrisk.retrieval.encode import provenance
    from dpr_xrisk.retrieval.search import (check_run_outputs, corpus_for_json, dense_search, fuse, load_query_encoder,
                                            open_indexes, run_meta, write_run_outputs)
    from dpr_xrisk.runtime.device import resolve_bf16, resolve_device

    check_run_outputs(out_run, out_json)  # before any work: a bad output path never costs a search
    dev = resolve_device(device)  # checked before anything loads
    check_inference(backend, quantize, dev, bf16)
    bf16 = resolve_bf16(bf16, dev, backend, quantize)  # unset: auto, printed
    questions = check_unique_ids(read_questions(queries), queries)
    loaded = open_indexes(index, ef_search, nprobe, faiss_gpu)
    faiss_index, ids, meta = loaded[0]
    if bm25_index is not None:  # before any search: a BM25 index of another corpus (fingerprints, counts)
        from dpr_xrisk.retrieval.bm25 import bm25_search, check_same_corpus

        dense_ids = frozenset(i for _, ids_, _ in loaded for i in ids_)
        check_same_corpus(bm25_index, meta, dense_ids)
    texts_from = corpus_for_json(meta, corpus, allow_corpus_mismatch) if out_json is not None else None
    encoder = load_query_encoder(meta, model, dev, backend, quantize, bf16, allow_backend_mismatch)
    run = dense_search(encoder, faiss_index, ids, meta, questions, k=max(k, depth) if bm25_index else k,
                       batch_size=default_batch_size(batch_size, dev, bf16), bf16=bf16, more=loaded[1:])
    tag = "dense"
    if bm25_index is not None:
        sparse = bm25_search(bm25_index, questions, k=depth)
        check_same_corpus(bm25_index, meta, dense_ids, sparse)  # and the ids BM25 returned
        run = fuse(run, sparse, method=fusion, alpha=alpha, k=k)
        tag = f"hybrid-{fusion}"
    made_from = run_meta(tag, questions, queries, model=meta["model"], fingerprint=encoder.fingerprint(),
                         quantize=quantize, backend=backend, bf16=bf16, k=k, index=[str(Path(i).resolve()) for i in index],
                         corpus_fingerprint=meta.get("corpus_fingerprint"),
                         inputs=provenance(queries=queries, bm25_index=bm25_index))
    for path in write_run_outputs(run, questions, texts_from, out_run, out_json, tag, made_from):
        typer.echo(f"wrote {path}", err=True)


def fuse_runs(
    dense: Annotated[Path, typer.Option(help="Dense run (TREC or DPR JSON).")],
    sparse: Annotated[Path, typer.Option(help="Sparse (BM25) run (TREC or DPR JSON).")],
    queries: Queries,
    corpus: Annotated[Optional[Path], typer.Option("--corpus", "-c", help="Passage texts for --out-json.")] = None,
    out_run: OutRun = None,
    out_json: OutJson = None,
    k: K = 100,
    fusion: Fusion = "rrf",
    alpha: Alpha = 0.5,
):
    """Fuse two existing runs into a hybrid run."""
    from dpr_xrisk.evaluation.evaluate import read_any_run, run_meta as stored_meta
    from dpr_xrisk.io.questions import check_unique_ids, read_questions
    from dpr_xrisk.retrieval.encode import same_corpus
    from dpr_xrisk.retrieval.search import check_run_outputs, fuse, run_meta, write_run_outputs

    check_run_outputs(out_run, out_json)
    if out_json is not None and corpus is None:
        from dpr_xrisk.errors import InputError

        raise InputError("--out-json needs --corpus (the passage texts)")
    metas = [stored_meta(dense) or {}, stored_meta(sparse) or {}]
    fps = [m.get("corpus_fingerprint") for m in metas]
    if all(fps) and not same_corpus(*fps):
        from dpr_xrisk.errors import InputError

        raise InputError(f"was retrieved from another corpus than {dense} (their .meta.json corpus fingerprints "
                         "differ): fuse runs of one corpus", sparse)
    questions = check_unique_ids(read_questions(queries), queries)
    run = fuse(read_any_run(dense)[0], read_any_run(sparse)[0], method=fusion, alpha=alpha, k=k)
    meta = run_meta(f"hybrid-{fusion}", questions, queries, k=k, alpha=alpha if fusion == "interpolation" else None,
                    runs=[str(Path(dense).resolve()), str(Path(sparse).resolve())], corpus_fingerprint=fps[0] or fps[1])
    for path in write_run_outputs(run, questions, corpus, out_run, out_json, f"hybrid-{fusion}", meta):
        typer.echo(f"wrote {path}", err=True)


def tune_fusion(
    dense: Annotated[Path, typer.Option(help="Dense run of labelled (dev) questions: TREC or DPR JSON.")],
    sparse: Annotated[Path, typer.Option(help="BM25 run of the same questions: TREC or DPR JSON.")],
    qrels: Annotated[Optional[Path], typer.Option("--qrels", help="TREC or BEIR qrels of the questions: MRR@k, recall@k, nDCG@k.")] = None,
    answers: Annotated[Optional[Path], typer.Option("--answers", "-a", help="Questions with answers (DPR QA .tsv, .jsonl, biencoder .json): DPR top-k accuracy; needs --corpus.")] = None,
    corpus: Annotated[Optional[Path], typer.Option("--corpus", "-c", help="Passage texts, for --answers.")] = None,
    metric: Annotated[Optional[str], typer.Option(help="What alpha is chosen by: mrr@10, top5, recall@10, ... (default: mrr@10 with --qrels, else top5).")] = None,
    alpha: Annotated[Optional[list[float]], typer.Option("--alpha", min=0.0, help="Interpolation weights to try; repeat (default: 0.1 0.2 0.3 0.5 0.7 1 1.5 2 3 5).")] = None,
    k: K = 100,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write every candidate's scores and the choice as JSON here.")] = None,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Also write a PNG: each metric against alpha, RRF as a line.")] = None,
):
    """Choose the hybrid's interpolation weight on labelled questions (a dev set, never the test set).

    Fuses the two runs by RRF and by interpolation at every --alpha, scores each on the labelled
    questions, prints the table and the alpha with the best --metric, to pass to
    `fuse`/`search --fusion interpolation --alpha`.
    """
    from dpr_xrisk.retrieval.tuning import load_answer_passages, metric_cutoffs, read_labelled_runs
    from dpr_xrisk.retrieval.search import ALPHA_GRID, tune_alpha

    _check_tune_options(qrels, answers, corpus, plot)
    metric = metric or ("mrr@10" if qrels is not None else "top5")
    ks, qks = metric_cutoffs(metric)
    runs = read_labelled_runs(dense, sparse, qrels, answers, corpus)
    if runs.unlabelled:
        typer.echo(f"note: {runs.unlabelled} run question(s) have no label and are not used", err=True)
    if runs.questions is not None:
        load_answer_passages(runs, corpus)
    result = tune_alpha(runs.dense, runs.sparse, runs.scorer(ks, qks), metric, grid=alpha or ALPHA_GRID, k=k)
    _print_fusion_table(result, metric, len(runs.labelled))
    if out is not None:
        _write_fusion_choice(out, result, metric, len(runs.labelled),
                             inputs=dict(dense=dense, sparse=sparse, qrels=qrels, answers=answers, corpus=corpus))
    if plot is not None:
        _write_fusion_plot(plot, result, metric)


def _check_tune_options(qrels: Optional[Path], answers: Optional[Path], corpus: Optional[Path],
                        plot: Optional[Path]) -> None:
    """tune-fusion's option combinations, refused before anything is read."""
    from dpr_xrisk.errors import InputError

    if qrels is None and answers is None:
        raise InputError("nothing to tune on: give --qrels and/or --answers (with --corpus) for the runs' questions")
    if answers is not None and corpus is None:
        raise InputError("--answers needs --corpus (the passage texts the answers are matched in)")
    if plot is not None and plot.suffix.lower() != ".png":
        raise InputError("--plot writes a PNG image: give a path ending in .png", plot)


def _print_fusion_table(result: dict, metric: str, questions: int) -> None:
    """One line per candidate (RRF, then each alpha) with its mean metrics, the best alpha marked."""
    cols = list(result["rows"][0]["means"])
    typer.echo(f"{'fusion':<20}  " + "  ".join(f"{c:>9}" for c in cols))
    for r in result["rows"]:
        name = "rrf" if r["fusion"] == "rrf" else f"interpolation {r['alpha']:g}"
        mark = "  <- best " + metric if r["fusion"] == "interpolation" and r["alpha"] == result["best_alpha"] else ""
        typer.echo(f"{name:<20}  " + "  ".join(f"{r['means'][c]:>9.4f}" for c in cols) + mark)
    typer.echo(f"{questions} labelled questions; best {metric}: alpha {result['best_alpha']:g} -> "
               f"dpr-xrisk fuse --fusion interpolation --alpha {result['best_alpha']:g}")


def _write_fusion_choice(out: Path, result: dict, metric: str, questions: int, inputs: dict) -> None:
    """--out: every candidate's mean scores, the choice, the command and its inputs, as JSON."""
    import shlex
    import sys

    from dpr_xrisk.io.common import write_json
    from dpr_xrisk.retrieval.encode import provenance

    rows = [{k_: v for k_, v in r.items() if k_ != "per_question"} for r in result["rows"]]
    write_json(out, {"metric": metric, "best_alpha": result["best_alpha"], "questions": questions, "rows": rows,
                     "command": shlex.join(["dpr-xrisk", *sys.argv[1:]]), "inputs": provenance(**inputs)})
    typer.echo(f"wrote {out}", err=True)


def _write_fusion_plot(plot: Path, result: dict, metric: str) -> None:
    """--plot: the chosen metric (and top5/top20/mrr@10 where scored) against alpha, as a PNG."""
    from dpr_xrisk.io.common import atomic_write
    from dpr_xrisk.report.charts import fusion_chart

    cols = list(result["rows"][0]["means"])
    shown = [metric] + [c for c in cols if c != metric and c in ("top5", "top20", "mrr@10")]
    png = fusion_chart(result["rows"], list(dict.fromkeys(shown)), result["best_alpha"], metric)
    with atomic_write(plot, "wb") as f:
        f.write(png)
    typer.echo(f"wrote {plot}", err=True)


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Dense pipeline")(search)
    app.command("fuse", rich_help_panel="Dense pipeline")(fuse_runs)
    app.command("tune-fusion", rich_help_panel="Dense pipeline")(tune_fusion)

from __future__ import annotations

import shlex
import sys

from pathlib import Path
from typing import Annotated, Optional

import typer


def evaluate(
    run: Annotated[list[Path], typer.Option("--run", "-r", help="Run(s) to score: DPR retrieval .json or TREC run; repeat for side by side.")],
    answers: Annotated[Optional[Path], typer.Option("--answers", "-a", help="Questions with answers (DPR QA .tsv, .jsonl, biencoder .json), for TREC runs.")] = None,
    corpus: Annotated[Optional[Path], typer.Option("--corpus", "-c", help="Passage texts, for DPR accuracy of TREC runs.")] = None,
    qrels: Annotated[Optional[Path], typer.Option("--qrels", help="TREC or BEIR qrels: adds recall@k, MRR@k, nDCG@k.")] = None,
    k: Annotated[list[int], typer.Option("--k", "-k", min=1, help="Cut-offs of DPR top-k accuracy.")] = [1, 5, 20, 100],
    qrels_k: Annotated[list[int], typer.Option("--qrels-k", min=1, help="Cut-offs of the qrels metrics.")] = [10, 100],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write all results as JSON here.")] = None,
    per_question: Annotated[bool, typer.Option(help="Include each question's first answer-bearing rank in --out.")] = False,
    regex: Annotated[bool, typer.Option(help="Answers are regular expressions (CuratedTREC).")] = False,
    strict: Annotated[bool, typer.Option("--strict/--no-strict", help="A question of --answers or --qrels missing from the run is an error (--strict) or a miss counted in n (--no-strict, the table says how many).")] = True,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Also write one PNG chart: top-k accuracy vs the evaluated k's (or recall/MRR/nDCG bars). Full reports: `dpr-xrisk report`.")] = None,
):
    """Score runs: DPR top-k accuracy (answers) and recall/MRR/nDCG (qrels), as a table and JSON."""
    from dpr_xrisk.retrieval.encode import provenance
    from dpr_xrisk.evaluation.evaluate import check_ks, check_qrels_docs, evaluate_run, read_any_run
    from dpr_xrisk.io.common import write_json
    from dpr_xrisk.io.questions import check_unique_ids, read_questions
    from dpr_xrisk.io.trec import read_qrels
    from dpr_xrisk.retrieval.search import load_passage_texts

    if plot is not None and plot.suffix.lower() != ".png":
        from dpr_xrisk.errors import InputError

        raise InputError("--plot writes a PNG image: give a path ending in .png", plot)
    check_ks(k)
    check_ks(qrels_k, "--qrels-k")
    from dpr_xrisk.io.common import check_output

    for path in (out, plot):
        if path is not None:
            check_output(path)  # before any work
    questions = check_unique_ids(read_questions(answers), answers) if answers else None
    judged = read_qrels(qrels) if qrels else None
    passages = None
    if corpus is not None and (questions is not None or judged is not None):  # one pass over the corpus
        wanted = {d for r in run for hits in read_any_run(r)[0].values() for d, _ in hits} if questions else set()
        judged_docs = {d for docs in judged.values() for d in docs} if judged else set()
        passages = load_passage_texts(corpus, wanted | judged_docs)
        if judged is not None:
            check_qrels_docs(judged, passages.keys(), corpus)
        if questions is None:
            passages = None
    results = [evaluate_run(r, questions, passages, judged, ks=k, qrels_ks=qrels_k, regex=regex,
                            per_question=per_question, strict=strict, answers_path=answers, qrels_path=qrels,
                            corpus_path=corpus) for r in run]
    typer.echo(format_table(results))
    for r in results:
        if r.get("missing_in_run"):
            typer.echo(f"note: {Path(r['run']).name}: {r['missing_in_run']} question(s) missing from the run, "
                       "scored as misses (included in n)", err=True)
        if r.get("num_qrels_questions"):
            typer.echo(f"note: {Path(r['run']).name}: the qrels metrics average over {r['num_qrels_questions']} "
                       "judged question(s)", err=True)
    if out is not None:
        write_json(out, {"results": results, "command": shlex.join(["dpr-xrisk", *sys.argv[1:]]),
                         "inputs": provenance(run=list(run), answers=answers, corpus=corpus, qrels=qrels)})
        typer.echo(f"wrote {out}", err=True)
    if plot is not None:
        from dpr_xrisk.report.charts import write_quick_eval_chart

        write_quick_eval_chart(results, plot)
        typer.echo(f"wrote {plot}", err=True)


def format_table(results: list[dict]) -> str:
    """Plain-text table: one row per run, one column per metric (4 decimals, like pyserini)."""
    cols = list(dict.fromkeys(m for r in results for m in r["metrics"]))
    names = [Path(r["run"]).name for r in results]
    w = max(len("run"), *(len(n) for n in names))
    lines = [f"{'run':<{w}}  {'n':>5}  " + "  ".join(f"{c:>9}" for c in cols)]
    for name, r in zip(names, results):
        vals = "  ".join(f"{r['metrics'][c]:>9.4f}" if c in r["metrics"] else f"{'-':>9}" for c in cols)
        lines.append(f"{name:<{w}}  {r['num_questions']:>5}  {vals}")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Evaluation")(evaluate)

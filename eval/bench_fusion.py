"""How much of the hybrid's quality is the fusion weight? The finished runs of eval/bench_full.py
fused with BM25 by RRF, by interpolation at fixed weights, and by interpolation with the weight
chosen by leave-one-article-out cross-validation (`dpr-xrisk tune-fusion`'s rule on the other
articles' questions), with paired 95 % bootstrap intervals.

    python eval/bench_fusion.py            # every finished run of eval/work/full/runs (minutes, no encoding)

Inputs (made by bench_full.py, git-ignored): each run's dense TREC run (run.trec: the 3,244
held-out questions' top-100 of 102,067 passages), the BM25 run of the same questions, the test
qrels (own paragraph) and answers. Nothing is re-encoded: fusion reorders the two top-100 lists.

Protocol: the 12 test articles are the folds. For each article, alpha is the grid weight with the
best MRR@10 (by qrels) over the other 11 articles' questions; that article's questions are scored
with it. No question is ever scored by a weight chosen on itself or on its own article. The
"best on test" column chooses alpha on all test questions: an upper bound, not a result.
Results: eval/RESULTS-fusion.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402
from _common import EVAL, WORK  # noqa: E402
from dpr_xrisk.evaluation.evaluate import read_any_run  # noqa: E402
from dpr_xrisk.io.questions import read_questions  # noqa: E402
from dpr_xrisk.io.trec import read_qrels  # noqa: E402
from dpr_xrisk.retrieval.search import ALPHA_GRID, best_alpha, load_passage_texts, per_question_metrics, tune_alpha  # noqa: E402

FULL = WORK / "full"
SQUAD = WORK / "refresh" / "squad"  # bench_full's split: convert squad --test-fraction 0.25 --seed 0
METRICS = ("top1", "top5", "top20", "mrr@10")
CHOOSE_BY = "mrr@10"
FIXED = (0.5, 1.0)  # bench_full's weight, and equal weights of the centred scores (no tuning)


def load(args):
    qa, qrels_path = SQUAD / "test.qa.tsv", SQUAD / "test.qrels.tsv"
    questions = read_questions(qa)
    qrels = read_qrels(qrels_path)
    bm25_path = FULL / f"bm25-wiki100000-q{len(questions)}.json"
    corpus = FULL / "eval-corpus-wiki100000.tsv"
    for p in (qa, qrels_path, bm25_path, corpus):
        if not p.exists():
            raise SystemExit(f"missing {p}: run eval/bench_full.py first")
    sparse = read_any_run(bm25_path)[0]
    runs = {}
    for d in sorted(args.runs.iterdir()):
        if (d / "run.trec").exists() and (d / "bench.json").exists():
            runs[d.name] = read_any_run(d / "run.trec")[0]
    if not runs:
        raise SystemExit(f"no finished run with run.trec under {args.runs}")
    qids = [q.qid for q in questions]
    for name, run in runs.items():
        if set(run) != set(qids):
            raise SystemExit(f"{name}: run.trec has {len(run)} questions, the test set {len(qids)}")
    if set(sparse) != set(qids) or set(qrels) != set(qids):
        raise SystemExit("BM25 run / qrels do not cover exactly the test questions")
    wanted = {d for run in [sparse, *runs.values()] for hits in run.values() for d, _ in hits}
    passages = load_passage_texts(corpus, wanted)
    if wanted - passages.keys():
        raise SystemExit(f"{len(wanted - passages.keys())} retrieved passages are not in {corpus}")
    # the fold of a question: its article, from its judged paragraph id squad-<article>-<paragraph>
    article = {}
    for q in qids:
        arts = {d.split("-")[1] for d in qrels[q]}
        if len(arts) != 1:
            raise SystemExit(f"question {q}: judged paragraphs of {len(arts)} articles")
        article[q] = arts.pop()
    return questions, qrels, sparse, runs, passages, article, qids


def boot(diff: np.ndarray, rng, n: int = 10000) -> tuple[float, float]:
    means = diff[rng.integers(0, len(diff), size=(n, len(diff)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def boot_articles(diff: np.ndarray, group: np.ndarray, rng, n: int = 10000) -> tuple[float, float]:
    """Cluster bootstrap: the articles (``group``: each question's article index) are resampled
    with replacement and the mean is taken over their questions; questions of one article are
    not independent draws, and the cross-validated weight is fixed per article."""
    sums = np.bincount(group, weights=diff)
    counts = np.bincount(group).astype(float)
    idx = rng.integers(0, len(sums), size=(n, len(sums)))
    means = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, default=FULL / "runs")
    ap.add_argument("--out", type=Path, default=EVAL / "RESULTS-fusion.md")
    ap.add_argument("--json", type=Path, default=None,
                    help="where the JSON results go (default eval/results/bench_fusion.json); with --runs of a subset "
                         "of the runs, give --out and --json elsewhere so the full report is not replaced")
    args = ap.parse_args()
    questions, qrels, sparse, runs, passages, article, qids = load(args)
    folds = sorted(set(article.values()), key=int)
    print(f"{len(runs)} runs, {len(qids)} questions, {len(folds)} article folds", flush=True)

    matched: dict = {}  # answer matches, shared by every run and candidate

    def score(run):
        return per_question_metrics(run, qids, qrels=qrels, questions=questions, passages=passages,
                                    ks=(1, 5, 20), qrels_ks=(10,), answer_cache=matched)

    rows, per_q = [], {}
    bm25 = score(sparse)
    for name, dense in runs.items():
        res = tune_alpha(dense, sparse, score, CHOOSE_BY, grid=ALPHA_GRID, k=100)
        by = {("rrf" if r["fusion"] == "rrf" else r["alpha"]): r["per_question"] for r in res["rows"]}
        cv, chosen = {m: {} for m in METRICS}, {}
        for f in folds:
            held = [q for q in qids if article[q] == f]
            a = best_alpha(res["rows"], CHOOSE_BY, [q for q in qids if article[q] != f])
            chosen[f] = a
            for m in METRICS:
                cv[m].update({q: by[a][m][q] for q in held})
        systems = {"dense": score(dense), "rrf": by["rrf"], **{f"interp {a:g}": by[a] for a in FIXED},
                   "interp cv": cv, f"best on test ({res['best_alpha']:g})": by[res["best_alpha"]]}
        per_q[name] = systems
        row = {"run": name, "chosen": chosen, "best_on_test": res["best_alpha"],
               "means": {s: {m: float(np.mean([v[m][q] for q in qids])) for m in METRICS} for s, v in systems.items()}}
        rows.append(row)
        print(name, {s: round(v["top5"], 4) for s, v in row["means"].items()}, "cv alphas", sorted(set(chosen.values())), flush=True)

    rng = np.random.default_rng(0)
    arr = lambda d, m: np.array([d[m][q] for q in qids])  # noqa: E731
    group = np.array([folds.index(article[q]) for q in qids])
    comparisons = [(name, f"{a} − {b}", systems[a], systems[b]) for name, systems in per_q.items()
                   for a, b in (("interp cv", "rrf"), ("interp cv", "interp 0.5"), ("interp 1", "rrf"))]
    if "zero-shot" in per_q:
        comparisons += [(name, f"{s}: run − zero-shot", systems[s], per_q["zero-shot"][s])
                        for name, systems in per_q.items() if name != "zero-shot" for s in ("interp cv", "rrf")]
    paired = []
    for name, what, x, y in comparisons:
        diffs = {m: arr(x, m) - arr(y, m) for m in METRICS}
        paired.append({"run": name, "what": what, **{m: (float(d.mean()), *boot(d, rng)) for m, d in diffs.items()},
                       "articles": {m: boot_articles(d, group, rng) for m, d in diffs.items()}})
    write(args, rows, paired, bm25, qids, folds)


def write(args, rows, paired, bm25, qids, folds) -> None:
    mach = common.machine()
    lines = ["# Hybrid fusion weight: RRF, fixed interpolation, cross-validated interpolation (issue #17)", "",
             f"Command: `{' '.join(['python eval/bench_fusion.py', *sys.argv[1:]])}`  ",
             f"Date: {mach['date']}  ",
             f"Machine: {mach['cpus']} CPU cores, torch {mach['torch']} (no encoding: fusion of stored runs).", "",
             f"Data: the finished runs of eval/bench_full.py (dense top-100 of {len(qids):,} held-out SQuAD questions "
             "against 102,067 passages) and the BM25 top-100 of the same questions. Interpolation = dense + alpha x BM25, "
             "each list min-max centred first (1 = equal weights; `dpr-xrisk fuse --fusion interpolation`). "
             f"**interp cv**: alpha chosen by MRR@10 on the other {len(folds) - 1} articles' questions for each of the "
             f"{len(folds)} test articles (leave-one-article-out); grid {', '.join(f'{a:g}' for a in ALPHA_GRID)}. "
             "**best on test**: alpha chosen on all test questions, an upper bound only. "
             "top-k = DPR answer accuracy; MRR@10 by the question's own paragraph (qrels).", "",
             f"BM25 alone: top-1 {np.mean(list(bm25['top1'].values())):.4f}, top-5 {np.mean(list(bm25['top5'].values())):.4f}, "
             f"top-20 {np.mean(list(bm25['top20'].values())):.4f}, MRR@10 {np.mean(list(bm25['mrr@10'].values())):.4f}.", "",
             "| run | fusion | top-1 | top-5 | top-20 | MRR@10 |", "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        for s, m in r["means"].items():
            lines.append(f"| {r['run']} | {s} | " + " | ".join(f"{m[k]:.4f}" for k in METRICS) + " |")
    lines += ["", "Weights chosen by the cross-validation (held-out article: alpha):", ""]
    for r in rows:
        lines.append(f"- {r['run']}: " + ", ".join(f"{f}: {a:g}" for f, a in r["chosen"].items()))
    lines += ["", "## Paired differences (points, 95 % bootstrap interval over the questions)", "",
              "| run | comparison | Δ top-1 | Δ top-5 | Δ top-20 | Δ MRR@10 |", "|---|---|---|---|---|---|"]
    for p in paired:
        lines.append(f"| {p['run']} | {p['what']} | " + " | ".join(
            f"{100 * p[m][0]:+.1f} [{100 * p[m][1]:+.1f}, {100 * p[m][2]:+.1f}]" for m in METRICS) + " |")
    lines += ["", f"The same differences with an article-cluster bootstrap ({len(folds)} articles resampled with "
              "replacement, each with all its questions): wider, because questions of one article are not independent "
              "and the cross-validated weight is fixed per article (the weight choice is not redone inside the resampling; "
              "every fold chose the same weight here).", "",
              "| run | comparison | Δ top-1 | Δ top-5 | Δ top-20 | Δ MRR@10 |", "|---|---|---|---|---|---|"]
    for p in paired:
        lines.append(f"| {p['run']} | {p['what']} | " + " | ".join(
            f"{100 * p[m][0]:+.1f} [{100 * p['articles'][m][0]:+.1f}, {100 * p['articles'][m][1]:+.1f}]"
            for m in METRICS) + " |")
    lines.append("")
    common.write_report(args.out, "\n".join(lines))  # the hand-written Observations survive
    common.RESULTS.mkdir(exist_ok=True)
    (args.json or common.RESULTS / "bench_fusion.json").write_text(json.dumps({"rows": rows, "paired": paired}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""Retrieval quality after a short fine-tuning of MiniLM on SQuAD v1.1 dev split by article:
zero-shot vs InfoNCE (in-batch only; + BM25 hard negatives, the DPR recipe) vs DPM and listwise
with the same BM25 negatives, each with zeta-scale 0 and 1; same budget for every trained system.

    python eval/bench_train_squad.py --jobs 2          # 7 systems, seeds 0 1 2

It shares its data, protocol and run directory with eval/bench_refresh.py (issue #4), so the
two benchmarks differ only in their systems, and the runs they have in common (zero-shot and the
DPR recipe, there called ``a-dpr-bm25``) are computed once and reused by whichever runs second:

- train split (7,326 questions, 36 articles) / test split (3,244 questions, 12 other articles) of
  ``dpr-xrisk convert squad --test-fraction 0.25 --seed 0``;
- training questions: a fixed random subset of 1,024 (numpy default_rng(0)); training corpus
  (``--corpus``, the BM25 index the negatives come from, N of the in-batch q = n_b/N): the 1,543
  paragraphs of the training articles only, so no test paragraph is seen in training, not even as
  a negative;
- evaluation: 1,000 random test questions against the test articles' 524 paragraphs
  (``--eval-corpus test-articles``) or all 2,067 (``all``), with the real CLI (``encode --fp32``,
  ``index`` Flat, ``search --k 20``, ``evaluate``): DPR top-1/5/20 and MRR@10.

Every trained system: ``--model minilm --batch-size 16 --hard-negatives 1 --lr 2e-5
--max-steps 32 --threads 1``, everything else at its default. After every run the results JSON
(eval/results/bench_train_squad.json), the report eval/RESULTS-train-quality.md and the plot
eval/train_squad_quality.png are rewritten; a finished run with the same settings is reused, so
rerunning the command continues where it stopped.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_refresh as br  # noqa: E402
import _common as common  # noqa: E402
from _common import EVAL, RESULTS, fmt, machine  # noqa: E402

BM25_FLAGS = ["--negatives", "bm25"]
NEW_SYSTEMS = {
    "infonce-inbatch": ("(b) InfoNCE, in-batch negatives only", ["--loss", "infonce", "--negatives", "none"]),
    "dpm-bm25-z0": ("(d) DPM + BM25 negatives, zeta-scale 0", ["--loss", "dpm", *BM25_FLAGS, "--zeta-scale", "0"]),
    "dpm-bm25-z1": ("(e) DPM + BM25 negatives, zeta-scale 1", ["--loss", "dpm", *BM25_FLAGS, "--zeta-scale", "1"]),
    # logistic ℓ: with the linear ℓ and one positive per question (SQuAD), listwise is DPM shifted by
    # the constant τ·log|C|, i.e. the same training (see RESULTS-refresh.md, d-listwise-refresh-z1)
    "listwise-bm25-z0": ("(f) listwise (logistic pairwise loss) + BM25 negatives, zeta-scale 0",
                         ["--loss", "listwise", "--pairwise-loss", "logistic", *BM25_FLAGS, "--zeta-scale", "0"]),
    "listwise-bm25-z1": ("(g) listwise (logistic pairwise loss) + BM25 negatives, zeta-scale 1",
                         ["--loss", "listwise", "--pairwise-loss", "logistic", *BM25_FLAGS, "--zeta-scale", "1"]),
}
br.SYSTEMS.update(NEW_SYSTEMS)
ORDER = ["a-dpr-bm25", "dpm-bm25-z1", "listwise-bm25-z1", "dpm-bm25-z0", "listwise-bm25-z0", "infonce-inbatch"]
LABEL = {"a-dpr-bm25": "infonce-bm25 (DPR recipe)"}
METRICS = br.METRICS


def write_report(path: Path, record: dict, png: Path) -> None:
    a, data, summ, runs, mach = record["args"], record["data"], record["summary"], record["runs"], record["machine"]
    systems = ["zero-shot", *[s for s in ORDER if s in a["systems"]]]
    L = [
        "# Training quality on SQuAD v1.1 dev (split by article): InfoNCE vs DPM vs listwise",
        "",
        f"Command: `{record['command']}`  ",
        f"Date: {record['started']} (last update {record['updated']})  ",
        f"Machine: {mach['cpus']} CPU cores, {mach['mem_gib']} GiB, no GPU, Python {mach['python']}, torch "
        f"{mach['torch']}; every command with 1 thread, {a['jobs']} run(s) at a time (`--jobs`); no other "
        "benchmark ran at the same time.  ",
        f"Status: **{record['status']}** — {record['finished_runs']} of {record['planned_runs']} runs finished "
        f"(seeds planned: {', '.join(map(str, a['seeds']))}).",
        "",
        "## Setup",
        "",
        "Same data, protocol and run directory as [RESULTS-refresh.md](RESULTS-refresh.md) (issue #4); the runs "
        "both benchmarks contain (zero-shot, the DPR recipe `a-dpr-bm25`) are the same runs.",
        "",
        "- **Data**: `dpr-xrisk convert squad --test-fraction 0.25 --seed 0` of ../shared/data/squad-v1.1-dev: "
        f"split by article, train split {data['train_split_questions']:,} questions (36 articles), test split "
        f"{data['test_split_questions']:,} questions (12 other articles, never trained on).",
        f"- **Training**: a fixed random subset of {data['train_questions']:,} training questions "
        "(`numpy.random.default_rng(0)`); `--corpus` = the "
        f"{data['train_corpus_passages']:,} paragraphs of the training articles only (no test paragraph is seen "
        "in training, not even as a negative; it is also N of the in-batch q = n_b/N); BM25 negatives: "
        "`dpr-xrisk bm25 index` of that corpus, top 100 minus positives and answer-bearing passages.",
        f"- **Budget** (every trained system): `--model minilm --batch-size {a['batch_size']} --hard-negatives 1 "
        f"--lr {a['lr']} --max-steps {a['max_steps']} --threads 1` = {a['max_steps'] * a['batch_size']:,} question "
        f"visits ({a['max_steps'] * a['batch_size'] / data['train_questions']:.2f} epoch of the subset); "
        "everything else at its default (tau 0.05, warm-up 10 % + linear decay, grad clip 2, training lengths "
        "query 32 / passage 128, minibatch estimator, one positive); the listwise systems use the logistic pairwise loss "
        "(with the linear one and a single positive, listwise equals DPM up to a constant).",
        f"- **Evaluation**: {data['test_questions']:,} random test-split questions (`default_rng(0)`) against "
        + (f"the {data['eval_passages']:,} paragraphs of the 12 test articles (the hardest distractors, the "
           "other paragraphs of a question's own article, are all in; the training articles' paragraphs and the "
           "100k Wikipedia passages are left out for CPU time)" if a["eval_corpus"] == "test-articles" else
           f"all {data['eval_passages']:,} SQuAD paragraphs (the 100k Wikipedia passages left out for CPU time)")
        + "; `encode --fp32 --threads 1` at MiniLM's own inference lengths (query 64 / passage 256, for zero-shot "
        "and trained models alike), `index` (Flat), `search --k 20`, `evaluate --k 1 --k 5 --k 20 --qrels-k 10`: "
        "DPR top-k answer accuracy and MRR@10 against the question's own paragraph.",
        "",
        "## Systems",
        "",
        "| system | what |",
        "|---|---|",
    ]
    for s in systems:
        L.append(f"| {LABEL.get(s, s)} | {br.SYSTEMS[s][0]} |")
    L += ["", "## Results (mean ± std over seeds)", "",
          "| system | seeds | top-1 | top-5 | top-20 | MRR@10 | train wall s | train CPU s |",
          "|---|---|---|---|---|---|---|---|"]
    for s in systems:
        if s not in summ:
            L.append(f"| {LABEL.get(s, s)} | 0 | | | | | | |")
            continue
        row = summ[s]
        tw = fmt(row["train_wall_s"], row["n"], 0) if "train_wall_s" in row else "—"
        tc = fmt(row["train_cpu_s"], row["n"], 0) if "train_cpu_s" in row else "—"
        L.append(f"| {LABEL.get(s, s)} | {row['n']} | " + " | ".join(fmt(row[k], row["n"]) for k in METRICS) + f" | {tw} | {tc} |")
    L += ["", "std = sample standard deviation over seeds (0 with one seed); zero-shot is deterministic and "
          "runs once. With 1,000 questions the binomial standard error of one run's top-5 is ~1 point.", "",
          f"![top-5 / top-20 per system]({png.name})", "",
          "## Per-run numbers", "",
          "| system | seed | top-1 | top-5 | top-20 | MRR@10 | train wall s | train CPU s | loss first5 → last5 |",
          "|---|---|---|---|---|---|---|---|---|"]
    for s in systems:
        for seed, r in sorted(runs.get(s, {}).items()):
            m = r["metrics"]
            loss = f"{r['loss_first5']:.3f} → {r['loss_last5']:.3f}" if "loss_first5" in r else "—"
            L.append(f"| {LABEL.get(s, s)} | {seed} | {m['top1']:.4f} | {m['top5']:.4f} | {m['top20']:.4f} | "
                     f"{m['mrr@10']:.4f} | {r.get('train_wall_s', '—')} | {r.get('train_cpu_s', '—')} | {loss} |")
    L += ["", "train wall / CPU = the whole `dpr-xrisk train` process (model load, BM25 mining, the loop, saving). "
          "Losses of different systems are on different scales.", ""]
    if record.get("failed"):
        L += ["## Failed runs", ""] + [f"- {f['system']} seed {f['seed']}: `{f['error'][-300:]}`"
                                       for f in record["failed"]] + [""]
    common.write_report(path, "\n".join(L) + "\n")  # the hand-written Observations survive


def plot(path: Path, record: dict) -> None:
    summ, a, d = record["summary"], record["args"], record["data"]
    systems = [s for s in ["zero-shot", *ORDER] if s in summ]
    if systems:
        common.bar_chart(path, summ, systems, [("top1", "#55A868"), ("top5", "#4C72B0"), ("top20", "#DD8452")],
                         [f"{LABEL.get(s, s)}\n(n={summ[s]['n']})" for s in systems],
                         f"SQuAD v1.1 dev, held-out articles: {d['test_questions']} questions, "
                         f"{d['eval_passages']:,} passages\nMiniLM, {a['max_steps']} steps x {a['batch_size']} "
                         f"questions, lr {a['lr']}; mean ± std over seeds")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", nargs="+", default=list(ORDER), choices=ORDER)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--max-steps", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--train-questions", type=int, default=1024, help="fixed random subset of the train split")
    ap.add_argument("--test-questions", type=int, default=1000, help="fixed random subset of the test split")
    ap.add_argument("--eval-corpus", choices=["all", "test-articles"], default="test-articles")
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time (each a 1-thread process)")
    ap.add_argument("--save-every", type=int, default=8, help="checkpoint interval (a killed run resumes)")
    ap.add_argument("--render", action="store_true",
                    help="run nothing: rewrite the report and plot from the last results record")
    args = ap.parse_args()
    # the settings bench_refresh's one_run keys a run on (refresh options are unused by these systems)
    args.refresh_every, args.refresh_k, args.bf16_encode = 16, 50, False
    command = "python eval/bench_train_squad.py" + (" " + " ".join(sys.argv[1:]) if len(sys.argv) > 1 else "")
    args.work = br.BASE / "runs"
    args.work.mkdir(parents=True, exist_ok=True)
    results, report, png = RESULTS / "bench_train_squad.json", EVAL / "RESULTS-train-quality.md", EVAL / "train_squad_quality.png"

    if args.render:
        record = json.loads(results.read_text())[-1]
        write_report(report, record, png)
        plot(png, record)
        print(f"rewrote {report} and {png}")
        return
    data = br.prepare_data(args)
    plan = [("zero-shot", None)] + [(s, seed) for seed in args.seeds for s in ORDER if s in args.systems]
    history = json.loads(results.read_text()) if results.exists() else []
    record = {"machine": machine(), "command": command, "started": machine()["date"], "updated": None,
              "status": "running", "planned_runs": len(plan), "finished_runs": 0,
              "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "data": data, "runs": {}, "summary": {}}
    history.append(record)
    lock = threading.Lock()

    def flush(status: str) -> None:
        record["status"], record["updated"] = status, machine()["date"]
        record["summary"] = br.summarise(record["runs"])
        common.replace_text(results, json.dumps(history, indent=2) + "\n")
        write_report(report, record, png)
        plot(png, record)

    def task(i, system, seed):
        try:
            print(f"\n=== run {i + 1}/{len(plan)}: {system} seed {seed} ===", flush=True)
            rec = br.one_run(args, data, system, seed, args.max_steps if seed is not None else None)
        except Exception as e:  # noqa: BLE001 - one failed run must not stop the grid
            print(f"[{system} s{seed}] FAILED: {e}", flush=True)
            with lock:
                record.setdefault("failed", []).append({"system": system, "seed": seed, "error": str(e)[-2000:]})
                flush("running")
            return
        with lock:
            record["runs"].setdefault(system, {})[str(seed if seed is not None else 0)] = rec
            record["finished_runs"] += 1
            flush("running")

    flush("running")
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for i, (system, seed) in enumerate(plan):
            pool.submit(task, i, system, seed)
    flush("finished" if record["finished_runs"] == len(plan) else "stopped")


if __name__ == "__main__":
    main()

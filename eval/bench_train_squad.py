"""Retrieval quality after a short fine-tuning of MiniLM on SQuAD v1.1 dev (split by article):
zero-shot vs InfoNCE (in-batch; + BM25 hard negatives) vs DPM and listwise (BM25 negatives,
zeta-scale 0 and 1), every trained system with the same budget, several seeds.

    python eval/bench_train_squad.py            # 7 systems (+ a truncation control), seeds 0 1 2
    python eval/bench_train_squad.py --corpus test-articles --jobs 2   # what fitted the CPU budget

The control ``zero-shot-128`` is untrained MiniLM saved with the trained models' inference lengths
(query 32 / passage 128: training saves its lengths, while MiniLM itself encodes up to 256), to
separate the effect of training from that of truncating long SQuAD paragraphs.

Data: ``dpr-xrisk convert squad --test-fraction 0.25 --seed 0`` of
../shared/data/squad-v1.1-dev/dev-v1.1.json (train split: 7,326 questions of 36 articles; test
split: 3,244 questions of the 12 other articles, never trained on). BM25 hard negatives come from
``dpr-xrisk bm25 index`` over the 2,067 SQuAD paragraphs. Evaluation: a fixed random subset of
``--test-questions`` test questions (numpy default_rng(0), 1,000 by default) retrieved from all
2,067 SQuAD paragraphs (+ the first ``--wiki N`` passages of ../shared/data/wikipedia-100k as
distractors; default 0, i.e. the issue's 100k Wikipedia distractors are left out for CPU time;
``--corpus test-articles`` keeps only the 524 paragraphs of the test articles),
with the real CLI: ``train`` -> ``encode`` (fp32; ``--bf16`` optional) -> ``index`` (Flat, exact) -> ``search`` ->
``evaluate`` (DPR top-1/5/20 answer accuracy, MRR@10 against the question's own paragraph).

Systems run seed-major (all systems for seed 0, then seed 1, ...); after every run the results
JSON (eval/results/bench_train_squad.json, this invocation's record updated in place), the
report eval/RESULTS-train-quality.md and the plot eval/train_squad_quality.png are rewritten, so
partial results survive. A finished run (its eval.json under eval/work/runs/<system>-s<seed>,
made with the same settings) is reused, so rerunning the command continues where it stopped.
Everything derived from ../shared/data lives in eval/work/ (git-ignored).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import EVAL, RESULTS, SHARED, WIKI, WORK, machine  # noqa: E402

CLI = str(Path(sys.executable).parent / "dpr-xrisk")
SQUAD_JSON = SHARED / "squad-v1.1-dev" / "dev-v1.1.json"
SQUAD = WORK / "squad"
BM25 = WORK / "squad-bm25"
METRICS = ["top1", "top5", "top20", "mrr@10"]

# name -> (description, train flags or None for no training)
SYSTEMS: dict[str, tuple[str, list[str] | None]] = {
    "zero-shot": ("(a) MiniLM, no training (its own lengths: query 64, passage 256 tokens)", None),
    "zero-shot-128": ("(a') MiniLM, no training, trained models' lengths (query 32, passage 128) -- control", None),
    "infonce-inbatch": ("(b) InfoNCE, in-batch negatives only (DPR recipe)", ["--loss", "infonce", "--negatives", "none"]),
    "infonce-bm25": ("(c) InfoNCE + 1 BM25 hard negative", ["--loss", "infonce", "--negatives", "bm25"]),
    "dpm-z0": ("(d) DPM + BM25, zeta-scale 0", ["--loss", "dpm", "--negatives", "bm25", "--zeta-scale", "0"]),
    "dpm-z1": ("(e) DPM + BM25, zeta-scale 1", ["--loss", "dpm", "--negatives", "bm25", "--zeta-scale", "1"]),
    "listwise-z0": ("(f) listwise + BM25, zeta-scale 0", ["--loss", "listwise", "--negatives", "bm25", "--zeta-scale", "0"]),
    "listwise-z1": ("(g) listwise + BM25, zeta-scale 1", ["--loss", "listwise", "--negatives", "bm25", "--zeta-scale", "1"]),
}


def env() -> dict:
    one = "1"
    return {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": one, "MKL_NUM_THREADS": one,
            "OPENBLAS_NUM_THREADS": one, "TOKENIZERS_PARALLELISM": "false"}


STOP = threading.Event()  # set by SIGTERM: finish the report with what is done, start nothing new
ACTIVE: set = set()  # running dpr-xrisk processes, terminated on SIGTERM


def cli(args: list, log: Path) -> float:
    """Run ``dpr-xrisk <args>`` with its output appended to ``log``; return the wall seconds."""
    cmd = [CLI, *map(str, args)]
    print(f"  $ {' '.join(cmd)}", flush=True)
    if STOP.is_set():
        raise RuntimeError("stopped (SIGTERM)")
    t0 = time.perf_counter()
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env())
        ACTIVE.add(proc)
        try:
            rc = proc.wait()
        finally:
            ACTIVE.discard(proc)
    if rc:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        raise RuntimeError(f"exit {rc}: {' '.join(cmd)}\n" + "\n".join(tail))
    return round(time.perf_counter() - t0, 1)


# ---- data ----------------------------------------------------------------------------------
def prepare_data(args) -> dict:
    log = WORK / "bench_train_squad.log"
    if not (SQUAD / "test.qrels.tsv").exists():
        cli(["convert", "squad", "--input", SQUAD_JSON, "--out", SQUAD, "--test-fraction", "0.25", "--seed", "0"], log)
    if not (BM25 / "meta.json").exists():
        cli(["bm25", "index", "--corpus", SQUAD / "passages.tsv", "--out", BM25], log)
    # the test subset: qid = 0-based line number, so the subset is renumbered 0..n-1
    lines = (SQUAD / "test.qa.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    qrels: dict[str, list[str]] = {}
    for line in (SQUAD / "test.qrels.tsv").read_text(encoding="utf-8").splitlines(keepends=True):
        qrels.setdefault(line.split()[0], []).append(line)
    n = min(args.test_questions, len(lines))
    pick = sorted(np.random.default_rng(0).choice(len(lines), size=n, replace=False).tolist())
    sub = WORK / f"squad-test{n}"
    sub.mkdir(parents=True, exist_ok=True)
    qa, qr = sub / "qa.tsv", sub / "qrels.tsv"
    if not qr.exists():
        qa.write_text("".join(lines[i] for i in pick), encoding="utf-8")
        out = []
        for new, old in enumerate(pick):
            for line in qrels[str(old)]:
                parts = line.split()
                out.append(" ".join([str(new), *parts[1:]]) + "\n")
        (sub / "orig_qids.json").write_text(json.dumps(pick))
        qr.write_text("".join(out), encoding="utf-8")
    # the evaluation corpus: SQuAD paragraphs (all, or the test articles' only) + Wikipedia distractors
    test_articles = set(json.loads((SQUAD / "convert-meta.json").read_text())["test_articles"])
    limit = 100 if args.dry else None  # plumbing check: a tiny corpus
    if args.wiki or args.corpus == "test-articles" or limit:
        corpus = WORK / f"squad-corpus-{args.corpus}-wiki{args.wiki}{'-dry' if limit else ''}.tsv"
        if not corpus.exists():
            tmp = corpus.with_suffix(".partial")
            with open(tmp, "w", encoding="utf-8") as g:
                with open(SQUAD / "passages.tsv", encoding="utf-8") as f:
                    g.write(next(f))  # header
                    rows = (x for x in f if args.corpus == "all" or int(x.split("\t", 1)[0].split("-")[1]) in test_articles)
                    g.writelines(itertools.islice(rows, limit))
                if args.wiki:
                    with open(WIKI, encoding="utf-8") as f:
                        next(f)
                        g.writelines(itertools.islice(f, args.wiki))
            os.replace(tmp, corpus)
    else:
        corpus = SQUAD / "passages.tsv"
    n_psg = sum(1 for _ in open(corpus, encoding="utf-8")) - 1
    n_train = sum(1 for _ in open(SQUAD / "train.qa.tsv", encoding="utf-8"))
    return {"qa": qa, "qrels": qr, "corpus": corpus, "test_questions": n, "test_split_questions": len(lines),
            "passages": n_psg, "train_questions": n_train}


# ---- one run -------------------------------------------------------------------------------
def run_settings(args, data, system: str, seed: int | None) -> dict:
    s = {"system": system, "seed": seed, "wiki": args.wiki, "test_questions": data["test_questions"],
         "bf16_encode": args.bf16, "corpus": args.corpus}
    if SYSTEMS[system][1] is not None:
        s.update(max_steps=args.max_steps, batch_size=args.batch_size, lr=args.lr, flags=SYSTEMS[system][1])
    return s


def trained_model_complete(d: Path, args, flags: list[str], seed: int) -> bool:
    """Did ``d`` finish training (end event, saved model) with this run's configuration?"""
    try:
        cfg = json.loads((d / "config.json").read_text())
        ended = any(json.loads(x).get("event") == "end" for x in (d / "train_log.jsonl").read_text().splitlines())
    except (OSError, ValueError):
        return False
    opts = dict(zip(flags[::2], flags[1::2]))
    want = {"loss": opts["--loss"], "negatives": opts["--negatives"], "max_steps": args.max_steps,
            "batch_size": args.batch_size, "lr": args.lr, "seed": seed, "model": "minilm", "hard_negatives": 1}
    if "--zeta-scale" in opts:
        want["zeta_scale"] = float(opts["--zeta-scale"])
    return ended and (d / "dpr_xrisk.json").exists() and all(cfg.get(k) == v for k, v in want.items())


def one_run(args, data, system: str, seed: int | None) -> dict:
    flags = SYSTEMS[system][1]
    name = system if flags is None else f"{system}-s{seed}"
    d = args.work / name
    settings = run_settings(args, data, system, seed)
    done = d / "bench.json"
    if done.exists():
        rec = json.loads(done.read_text())
        if rec.get("settings") == settings:
            print(f"[{name}] reusing {done}", flush=True)
            return rec
    rec: dict = {"settings": settings}
    adopted = flags is not None and trained_model_complete(d, args, flags, seed)
    if adopted:  # training finished but its evaluation did not (e.g. the benchmark was stopped): evaluate it
        start = d / "train_start.txt"
        rec["train_wall_s"] = (round((d / "dpr_xrisk.json").stat().st_mtime - float(start.read_text()), 1)
                               if start.exists() else None)
        rec["adopted_trained_model"] = True
    elif d.exists():
        shutil.rmtree(d)  # an unfinished or differently-configured run starts over
    d.mkdir(parents=True, exist_ok=True)
    log = d / "bench.log"
    print(f"[{name}] {SYSTEMS[system][0]}" + (" (reusing its finished training)" if adopted else ""), flush=True)
    if flags is None:
        if system == "zero-shot":
            model = "minilm"
        else:  # the packaged MiniLM saved with the training defaults' inference lengths
            from dpr_xrisk.encoder import DualEncoder

            model = d / "model"
            DualEncoder.load("minilm", query_max_length=32, passage_max_length=128).save(model)
    else:
        model = d
        bm25 = ["--bm25-index", BM25, "--corpus", SQUAD / "passages.tsv"] if "bm25" in flags else []
        if not adopted:
            (d / "train_start.txt").write_text(repr(time.time()))
            rec["train_wall_s"] = cli(["train", "--train", SQUAD / "biencoder-train.json", *flags, *bm25,
                                       "--max-steps", args.max_steps, "--batch-size", args.batch_size, "--lr",
                                       args.lr, "--seed", seed, "--threads", 1, "--out", d], log)
        events = [json.loads(x) for x in (d / "train_log.jsonl").read_text().splitlines()]
        end = next(e for e in events if e.get("event") == "end")
        start = next(e for e in events if e.get("event") == "start")
        steps = [e for e in events if "loss" in e and "event" not in e]
        rec.update(train_loop_s=end["seconds"], tau=end["tau"], mean_pool_size=start.get("mean_pool_size"),
                   first_loss=steps[0]["loss"], last_loss=steps[-1]["loss"],
                   loss_first5=float(np.mean([e["loss"] for e in steps[:5]])),
                   loss_last5=float(np.mean([e["loss"] for e in steps[-5:]])))
        shutil.rmtree(d / "checkpoints", ignore_errors=True)  # optimiser state: ~0.5 GB per run
    emb, idx, run = d / "emb", d / "index", d / "run.json"
    rec["encode_s"] = cli(["encode", "--model", model, "--corpus", data["corpus"], "--out", emb, "--threads", 1,
                           "--batch-size", args.encode_batch_size, "--bf16" if args.bf16 else "--fp32"], log)
    cli(["index", "--embeddings", emb, "--out", idx, "--threads", 1, "--overwrite"], log)
    rec["search_s"] = cli(["search", "--index", idx, "--queries", data["qa"], "--k", 20, "--out-json", run], log)
    cli(["evaluate", "--run", run, "--qrels", data["qrels"], "--k", 1, "--k", 5, "--k", 20, "--qrels-k", 10,
         "--out", d / "eval.json"], log)
    m = json.loads((d / "eval.json").read_text())["results"][0]["metrics"]
    rec["metrics"] = {k: m[k] for k in METRICS}
    shutil.rmtree(emb, ignore_errors=True)
    shutil.rmtree(idx, ignore_errors=True)
    done.write_text(json.dumps(rec, indent=2))
    print(f"[{name}] " + " ".join(f"{k} {v:.4f}" for k, v in rec["metrics"].items())
          + (f" | train {rec['train_wall_s']} s" if rec.get("train_wall_s") else ""), flush=True)
    return rec


# ---- summary, report, plot ----------------------------------------------------------------
def summarise(runs: dict) -> dict:
    out = {}
    for system, by_seed in runs.items():
        recs = list(by_seed.values())
        if not recs:
            continue
        row = {"n": len(recs)}
        for k in METRICS:
            xs = [r["metrics"][k] for r in recs]
            row[k] = {"mean": statistics.fmean(xs), "std": statistics.stdev(xs) if len(xs) > 1 else 0.0}
        tw = [r["train_wall_s"] for r in recs if r.get("train_wall_s") is not None]
        if tw:
            row["train_wall_s"] = statistics.fmean(tw)
        out[system] = row
    return out


def fmt(row, k):
    m = row[k]
    return f"{m['mean']:.3f} ± {m['std']:.3f}" if row["n"] > 1 else f"{m['mean']:.3f}"


def write_report(path: Path, record: dict, command: str, png: Path) -> None:
    a, data, summ, runs = record["args"], record["data"], record["summary"], record["runs"]
    mach = record["machine"]
    keep = ""
    if path.exists():  # hand-written observations survive a rewrite
        old = path.read_text(encoding="utf-8")
        if "## Observations" in old:
            keep = old[old.index("## Observations"):]
    seeds_planned = a["seeds"]
    L = [
        "# Training quality on SQuAD v1.1 dev (split by article)",
        "",
        f"Command: `{command}`  ",
        f"Date: {record['started']} (last update {record['updated']})  ",
        f"Machine: {mach['cpus']} CPU cores, {mach['mem_gib']} GiB, no GPU, Python {mach['python']}, torch "
        f"{mach['torch']}; other benchmarks ran at the same time, so every command ran with 1 thread "
        f"(`--threads 1`, `OMP_NUM_THREADS=1`), {a.get('jobs', 1)} run(s) at a time (`--jobs`).  ",
        f"Status: **{record['status']}** — {record['finished_runs']} of {record['planned_runs']} runs finished.",
        "",
        "## Setup",
        "",
        "- **Data**: `dpr-xrisk convert squad --input ../shared/data/squad-v1.1-dev/dev-v1.1.json "
        "--test-fraction 0.25 --seed 0`: split by article, train = "
        f"{data['train_questions']:,} questions of 36 articles, test = {data['test_split_questions']:,} "
        "questions of the 12 other articles (never trained on).",
        f"- **Test questions**: a fixed random subset of {data['test_questions']:,} of the "
        f"{data['test_split_questions']:,} test-split questions (`numpy.random.default_rng(0)`, "
        "`--test-questions`), to keep evaluation cheap.",
        f"- **Evaluation corpus**: {data['passages']:,} passages = "
        + ("all 2,067 SQuAD v1.1 dev paragraphs" if a["corpus"] == "all" else
           "the 524 SQuAD paragraphs of the 12 test articles only (`--corpus test-articles`; the issue's "
           "corpus holds all 2,067 paragraphs, `--corpus all`: the 1,543 paragraphs of the training articles "
           "were left out for CPU time — encoding them once per trained model cost ~6 extra minutes per run "
           "on this shared machine; the hardest distractors, the other paragraphs of the question's own "
           "article, are all kept)")
        + (f" + the first {a['wiki']:,} Wikipedia passages of wikipedia-100k." if a["wiki"] else
           ". The issue's setup adds 100k Wikipedia passages as distractors; they were **left out for "
           "CPU time** (`--wiki N` appends the first N of ../shared/data/wikipedia-100k/psgs.tsv; "
           "default 0), so the numbers are on a much easier corpus than the issue's."),
        "- **Start**: the packaged all-MiniLM-L6-v2 (mean pooling, L2-normalised, tau = 0.05 by default).",
        f"- **Budget** (same for every trained system): `--max-steps {a['max_steps']} --batch-size "
        f"{a['batch_size']} --lr {a['lr']}` (= {a['max_steps'] * a['batch_size']:,} training questions, "
        f"{a['max_steps'] * a['batch_size'] / data['train_questions']:.2f} epoch), every other option at "
        "its default (1 hard negative, linear warm-up 10 % and decay, max grad norm 2, training lengths "
        "query 32 / passage 128 tokens, which the trained model also keeps for inference, minibatch "
        "estimator, no dev evaluation). BM25 negatives: `dpr-xrisk bm25 index` over the 2,067 "
        "paragraphs, `--negatives bm25 --bm25-index ... --corpus passages.tsv` (top-100 minus answer "
        "passages).",
        "- **Evaluation**: `encode --threads 1 " + ("--bf16` (bfloat16 autocast for the corpus; queries fp32 in "
        "`search`)" if a["bf16"] else "--fp32` (bfloat16 autocast was not used: on this AVX2 CPU without native "
        "bf16 it encodes ~10x slower than fp32 — 1 psg/s vs 10 psg/s in eval/results/bench_encode.json)") + ", `index` (Flat, exact), `search --k 20`, `evaluate --k 1 --k 5 --k 20 "
        "--qrels-k 10`: DPR top-k answer accuracy (a passage containing an answer string) and MRR@10 "
        "against the question's own paragraph.",
        f"- **Seeds**: {', '.join(map(str, seeds_planned))} (`--seed`: data order, negatives, dropout), "
        "run seed-major; zero-shot is deterministic and runs once.",
        "",
        "## Systems",
        "",
        "| system | what |",
        "|---|---|",
    ]
    for s in a["systems"]:
        L.append(f"| {s} | {SYSTEMS[s][0]} |")
    L += ["", "## Results (mean ± std over the finished seeds)", "",
          "| system | seeds | top-1 | top-5 | top-20 | MRR@10 | train wall s/run |",
          "|---|---|---|---|---|---|---|"]
    for s in a["systems"]:
        if s not in summ:
            L.append(f"| {s} | 0 | | | | | |")
            continue
        row = summ[s]
        tw = f"{row['train_wall_s']:.0f}" if "train_wall_s" in row else "—"
        L.append(f"| {s} | {row['n']} | " + " | ".join(fmt(row, k) for k in METRICS) + f" | {tw} |")
    L += ["", "std = sample standard deviation over seeds (0 when one seed).", "",
          f"![top-5 / top-20 per system]({png.name})", "",
          "## Per-run numbers", "",
          "| system | seed | top-1 | top-5 | top-20 | MRR@10 | train wall s | train loop s | loss first5 → last5 | encode s |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for s in a["systems"]:
        for seed, r in runs.get(s, {}).items():
            m = r["metrics"]
            loss = f"{r['loss_first5']:.3f} → {r['loss_last5']:.3f}" if "loss_first5" in r else "—"
            L.append(f"| {s} | {seed} | {m['top1']:.4f} | {m['top5']:.4f} | {m['top20']:.4f} | {m['mrr@10']:.4f} | "
                     f"{r.get('train_wall_s') or '—'} | {r.get('train_loop_s') or '—'} | {loss} | {r['encode_s']} |")
    L += ["", "train wall = the whole `dpr-xrisk train` process (model load, BM25 negative mining for all "
          "training questions, the loop, saving); train loop = the optimiser steps alone (`train_log.jsonl`). "
          "Losses of different systems are on different scales and not comparable with each other.", ""]
    text = "\n".join(L) + "\n"
    if keep:
        text += "\n" + keep
    tmp = path.with_suffix(".partial")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def plot(path: Path, record: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summ = record["summary"]
    systems = [s for s in record["args"]["systems"] if s in summ]
    if not systems:
        return
    x = np.arange(len(systems))
    w = 0.38
    fig, ax = plt.subplots(figsize=(max(6.0, 1.25 * len(systems) + 1.5), 4.6))
    for off, k, c in ((-w / 2, "top5", "#4C72B0"), (w / 2, "top20", "#DD8452")):
        mean = [summ[s][k]["mean"] for s in systems]
        std = [summ[s][k]["std"] for s in systems]
        bars = ax.bar(x + off, mean, w, yerr=std, capsize=3, label=k.replace("top", "top-"), color=c)
        for b, v in zip(bars, mean):
            ax.text(b.get_x() + b.get_width() / 2, v + 0.004, f"{v:.3f}", ha="center", va="bottom", fontsize=7)
    lo = min(summ[s]["top5"]["mean"] - summ[s]["top5"]["std"] for s in systems)
    ax.set_ylim(max(0.0, lo - 0.08), 1.06)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{s}\n(n={summ[s]['n']})" for s in systems], fontsize=8, rotation=20, ha="right")
    ax.set_ylabel("DPR top-k answer accuracy")
    a, d = record["args"], record["data"]
    ax.set_title(f"SQuAD v1.1 dev test articles: {d['test_questions']} questions, {d['passages']:,} passages\n"
                 f"MiniLM, {a['max_steps']} steps x {a['batch_size']} questions, lr {a['lr']}; "
                 "mean ± std over seeds", fontsize=9)
    ax.legend(loc="upper left", ncol=2, fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    tmp = path.with_name(path.stem + ".partial.png")
    fig.savefig(tmp, dpi=130)
    plt.close(fig)
    os.replace(tmp, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--max-steps", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--test-questions", type=int, default=1000, help="fixed random subset of the test split")
    ap.add_argument("--wiki", type=int, default=0, help="append the first N wikipedia-100k passages to the corpus")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (each single-threaded)")
    ap.add_argument("--encode-batch-size", type=int, default=64)
    ap.add_argument("--corpus", choices=["all", "test-articles"], default="all",
                    help="SQuAD paragraphs of the evaluation corpus: all 2,067, or the 524 of the test articles")
    ap.add_argument("--bf16", action="store_true",
                    help="encode the corpus with bfloat16 autocast (default fp32: bf16 is ~10x slower on CPUs "
                         "without native bf16, such as this AVX2 machine)")
    ap.add_argument("--dry", action="store_true",
                    help="plumbing check: runs, JSON, report and plot all under eval/work/dry/")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the report and plot from the last record of the results JSON, run nothing")
    args = ap.parse_args()
    if args.report_only:
        results = WORK / "dry" / "bench_train_squad.json" if args.dry else RESULTS / "bench_train_squad.json"
        record = json.loads(results.read_text())[-1]
        report = WORK / "dry" / "report.md" if args.dry else EVAL / "RESULTS-train-quality.md"
        png = WORK / "dry" / "plot.png" if args.dry else EVAL / "train_squad_quality.png"
        write_report(report, record, record["command"], png)
        plot(png, record)
        print(f"wrote {report}, {png}")
        return
    command = "python eval/bench_train_squad.py" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else "")
    if args.dry:
        base = WORK / "dry"
        args.work, results, report, png = base / "runs", base / "bench_train_squad.json", base / "report.md", base / "plot.png"
    else:
        args.work = WORK / "runs"
        results, report, png = RESULTS / "bench_train_squad.json", EVAL / "RESULTS-train-quality.md", EVAL / "train_squad_quality.png"
    args.work.mkdir(parents=True, exist_ok=True)
    results.parent.mkdir(parents=True, exist_ok=True)

    data = prepare_data(args)
    # the (cheap, deterministic) zero-shot runs first, then seed-major in --systems order
    plan = [(s, None) for s in args.systems if SYSTEMS[s][1] is None]
    plan += [(s, seed) for seed in args.seeds for s in args.systems if SYSTEMS[s][1] is not None]
    history = json.loads(results.read_text()) if results.exists() else []
    record = {"machine": machine(), "command": command, "started": machine()["date"], "updated": None,
              "status": "running", "planned_runs": len(plan), "finished_runs": 0,
              "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "data": {k: (str(v) if isinstance(v, Path) else v) for k, v in data.items()},
              "runs": {}, "summary": {}}
    history.append(record)

    def flush(status: str) -> None:
        record["status"], record["updated"] = status, machine()["date"]
        record["summary"] = summarise(record["runs"])
        tmp = results.with_suffix(".partial")
        tmp.write_text(json.dumps(history, indent=2) + "\n")
        os.replace(tmp, results)
        write_report(report, record, command, png)
        plot(png, record)

    flush("running")

    def on_term(signum, frame):
        print("\nSIGTERM: stopping the running commands; the report keeps the finished runs", flush=True)
        STOP.set()
        for proc in list(ACTIVE):
            proc.terminate()

    signal.signal(signal.SIGTERM, on_term)

    def task(i: int, system: str, seed) -> dict:
        if STOP.is_set():
            raise RuntimeError("stopped (SIGTERM)")
        print(f"\n=== run {i + 1}/{len(plan)}: {system} seed {seed} ===", flush=True)
        return one_run(args, data, system, seed)

    # --jobs N runs N pipelines at once (each single-threaded), taking the plan in order
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(task, i, system, seed): (system, seed) for i, (system, seed) in enumerate(plan)}
        for fut in as_completed(futures):
            system, seed = futures[fut]
            try:
                rec = fut.result()
            except RuntimeError as e:
                if STOP.is_set():
                    continue
                print(f"[{system} s{seed}] FAILED: {e}", flush=True)
                record.setdefault("failed", []).append({"system": system, "seed": seed, "error": str(e)[-2000:]})
                flush("running")
                continue
            runs = record["runs"].setdefault(system, {})
            runs[str(seed if seed is not None else 0)] = rec
            record["runs"][system] = dict(sorted(runs.items()))
            record["finished_runs"] += 1
            flush("running")
    flush("complete" if record["finished_runs"] == len(plan) else
          "stopped at the time limit (SIGTERM)" if STOP.is_set() else "finished with failures")
    print(f"\nwrote {results}, {report}, {png}")
    for s, row in record["summary"].items():
        print(f"{s:16s} n={row['n']} " + " ".join(f"{k} {fmt(row, k)}" for k in METRICS))


if __name__ == "__main__":
    main()

"""FCCO (moving-average partition-function estimator, SPEC §4) vs the plain mini-batch estimator
across batch sizes: does FCCO with small batches match mini-batch training with large ones?

    python eval/bench_fcco_batch.py             # batch 8/16/32 x {minibatch, fcco} x seeds 0 1 2

Data: ``dpr-xrisk convert squad --test-fraction 0.25 --seed 0`` of
../shared/data/squad-v1.1-dev/dev-v1.1.json into eval/work/fcco/squad (split by article; the test
articles are never trained on). Training set: a fixed random subset of ``--train-questions``
(512) train-split questions (numpy default_rng(``--subset-seed``)), written as a DPR biencoder
JSON, and the training passages TSV = the distinct positives of that subset (N, the in-batch
q = n_b/N of ``--zeta-scale 1``, and the corpus of the FCCO probe's exact full-corpus loss).
Training: DPM, in-batch negatives only (``--negatives none``), zeta-scale 1, default tau (0.05),
lr 2e-5, ``--epochs`` (3) epochs from MiniLM; FCCO with gamma ``--gamma`` (0.9) from step 0
(``gamma_warmup_steps = 0`` via a TOML --config, since FCCO's first visit is already plain
mini-batch) and the estimator probe every ~quarter of the run (``probe_size`` 64).
Evaluation: ``encode --fp32 --threads 1`` of all 2,067 SQuAD paragraphs (the issue suggested
``--bf16`` for speed, but on this AVX2-only CPU bf16 autocast is ~10x slower than fp32:
eval/results/bench_encode.json, and 1.6 s/passage in this script's dry run; ``--bf16`` restores
it), ``index`` (Flat),
``search --k 20`` of a fixed random subset of ``--test-questions`` (1000) test-split questions,
``evaluate --k 1 --k 5 --k 20 --qrels-k 10``. Zero-shot MiniLM is evaluated once (reference).

Runs go seed-major (all six configs for seed 0, then seed 1, ...); after every run the results
JSON (eval/results/bench_fcco_batch.json, this invocation's record updated in place), the
report eval/RESULTS-fcco.md and the plot eval/fcco_batch.png are rewritten, so partial results
survive. A finished run (bench.json under eval/work/fcco/runs/<name>, same settings) is reused.
Everything derived from ../shared/data lives under eval/work/fcco/ (git-ignored).
``--dry`` checks the plumbing with tiny settings; its outputs all go to eval/work/fcco/dry/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402
from _common import EVAL, RESULTS, SHARED, WORK, fmt, machine, passage_subset  # noqa: E402

CLI = str(Path(sys.executable).parent / "dpr-xrisk")
SQUAD_JSON = SHARED / "squad-v1.1-dev" / "dev-v1.1.json"
FW = WORK / "fcco"
SQUAD = FW / "squad"
METRICS = ["top1", "top5", "top20", "mrr@10"]
ESTIMATORS = ["minibatch", "fcco"]
# the headline pair first (FCCO at the smallest batch vs mini-batch at the largest), then the rest
ORDER = [(32, "minibatch"), (8, "fcco"), (8, "minibatch"), (32, "fcco"), (16, "minibatch"), (16, "fcco")]


def env() -> dict:
    one = "1"
    return {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": one, "MKL_NUM_THREADS": one,
            "OPENBLAS_NUM_THREADS": one, "TOKENIZERS_PARALLELISM": "false"}


def cli(args: list, log: Path) -> float:
    """Run ``dpr-xrisk <args>`` with its output appended to ``log``; return the wall seconds."""
    cmd = [CLI, *map(str, args)]
    print(f"  $ {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env())
    if r.returncode:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        raise RuntimeError(f"exit {r.returncode}: {' '.join(cmd)}\n" + "\n".join(tail))
    return round(time.perf_counter() - t0, 1)


def tsv_field(s: str) -> str:
    return s.replace("\t", " ").replace("\n", " ").replace("\r", " ")


# ---- data ----------------------------------------------------------------------------------
def prepare_data(args) -> dict:
    log = FW / "bench_fcco_batch.log"
    FW.mkdir(parents=True, exist_ok=True)
    if not (SQUAD / "test.qrels.tsv").exists():
        cli(["convert", "squad", "--input", SQUAD_JSON, "--out", SQUAD, "--test-fraction", "0.25", "--seed", "0"], log)
    # training subset (biencoder JSON) and its passages (the distinct positives)
    full = json.loads((SQUAD / "biencoder-train.json").read_text(encoding="utf-8"))
    usable = [i for i, r in enumerate(full) if r.get("positive_ctxs")]
    n_train = min(args.train_questions, len(usable))
    pick = sorted(np.random.default_rng(args.subset_seed).choice(usable, size=n_train, replace=False).tolist())
    train = FW / f"train{n_train}-s{args.subset_seed}.json"
    train_psg = FW / f"train{n_train}-s{args.subset_seed}-passages.tsv"
    if not train_psg.exists():
        sub = [full[i] for i in pick]
        train.write_text(json.dumps(sub, indent=1, ensure_ascii=False), encoding="utf-8")
        seen: dict[str, tuple[str, str]] = {}
        for r in sub:
            for c in r["positive_ctxs"]:
                seen.setdefault(c["passage_id"], (c.get("title", ""), c["text"]))
        common.replace_text(train_psg, "id\ttext\ttitle\n" + "".join(
            f"{k}\t{tsv_field(text)}\t{tsv_field(title)}\n" for k, (title, text) in seen.items()))
    n_train_psg = sum(1 for _ in open(train_psg, encoding="utf-8")) - 1
    n_articles = len({full[i]["positive_ctxs"][0]["passage_id"].split("-")[1] for i in pick})
    # the test subset: qid = 0-based line number, so the subset is renumbered 0..n-1
    lines = (SQUAD / "test.qa.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    qrels: dict[str, list[str]] = {}
    for line in (SQUAD / "test.qrels.tsv").read_text(encoding="utf-8").splitlines(keepends=True):
        qrels.setdefault(line.split()[0], []).append(line)
    n = min(args.test_questions, len(lines))
    tpick = sorted(np.random.default_rng(0).choice(len(lines), size=n, replace=False).tolist())
    sub_dir = FW / f"squad-test{n}"
    sub_dir.mkdir(parents=True, exist_ok=True)
    qa, qr = sub_dir / "qa.tsv", sub_dir / "qrels.tsv"
    if not qr.exists():
        qa.write_text("".join(lines[i] for i in tpick), encoding="utf-8")
        out = []
        for new, old in enumerate(tpick):
            for line in qrels[str(old)]:
                parts = line.split()
                out.append(" ".join([str(new), *parts[1:]]) + "\n")
        (sub_dir / "orig_qids.json").write_text(json.dumps(tpick))
        qr.write_text("".join(out), encoding="utf-8")
    corpus = SQUAD / "passages.tsv"
    if args.eval_passages:  # dry runs only: a truncated evaluation corpus
        corpus = FW / f"passages-first{args.eval_passages}.tsv"
        with open(SQUAD / "passages.tsv", encoding="utf-8") as f:
            corpus.write_text("".join(next(f) for _ in range(args.eval_passages + 1)), encoding="utf-8")
    elif args.eval_corpus == "test-articles":  # the test articles' paragraphs only, in corpus order
        test_ids = {x.split()[2] for x in (SQUAD / "test.qrels.tsv").read_text().splitlines()}
        with open(SQUAD / "passages.tsv", encoding="utf-8") as f:
            rows = f.readlines()
        corpus = FW / "passages-test-articles.tsv"
        passage_subset(rows, test_ids, corpus)
    n_psg = sum(1 for _ in open(corpus, encoding="utf-8")) - 1
    return {"train": str(train), "train_passages": str(train_psg), "train_questions": n_train,
            "train_split_questions": len(full), "train_subset_articles": n_articles,
            "train_distinct_passages": n_train_psg, "qa": str(qa), "qrels": str(qr), "corpus": str(corpus),
            "test_questions": n, "test_split_questions": len(lines), "passages": n_psg}


# ---- one run -------------------------------------------------------------------------------
def run_name(batch: int | None, est: str | None, seed: int | None) -> str:
    return "zero-shot" if batch is None else f"{est}-b{batch}-s{seed}"


def run_steps(args, data, batch: int) -> int:
    import math

    return args.max_steps or max(1, math.ceil(args.epochs * data["train_questions"] / batch))


def run_settings(args, data, batch, est, seed) -> dict:
    # protocol 2: trained models are evaluated at MiniLM's own inference lengths (commit b7343e8)
    s = {"name": run_name(batch, est, seed), "test_questions": data["test_questions"], "passages": data["passages"],
         "bf16_encode": args.bf16, "protocol": 2, "eval_corpus": data["corpus"]}
    if batch is not None:
        steps = run_steps(args, data, batch)
        s.update(batch_size=batch, estimator=est, seed=seed, epochs=args.epochs, max_steps=args.max_steps,
                 steps=steps, lr=args.lr, gamma=args.gamma if est == "fcco" else None,
                 train=data["train"], train_questions=data["train_questions"],
                 probe_every=max(1, steps // 4) if est == "fcco" else 0, probe_size=args.probe_size)
    return s


def read_events(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def train_diagnostics(d: Path, est: str) -> dict:
    events = read_events(d / "train_log.jsonl")
    start = next(e for e in events if e.get("event") == "start")
    end = next(e for e in events if e.get("event") == "end")
    steps = [e for e in events if "loss" in e and "event" not in e]
    out = {"train_loop_s": end["seconds"], "tau": end["tau"], "corpus_size": start.get("corpus_size"),
           "steps_run": len(steps), "first_loss": steps[0]["loss"], "last_loss": steps[-1]["loss"],
           "loss_first5": float(np.mean([e["loss"] for e in steps[:5]])),
           "loss_last5": float(np.mean([e["loss"] for e in steps[-5:]])),
           "mean_step_s": float(np.mean([e["seconds"] for e in steps])),
           "steps_s": float(np.sum([e["seconds"] for e in steps]))}  # loop minus steps = probes + saving
    if est == "fcco":
        last = steps[-1]
        tail = steps[-10:]
        out["fcco_end"] = {k: last.get(f"fcco_{k}") for k in ("weight_mean", "weight_std", "seen_fraction", "v_mean")}
        out["fcco_end"]["gamma"] = last.get("gamma")
        out["fcco_last10"] = {k: float(np.mean([e[f"fcco_{k}"] for e in tail])) for k in ("weight_mean", "weight_std")}
        out["probes"] = [{k: e.get(k) for k in ("step", "probe_seen", "probe_tau_v", "probe_exact_loss", "probe_gap",
                                                  "probe_abs_gap")} for e in events if e.get("event") == "probe"]
    return out


def one_run(args, data, batch, est, seed) -> dict:
    name = run_name(batch, est, seed)
    d = args.work / name
    settings = run_settings(args, data, batch, est, seed)
    rec = common.finished_run(d, settings, name)
    if rec is not None:
        return rec
    if d.exists():
        shutil.rmtree(d)  # an unfinished or differently-configured run starts over
    d.mkdir(parents=True)
    log = d / "bench.log"
    rec: dict = {"settings": settings}
    if batch is None:
        model = "minilm"
    else:
        model = d / "model"
        cfg = d / "train.toml"
        toml = [f'corpus = "{data["train_passages"]}"', "gamma_warmup_steps = 0"]
        if est == "fcco":
            toml += [f"probe_every = {settings['probe_every']}", f"probe_size = {args.probe_size}"]
        cfg.write_text("\n".join(toml) + "\n")
        rec["train_wall_s"] = cli(["train", "--config", cfg, "--model", "minilm", "--train", data["train"],
                                   "--negatives", "none", "--loss", "dpm", "--zeta-scale", 1,
                                   "--estimator", est, "--gamma", args.gamma, "--batch-size", batch,
                                   "--epochs", args.epochs, "--max-steps", args.max_steps, "--lr", args.lr,
                                   "--seed", seed, "--threads", 1, "--out", model], log)
        rec.update(train_diagnostics(model, est))
        shutil.rmtree(model / "checkpoints", ignore_errors=True)  # optimiser state: ~0.5 GB per run
        shutil.rmtree(model / "best", ignore_errors=True)
    emb, idx, run = d / "emb", d / "index", d / "run.json"
    rec["encode_s"] = cli(["encode", "--model", model, "--corpus", data["corpus"], "--out", emb, "--threads", 1,
                           "--batch-size", 64, "--bf16" if args.bf16 else "--fp32"], log)
    cli(["index", "--embeddings", emb, "--out", idx, "--threads", 1, "--overwrite"], log)
    rec["search_s"] = cli(["search", "--index", idx, "--queries", data["qa"], "--k", 20, "--out-json", run], log)
    cli(["evaluate", "--run", run, "--qrels", data["qrels"], "--k", 1, "--k", 5, "--k", 20, "--qrels-k", 10,
         "--out", d / "eval.json"], log)
    m = json.loads((d / "eval.json").read_text())["results"][0]["metrics"]
    rec["metrics"] = {k: m[k] for k in METRICS}
    shutil.rmtree(emb, ignore_errors=True)
    shutil.rmtree(idx, ignore_errors=True)
    if batch is not None:  # keep train_log.jsonl and config.json, drop the weights (~90 MB)
        for p in model.glob("*.safetensors"):
            p.unlink()
    (d / "bench.json").write_text(json.dumps(rec, indent=2))
    print(f"[{name}] " + " ".join(f"{k} {v:.4f}" for k, v in rec["metrics"].items())
          + (f" | train {rec['train_wall_s']} s" if "train_wall_s" in rec else ""), flush=True)
    return rec


# ---- summary, report, plot ----------------------------------------------------------------
def key(batch, est) -> str:
    return f"{est}-b{batch}"


def summarise(runs: dict) -> dict:
    out = {}
    for k, by_seed in runs.items():
        recs = list(by_seed.values())
        if not recs:
            continue
        row = {"n": len(recs), "seeds": sorted(int(s) for s in by_seed)}
        for mk in METRICS:
            xs = [r["metrics"][mk] for r in recs]
            row[mk] = {"mean": statistics.fmean(xs), "std": statistics.stdev(xs) if len(xs) > 1 else 0.0}
        tw = [r["train_wall_s"] for r in recs if "train_wall_s" in r]
        if tw:
            row["train_wall_s"] = statistics.fmean(tw)
        out[k] = row
    return out


def plan_order(batches) -> list[tuple[int, str]]:
    """The (batch, estimator) runs of one seed, in the order they start: the headline pair first."""
    return [(b, e) for b, e in ORDER if b in batches] + \
        [(b, e) for b in batches for e in ESTIMATORS if (b, e) not in ORDER]


def verdict(summ: dict) -> list[str]:
    a, b = summ.get(key(8, "fcco")), summ.get(key(32, "minibatch"))
    if not (a and b):
        return ["Not decidable yet: fcco-b8 and minibatch-b32 have not both finished."]
    L = []
    for mk, label in (("top20", "top-20"), ("top5", "top-5"), ("mrr@10", "MRR@10")):
        diff = a[mk]["mean"] - b[mk]["mean"]
        noise = max(a[mk]["std"], b[mk]["std"])
        rel = "higher than" if diff > 0 else "lower than" if diff < 0 else "equal to"
        L.append(f"- {label}: fcco-b8 {fmt(a[mk], a['n'])} vs minibatch-b32 {fmt(b[mk], b['n'])} → FCCO at batch 8 is "
                 + (f"{abs(diff):.3f} {rel}" if diff else "equal to") + " mini-batch at batch 32"
                 + (f" (seed std up to {noise:.3f}; n = {a['n']} / {b['n']} seeds)" if noise else
                    f" (n = {a['n']} / {b['n']} seed(s), no spread estimate)"))
    return L


def write_report(path: Path, record: dict, png: Path) -> None:
    a, data, summ, runs = record["args"], record["data"], record["summary"], record["runs"]
    mach = record["machine"]
    steps = {b: run_steps(argparse.Namespace(**a), data, b) for b in a["batches"]}
    L = [
        "# FCCO vs mini-batch estimator across batch sizes (SQuAD v1.1 dev, split by article)",
        "",
        f"Command: `{record['command']}`  ",
        f"Date: {record['started']} (last update {record['updated']})  ",
        f"Machine: {mach['cpus']} CPU cores, {mach['mem_gib']} GiB, no GPU, Python {mach['python']}, torch "
        f"{mach['torch']}; no other benchmark ran at the same time; every command ran with 1 thread (`--threads 1`, "
        "`OMP_NUM_THREADS=1`)"
        + (f"; {a['jobs']} runs went at a time (`--jobs {a['jobs']}`) to fit the time budget" if a.get("jobs", 1) > 1 else "")
        + ".  ",
        f"Status: **{record['status']}** — {record['finished_runs']} of {record['planned_runs']} runs finished "
        f"(seeds fully finished: {', '.join(map(str, record.get('seeds_complete', []))) or 'none'}).",
        "",
        "## Setup",
        "",
        "- **Data**: `dpr-xrisk convert squad --input ../shared/data/squad-v1.1-dev/dev-v1.1.json --out "
        "eval/work/fcco/squad --test-fraction 0.25 --seed 0`: split by article, train split = "
        f"{data['train_split_questions']:,} questions of 36 articles, test split = {data['test_split_questions']:,} "
        "questions of the 12 other articles (never trained on).",
        f"- **Training set**: a fixed random subset of {data['train_questions']} train-split questions "
        f"(`numpy.random.default_rng({a['subset_seed']})`, `--train-questions`; from "
        f"{data['train_subset_articles']} articles), written as a biencoder JSON under eval/work/fcco/. "
        f"Its distinct positives, N = {data['train_distinct_passages']} paragraphs, are the training passages "
        "TSV (`corpus`): N is the corpus size of the in-batch q = n_b/N, and the probe's exact loss runs over it. "
        "The full 7,326-question training split was **left out for CPU time**."
        + (f" {data['train_questions']} questions (not the script's default 512) so that each question is visited "
           f"{a['epochs']} times within the CPU budget: the moving average needs repeated visits to matter."
           if data["train_questions"] < 512 else ""),
        f"- **Training** (every run): from `minilm` (all-MiniLM-L6-v2, mean pooling, L2-normalised), `--loss dpm "
        f"--zeta-scale 1 --negatives none` (in-batch negatives only, q = n_b/N), tau = 0.05 (default), `--lr "
        f"{a['lr']}`, `--epochs {a['epochs']}` (steps: "
        + ", ".join(f"batch {b} → {steps[b]}" for b in a["batches"])
        + "; same number of epochs, so smaller batches take more, smaller steps), linear warm-up 10 % and decay, "
        "max grad norm 2, training lengths query 32 / passage 128 tokens (inference at MiniLM's own 64 / 256), fp32 training, "
        "no dev evaluation. Everything else at its default.",
        f"- **Estimators**: `--estimator minibatch` (plain DPM) vs `--estimator fcco --gamma {a['gamma']}` with "
        "`gamma_warmup_steps = 0` (in a TOML `--config`; the first visit of a question already sets v = log ĝ, i.e. "
        f"plain mini-batch, so {a['epochs']} epochs give every question {a['epochs'] - 1} moving-average updates). "
        f"FCCO runs log the estimator probe every ⌊steps/4⌋ steps (`probe_size` {a['probe_size']}): mean τ·v of "
        f"{a['probe_size']} fixed training questions vs their exact DPM loss over all N training passages, "
        "τ·log(1 + Σ_{j ≠ positive} exp((s_ij − s_ik)/τ)).",
        ("- **Evaluation**: `encode --bf16 --threads 1 --batch-size 64` (bfloat16 autocast for the corpus encoding; "
         "queries fp32 in `search`) of all " if a.get("bf16") else
         "- **Evaluation**: `encode --fp32 --threads 1 --batch-size 64` (fp32, not the `--bf16` the issue suggested for "
         "speed: this CPU (AMD EPYC, AVX2, no AVX512-BF16/AMX) runs bf16 autocast ~10x *slower* than fp32 — "
         "eval/results/bench_encode.json: 1.1 vs 10.3 passages/s; this script's dry run: 1.6 s per passage in bf16 "
         "under load) of all ")
        + (f"{data['passages']:,} SQuAD v1.1 dev paragraphs" if not a.get("eval_corpus") or a["eval_corpus"] == "all" else
           f"the {data['passages']:,} paragraphs of the 12 test articles (`--eval-corpus test-articles`: the training "
           "articles' paragraphs left out for CPU time; the hardest distractors, the other paragraphs of a question's "
           "own article, are all in)")
        + f", `index` (Flat, exact), `search --k 20` of a fixed random "
        f"subset of {data['test_questions']:,} test-split questions (`numpy.random.default_rng(0)`), `evaluate --k 1 "
        "--k 5 --k 20 --qrels-k 10`: DPR top-k answer accuracy (a retrieved passage contains an answer string) and "
        "MRR@10 against the question's own paragraph. The issue's 100k Wikipedia distractors were **left out for "
        "CPU time**, so the corpus is much easier than the issue's.",
        ("- **Zero-shot reference**: not run in this grid (`--no-zero-shot`); the main grid's zero-shot run "
         "([RESULTS-fcco.md](RESULTS-fcco.md)) uses the same test questions and corpus." if a.get("no_zero_shot") else
         "- **Zero-shot reference**: the packaged MiniLM, no training, its own inference lengths (query 64 / passage "
         "256 tokens), evaluated once the same way."),
        f"- **Seeds**: {', '.join(map(str, a['seeds']))} (`--seed`: data order, dropout), seed-major; within a seed "
        "the order is " + ", ".join(key(b, e) for b, e in plan_order(a["batches"])) + ".",
        "",
        "## Results (mean ± std over the finished seeds)",
        "",
        "| batch | estimator | steps | seeds | top-1 | top-5 | top-20 | MRR@10 | train wall s/run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    z = runs.get("zero-shot", {}).get("0")
    if z:
        m = z["metrics"]
        L.append(f"| — | zero-shot | 0 | — | {m['top1']:.3f} | {m['top5']:.3f} | {m['top20']:.3f} | {m['mrr@10']:.3f} | — |")
    for b in a["batches"]:
        for e in ESTIMATORS:
            k = key(b, e)
            if k not in summ:
                L.append(f"| {b} | {e} | {steps[b]} | 0 | | | | | |")
                continue
            row = summ[k]
            L.append(f"| {b} | {e} | {steps[b]} | {row['n']} | " + " | ".join(fmt(row[mk], row["n"]) for mk in METRICS)
                     + (f" | {row['train_wall_s']:.0f} |" if "train_wall_s" in row else " | — |"))
    L += ["", "std = sample standard deviation over seeds (shown only when n > 1).", "",
          "**FCCO at batch 8 vs mini-batch at batch 32** (computed from the table):", "", *verdict(summ), "",
          f"![top-5, top-20 and MRR@10 vs batch size]({png.name})", "",
          "## Per-run numbers", "",
          "| run | top-1 | top-5 | top-20 | MRR@10 | train wall s | train loop s | of which steps s | s/step | loss first5 → last5 | encode s |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for k in ["zero-shot"] + [key(b, e) for b in a["batches"] for e in ESTIMATORS]:
        for seed, r in sorted(runs.get(k, {}).items()):
            m = r["metrics"]
            loss = f"{r['loss_first5']:.4f} → {r['loss_last5']:.4f}" if "loss_first5" in r else "—"
            step_s = f"{r['mean_step_s']:.2f}" if "mean_step_s" in r else "—"
            L.append(f"| {r['settings']['name']} | {m['top1']:.4f} | {m['top5']:.4f} | {m['top20']:.4f} | "
                     f"{m['mrr@10']:.4f} | {r.get('train_wall_s', '—')} | {r.get('train_loop_s', '—')} | "
                     f"{round(r['steps_s']) if 'steps_s' in r else '—'} | {step_s} | "
                     f"{loss} | {r['encode_s']} |")
    L += ["", "train wall = the whole `dpr-xrisk train` process (model load, the loop, FCCO probes, saving); train "
          "loop = from the first step to the end (`train_log.jsonl`, includes the FCCO probes, which encode all N "
          "training passages each time, and the final save); of which steps = the optimiser steps alone (sum of the "
          "logged step seconds), the fair time comparison of the estimators; s/step = mean optimiser step. The logged loss of FCCO runs is τ·v (the moving-average estimate), of mini-batch runs the plain "
          "batch loss; both are on the same scale but the mini-batch one is a noisier, downward-biased estimate.", "",
          "## FCCO estimator diagnostics (train_log.jsonl)", "",
          "Probe events: mean τ·v of the 64 probe questions (their stored moving average, in loss units) vs their "
          "exact full-corpus DPM loss with the current encoder; gap = mean(τ·v − exact), |gap| = mean |τ·v − exact|. "
          "End-of-run FCCO stats (last step's batch): weight = ĝ/u per pair (1 = the batch estimate agrees with the "
          "moving average; mini-batch is weight ≡ 1 of a fresh u), seen = fraction of (question, slot) states "
          "visited.", "",
          "| run | probe step | seen | τ·v | exact | gap | abs gap |", "|---|---|---|---|---|---|---|"]
    for b in a["batches"]:
        for seed, r in sorted(runs.get(key(b, "fcco"), {}).items()):
            for p in r.get("probes", []):
                f = lambda x: f"{x:.4f}" if isinstance(x, (int, float)) else "—"  # noqa: E731
                L.append(f"| {r['settings']['name']} | {p['step']} | {p['probe_seen']} | {f(p.get('probe_tau_v'))} | "
                         f"{f(p.get('probe_exact_loss'))} | {f(p.get('probe_gap'))} | {f(p.get('probe_abs_gap'))} |")
    L += ["", "| run | γ at end | weight mean (end / last 10 steps) | weight std (end / last 10) | seen fraction | τ·v̄ (all seen) |",
          "|---|---|---|---|---|---|"]
    for b in a["batches"]:
        for seed, r in sorted(runs.get(key(b, "fcco"), {}).items()):
            e, t10, tau = r["fcco_end"], r["fcco_last10"], r["tau"]
            L.append(f"| {r['settings']['name']} | {e['gamma']} | {e['weight_mean']:.4f} / {t10['weight_mean']:.4f} | "
                     f"{e['weight_std']:.4f} / {t10['weight_std']:.4f} | {e['seen_fraction']:.3f} | "
                     f"{tau * e['v_mean']:.4f} |")
    if record.get("failed"):
        L += ["", "## Failed runs", ""] + [f"- {f['name']}: `{f['error'][-300:]}`" for f in record["failed"]]
    common.write_report(path, "\n".join(L) + "\n")  # the hand-written Observations survive


def plot(path: Path, record: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summ, a, d = record["summary"], record["args"], record["data"]
    z = record["runs"].get("zero-shot", {}).get("0")
    if not summ and not z:
        return
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.3))
    style = {"minibatch": ("#4C72B0", "o", -0.03), "fcco": ("#DD8452", "s", 0.03)}
    for ax, mk, label in ((axes[0], "top5", "DPR top-5 accuracy"), (axes[1], "top20", "DPR top-20 accuracy"),
                          (axes[2], "mrr@10", "MRR@10 (own paragraph)")):
        for e in ESTIMATORS:
            bs = [b for b in a["batches"] if key(b, e) in summ]
            if not bs:
                continue
            c, mark, off = style[e]
            xs = [b * 2 ** off for b in bs]  # a small horizontal offset so the error bars do not overlap
            mean = [summ[key(b, e)][mk]["mean"] for b in bs]
            std = [summ[key(b, e)][mk]["std"] for b in bs]
            ns = [summ[key(b, e)]["n"] for b in bs]
            ax.errorbar(xs, mean, yerr=std, color=c, marker=mark, capsize=4, lw=1.8,
                        label=f"{e}" + (f" (γ={a['gamma']})" if e == "fcco" else "")
                        + (f", n={ns[0]} seeds" if len(set(ns)) == 1 else ""))
            for x, y, n in zip(xs, mean, ns):  # seed counts per point only when they differ
                ax.annotate(f"{y:.3f}" + (f"\nn={n}" if len(set(ns)) > 1 else ""), (x, y), textcoords="offset points",
                            xytext=(8, 0) if e == "fcco" else (-8, 0), ha="left" if e == "fcco" else "right",
                            va="center", fontsize=7, color=c)
        if z:
            ax.axhline(z["metrics"][mk], color="gray", ls="--", lw=1.2, label=f"zero-shot ({z['metrics'][mk]:.3f})")
        ax.set_xscale("log", base=2)
        ax.set_xlim(min(a["batches"]) / 1.5, max(a["batches"]) * 1.5)
        ax.set_xticks(a["batches"])
        ax.set_xticklabels([str(b) for b in a["batches"]])
        ax.set_xlabel(f"batch size (questions per step; {a['epochs']} epochs each)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
        ax.margins(y=0.25)
    fig.suptitle(f"MiniLM + DPM (in-batch, ζ-scale 1), {d['train_questions']} SQuAD train questions; "
                 f"test: {d['test_questions']} questions, {d['passages']:,} passages; mean ± std over seeds",
                 fontsize=9)
    fig.tight_layout()
    common.save_figure(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", nargs="+", type=int, default=[8, 16, 32])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--train-questions", type=int, default=512)
    ap.add_argument("--subset-seed", type=int, default=0, help="seed of the training-question subset")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--max-steps", type=int, default=0, help="0 = from --epochs (dry runs: a few steps)")
    ap.add_argument("--gamma", type=float, default=0.9)
    ap.add_argument("--probe-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--test-questions", type=int, default=1000, help="fixed random subset of the test split")
    ap.add_argument("--eval-passages", type=int, default=0, help="dry runs: only the first N paragraphs")
    ap.add_argument("--no-zero-shot", action="store_true")
    ap.add_argument("--eval-corpus", choices=["all", "test-articles"], default="all",
                    help="all 2,067 SQuAD paragraphs, or only the test articles' paragraphs")
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time (each single-threaded)")
    ap.add_argument("--bf16", action="store_true",
                    help="encode the eval corpus with bfloat16 autocast (default fp32: ~10x faster on this AVX2-only "
                         "CPU, see eval/results/bench_encode.json)")
    ap.add_argument("--tag", default="",
                    help="a variant grid kept apart from the main one: runs under eval/work/fcco/runs-TAG/, "
                         "results in eval/results/bench_fcco_batch-TAG.json, eval/RESULTS-fcco-TAG.md, "
                         "eval/fcco_batch-TAG.png")
    ap.add_argument("--dry", action="store_true", help="plumbing check: everything under eval/work/fcco/dry/")
    ap.add_argument("--render", action="store_true",
                    help="run nothing: re-read the train logs of the latest record's runs and rewrite its report and plot")
    args = ap.parse_args()
    command = "python eval/bench_fcco_batch.py" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else "")
    if args.dry:
        base = FW / "dry"
        args.work, results, report, png = base / "runs", base / "bench_fcco_batch.json", base / "report.md", base / "plot.png"
    else:
        t = f"-{args.tag}" if args.tag else ""
        args.work = FW / f"runs{t}"
        results, report, png = RESULTS / f"bench_fcco_batch{t}.json", EVAL / f"RESULTS-fcco{t}.md", EVAL / f"fcco_batch{t}.png"
    args.work.mkdir(parents=True, exist_ok=True)
    results.parent.mkdir(parents=True, exist_ok=True)

    if args.render:
        history = json.loads(results.read_text())
        record = history[-1]
        for k, by_seed in record["runs"].items():
            for r in by_seed.values():
                model = args.work / r["settings"]["name"] / "model"
                if (model / "train_log.jsonl").exists():
                    r.update(train_diagnostics(model, r["settings"]["estimator"]))
        record["summary"] = summarise({k: v for k, v in record["runs"].items() if k != "zero-shot"})
        common.replace_text(results, json.dumps(history, indent=2) + "\n")
        write_report(report, record, png)
        plot(png, record)
        print(f"rewrote {report} and {png}")
        return

    data = prepare_data(args)
    order = plan_order(args.batches)
    plan = [(b, e, s) for s in args.seeds for b, e in order]
    if not args.no_zero_shot:
        plan.insert(min(2, len(plan)), (None, None, None))  # after the headline pair (mb-b32, fcco-b8)
    history = json.loads(results.read_text()) if results.exists() else []
    record = {"machine": machine(), "command": command, "started": machine()["date"], "updated": None,
              "status": "running", "planned_runs": len(plan), "finished_runs": 0,
              "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "data": data, "runs": {}, "summary": {}, "seeds_complete": []}
    history.append(record)

    def flush(status: str) -> None:
        record["status"], record["updated"] = status, machine()["date"]
        record["summary"] = summarise({k: v for k, v in record["runs"].items() if k != "zero-shot"})
        record["seeds_complete"] = [s for s in args.seeds
                                    if all(str(s) in record["runs"].get(key(b, e), {}) for b, e in order)]
        common.replace_text(results, json.dumps(history, indent=2) + "\n")
        write_report(report, record, png)
        plot(png, record)

    flush("running")

    def stop(signum, frame):  # killed (e.g. at the time budget): record what finished, then exit
        flush("stopped (time budget) — unfinished runs were killed")
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)

    def job(i, b, e, s):
        print(f"\n=== run {i + 1}/{len(plan)}: {run_name(b, e, s)} ===", flush=True)
        return one_run(args, data, b, e, s)

    # --jobs N: N runs at a time, started in plan order (seed-major); results are recorded (and the
    # JSON/report/plot rewritten) by this thread as each run finishes
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(job, i, b, e, s): (b, e, s) for i, (b, e, s) in enumerate(plan)}
        for fut in as_completed(futures):
            b, e, s = futures[fut]
            name = run_name(b, e, s)
            try:
                rec = fut.result()
            except RuntimeError as err:
                print(f"[{name}] FAILED: {err}", flush=True)
                record.setdefault("failed", []).append({"name": name, "error": str(err)[-2000:]})
                flush("running")
                continue
            record["runs"].setdefault("zero-shot" if b is None else key(b, e), {})[str(s if s is not None else 0)] = rec
            record["finished_runs"] += 1
            flush("running")
    flush("finished")


if __name__ == "__main__":
    main()

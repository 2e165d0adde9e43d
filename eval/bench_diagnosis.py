"""Diagnosis (issue #17, item 0): which ingredient makes a trained retriever lose to zero-shot
MiniLM on questions it was not trained on, and do passages trained as positives become hubs?

    python eval/bench_diagnosis.py            # every system, seed 0, one run at a time on both cores

Data (under eval/work/refresh/, git-ignored, shared with eval/bench_refresh.py):
``dpr-xrisk convert squad --test-fraction 0.25 --seed 0`` of ../shared/data/squad-v1.1-dev.
Training: a fixed random subset of ``--train-questions`` (2,048) of the 7,326 training-article
questions (numpy default_rng(0)); training corpus (``--corpus``, N of in-batch q, BM25 negatives)
= the 1,543 training-article paragraphs. Evaluation: **all 3,244 held-out questions** of the 12
test articles against **all 2,067 SQuAD paragraphs** -- the corpus holds every training
positive, as any real corpus does, so a model that turns training positives into hubs pays for
it here (the earlier ``--eval-corpus test-articles`` protocol could not see that). Real CLI:
``encode`` (fp32) -> ``index`` (Flat) -> ``search --k 100`` -> ``evaluate`` (DPR top-1/5/20/100,
MRR@10 against the question's own paragraph), plus the **hub rate**: the share of test questions
whose top-1 passage is the positive of a training question (such a passage never answers a
held-out question's article) -- and the same share among the questions lost to zero-shot.

Every system trains from minilm for ``--epochs`` (1) epoch at batch ``--batch-size`` (32),
lr ``--lr`` (2e-5), linear warm-up 10 %, and changes ONE factor of the base system
``dpm-z1`` (today's default: DPM, separate towers, ζ scale 1, in-batch negatives only with
q = n_b/N) -- or of ``dpm-z0`` where named so. ``st-mnrl`` is the reference: a plain
sentence-transformers MultipleNegativesRankingLoss fine-tune (shared tower, scale 20 = τ 0.05,
max length 128, same questions, batch, epochs, lr and warm-up) run by eval/_st_mnrl.py.

A finished run is reused (same settings); rerunning the command continues. Results:
eval/results/bench_diagnosis.json, report eval/RESULTS-diagnosis.md (paired differences with
95 % bootstrap intervals from eval/paired.py, per question, against zero-shot and st-mnrl).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402
import bench_refresh as br  # noqa: E402
import paired  # noqa: E402
from _common import EVAL, RESULTS, machine  # noqa: E402
from dpr_xrisk.train.config import toml_text  # noqa: E402

WORK = br.BASE / "diagnosis"
RUNS = WORK / "runs"
METRICS = ["top1", "top5", "top20", "top100", "mrr@10"]

BASE_CFG = {"loss": "dpm", "negatives": "none", "hard_negatives": 0, "zeta_scale": 1.0}
Z0 = {**BASE_CFG, "zeta_scale": 0.0}
REFRESH = {"negatives": "model", "hard_negatives": 1, "refresh_every": 16, "refresh_k": 50}
# name -> (what changes, config overrides; None = no training, "st" = sentence-transformers)
SYSTEMS: dict[str, tuple[str, object]] = {
    "zero-shot": ("MiniLM, no training", None),
    "st-mnrl": ("reference: sentence-transformers MNRL, shared tower, scale 20, max length 128", "st"),
    "dpm-z1": ("base: DPM, separate towers, in-batch negatives, q = n_b/N (N = 1,543), ζ scale 1", BASE_CFG),
    "dpm-z0": ("ζ scale 0 (= τ·InfoNCE)", Z0),
    "dpm-z1-n21m": ("ζ scale 1 with N = 21,015,324 (DPR's Wikipedia): the ζ a user of the full corpus gets",
                    {**BASE_CFG, "corpus_size": 21015324}),
    "dpm-z0.5": ("ζ scale 0.5", {**BASE_CFG, "zeta_scale": 0.5}),
    "dpm-z1-shared": ("shared tower, ζ 1", {**BASE_CFG, "shared": True}),
    "dpm-z0-shared": ("shared tower, ζ 0", {**Z0, "shared": True}),
    "dpm-z1-lr1e-5": ("lr 1e-5, ζ 1", {**BASE_CFG, "lr": 1e-5}),
    "dpm-z0-nofilter": ("ζ 0, no answer masking of in-batch negatives", {**Z0, "filter_answers": False}),
    "dpm-z0-len256": ("ζ 0, training passage length 256 (= inference) instead of 128",
                      {**Z0, "passage_max_length": 256, "query_max_length": 64}),
    "dpm-z1-bm25": ("ζ 1 + 1 BM25 hard negative (q = 1/L)", {**BASE_CFG, "negatives": "bm25", "hard_negatives": 1}),
    "dpm-z0-bm25": ("ζ 0 + 1 BM25 hard negative", {**Z0, "negatives": "bm25", "hard_negatives": 1}),
    "dpm-z1-bm25-separate": ("ζ 1 + 1 BM25 hard negative, the weights before SPEC §3's update (q_rule separate)",
                             {**BASE_CFG, "negatives": "bm25", "hard_negatives": 1, "q_rule": "separate"}),
    "dpm-znorm-bm25": ("ζ 1 self-normalised (zeta_normalize) + 1 BM25 hard negative",
                       {**BASE_CFG, "negatives": "bm25", "hard_negatives": 1, "zeta_normalize": True}),
    "dpm-z1-refresh": ("ζ 1 + 1 negative from the refreshed index (mined at step 0, refresh every 16 steps, top 50)",
                       {**BASE_CFG, **REFRESH}),
    "dpm-z0-refresh": ("ζ 0 + refreshed-index negative", {**Z0, **REFRESH}),
    "dpm-znorm-refresh": ("ζ 1 self-normalised + refreshed-index negative", {**BASE_CFG, **REFRESH, "zeta_normalize": True}),
    "dpm-z1-refresh-n21m": ("ζ 1 + refreshed-index negative, N = 21,015,324 (the flagship as a full-corpus user runs it)",
                            {**BASE_CFG, **REFRESH, "corpus_size": 21015324}),
    "dpm-znorm-refresh-n21m": ("ζ 1 self-normalised + refreshed-index negative, N = 21,015,324",
                               {**BASE_CFG, **REFRESH, "corpus_size": 21015324, "zeta_normalize": True}),
    # τ·ln(N/n_b) is the margin the positive must win by under unnormalised weights: 0.67 in cosine at τ 0.05
    # and N = 21M (out of reach), 0.27 at τ 0.02
    "dpm-z1-refresh-n21m-t02": ("ζ 1 + refreshed negative, N = 21,015,324, τ 0.02",
                                {**BASE_CFG, **REFRESH, "corpus_size": 21015324, "tau": 0.02}),
    "dpm-znorm-refresh-n21m-t02": ("ζ 1 self-normalised + refreshed negative, N = 21,015,324, τ 0.02",
                                   {**BASE_CFG, **REFRESH, "corpus_size": 21015324, "zeta_normalize": True, "tau": 0.02}),
    "dpm-z0-t02": ("ζ 0, τ 0.02 (control for the τ 0.02 rows)", {**Z0, "tau": 0.02}),
}


def settings_of(args, data, system: str, seed: int) -> dict:
    spec = SYSTEMS[system][1]
    s = {"system": system, "protocol": "diagnosis-1", "test_questions": data["test_questions"],
         "eval_passages": data["eval_passages"], "train_questions": data["train_questions"]}
    if spec is not None:
        s.update(seed=seed, batch_size=args.batch_size, epochs=args.epochs, lr=args.lr,
                 config=None if spec == "st" else spec)
    return s


def train_config(args, data, spec: dict, seed: int) -> dict:
    cfg = {"model": "minilm", "train": [data["train"]], "corpus": data["train_corpus"], "batch_size": args.batch_size,
           "epochs": args.epochs, "lr": args.lr, "seed": seed, "threads": args.threads, "save_every": 16}
    cfg.update(spec)
    if cfg.get("negatives") == "bm25":
        cfg["bm25_index"] = data["bm25"]
    return cfg


def hub_stats(run_json: Path, train_pos: set[str], zs_first: np.ndarray | None) -> dict:
    run = json.loads(run_json.read_text(encoding="utf-8"))
    qids = sorted(run, key=int)
    top1_train = np.array([run[q]["contexts"][0]["docid"] in train_pos for q in qids])
    first = paired.first_hit(run_json)
    out = {"hub_rate": float(top1_train.mean())}
    if zs_first is not None:
        lost = (zs_first == 0) & (first > 0)  # zero-shot right at rank 1, this system not
        won = (zs_first > 0) & (first == 0)
        out.update(won_top1=int(won.sum()), lost_top1=int(lost.sum()),
                   lost_with_train_top1=int((lost & top1_train).sum()))
    return out


def one_run(args, data, system: str, seed: int) -> dict:
    spec = SYSTEMS[system][1]
    name = system if spec is None else f"{system}-s{seed}"
    d = RUNS / name
    settings = settings_of(args, data, system, seed)
    finished = common.open_run(d, settings, name)
    if finished is not None:
        return finished
    log = d / "bench.log"
    rec: dict = {"settings": settings}
    print(f"[{name}] {SYSTEMS[system][0]}", flush=True)
    model: str | Path = "minilm"
    t0 = time.perf_counter()
    if spec == "st":
        model = d / "model"
        if not (model / "modules.json").exists():
            cmd = [sys.executable, str(EVAL / "_st_mnrl.py"), "--train", data["train"], "--out", str(model),
                   "--batch-size", str(args.batch_size), "--epochs", str(args.epochs), "--lr", str(args.lr),
                   "--seed", str(seed), "--threads", str(args.threads)]
            with open(log, "a") as f:
                subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True, env=br.env())
            rec["train_wall_s"] = round(time.perf_counter() - t0, 1)  # unknown when an earlier invocation trained it
    elif spec is not None:
        model = d
        if not (d / "dpr_xrisk.json").exists():
            cfg_path = d / "config.toml"
            cfg_path.write_text(toml_text(train_config(args, data, spec, seed)))
            ckpt = d / "checkpoints"
            resume = ["--resume"] if ckpt.is_dir() and any(ckpt.iterdir()) else []
            br.cli(["train", "--config", cfg_path, *resume, "--out", d], log)
        rec["train_wall_s"] = round(time.perf_counter() - t0, 1)
        events = [json.loads(x) for x in (d / "train_log.jsonl").read_text().splitlines()]
        steps = sorted({e["step"]: e for e in events if "loss" in e and "event" not in e}.values(), key=lambda e: e["step"])
        rec.update(steps=len(steps), loss_first5=float(np.mean([e["loss"] for e in steps[:5]])),
                   loss_last5=float(np.mean([e["loss"] for e in steps[-5:]])),
                   grad_norm_mean=float(np.mean([e["grad_norm"] for e in steps])))
    emb, idx, run = d / "emb", d / "index", d / "run.json"
    rec["encode_s"] = br.cli(["encode", "--model", model, "--corpus", data["eval_corpus"], "--out", emb,
                              "--threads", args.threads, "--batch-size", 64, "--fp32"], log)
    br.cli(["index", "--embeddings", emb, "--out", idx, "--threads", args.threads, "--overwrite"], log)
    br.cli(["search", "--index", idx, "--queries", data["qa"], "--k", 100, "--out-json", run], log)
    br.cli(["evaluate", "--run", run, "--qrels", data["qrels"], "--k", 1, "--k", 5, "--k", 20, "--k", 100,
            "--qrels-k", 10, "--out", d / "eval.json"], log)
    m = json.loads((d / "eval.json").read_text())["results"][0]["metrics"]
    rec["metrics"] = {k: m[k] for k in METRICS}
    zs = RUNS / "zero-shot" / "run.json"
    rec.update(hub_stats(run, data["train_positives"], paired.first_hit(zs) if zs.exists() and spec else None))
    for p in d.glob("*.safetensors"):  # the trained weights are not needed after evaluation
        p.unlink()
    for p in d.iterdir():  # emb, index, checkpoints, best, the ST model
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
    (d / "bench.json").write_text(json.dumps(rec, indent=2))
    print(f"[{name}] " + " ".join(f"{k} {v:.4f}" for k, v in rec["metrics"].items())
          + f" hub {rec['hub_rate']:.4f}", flush=True)
    return rec


def report(args, data, recs: dict) -> str:
    rng = np.random.default_rng(0)
    lines = [
        "# Diagnosis: what makes a trained retriever lose to zero-shot (issue #17, item 0)", "",
        f"Command: `{args.command}`  ", f"Date: {args.machine['date']}  ",
        f"Machine: {args.machine['cpus']} CPU cores, torch {args.machine['torch']}, {args.threads} threads, one run at a time.", "",
        "## Setup", "",
        f"- Training: {data['train_questions']:,} questions of the 36 SQuAD v1.1 dev training articles "
        f"(`convert squad --test-fraction 0.25 --seed 0`, subset default_rng(0)), {args.epochs:g} epoch(s) at batch "
        f"{args.batch_size} ({data['train_questions'] * args.epochs // args.batch_size:.0f} steps), lr {args.lr:g}, warm-up 10 %, "
        f"from MiniLM; training corpus (N, BM25) = the {data['train_corpus_passages']:,} training-article paragraphs.",
        f"- Evaluation: all {data['test_questions']:,} held-out questions against **all {data['eval_passages']:,} SQuAD "
        "paragraphs**, i.e. the training positives are in the corpus. MRR@10 = against the question's own paragraph; "
        "Δ columns = paired per-question differences (eval/paired.py: top-k and RR@10 by answer), 95 % bootstrap interval.",
        "- hub rate = share of test questions whose top-1 passage is a training question's positive (never the "
        "test question's article); lost/won = questions zero-shot had right at rank 1 and the system not (and the reverse); "
        "lost→hub = lost questions whose new top-1 is a training positive. Rows with several seeds show means; "
        "the Δ columns pair each seed's run with the reference and average over seeds.", "",
        "## Results", "",
        "| system | what | top-1 | top-5 | top-20 | MRR@10 | hub rate | won / lost @1 (lost→hub) | Δ top-1 vs zero-shot | Δ RR@10 vs zero-shot | Δ RR@10 vs st-mnrl | loss first→last 5 | train s |",
        "|---|---|---:|---:|---:|---:|---:|---|---|---|---|---|---:|"]

    def cell(base, other, key):
        try:
            c = paired.compare(base, other, 2000, rng, RUNS)[key]
        except SystemExit:
            return "—"
        return f"{100 * c['diff']:+.1f} [{100 * c['ci95'][0]:+.1f}, {100 * c['ci95'][1]:+.1f}]"

    for system, by_seed in recs.items():
        rs = list(by_seed.values())
        r = {k: float(np.mean([x[k] for x in rs])) for k in rs[0] if isinstance(rs[0][k], (int, float))}
        m = {k: float(np.mean([x["metrics"][k] for x in rs])) for k in METRICS}
        trained = SYSTEMS[system][1] is not None
        wl = f"{r['won_top1']:.0f} / {r['lost_top1']:.0f} ({r['lost_with_train_top1']:.0f})" if "won_top1" in r else "—"
        seeds = f" ({len(rs)} seeds)" if len(rs) > 1 else ""
        lines.append(
            f"| {system}{seeds} | {SYSTEMS[system][0]} | {m['top1']:.3f} | {m['top5']:.3f} | {m['top20']:.3f} | {m['mrr@10']:.3f} | "
            f"{r['hub_rate']:.3f} | {wl} | {cell('zero-shot', system, 'top1') if trained else '—'} | "
            f"{cell('zero-shot', system, 'rr@10') if trained else '—'} | "
            f"{cell('st-mnrl', system, 'rr@10') if trained and system != 'st-mnrl' else '—'} | "
            + (f"{r['loss_first5']:.3f}→{r['loss_last5']:.3f}" if "loss_first5" in r else "—")
            + (f" | {r['train_wall_s']:.0f} |" if "train_wall_s" in r else " | — |"))
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train-questions", type=int, default=2048)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    ap.add_argument("--more-seeds-for", nargs="+", default=None, metavar="SYSTEM",
                    help="only these systems get the seeds after the first (the others run the first seed only)")
    ap.add_argument("--tag", default="", help="a variant grid in its own runs folder, JSON and report")
    args = ap.parse_args()
    global RUNS
    suffix = f"-{args.tag}" if args.tag else ""
    RUNS = WORK / f"runs{suffix}"
    args.command = "python eval/bench_diagnosis.py " + " ".join(sys.argv[1:])
    args.machine = machine()
    ns = argparse.Namespace(train_questions=args.train_questions, test_questions=10 ** 9, eval_corpus="all")
    data = br.prepare_data(ns)
    train = json.loads(Path(data["train"]).read_text(encoding="utf-8"))
    data["train_positives"] = {p["passage_id"] for q in train for p in q["positive_ctxs"]}
    RUNS.mkdir(parents=True, exist_ok=True)
    systems = ["zero-shot"] + [s for s in args.systems if s != "zero-shot"]
    recs: dict = {}
    for seed in args.seeds:
        for system in systems:
            if seed != args.seeds[0] and (SYSTEMS[system][1] is None or
                                          (args.more_seeds_for is not None and system not in args.more_seeds_for)):
                continue
            rec = one_run(args, data, system, seed)
            recs.setdefault(system, {})[seed] = rec
            out = {"command": args.command, "machine": args.machine,
                   "data": {k: v for k, v in data.items() if k != "train_positives"}, "runs": recs}
            common.replace_text(RESULTS / f"bench_diagnosis{suffix}.json", json.dumps(out, indent=2) + "\n")
            common.write_report(EVAL / f"RESULTS-diagnosis{suffix}.md", report(args, data, recs))


if __name__ == "__main__":
    main()
